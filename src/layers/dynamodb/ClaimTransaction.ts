/**
 * Claiming one record on DynamoDB (R-CLAIM-2/4/6/8): one `TransactWriteItems` of [fence check
 * `max_claim_version <= v`, conditional update of the record (still claimable, same `replay_count`)],
 * stamped with `Fence.stampClaim`, and the cancellation rules applied while claiming a selection in
 * order: fence lost → stop (`StaleFencingToken`); record lost or conflicting → skip its ordering key
 * for this batch; anything else → stop with a short batch.
 *
 * @since 0.1.0
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import type * as ClaimOrder from "../../domain/ClaimOrder.js"
import * as Fence from "../../domain/Fence.js"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import * as OutboxRecord from "../../domain/OutboxRecord.js"
import type { DynamoDbError } from "../../services/DynamoDb.js"
import * as OutboxMetrics from "../../services/OutboxMetrics.js"
import { fenceCheck } from "./FenceItem.js"
import * as RecordItem from "./RecordItem.js"
import type { StoreContext } from "./StoreContext.js"

/**
 * What one claim transaction did.
 *
 * @since 0.1.0
 */
export type ClaimOutcome =
  | { readonly _tag: "Claimed"; readonly record: OutboxRecord.OutboxRecord }
  | { readonly _tag: "Lost" }
  | { readonly _tag: "Conflict"; readonly cause: DynamoDbError }
  | { readonly _tag: "FenceLost" }
  | { readonly _tag: "Transient"; readonly cause: DynamoDbError }

/**
 * Classifies a failed [fence check, record update] transaction by its cancellation reasons (item order).
 *
 * @since 0.1.0
 */
export const claimOutcome = (error: DynamoDbError): ClaimOutcome => {
  if (error.kind === "TransactionCanceled") {
    const reasons = error.cancellationReasons ?? []
    if (reasons[0] === "ConditionalCheckFailed") return { _tag: "FenceLost" }
    if (reasons.includes("TransactionConflict")) return { _tag: "Conflict", cause: error }
    if (reasons[1] === "ConditionalCheckFailed") return { _tag: "Lost" }
    return { _tag: "Transient", cause: error }
  }
  if (error.kind === "TransactionConflict") return { _tag: "Conflict", cause: error }
  return { _tag: "Transient", cause: error }
}

/**
 * The claimability rule (R-CLAIM-4/6/7) as a DynamoDB condition over {@link claimValues}.
 *
 * @since 0.1.0
 */
export const ClaimableCondition =
  "#status = :pending OR (#status = :claimed AND (claim_version < :v OR attribute_not_exists(claimed_at) OR claimed_at < :staleBefore))"

/**
 * The expression values of {@link ClaimableCondition}.
 *
 * @since 0.1.0
 */
export const claimValues = (
  token: LeaseToken.LeaseTokenLike,
  rule: ClaimOrder.ClaimRule
): Record<string, AttributeValue> => ({
  ":pending": RecordItem.str("pending"),
  ":claimed": RecordItem.str("claimed"),
  ":v": RecordItem.num(token.version),
  ":staleBefore": RecordItem.num(rule.nowMillis - (rule.staleClaimAfterMillis ?? rule.nowMillis + 1))
})

/**
 * Claims one record with a fenced transaction; the returned record is exactly what was stored (the
 * transaction pins the `replay_count` it read).
 *
 * @since 0.1.0
 */
export const claimOne = (
  ctx: StoreContext,
  record: OutboxRecord.OutboxRecord,
  token: LeaseToken.LeaseTokenLike,
  rule: ClaimOrder.ClaimRule
): Effect.Effect<ClaimOutcome> =>
  ctx.dynamo
    .transactWriteItems({
      TransactItems: [
        fenceCheck(ctx, record.partitionKey, token.version),
        {
          Update: {
            TableName: ctx.options.tableName,
            Key: RecordItem.recordKey(record),
            UpdateExpression:
              "SET #status = :claimed, claimed_by = :owner, claim_version = :v, claimed_at = :now, " +
              "first_attempted_at = if_not_exists(first_attempted_at, :now) ADD replay_count :one",
            ConditionExpression: `record_id = :id AND replay_count = :rc AND (${ClaimableCondition})`,
            ExpressionAttributeNames: { "#status": "status" },
            ExpressionAttributeValues: {
              ...claimValues(token, rule),
              ":owner": RecordItem.str(token.owner),
              ":now": RecordItem.num(rule.nowMillis),
              ":one": RecordItem.num(1),
              ":rc": RecordItem.num(record.replayCount),
              ":id": RecordItem.str(record.id)
            }
          }
        }
      ]
    })
    .pipe(
      Effect.map((): ClaimOutcome => ({
        _tag: "Claimed",
        record: OutboxRecord.update(record, {
          status: "claimed",
          ...Fence.stampClaim(record, token, DateTime.unsafeMake(rule.nowMillis))
        })
      })),
      Effect.catchAll((error) => Effect.succeed(claimOutcome(error)))
    )

