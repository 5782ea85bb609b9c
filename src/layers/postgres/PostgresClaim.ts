/**
 * The statement steps of the PostgreSQL outbox store that run inside its transactions: reading rows with
 * a Schema, the fence (lock the partition's fence row, admit the token and raise the high-water mark,
 * R-CLAIM-2, R-EXP-1) and the claim (candidates through the claim index with the head-of-line check,
 * the final choice by `ClaimOrder.selectFrom`, R-CLAIM-4/5/6, then a guarded update; the claimed records
 * are the candidates it changed, with the claim applied).
 *
 * @since 0.1.0
 */
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as ClaimOrder from "../../domain/ClaimOrder.js"
import * as Fence from "../../domain/Fence.js"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import { type CorruptRecord, type StaleFencingToken, StoreUnavailable } from "../../domain/OutboxError.js"
import * as OutboxRecord from "../../domain/OutboxRecord.js"
import { belowHighWaterMark, ClaimBatch } from "../../services/OutboxStore.js"
import type * as SqlOutboxStatements from "../sql/SqlOutboxStatements.js"
import * as PostgresOutboxSchema from "./PostgresOutboxSchema.js"
import type { Transactions } from "./PostgresTransaction.js"

/**
 * Rows of `id`.
 *
 * @since 0.1.0
 */
export const IdRows = Schema.Array(Schema.Struct({ id: Schema.String }))
const FenceRows = Schema.Array(Schema.Struct({ max_version: PostgresOutboxSchema.BigIntColumn }))

/**
 * What the steps need of the store.
 *
 * @since 0.1.0
 */
export interface StoreContext {
  readonly run: Transactions["run"]
  readonly st: PostgresOutboxSchema.Statements
  readonly bind: SqlOutboxStatements.Binds
  /** The stale-claim threshold, when stale reclaim is on. */
  readonly staleMillis: number | undefined
}

/**
 * Runs a statement and decodes its rows with a schema (`StoreUnavailable` naming the operation on a
 * mismatch).
 *
 * @since 0.1.0
 */
export const select = <A, I>(
  ctx: StoreContext,
  operation: string,
  schema: Schema.Schema<A, I>,
  conn: Connection,
  text: string,
  params: ReadonlyArray<unknown>
): Effect.Effect<A, SqlError | StoreUnavailable> =>
  Effect.flatMap(ctx.run(conn, text, params), (rows) =>
    Effect.mapError(Schema.decodeUnknown(schema)(rows), (cause) => new StoreUnavailable({ operation, cause }))
  )

/**
 * Runs a statement returning outbox rows and decodes them into records (`CorruptRecord` on a bad row).
 *
 * @since 0.1.0
 */
export const records = (
  ctx: StoreContext,
  conn: Connection,
  text: string,
  params: ReadonlyArray<unknown>
): Effect.Effect<Array<OutboxRecord.OutboxRecord>, SqlError | CorruptRecord> =>
  Effect.flatMap(ctx.run(conn, text, params), (rows) => {
    const out: Array<OutboxRecord.OutboxRecord> = []
    for (const row of rows) {
      const decoded = PostgresOutboxSchema.decodeRow(row)
      if (Either.isLeft(decoded)) return Effect.fail(decoded.left)
      out.push(decoded.right)
    }
    return Effect.succeed(out)
  })

/**
 * Locks the partition's fence row, admits the token and raises the mark (R-CLAIM-2, R-EXP-1).
 *
 * @since 0.1.0
 */
export const fence = (
  ctx: StoreContext,
  conn: Connection,
  operation: string,
  partitionKey: string,
  token: LeaseToken.LeaseTokenLike
): Effect.Effect<void, SqlError | StoreUnavailable | StaleFencingToken> =>
  Effect.gen(function* () {
    const { run, st } = ctx
    let rows = yield* select(ctx, operation, FenceRows, conn, st.lockFence, [partitionKey])
    if (rows.length === 0) {
      yield* run(conn, st.createFence, [partitionKey])
      rows = yield* select(ctx, operation, FenceRows, conn, st.lockFence, [partitionKey])
    }
    const mark = rows[0]?.max_version ?? 0
    switch (Fence.admit(mark, token.version)) {
      case "stale":
        return yield* belowHighWaterMark(operation, partitionKey, token, mark)
      case "raise":
        yield* run(conn, st.raiseFence, [partitionKey, token.version])
        return
      case "keep":
        return
    }
  })

/**
 * The claim of up to `limit` records of a partition for the token, on `conn` inside a transaction.
 *
 * @since 0.1.0
 */
export const claimIn = (
  ctx: StoreContext,
  conn: Connection,
  partitionKey: string,
  token: LeaseToken.LeaseTokenLike,
  limit: number
): Effect.Effect<ClaimBatch, SqlError | StoreUnavailable | StaleFencingToken | CorruptRecord> =>
  Effect.gen(function* () {
    const { bind, st, staleMillis } = ctx
    yield* fence(ctx, conn, "claim", partitionKey, token)
    if (limit <= 0) return ClaimBatch([])
    const now = yield* Clock.currentTimeMillis
    const staleCutoff = staleMillis === undefined ? undefined : now - staleMillis
    const candidates = yield* records(
      ctx,
      conn,
      st.selectClaimable,
      bind.selectClaimable(partitionKey, token.version, staleCutoff, limit)
    )
    const chosen = ClaimOrder.selectFrom(candidates, limit, {
      version: token.version,
      nowMillis: now,
      staleClaimAfterMillis: staleMillis
    })
    if (chosen.length === 0) return ClaimBatch([])
    const ids = chosen.map((record) => record.id)
    const updated = yield* select(
      ctx,
      "claim",
      IdRows,
      conn,
      st.claimUpdate,
      bind.claimUpdate(ids, token, now, partitionKey, staleCutoff)
    )
    // read back: the candidates were read under the partition's fence lock, and nothing but a claim (which
    // needs that lock) changes the fields a claim does not set, so the claimed records are the candidates
    // with the claim applied
    const claimedIds = new Set(updated.map((row) => row.id))
    const at = DateTime.unsafeMake(now)
    const claimed = chosen
      .filter((record) => claimedIds.has(record.id))
      .map((record) => OutboxRecord.update(record, { ...Fence.stampClaim(record, token, at), status: "claimed" }))
    claimed.sort(ClaimOrder.compareAge)
    return ClaimBatch(claimed)
  })
