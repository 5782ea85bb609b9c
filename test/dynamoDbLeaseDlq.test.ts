import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { afterAll, beforeAll } from "vitest"
import { DeadLetterEntry } from "../src/domain/DeadLetterEntry.js"
import * as DeadLetterTable from "../src/layers/dynamodb/DeadLetterTable.js"
import * as DynamoDbDeadLetterStore from "../src/layers/dynamodb/DynamoDbDeadLetterStore.js"
import * as DynamoDbLeaseStore from "../src/layers/dynamodb/DynamoDbLeaseStore.js"
import * as DynamoDbOutboxStore from "../src/layers/dynamodb/DynamoDbOutboxStore.js"
import * as OutboxTable from "../src/layers/dynamodb/OutboxTable.js"
import { DeadLetterStore } from "../src/services/DeadLetterStore.js"
import * as DynamoDb from "../src/services/DynamoDb.js"
import { LeaseStore } from "../src/services/LeaseStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { deadLetterStoreContract } from "./contract/DeadLetterStoreContract.js"
import { leaseStoreContract } from "./contract/LeaseStoreContract.js"
import { makeTestClientConfig, randomTableName } from "./support/DynamoLocal.js"

const outboxTable = randomTableName("lease-dlq-outbox")
const deadLetterTable = randomTableName("lease-dlq-dead-letter")
// The purge contract test assumes it is the only one purging its table: each suite gets a table.
const deadLetterTableLargePages = randomTableName("lease-dlq-dead-letter-1mb")
const tables = [outboxTable, deadLetterTable, deadLetterTableLargePages]
const dynamoLayer = DynamoDb.layer(makeTestClientConfig())

beforeAll(() =>
  Effect.runPromise(
    Effect.all(
      [
        OutboxTable.ensureTable(outboxTable),
        DeadLetterTable.ensureTable(deadLetterTable),
        DeadLetterTable.ensureTable(deadLetterTableLargePages)
      ],
      { concurrency: 3, discard: true }
    ).pipe(Effect.provide(dynamoLayer))
  )
)
afterAll(() =>
  Effect.runPromise(
    Effect.flatMap(DynamoDb.DynamoDb, (d) =>
      Effect.all([d.deleteTable({ TableName: outboxTable }), d.deleteTable({ TableName: deadLetterTable })], {
        concurrency: 2,
        discard: true
      })
    ).pipe(Effect.provide(dynamoLayer))
  )
)

const leaseLayer = () =>
  DynamoDbLeaseStore.layerWith({ tableName: outboxTable, ensureTable: false }).pipe(Layer.provide(dynamoLayer))

const outboxLayer = DynamoDbOutboxStore.layerWith({ tableName: outboxTable, ensureTable: false, indexLagRetries: 0 })

/** A small page size so that lists and deletes page through several Query pages per shard. */
const deadLetterLayer = (options: Partial<DynamoDbDeadLetterStore.DynamoDbDeadLetterStoreOptions> = {}) =>
  DynamoDbDeadLetterStore.layerWith({ tableName: deadLetterTable, ensureTable: false, pageSize: 16, ...options }).pipe(
    Layer.provideMerge(outboxLayer),
    Layer.provide(dynamoLayer)
  )

leaseStoreContract("dynamodb", leaseLayer)

deadLetterStoreContract("dynamodb", () => deadLetterLayer())

deadLetterStoreContract("dynamodb (1 MB pages)", () =>
  deadLetterLayer({ tableName: deadLetterTableLargePages, pageSize: undefined })
)
