/**
 * The shared OutboxStore contract suite on the DynamoDB store claiming through the local secondary index
 * `ClaimLocalIndex` (DynamoDB Local), one table created with the index for the file.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { afterAll, beforeAll } from "vitest"
import * as DynamoDbOutboxStore from "../src/layers/dynamodb/DynamoDbOutboxStore.js"
import * as OutboxTable from "../src/layers/dynamodb/OutboxTable.js"
import * as RecordItem from "../src/layers/dynamodb/RecordItem.js"
import * as DynamoDb from "../src/services/DynamoDb.js"
import { type ContractLayerOptions, outboxStoreContract } from "./contract/OutboxStoreContract.js"
import { makeTestClientConfig, randomTableName } from "./support/DynamoLocal.js"

const tableName = randomTableName("outbox-lsi-contract")
const dynamoLayer = DynamoDb.layer(makeTestClientConfig())

beforeAll(() =>
  Effect.runPromise(OutboxTable.ensureTable(tableName, { localClaimIndex: true }).pipe(Effect.provide(dynamoLayer)))
)
afterAll(() =>
  Effect.runPromise(
    Effect.flatMap(DynamoDb.DynamoDb, (d) => d.deleteTable({ TableName: tableName })).pipe(Effect.provide(dynamoLayer))
  )
)

// DynamoDB Local's indexes are consistent at once, so RecordIdIndex lookups need no lag retries
// (which would also sleep on the TestClock the suite runs on).
const makeLayer = (options: ContractLayerOptions) =>
  DynamoDbOutboxStore.layerWith({
    tableName,
    ensureTable: false,
    localClaimIndex: true,
    indexLagRetries: 0,
    ...(options.staleClaimAfter !== undefined ? { staleClaimAfter: options.staleClaimAfter } : {})
  }).pipe(Layer.provide(dynamoLayer))

outboxStoreContract("dynamodb (ClaimLocalIndex)", makeLayer, {
  staleReclaim: true,
  firstAttempt: true,
  multiIdAtomic: false,
  maxPayloadBytes: RecordItem.MaxPayloadBytes
})
