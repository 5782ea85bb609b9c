/**
 * Complete and release on DynamoDB (R-DONE-1..3): ids resolve to keys through an in-process cache of the
 * keys this store persisted or claimed, else `RecordIdIndex` (retried for index lag); an id the index
 * does not show is not claimed by the token. Each id is one conditional update on status, owner, version
 * and id; several ids are not atomic (earlier matches stay applied). Complete sets `ttl = now +
 * retention` and leaves the claim and expiry indexes.
 *
 * @since 0.1.0
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import { type InvalidArgument, type StaleFencingToken, StoreUnavailable } from "../../domain/OutboxError.js"
import * as OutboxStore from "../../services/OutboxStore.js"
import * as OutboxTable from "./OutboxTable.js"
import * as RecordItem from "./RecordItem.js"
import { isConditionFailure, requestFailure, type StoreContext } from "./StoreContext.js"

/** How many ids a {@link KeyCache} remembers. */
const CacheCapacity = 100_000

/**
 * The primary key of a record item.
 *
 * @since 0.1.0
 */
export interface RecordKey {
  readonly partitionKey: string
  readonly sortKey: string
}

/**
 * A bounded id → key map (oldest insertion evicted first).
 *
 * @since 0.1.0
 */
export class KeyCache {
  private readonly entries = new Map<string, RecordKey>()
  constructor(private readonly capacity: number = CacheCapacity) {}
  /** The key remembered for an id. */
  get(id: string): RecordKey | undefined {
    return this.entries.get(id)
  }
  /** Remembers (or refreshes) an id's key. */
  set(id: string, partitionKey: string, sortKey: string): void {
    this.entries.delete(id)
    this.entries.set(id, { partitionKey, sortKey })
    if (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next()
      if (oldest.done !== true) this.entries.delete(oldest.value)
    }
  }
  /** How many ids are remembered. */
  get size(): number {
    return this.entries.size
  }
}

/**
 * Resolves an id to its key: the cache, else `RecordIdIndex` with `indexLagRetries` more lookups
 * `indexLagDelay` apart. `undefined` when the index does not show the id, or when no stored record can
 * have it (empty or over the key limit).
 *
 * @since 0.1.0
 */
export const lookupKey = (
  ctx: StoreContext,
  cache: KeyCache,
  id: string,
  operation: string
): Effect.Effect<RecordKey | undefined, StoreUnavailable> => {
  const cached = cache.get(id)
  if (cached !== undefined) return Effect.succeed(cached)
  // an id no record can have is unknown without asking (DynamoDB would reject the key as invalid)
  if (!RecordItem.canBeRecordId(id)) return Effect.succeed(undefined)
  const once = ctx.dynamo
    .query({
      TableName: ctx.options.tableName,
      IndexName: OutboxTable.RecordIdIndex,
      KeyConditionExpression: "record_id = :id",
      ExpressionAttributeValues: { ":id": RecordItem.str(id) }
    })
    .pipe(
      StoreUnavailable.refail(operation),
      Effect.map((output) => {
        const item = output.Items?.[0]
        const partitionKey = item?.["PK"]?.S
        const sortKey = item?.["SK"]?.S
        return partitionKey !== undefined && sortKey !== undefined ? { partitionKey, sortKey } : undefined
      })
    )
  const attempt = (left: number): Effect.Effect<RecordKey | undefined, StoreUnavailable> =>
    Effect.flatMap(once, (found) =>
      found !== undefined || left <= 0
        ? Effect.succeed(found)
        : Effect.zipRight(Effect.sleep(ctx.options.indexLagDelay), attempt(left - 1))
    )
  return attempt(ctx.options.indexLagRetries)
}

/**
 * The update one settle operation applies to a matched record.
 *
 * @since 0.1.0
 */
export interface SettleUpdate {
  readonly expression: string
  readonly names: Record<string, string>
  readonly values: Record<string, AttributeValue>
}

/**
 * Complete: `completed`, `completed_at = now`, `ttl = now + retention`, out of the claim and expiry
 * indexes. Release: back to `pending`, owner and claim time removed (version, replay count and first
 * attempt kept).
 *
 * @since 0.1.0
 */
export const settleUpdate = (
  operation: "complete" | "release",
  nowMillis: number,
  retentionSeconds: number
): SettleUpdate =>
  operation === "complete"
    ? {
        expression: "SET #status = :completed, completed_at = :now, #ttl = :ttl REMOVE claim_sort, has_expiry",
        names: { "#status": "status", "#ttl": OutboxTable.TtlAttribute },
        values: {
          ":completed": RecordItem.str("completed"),
          ":now": RecordItem.num(nowMillis),
          ":ttl": RecordItem.num(Math.floor(nowMillis / 1000) + retentionSeconds)
        }
      }
    : {
        expression: "SET #status = :pending REMOVE claimed_by, claimed_at",
        names: { "#status": "status" },
        values: { ":pending": RecordItem.str("pending") }
      }

/**
 * The backend's `complete` or `release`: every distinct id in turn; the ids that were not claimed by
 * the token (or are unknown) fail the call with `StaleFencingToken` naming them.
 *
 * @since 0.1.0
 */
export const settle =
  (ctx: StoreContext, cache: KeyCache, operation: "complete" | "release") =>
  (
    ids: ReadonlyArray<string>,
    token: LeaseToken.LeaseTokenLike
  ): Effect.Effect<void, StaleFencingToken | InvalidArgument | StoreUnavailable> =>
    Effect.gen(function* () {
      const update = settleUpdate(operation, yield* Clock.currentTimeMillis, ctx.options.retentionSeconds)
      const mismatched: Array<string> = []
      for (const id of new Set(ids)) {
        const key = yield* lookupKey(ctx, cache, id, operation)
        if (key === undefined) {
          mismatched.push(id)
          continue
        }
        const matched = yield* ctx.dynamo
          .updateItem({
            TableName: ctx.options.tableName,
            Key: { PK: RecordItem.str(key.partitionKey), SK: RecordItem.str(key.sortKey) },
            UpdateExpression: update.expression,
            ConditionExpression:
              "record_id = :id AND #status = :claimed AND claimed_by = :owner AND claim_version = :v",
            ExpressionAttributeNames: update.names,
            ExpressionAttributeValues: {
              ...update.values,
              ":id": RecordItem.str(id),
              ":claimed": RecordItem.str("claimed"),
              ":owner": RecordItem.str(token.owner),
              ":v": RecordItem.num(token.version)
            }
          })
          .pipe(
            Effect.as(true),
            Effect.catchIf(isConditionFailure, () => Effect.succeed(false)),
            Effect.mapError(requestFailure(operation, key.partitionKey))
          )
        if (!matched) mismatched.push(id)
      }
      if (mismatched.length > 0) return yield* OutboxStore.notClaimedBy(operation, token, mismatched)
    })
