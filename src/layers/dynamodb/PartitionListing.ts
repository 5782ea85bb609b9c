/**
 * Which partitions `listPartitions` returns (R-READ-3): a persist lists its partition on the fence item
 * (`partitions_shard`, `listed_at`, bumping `listing_epoch`); a claim that finds the partition empty
 * de-lists it conditionally on the epoch it read, so a racing persist keeps it listed. Listing reads the
 * shards of `PartitionIndex`, one fence item per partition, never a record.
 *
 * @since 0.1.0
 */
import * as Chunk from "effect/Chunk"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { StoreUnavailable } from "../../domain/OutboxError.js"
import * as OutboxTable from "./OutboxTable.js"
import * as RecordItem from "./RecordItem.js"
import { nextCursor, noCursor, queryPage, type StoreContext } from "./StoreContext.js"

/**
 * How long after its last persist a partition may be de-listed on the word of `ClaimIndex` alone (an
 * eventually consistent index may not show records written just before). The consistent scan path
 * de-lists without waiting.
 *
 * @since 0.1.0
 */
export const ListingGrace = Duration.minutes(1)

/**
 * The fence update that lists a partition after records were written: sets the shard and `listed_at`
 * and bumps `listing_epoch`, so a claim that read the fence earlier cannot de-list it.
 *
 * @since 0.1.0
 */
export const listingUpdate = (tableName: string, partitionKey: string, now: number) => ({
  TableName: tableName,
  Key: RecordItem.fenceKey(partitionKey),
  UpdateExpression: "SET partitions_shard = :shard, listed_at = :now ADD listing_epoch :one",
  ExpressionAttributeValues: {
    ":shard": RecordItem.num(OutboxTable.partitionShard(partitionKey)),
    ":now": RecordItem.num(now),
    ":one": RecordItem.num(1)
  }
})

/**
 * What a claim that claimed nothing learnt about the partition's emptiness.
 *
 * @since 0.1.0
 */
export interface EmptinessEvidence {
  /** Non-terminal records a consistent read (scan or local path) saw, when one ran. */
  readonly consistentNonTerminal: number | undefined
  /** Items the fast path read from `ClaimIndex`. */
  readonly indexScanned: number
  /** Now, in epoch ms. */
  readonly nowMillis: number
}

/**
 * Whether a listed partition may be de-listed: a consistent read saw no non-terminal record, or only
 * `ClaimIndex` was read, it showed nothing and the last persist is older than {@link ListingGrace}.
 *
 * @since 0.1.0
 */
export const mayDelist = (fence: RecordItem.Fence, evidence: EmptinessEvidence): boolean => {
  if (!fence.listed) return false
  if (evidence.consistentNonTerminal !== undefined) return evidence.consistentNonTerminal === 0
  return (
    evidence.indexScanned === 0 &&
    (fence.listedAt === undefined || fence.listedAt < evidence.nowMillis - Duration.toMillis(ListingGrace))
  )
}

/**
 * Removes a partition found empty from the listing unless a persist listed it again since `fence` was
 * read (`listing_epoch` changed). Best effort: a failure leaves it listed.
 *
 * @since 0.1.0
 */
export const delist = (ctx: StoreContext, partitionKey: string, fence: RecordItem.Fence): Effect.Effect<void> =>
  ctx.dynamo
    .updateItem({
      TableName: ctx.options.tableName,
      Key: RecordItem.fenceKey(partitionKey),
      UpdateExpression: "REMOVE partitions_shard",
      ...(fence.listingEpoch === undefined
        ? { ConditionExpression: "attribute_not_exists(listing_epoch)" }
        : {
            ConditionExpression: "listing_epoch = :epoch",
            ExpressionAttributeValues: { ":epoch": RecordItem.num(fence.listingEpoch) }
          })
    })
    .pipe(Effect.ignore)

/**
 * The listed partitions: every shard of `PartitionIndex` in turn, page by page.
 *
 * @since 0.1.0
 */
export const listPartitions = (ctx: StoreContext): Stream.Stream<string, StoreUnavailable> =>
  Stream.flatMap(Stream.range(0, OutboxTable.PartitionShards - 1), (shard) =>
    Stream.paginateChunkEffect(noCursor, ({ cursor }) =>
      queryPage(
        ctx,
        "listPartitions",
        undefined,
        {
          IndexName: OutboxTable.PartitionIndex,
          KeyConditionExpression: "partitions_shard = :shard",
          ExpressionAttributeValues: { ":shard": RecordItem.num(shard) }
        },
        cursor
      ).pipe(
        Effect.mapError((error) =>
          error._tag === "StoreUnavailable" ? error : StoreUnavailable.wrap("listPartitions")(error)
        ),
        Effect.map(
          (output) =>
            [
              Chunk.fromIterable(
                (output.Items ?? []).flatMap((item) => (item["PK"]?.S !== undefined ? [item["PK"].S] : []))
              ),
              nextCursor(output)
            ] as const
        )
      )
    )
  )
