/**
 * Generated histories of the DynamoDB store claiming through the local secondary index
 * `ClaimLocalIndex` (DynamoDB Local) against the pure model. Stale reclaim after 30 s (the store's
 * default). One table, created with the index, for the file; every history uses fresh partition keys.
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

const tableName = randomTableName("outbox-lsi-histories")
const dynamoLayer = DynamoDb.layer(makeTestClientConfig())

beforeAll(() =>
  Effect.runPromise(OutboxTable.ensureTable(tableName, { localClaimIndex: true }).pipe(Effect.provide(dynamoLayer)))
)
afterAll(() =>
  Effect.runPromise(
    Effect.flatMap(DynamoDb.DynamoDb, (d) => d.deleteTable({ TableName: tableName })).pipe(Effect.provide(dynamoLayer))
  )
)

const makeLayer = (options: ContractLayerOptions) =>
  DynamoDbOutboxStore.layerWith({
    tableName,
    ensureTable: false,
    localClaimIndex: true,
    indexLagRetries: 0,
    ...(options.staleClaimAfter !== undefined ? { staleClaimAfter: options.staleClaimAfter } : {})
  }).pipe(Layer.provide(dynamoLayer))

// 24 histories in two registrations: each gets its own time budget and draws its own seed (printed on
// failure; OUTBOX_SEED replays).
for (const part of [1, 2]) {
  runOutboxHistories(`dynamodb ClaimLocalIndex (DynamoDB Local), stale reclaim after 30 s, part ${part}/2`, makeLayer, {
    runs: 12,
    staleClaimAfterMillis: 30_000
  })
}
