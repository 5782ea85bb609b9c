/**
 * Generated histories of the DynamoDB store (DynamoDB Local) against the pure model. The store always
 * has stale reclaim (default 30 s), so histories run with that threshold. One table for the file; every
 * history uses fresh partition keys.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { afterAll, beforeAll } from "vitest"
import * as DynamoDbOutboxStore from "../../src/layers/dynamodb/DynamoDbOutboxStore.js"
import * as OutboxTable from "../../src/layers/dynamodb/OutboxTable.js"
import * as DynamoDb from "../../src/services/DynamoDb.js"
import type { ContractLayerOptions } from "../contract/OutboxStoreContract.js"
import { makeTestClientConfig, randomTableName } from "../support/DynamoLocal.js"
import { runOutboxHistories } from "./OutboxHistory.js"

const tableName = randomTableName("outbox-histories")
const dynamoLayer = DynamoDb.layer(makeTestClientConfig())

beforeAll(() => Effect.runPromise(OutboxTable.ensureTable(tableName).pipe(Effect.provide(dynamoLayer))))
afterAll(() =>
  Effect.runPromise(
    Effect.flatMap(DynamoDb.DynamoDb, (d) => d.deleteTable({ TableName: tableName })).pipe(Effect.provide(dynamoLayer))
  )
)

const makeLayer = (options: ContractLayerOptions) =>
  DynamoDbOutboxStore.layerWith({
    tableName,
    ensureTable: false,
    indexLagRetries: 0,
    ...(options.staleClaimAfter !== undefined ? { staleClaimAfter: options.staleClaimAfter } : {})
  }).pipe(Layer.provide(dynamoLayer))

// 36 histories in three registrations: each gets its own time budget (DynamoDB Local is slow, and CI
// machines are shared), and each draws its own seed (printed on failure; OUTBOX_SEED replays).
for (const part of [1, 2, 3]) {
  runOutboxHistories(`dynamodb (DynamoDB Local), stale reclaim after 30 s, part ${part}/3`, makeLayer, {
    runs: 12,
    staleClaimAfterMillis: 30_000
  })
}
