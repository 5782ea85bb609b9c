/**
 * Seq allocation for persist (R-PERSIST-3): one `ADD seq_counter :n` per partition per batch on the
 * fence item (which also lists the partition); the batch takes the block ending at the returned value,
 * so seqs are unique and increasing per partition (skipped records leave gaps).
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { StoreUnavailable } from "../../domain/OutboxError.js"
import type { DynamoDbError } from "../../services/DynamoDb.js"
import * as OutboxTable from "./OutboxTable.js"
import * as RecordItem from "./RecordItem.js"
import { retryFenceConflicts, type StoreContext } from "./StoreContext.js"

/**
 * How many seqs each partition needs, in first-appearance order.
 *
 * @since 0.1.0
 */
export const countByPartition = (records: ReadonlyArray<{ readonly partitionKey: string }>): Map<string, number> => {
  const counts = new Map<string, number>()
  for (const record of records) counts.set(record.partitionKey, (counts.get(record.partitionKey) ?? 0) + 1)
  return counts
}

/**
 * Hands out seqs in batch order from the first seq of each partition's block.
 *
 * @since 0.1.0
 */
export const assignSeqs = (
  records: ReadonlyArray<{ readonly partitionKey: string }>,
  firstSeq: ReadonlyMap<string, number>
): Array<number> => {
  const next = new Map(firstSeq)
  return records.map((record) => {
    const seq = next.get(record.partitionKey) ?? 0
    next.set(record.partitionKey, seq + 1)
    return seq
  })
}

/**
 * Reserves `n` seqs of a partition; returns the first. Also lists the partition. A failed request is
 * mapped by `failure` (default `StoreUnavailable`).
 *
 * @since 0.1.0
 */
export const reserve = <E = StoreUnavailable>(
  ctx: StoreContext,
  partitionKey: string,
  n: number,
  now: number,
  failure: (partitionKey: string) => (error: DynamoDbError) => E | StoreUnavailable = (partitionKey) =>
    StoreUnavailable.wrap("persist", partitionKey)
): Effect.Effect<number, E | StoreUnavailable> =>
  retryFenceConflicts(
    ctx.dynamo.updateItem({
      TableName: ctx.options.tableName,
      Key: RecordItem.fenceKey(partitionKey),
      UpdateExpression: "ADD seq_counter :n, listing_epoch :one SET partitions_shard = :shard, listed_at = :now",
      ExpressionAttributeValues: {
        ":n": RecordItem.num(n),
        ":one": RecordItem.num(1),
        ":now": RecordItem.num(now),
        ":shard": RecordItem.num(OutboxTable.partitionShard(partitionKey))
      },
      ReturnValues: "UPDATED_NEW"
    })
  ).pipe(
    Effect.mapError(failure(partitionKey)),
    Effect.flatMap((output) => {
      const end = Number(output.Attributes?.["seq_counter"]?.N)
      return Number.isSafeInteger(end) && end >= n
        ? Effect.succeed(end - n + 1)
        : Effect.fail(
            new StoreUnavailable({
              operation: "persist",
              partitionKey,
              cause: new Error(`seq allocation returned ${String(output.Attributes?.["seq_counter"]?.N)}`)
            })
          )
    })
  )

/**
 * Allocates the seq of every record (returned in batch order), one request per partition.
 *
 * @since 0.1.0
 */
export const allocateSeqs = <E = StoreUnavailable>(
  ctx: StoreContext,
  records: ReadonlyArray<{ readonly partitionKey: string }>,
  failure?: (partitionKey: string) => (error: DynamoDbError) => E | StoreUnavailable
): Effect.Effect<Array<number>, E | StoreUnavailable> =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const first = new Map<string, number>()
    for (const [partitionKey, n] of countByPartition(records)) {
      first.set(partitionKey, yield* reserve(ctx, partitionKey, n, now, failure))
    }
    return assignSeqs(records, first)
  })
