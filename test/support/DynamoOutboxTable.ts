/**
 * One DynamoDB Local outbox table for a test file: created before the file's tests, deleted after, and
 * a factory of store layers on it for the shared suites (`outboxStoreContract`, `runOutboxHistories`).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { afterAll, beforeAll } from "vitest"
import * as DynamoDbOutboxStore from "../../src/layers/dynamodb/DynamoDbOutboxStore.js"
import * as OutboxTable from "../../src/layers/dynamodb/OutboxTable.js"
import * as DynamoDb from "../../src/services/DynamoDb.js"
import type { ContractLayerOptions } from "../contract/OutboxStoreContract.js"
import { makeTestClientConfig, randomTableName } from "./DynamoLocal.js"

export const outboxTableForFile = (prefix: string, options: { readonly localClaimIndex?: boolean } = {}) => {
  const tableName = randomTableName(prefix)
  const dynamoLayer = DynamoDb.layer(makeTestClientConfig())
  const localClaimIndex = options.localClaimIndex === true

  beforeAll(() =>
    Effect.runPromise(OutboxTable.ensureTable(tableName, { localClaimIndex }).pipe(Effect.provide(dynamoLayer)))
  )
  afterAll(() =>
    Effect.runPromise(
      Effect.flatMap(DynamoDb.DynamoDb, (d) => d.deleteTable({ TableName: tableName })).pipe(
        Effect.provide(dynamoLayer)
      )
    )
  )

  // DynamoDB Local's indexes are consistent at once, so RecordIdIndex lookups need no lag retries
  // (which would also sleep on the TestClock the suites run on).
  const makeLayer = (layerOptions: ContractLayerOptions) =>
    DynamoDbOutboxStore.layerWith({
      tableName,
      ensureTable: false,
      indexLagRetries: 0,
      ...(localClaimIndex ? { localClaimIndex } : {}),
      ...(layerOptions.staleClaimAfter !== undefined ? { staleClaimAfter: layerOptions.staleClaimAfter } : {})
    }).pipe(Layer.provide(dynamoLayer))

  return { tableName, dynamoLayer, makeLayer }
}
