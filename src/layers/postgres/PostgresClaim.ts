/**
 * The statement steps of the PostgreSQL outbox store that run inside its transactions: reading rows with
 * a Schema, the fence (one statement creates or raises the partition's fence row and locks it, admitting the
 * token against the high-water mark, R-CLAIM-2, R-EXP-1) and the claim (candidates through the claim index
 * with the head-of-line check, the final choice by `ClaimOrder.selectFrom`, R-CLAIM-4/5/6, then a guarded
 * update; the claimed records are the candidates it changed, with the claim applied).
 *
 * @since 0.1.0
 */
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Fence from "../../domain/Fence.js"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import { type CorruptRecord, type StaleFencingToken, StoreUnavailable } from "../../domain/OutboxError.js"
import type * as OutboxRecord from "../../domain/OutboxRecord.js"
import { belowHighWaterMark } from "../../services/OutboxStore.js"
import * as SqlClaim from "../sql/SqlClaim.js"
import * as SqlOutboxRow from "../sql/SqlOutboxRow.js"
import type * as SqlOutboxStatements from "../sql/SqlOutboxStatements.js"
import * as PostgresOutboxSchema from "./PostgresOutboxSchema.js"
import type { Transactions } from "./PostgresTransaction.js"
import { decodeAll } from "../DecodeAll.js"

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
 * Decodes result rows with a schema; a mismatch is `StoreUnavailable` naming the operation.
 *
 * @since 0.1.0
 */
export const decodeRows =
  <A, I>(operation: string, schema: Schema.Schema<A, I>) =>
  (rows: ReadonlyArray<unknown>): Effect.Effect<A, StoreUnavailable> =>
    StoreUnavailable.refail(operation)(Schema.decodeUnknown(schema)(rows))

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
  Effect.flatMap(ctx.run(conn, text, params), decodeRows(operation, schema))

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
  Effect.flatMap(ctx.run(conn, text, params), (rows) => decodeAll(rows, PostgresOutboxSchema.decodeRow))

/**
 * Admits the token at the partition's fence in one statement (R-CLAIM-2, R-EXP-1): the row is created or its
 * mark raised to the token's version, and locked until the transaction ends. A mark above the version after
 * it is a stale token (`StaleFencingToken`); the transaction's rollback then leaves the row as it was.
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
  Effect.flatMap(
    select(ctx, operation, FenceRows, conn, ctx.st.admitFence, [partitionKey, token.version]),
    (rows): Effect.Effect<void, StoreUnavailable | StaleFencingToken> => {
      const mark = rows[0]?.max_version
      if (mark === undefined) return Effect.fail(SqlClaim.noFenceRow(operation, partitionKey))
      return Fence.admit(mark, token.version) === "stale"
        ? Effect.fail(belowHighWaterMark(operation, partitionKey, token, mark))
        : Effect.void
    }
  )

/**
 * The claim of up to `limit` records of a partition for a token (`SqlClaim.claimWith` over PostgreSQL's
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
          ctx.run(conn, ctx.st.selectClaimable, ctx.bind.selectClaimable(partitionKey, version, staleCutoff, limit)),
          SqlOutboxRow.decodeCandidates
        ),
      idOf: (candidate) => candidate.row.id,
      update: (conn, ids, token, now, partitionKey, staleCutoff) =>
        Effect.map(
          select(
            ctx,
            "claim",
            IdRows,
            conn,
            ctx.st.claimUpdate,
            ctx.bind.claimUpdate(ids, token, now, partitionKey, staleCutoff)
          ),
          (rows) => new Set(rows.map((row) => row.id))
        ),
      claimed: SqlOutboxRow.claimedRecord
    },
    ctx.staleMillis
  )
