/**
 * The DynamoDB store's reads (R-READ-1/2): `queryPending` previews pending records in age order and
 * `countPending`/`countClaimed` count them with `Select: COUNT` summed over pages. They read
 * `ClaimIndex` (eventually consistent), or `ClaimLocalIndex` consistently when the store has it.
 *
 * @since 0.1.0
 */
import type { QueryCommandOutput } from "@aws-sdk/client-dynamodb"
import * as Effect from "effect/Effect"
import * as ClaimOrder from "../../domain/ClaimOrder.js"
import type { InvalidArgument, StoreUnavailable } from "../../domain/OutboxError.js"
import type * as OutboxRecord from "../../domain/OutboxRecord.js"
import type * as OutboxStore from "../../services/OutboxStore.js"
import * as OutboxTable from "./OutboxTable.js"
import * as RecordItem from "./RecordItem.js"
import { checkPartitionKey, decodeItems, queryPage, type StoreContext } from "./StoreContext.js"

/**
 * The index the reads use: `ClaimLocalIndex` read consistently when the store has it, else `ClaimIndex`.
 *
 * @since 0.1.0
 */
export const depthIndex = (ctx: StoreContext): { readonly IndexName: string; readonly ConsistentRead?: boolean } =>
  ctx.options.localClaimIndex
    ? { IndexName: OutboxTable.ClaimLocalIndex, ConsistentRead: true }
    : { IndexName: OutboxTable.ClaimIndex }

/**
 * The backend's `queryPending`: the oldest pending records the index shows, at most `limit`.
 *
 * @since 0.1.0
 */
export const queryPending =
  (ctx: StoreContext): OutboxStore.Backend["queryPending"] =>
  (partitionKey: string, limit: number) =>
    Effect.gen(function* () {
      yield* checkPartitionKey("queryPending", partitionKey)
      const found: Array<OutboxRecord.OutboxRecord> = []
      let cursor: RecordItem.Item | undefined = undefined
      for (;;) {
        const output: QueryCommandOutput = yield* queryPage(
          ctx,
          "queryPending",
          partitionKey,
          {
            ...depthIndex(ctx),
            KeyConditionExpression: "PK = :pk",
            FilterExpression: "#status = :pending",
            ExpressionAttributeNames: { "#status": "status" },
            ExpressionAttributeValues: { ":pk": RecordItem.str(partitionKey), ":pending": RecordItem.str("pending") },
            ScanIndexForward: true,
            Limit: Math.max(limit - found.length, 1)
          },
          cursor
        )
        const records = yield* decodeItems(output.Items ?? [])
        for (const record of records) if (found.length < limit) found.push(record)
        if (found.length >= limit || output.LastEvaluatedKey === undefined) break
        cursor = output.LastEvaluatedKey
      }
      return found.sort(ClaimOrder.compareAge)
    })

/**
 * The backend's `countPending` or `countClaimed`.
 *
 * @since 0.1.0
 */
export const countStatus =
  (ctx: StoreContext, status: "pending" | "claimed", operation: string) =>
  (partitionKey: string): Effect.Effect<number, InvalidArgument | StoreUnavailable> =>
    Effect.gen(function* () {
      yield* checkPartitionKey(operation, partitionKey)
      let total = 0
      let cursor: RecordItem.Item | undefined = undefined
      for (;;) {
        const output: QueryCommandOutput = yield* queryPage(
          ctx,
          operation,
          partitionKey,
          {
            ...depthIndex(ctx),
            KeyConditionExpression: "PK = :pk",
            FilterExpression: "#status = :status",
            ExpressionAttributeNames: { "#status": "status" },
            ExpressionAttributeValues: { ":pk": RecordItem.str(partitionKey), ":status": RecordItem.str(status) },
            Select: "COUNT"
          },
          cursor
        )
        total += output.Count ?? 0
        if (output.LastEvaluatedKey === undefined) return total
        cursor = output.LastEvaluatedKey
      }
    })
