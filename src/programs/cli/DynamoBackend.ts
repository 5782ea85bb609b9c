/**
 * The DynamoDB backend of the CLI, loaded only when `backend` is `dynamodb` (the AWS SDK is the
 * heaviest import of the command line).
 *
 * @since 0.1.0
 */
import type { QueryCommandOutput } from "@aws-sdk/client-dynamodb"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { StoreUnavailable } from "../../domain/OutboxError.js"
import * as DynamoDbDeadLetterStore from "../../layers/dynamodb/DynamoDbDeadLetterStore.js"
import * as DynamoDbLeaseStore from "../../layers/dynamodb/DynamoDbLeaseStore.js"
import * as DynamoDbOutboxStore from "../../layers/dynamodb/DynamoDbOutboxStore.js"
import * as OutboxTable from "../../layers/dynamodb/OutboxTable.js"
import * as RecordItem from "../../layers/dynamodb/RecordItem.js"
import { DeadLetterStore } from "../../services/DeadLetterStore.js"
import * as DynamoDb from "../../services/DynamoDb.js"
import { OutboxStore } from "../../services/OutboxStore.js"
import { countsThroughPort, listed, Probe, type Stores, unavailable } from "./Backends.js"
import type { StoreSettings } from "./Settings.js"

const dynamoProbe = (tableName: string): Layer.Layer<Probe, never, DynamoDb.DynamoDb | OutboxStore | DeadLetterStore> =>
  Layer.effect(
    Probe,
    Effect.gen(function* () {
      const dynamo = yield* DynamoDb.DynamoDb
      const store = yield* OutboxStore
      const dlq = yield* DeadLetterStore
      const oldestPendingAt = (partitionKey: string): Effect.Effect<Option.Option<number>, StoreUnavailable> =>
        Effect.gen(function* () {
          // ClaimIndex is in age order: the first pending item is the oldest (the index may lag the table)
          let startKey: Record<string, RecordItem.Item[string]> | undefined = undefined
          for (;;) {
            const page: QueryCommandOutput = yield* dynamo
              .query({
                TableName: tableName,
                IndexName: OutboxTable.ClaimIndex,
                KeyConditionExpression: "PK = :pk",
                FilterExpression: "#status = :pending",
                ExpressionAttributeNames: { "#status": "status" },
                ExpressionAttributeValues: { ":pk": { S: partitionKey }, ":pending": { S: "pending" } },
                ProjectionExpression: "created_at",
                Limit: 100,
                ...(startKey !== undefined ? { ExclusiveStartKey: startKey } : {})
              })
              .pipe(Effect.mapError(unavailable("inspect.oldest")))
            const first = page.Items?.[0]?.["created_at"]?.N
            if (first !== undefined) return Option.some(Number(first))
            if (page.LastEvaluatedKey === undefined) return Option.none()
            startKey = page.LastEvaluatedKey
          }
        })
      return Probe.of({
        backend: "dynamodb",
        knownPartitions: listed(store),
        fenceVersion: (partitionKey) =>
          dynamo.getItem({ TableName: tableName, Key: RecordItem.fenceKey(partitionKey), ConsistentRead: true }).pipe(
            Effect.mapError(unavailable("inspect.fence")),
            Effect.flatMap((output) => {
              const fence = RecordItem.decodeFence(output.Item)
              return fence._tag === "Right"
                ? Effect.succeed(fence.right.highWaterMark)
                : Effect.fail(new StoreUnavailable({ operation: "inspect.fence", partitionKey, cause: fence.left }))
            })
          ),
        oldestPendingAt,
        deadLetterCounts: countsThroughPort(dlq),
        notes: ["dead-letter counts list every entry of each category (DynamoDB has no cheap count)"]
      })
    })
  )

/**
 * The DynamoDB stores and probe for the settings (tables created when missing unless disabled). With
 * `dynamodbLocalClaimIndex` the outbox store claims through `ClaimLocalIndex` and a table it creates gets
 * that index; the outbox store is built before the lease store (same table), so that the table is created
 * with the index rather than without it by the lease store.
 *
 * @since 0.1.0
 */
export const layer = (settings: StoreSettings): Layer.Layer<Stores, unknown> => {
  const client = DynamoDb.layer({
    region: settings.dynamodbRegion,
    ...(Option.isSome(settings.dynamodbEndpoint) ? { endpoint: settings.dynamodbEndpoint.value } : {})
  })
  const ensureTable = settings.dynamodbEnsureTables
  const outbox = DynamoDbOutboxStore.layerWith({
    tableName: settings.dynamodbTable,
    ensureTable,
    localClaimIndex: settings.dynamodbLocalClaimIndex
  })
  const dlqAndLeases = Layer.merge(
    DynamoDbDeadLetterStore.layerWith({ tableName: settings.dynamodbDeadLetterTable, ensureTable }),
    DynamoDbLeaseStore.layerWith({ tableName: settings.dynamodbTable, ensureTable })
  )
  const stores = Layer.provideMerge(dynamoProbe(settings.dynamodbTable), Layer.provideMerge(dlqAndLeases, outbox))
  return stores.pipe(Layer.provide(client))
}
