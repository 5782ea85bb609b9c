/**
 * Expire on DynamoDB (R-EXP-1..3): the fence is admitted and raised like a claim, then `ExpiryIndex`
 * (`has_expiry` = partition, `expires_at < before`) is read page by page and each record is expired
 * with a transaction [fence check, update if still pending and due]. A sweep cut short after some
 * transitions fails with `ExpireIncomplete` carrying the count.
 *
 * @since 0.1.0
 */
import type { QueryCommandOutput } from "@aws-sdk/client-dynamodb"
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import {
  ExpireIncomplete,
  type InvalidArgument,
  type StaleFencingToken,
  StoreUnavailable
} from "../../domain/OutboxError.js"
import type * as OutboxStore from "../../services/OutboxStore.js"
import { claimOutcome } from "./ClaimTransaction.js"
import { fenceCheck, raiseFence, staleToken } from "./FenceItem.js"
import * as OutboxTable from "./OutboxTable.js"
import * as RecordItem from "./RecordItem.js"
import { checkPartitionKey, queryPage, type StoreContext } from "./StoreContext.js"

/**
 * The outcome of expiring one record: done, skipped (no longer pending or due), or the sweep stops.
 *
 * @since 0.1.0
 */
export type ExpireOutcome =
  | { readonly _tag: "Expired" }
  | { readonly _tag: "Skipped" }
  | { readonly _tag: "FenceLost" }
  | { readonly _tag: "Failed"; readonly cause: unknown }

/**
 * Expires one record found in `ExpiryIndex`.
 *
 * @since 0.1.0
 */
export const expireOne = (
  ctx: StoreContext,
  key: RecordItem.Item,
  partitionKey: string,
  token: LeaseToken.LeaseTokenLike,
  beforeMillis: number,
  nowMillis: number
): Effect.Effect<ExpireOutcome> =>
  ctx.dynamo
    .transactWriteItems({
      TransactItems: [
        fenceCheck(ctx, partitionKey, token.version),
        {
          Update: {
            TableName: ctx.options.tableName,
            Key: key,
            UpdateExpression: "SET #status = :expired, #ttl = :ttl REMOVE claim_sort, has_expiry",
            ConditionExpression: "#status = :pending AND expires_at < :before",
            ExpressionAttributeNames: { "#status": "status", "#ttl": OutboxTable.TtlAttribute },
            ExpressionAttributeValues: {
              ":expired": RecordItem.str("expired"),
              ":pending": RecordItem.str("pending"),
              ":before": RecordItem.num(beforeMillis),
              ":ttl": RecordItem.num(Math.floor(nowMillis / 1000) + ctx.options.retentionSeconds)
            }
          }
        }
      ]
    })
    .pipe(
      Effect.as<ExpireOutcome>({ _tag: "Expired" }),
      Effect.catchAll((error) => {
        const outcome = claimOutcome(error)
        return Effect.succeed<ExpireOutcome>(
          outcome._tag === "Lost"
            ? { _tag: "Skipped" }
            : outcome._tag === "FenceLost"
              ? { _tag: "FenceLost" }
              : { _tag: "Failed", cause: error }
        )
      })
    )

/**
 * The backend's `expire`.
 *
 * @since 0.1.0
 */
export const expire =
  (ctx: StoreContext): OutboxStore.Backend["expire"] =>
  (before: DateTime.Utc, partitionKey: string, token: LeaseToken.LeaseTokenLike) =>
    Effect.gen(function* () {
      yield* checkPartitionKey("expire", partitionKey)
      yield* raiseFence(ctx, partitionKey, token, "expire")
      const now = yield* Clock.currentTimeMillis
      const beforeMillis = DateTime.toEpochMillis(before)
      let expired = 0
      let cursor: RecordItem.Item | undefined = undefined
      const cut = (cause: unknown): Effect.Effect<never, ExpireIncomplete | StoreUnavailable> =>
        expired > 0
          ? Effect.fail(new ExpireIncomplete({ partitionKey, expired, cause }))
          : Effect.fail(StoreUnavailable.wrap("expire", partitionKey)(cause))
      for (;;) {
        const page: Either.Either<QueryCommandOutput, InvalidArgument | StoreUnavailable> = yield* Effect.either(
          queryPage(
            ctx,
            "expire",
            partitionKey,
            {
              IndexName: OutboxTable.ExpiryIndex,
              KeyConditionExpression: "has_expiry = :pk AND expires_at < :before",
              ExpressionAttributeValues: {
                ":pk": RecordItem.str(partitionKey),
                ":before": RecordItem.num(beforeMillis)
              }
            },
            cursor
          )
        )
        if (Either.isLeft(page)) {
          const failed = page.left
          if (failed._tag === "StoreUnavailable") return yield* cut(failed.cause)
          return yield* expired > 0
            ? Effect.fail(new ExpireIncomplete({ partitionKey, expired, cause: failed }))
            : failed
        }
        for (const item of page.right.Items ?? []) {
          const pk = item["PK"]
          const sk = item["SK"]
          if (pk === undefined || sk === undefined) continue
          const outcome = yield* expireOne(ctx, { PK: pk, SK: sk }, partitionKey, token, beforeMillis, now)
          switch (outcome._tag) {
            case "Expired":
              expired++
              break
            case "Skipped":
              break
            case "FenceLost": {
              const stale: StaleFencingToken = yield* Effect.flip(staleToken(ctx, partitionKey, token, "expire"))
              if (expired === 0) return yield* stale
              return yield* new ExpireIncomplete({ partitionKey, expired, cause: stale })
            }
            case "Failed":
              return yield* cut(outcome.cause)
          }
        }
        if (page.right.LastEvaluatedKey === undefined) return expired
        cursor = page.right.LastEvaluatedKey
      }
    })
