/**
 * The partition fence on DynamoDB (R-CLAIM-2, R-EXP-1): a consistent read of the fence item, admission
 * of a token with `Fence.admit`, and the conditional raise of the high-water mark. A failed fence
 * condition is always `StaleFencingToken`, never `StoreUnavailable`.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fence from "../../domain/Fence.js"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import { type InvalidArgument, StaleFencingToken, StoreUnavailable } from "../../domain/OutboxError.js"
import * as OutboxStore from "../../services/OutboxStore.js"
import * as RecordItem from "./RecordItem.js"
import { isConditionFailure, requestFailure, type StoreContext } from "./StoreContext.js"

/**
 * Reads a partition's fence item consistently (absent → zeros); a malformed item is `StoreUnavailable`.
 *
 * @since 0.1.0
 */
export const readFence = (
  ctx: StoreContext,
  partitionKey: string,
  operation: string
): Effect.Effect<RecordItem.Fence, InvalidArgument | StoreUnavailable> =>
  ctx.dynamo
    .getItem({ TableName: ctx.options.tableName, Key: RecordItem.fenceKey(partitionKey), ConsistentRead: true })
    .pipe(
      Effect.mapError(requestFailure(operation, partitionKey)),
      Effect.flatMap((output) =>
        Either.match(RecordItem.decodeFence(output.Item), {
          onLeft: (reason) =>
            Effect.fail(
              new StoreUnavailable({
                operation,
                partitionKey,
                cause: new Error(`fence item of partition ${partitionKey} is malformed: ${reason}`)
              })
            ),
          onRight: Effect.succeed
        })
      )
    )

/**
 * Fails with `StaleFencingToken` after a fence condition failed, naming the high-water mark when it can
 * be read (a failed read still yields `StaleFencingToken`: the condition proved the token stale).
 *
 * @since 0.1.0
 */
export const staleToken = (
  ctx: StoreContext,
  partitionKey: string,
  token: LeaseToken.LeaseTokenLike,
  operation: string
): Effect.Effect<never, StaleFencingToken> =>
  readFence(ctx, partitionKey, operation).pipe(
    Effect.map((fence) => OutboxStore.belowHighWaterMark(operation, partitionKey, token, fence.highWaterMark)),
    Effect.orElseSucceed(
      () =>
        new StaleFencingToken({
          operation,
          partitionKey,
          owner: token.owner,
          version: token.version,
          reason: `a newer owner raised the partition's fence above version ${token.version} (the high-water mark could not be read)`
        })
    ),
    Effect.flatMap(Effect.fail)
  )

/**
 * Admits a token at the partition's fence: below the mark → `StaleFencingToken`; above → the mark is
 * raised to its version with a conditional update. Returns the fence as read.
 *
 * @since 0.1.0
 */
export const raiseFence = (
  ctx: StoreContext,
  partitionKey: string,
  token: LeaseToken.LeaseTokenLike,
  operation: string
): Effect.Effect<RecordItem.Fence, StaleFencingToken | InvalidArgument | StoreUnavailable> =>
  Effect.gen(function* () {
    const fence = yield* readFence(ctx, partitionKey, operation)
    switch (Fence.admit(fence.highWaterMark, token.version)) {
      case "stale":
        return yield* OutboxStore.belowHighWaterMark(operation, partitionKey, token, fence.highWaterMark)
      case "keep":
        return fence
      case "raise":
        yield* ctx.dynamo
          .updateItem({
            TableName: ctx.options.tableName,
            Key: RecordItem.fenceKey(partitionKey),
            UpdateExpression: "SET max_claim_version = :v",
            ConditionExpression: "attribute_not_exists(max_claim_version) OR max_claim_version <= :v",
            ExpressionAttributeValues: { ":v": RecordItem.num(token.version) }
          })
          .pipe(
            Effect.catchIf(isConditionFailure, () => staleToken(ctx, partitionKey, token, operation)),
            Effect.mapError((error) =>
              error._tag === "DynamoDbError" ? requestFailure(operation, partitionKey)(error) : error
            )
          )
        return fence
    }
  })

/**
 * The transaction entry that checks the fence still admits `version` (`max_claim_version <= version`).
 *
 * @since 0.1.0
 */
export const fenceCheck = (ctx: StoreContext, partitionKey: string, version: number) => ({
  ConditionCheck: {
    TableName: ctx.options.tableName,
    Key: RecordItem.fenceKey(partitionKey),
    ConditionExpression: "max_claim_version <= :v",
    ExpressionAttributeValues: { ":v": RecordItem.num(version) }
  }
})
