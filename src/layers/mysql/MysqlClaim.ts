/**
 * The statement steps of the MySQL outbox store that run inside its transactions: reading rows with a
 * Schema, the fence (lock the partition's fence row `SELECT … FOR UPDATE`, admit the token and raise the
 * high-water mark, R-CLAIM-2, R-EXP-1) and the claim (candidates through the claim index with the
 * head-of-line check, the final choice by `ClaimOrder.selectFrom`, R-CLAIM-4/5/6, then a guarded update).
 * Without `RETURNING`, the update reports how many rows it claimed; only when that falls short of the
 * chosen ids are they read back (the ids now claimed by this token at this instant: no other claim of
 * the partition can write that while this one holds the fence row).
 *
 * @since 0.1.0
 */
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as Fence from "../../domain/Fence.js"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import { type CorruptRecord, type StaleFencingToken, StoreUnavailable } from "../../domain/OutboxError.js"
import type * as OutboxRecord from "../../domain/OutboxRecord.js"
import { belowHighWaterMark } from "../../services/OutboxStore.js"
import { decodeAll } from "../DecodeAll.js"
import * as SqlClaim from "../sql/SqlClaim.js"
import * as SqlOutboxRow from "../sql/SqlOutboxRow.js"
import type * as SqlOutboxStatements from "../sql/SqlOutboxStatements.js"
import type * as MysqlOutboxSchema from "./MysqlOutboxSchema.js"
import type { Transactions } from "./MysqlTransaction.js"

/**
 * Rows of `id`.
 *
 * @since 0.1.0
 */
export const IdRows = Schema.Array(Schema.Struct({ id: Schema.String }))
const FenceRows = Schema.Array(Schema.Struct({ max_version: SqlOutboxRow.BigIntColumn }))

/**
 * What the steps need of the store.
 *
 * @since 0.1.0
 */
export interface StoreContext {
  readonly tx: Transactions
  readonly st: MysqlOutboxSchema.Statements
  readonly bind: SqlOutboxStatements.Binds
  /** The stale-claim threshold, when stale reclaim is on. */
  readonly staleMillis: number | undefined
}

/**
 * Decodes result rows with a schema; a mismatch is `StoreUnavailable` naming the operation.
 *
 * @since 0.1.0
 */
export const decodeRows = <A, I>(
  operation: string,
  schema: Schema.Schema<A, I>
): ((rows: ReadonlyArray<unknown>) => Effect.Effect<A, StoreUnavailable>) => {
  // decoded synchronously (the schemas here have no effects): no parser fiber work per statement
  const decode = Schema.decodeUnknownEither(schema)
  return (rows) =>
    Either.match(decode(rows), {
      onLeft: (cause) => Effect.fail(new StoreUnavailable({ operation, cause })),
      onRight: Effect.succeed
    })
}

/**
 * Runs a statement and decodes its rows with a schema.
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
  Effect.flatMap(ctx.tx.run(conn, text, params), decodeRows(operation, schema))

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
  Effect.flatMap(ctx.tx.run(conn, text, params), (rows) => decodeAll(rows, SqlOutboxRow.decodeRow))

/**
 * Admits the token at the partition's fence (R-CLAIM-2, R-EXP-1): one upsert creates the row at the token's
 * version or raises its mark to it (a higher mark stays) and locks the row, then a locking read returns the
 * mark. Above the token's version, the token is stale (`StaleFencingToken`; the upsert changed nothing).
 *
 * @since 0.1.0
 */
export const fence = (
  ctx: StoreContext,
  conn: Connection,
  operation: string,
  partitionKey: string,
  token: LeaseToken.LeaseTokenLike
): Effect.Effect<void, SqlError | StoreUnavailable | StaleFencingToken> => {
  const { st, tx } = ctx
  // the upsert makes sure the row exists, raises it and locks it (a duplicate primary key takes a record
  // lock, no gap lock, under any isolation level); a locking read of a missing row would take a gap lock
  // under REPEATABLE READ and hold back the first claim of other partitions. The read after it is a locking
  // read: it sees the latest committed mark also inside a caller's REPEATABLE READ snapshot
  return tx.write(conn, st.admitFence, [partitionKey, token.version, token.version]).pipe(
    Effect.zipRight(select(ctx, operation, FenceRows, conn, st.lockFence, [partitionKey])),
    Effect.flatMap((rows): Effect.Effect<void, StoreUnavailable | StaleFencingToken> => {
      const mark = rows[0]?.max_version
      if (mark === undefined) return Effect.fail(SqlClaim.noFenceRow(operation, partitionKey))
      return Fence.admit(mark, token.version) === "stale"
        ? Effect.fail(belowHighWaterMark(operation, partitionKey, token, mark))
        : Effect.void
    })
  )
}

/**
 * The claim of up to `limit` records of a partition for a token (`SqlClaim.claimWith` over MySQL's
 * steps), on a connection inside a transaction.
 *
 * @since 0.1.0
 */
export const makeClaim = (ctx: StoreContext) =>
  SqlClaim.claimWith<
    Connection,
    SqlOutboxRow.Candidate,
    SqlError | StoreUnavailable | StaleFencingToken | CorruptRecord
  >(
    {
      fence: (conn, partitionKey, token) => fence(ctx, conn, "claim", partitionKey, token),
      candidates: (conn, partitionKey, version, staleCutoff, limit) =>
        Effect.flatMap(
          ctx.tx.run(conn, ctx.st.selectClaimable, ctx.bind.selectClaimable(partitionKey, version, staleCutoff, limit)),
          SqlOutboxRow.decodeCandidates
        ),
      idOf: (candidate) => candidate.row.id,
      update: (conn, ids, token, now, partitionKey, staleCutoff) =>
        Effect.flatMap(
          ctx.tx.write(
            conn,
            ctx.st.claimUpdate(ids.length),
            ctx.bind.claimUpdate(ids, token, now, partitionKey, staleCutoff)
          ),
          ({ affectedRows }): Effect.Effect<ReadonlySet<string>, SqlError | StoreUnavailable> =>
            affectedRows === ids.length
              ? Effect.succeed(new Set(ids))
              : Effect.map(
                  select(ctx, "claim", IdRows, conn, ctx.st.claimedBack(ids.length), [
                    ...ids,
                    token.owner,
                    token.version,
                    now
                  ]),
                  (rows) => new Set(rows.map((row) => row.id))
                )
        ),
      claimed: SqlOutboxRow.claimedRecord
    },
    ctx.staleMillis
  )