/**
 * The running state of one claim across its paths.
 *
 * @since 0.1.0
 */
export interface ClaimState {
  readonly claimed: Array<OutboxRecord.OutboxRecord>
  /** Items the fast path's ClaimIndex queries evaluated (before the claimable filter). */
  indexScanned: number
  /** Non-terminal records a consistent read (scan or local path) saw, when one ran. */
  scanNonTerminal: number | undefined
  /** Records lost to other claimers. */
  lost: number
  /** Transactions that met a `TransactionConflict`. */
  conflicts: number
  /** Ordering keys skipped for the rest of the batch. */
  readonly skippedKeys: Set<string>
  /** Why claiming stopped early, if it did. */
  stop: { readonly _tag: "FenceLost" } | { readonly _tag: "Transient"; readonly cause: unknown } | undefined
}

/**
 * One claim in progress: its partition, token, rule, limit and state.
 *
 * @since 0.1.0
 */
export interface ClaimRun {
  readonly partitionKey: string
  readonly token: LeaseToken.LeaseTokenLike
  readonly rule: ClaimOrder.ClaimRule
  readonly limit: number
  readonly state: ClaimState
}

/**
 * A fresh claim state.
 *
 * @since 0.1.0
 */
export const emptyClaimState = (): ClaimState => ({
  claimed: [],
  indexScanned: 0,
  scanNonTerminal: undefined,
  lost: 0,
  conflicts: 0,
  skippedKeys: new Set(),
  stop: undefined
})

/**
 * Records one claim outcome in the state: claimed → appended; lost or conflicting → its ordering key is
 * skipped from now on; fence lost or transient → claiming stops.
 *
 * @since 0.1.0
 */
export const recordOutcome = (state: ClaimState, record: OutboxRecord.OutboxRecord, outcome: ClaimOutcome): void => {
  const key = Option.getOrUndefined(record.orderingKey)
  switch (outcome._tag) {
    case "Claimed":
      state.claimed.push(outcome.record)
      return
    case "Lost":
      state.lost++
      if (key !== undefined) state.skippedKeys.add(key)
      return
    case "Conflict":
      state.conflicts++
      if (key !== undefined) state.skippedKeys.add(key)
      return
    case "FenceLost":
      state.stop = { _tag: "FenceLost" }
      return
    case "Transient":
      state.stop = { _tag: "Transient", cause: outcome.cause }
      return
  }
}

/**
 * Claims `candidates` in order until `limit` records are claimed or claiming stops; `remember` is told
 * every record claimed.
 *
 * @since 0.1.0
 */
export const claimInOrder = (
  ctx: StoreContext,
  remember: (record: OutboxRecord.OutboxRecord) => void,
  claim: ClaimRun,
  candidates: ReadonlyArray<OutboxRecord.OutboxRecord>
): Effect.Effect<void> =>
  Effect.gen(function* () {
    const { limit, partitionKey, rule, state, token } = claim
    for (const record of candidates) {
      if (state.claimed.length >= limit || state.stop !== undefined) return
      const key = Option.getOrUndefined(record.orderingKey)
      if (key !== undefined && state.skippedKeys.has(key)) continue
      const outcome = yield* claimOne(ctx, record, token, rule)
      recordOutcome(state, record, outcome)
      if (outcome._tag === "Claimed") remember(outcome.record)
      if (outcome._tag === "Conflict") {
        yield* Metric.increment(OutboxMetrics.tagged(OutboxMetrics.OutboxClaimConflicts, partitionKey))
      }
    }
  })
