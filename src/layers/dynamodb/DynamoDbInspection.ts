/**
 * Inspection of a DynamoDB outbox (see `OutboxInspection`). Known partitions are the store's
 * `listPartitions` (the fence items, kept after a partition empties); depths are the store's counts; the
 * oldest pending record is the first pending item of `ClaimIndex` (age order); the fence high-water mark
 * (R-CLAIM-4) is one consistent `GetItem`; dead-letter counts are `Select: COUNT` queries of the
 * dead-letter table's `CategoryIndex`, one per shard and category. The longest-held claim would need a read
 * of every claimed item: it is `DepthUnsupported`. Nothing is written.
 *
 * @since 0.1.0
 */
import type { QueryCommandOutput } from "@aws-sdk/client-dynamodb"
import * as Chunk from "effect/Chunk"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { StoreUnavailable } from "../../domain/OutboxError.js"
import * as DynamoDb from "../../services/DynamoDb.js"
import { LeaseStore } from "../../services/LeaseStore.js"
import * as OutboxInspection from "../../services/OutboxInspection.js"
import { OutboxStore } from "../../services/OutboxStore.js"
import * as DeadLetterTable from "./DeadLetterTable.js"
import { DefaultTableName } from "./DynamoDbOutboxStore.js"
import * as OutboxTable from "./OutboxTable.js"
import * as RecordItem from "./RecordItem.js"

/**
 * Options of the DynamoDB inspection: the tables the stores were built with.
 *
 * @since 0.1.0
 */
export interface DynamoDbInspectionOptions {
  /** The outbox table (default `effect-outbox`). */
  readonly tableName?: string | undefined
  /** The dead-letter table (default `effect-outbox-dead-letter`). */
  readonly deadLetterTableName?: string | undefined
}

const decodeMillis = Schema.decodeUnknownOption(Schema.NumberFromString)

/**
 * Builds the inspection over the `DynamoDb` client and `OutboxStore` in context (the lease store is used
 * when present).
 *
 * @since 0.1.0
 */
export const make = (
  options: DynamoDbInspectionOptions = {}
): Effect.Effect<OutboxInspection.OutboxInspectionService, never, DynamoDb.DynamoDb | OutboxStore> =>
  Effect.gen(function* () {
    const dynamo = yield* DynamoDb.DynamoDb
    const store = yield* OutboxStore
    const leases = yield* Effect.serviceOption(LeaseStore)
    const tableName = options.tableName ?? DefaultTableName
    const deadLetterTable = options.deadLetterTableName ?? DeadLetterTable.DefaultTableName
    const name = "dynamodb"

    const oldestPendingAt = (partitionKey: string): Effect.Effect<Option.Option<DateTime.Utc>, StoreUnavailable> =>
      Effect.gen(function* () {
        let startKey: RecordItem.Item | undefined = undefined
        for (;;) {
          const page: QueryCommandOutput = yield* dynamo
            .query({
              TableName: tableName,
              IndexName: OutboxTable.ClaimIndex,
              KeyConditionExpression: "PK = :pk",
              FilterExpression: "#status = :pending",
              ExpressionAttributeNames: { "#status": "status" },
              ExpressionAttributeValues: { ":pk": RecordItem.str(partitionKey), ":pending": RecordItem.str("pending") },
              ProjectionExpression: "created_at",
              Limit: 100,
              ...(startKey !== undefined ? { ExclusiveStartKey: startKey } : {})
            })
            .pipe(StoreUnavailable.refail("inspect.oldestPending", partitionKey))
          const first = page.Items?.[0]?.["created_at"]?.N
          if (first !== undefined) {
            const millis = decodeMillis(first)
            const at = Option.flatMap(millis, (ms) => DateTime.make(ms))
            if (Option.isNone(at)) {
              return yield* StoreUnavailable.wrap(
                "inspect.oldestPending",
                partitionKey
              )(`created_at ${first} is not an instant`)
            }
            return at
          }
          if (page.LastEvaluatedKey === undefined) return Option.none()
          startKey = page.LastEvaluatedKey
        }
      })

    const fence = (partitionKey: string): Effect.Effect<number, StoreUnavailable> =>
      dynamo.getItem({ TableName: tableName, Key: RecordItem.fenceKey(partitionKey), ConsistentRead: true }).pipe(
        StoreUnavailable.refail("inspect.fence", partitionKey),
        Effect.flatMap((output) => {
          const decoded = RecordItem.decodeFence(output.Item)
          return decoded._tag === "Right"
            ? Effect.succeed(decoded.right.highWaterMark)
            : Effect.fail(StoreUnavailable.wrap("inspect.fence", partitionKey)(decoded.left))
        })
      )

    const countKey = (categoryKey: string): Effect.Effect<number, StoreUnavailable> =>
      Effect.gen(function* () {
        let total = 0
        let startKey: RecordItem.Item | undefined = undefined
        for (;;) {
          const page: QueryCommandOutput = yield* dynamo
            .query({
              TableName: deadLetterTable,
              IndexName: DeadLetterTable.CategoryIndex,
              KeyConditionExpression: "category_key = :key",
              ExpressionAttributeValues: { ":key": RecordItem.str(categoryKey) },
              Select: "COUNT",
              ...(startKey !== undefined ? { ExclusiveStartKey: startKey } : {})
            })
            .pipe(StoreUnavailable.refail("inspect.deadLetters"))
          total += page.Count ?? 0
          if (page.LastEvaluatedKey === undefined) return total
          startKey = page.LastEvaluatedKey
        }
      })

    const deadLetters = Effect.gen(function* () {
      const counts = OutboxInspection.noDeadLetters()
      for (const category of OutboxInspection.categories) {
        const perShard = yield* Effect.forEach(
          Array.from({ length: DeadLetterTable.Shards }, (_, shard) => DeadLetterTable.categoryKey(shard, category)),
          countKey,
          { concurrency: DeadLetterTable.Shards }
        )
        counts[category] = perShard.reduce((sum, n) => sum + n, 0)
      }
      return counts
    })

    return OutboxInspection.make(
      {
        name,
        notes: ["the longest-held claim is not read on DynamoDB (it would read every claimed item)"],
        partitions: Effect.map(Stream.runCollect(store.listPartitions), Chunk.toReadonlyArray),
        facts: (partitionKey) =>
          Effect.gen(function* () {
            const pending = yield* OutboxInspection.fact(store.countPending(partitionKey))
            const claimed = yield* OutboxInspection.fact(store.countClaimed(partitionKey))
            const oldest = yield* oldestPendingAt(partitionKey)
            const version = yield* fence(partitionKey)
            return {
              pending,
              claimed,
              oldestPendingAt: OutboxInspection.known(oldest),
              oldestClaimedAt: OutboxInspection.unsupported(name, "oldestClaimedAt"),
              fence: OutboxInspection.known(version)
            }
          }),
        deadLetters
      },
      leases
    )
  })

/**
 * The DynamoDB inspection layer for the given tables.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: DynamoDbInspectionOptions
): Layer.Layer<OutboxInspection.OutboxInspection, never, DynamoDb.DynamoDb | OutboxStore> =>
  Layer.effect(OutboxInspection.OutboxInspection, make(options))

/**
 * The DynamoDB inspection layer for the default table names.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<OutboxInspection.OutboxInspection, never, DynamoDb.DynamoDb | OutboxStore> = layerWith(
  {}
)
