/**
 * The claim and fence steps of the SQLite outbox store, run inside the transaction the store opened:
 * the fence admits the token and raises the partition's high-water mark (R-CLAIM-2, R-EXP-1); the claim
 * reads the candidates through the claim index (the SQL applies R-CLAIM-4/5/6, `ClaimOrder.selectFrom`
 * makes the final choice), claims them with a guarded update and returns them with the claim applied.
 *
 * @since 0.1.0
 */
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ClaimOrder from "../../domain/ClaimOrder.js"
import * as Fence from "../../domain/Fence.js"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import { type CorruptRecord, type StaleFencingToken, StoreUnavailable } from "../../domain/OutboxError.js"
import type * as OutboxRecord from "../../domain/OutboxRecord.js"
import { belowHighWaterMark, ClaimBatch } from "../../services/OutboxStore.js"
import type * as SqlOutboxStatements from "../sql/SqlOutboxStatements.js"
import type * as SqliteOutboxSchema from "./SqliteOutboxSchema.js"
import * as SqliteOutboxRows from "./SqliteOutboxRows.js"
import { chunksOf, fenceOf, idsOf, run, select } from "./SqliteStatement.js"

/**
 * What the claim steps need of the store.
 *
 * @since 0.1.0
 */
export interface ClaimContext {
  readonly st: SqliteOutboxSchema.Statements
  readonly bind: SqlOutboxStatements.Binds
  /** The stale-claim threshold, when stale reclaim is on. */
  readonly staleMillis: number | undefined
}

/** Ids per guarded UPDATE (keeps the bound values well under SQLite's limit). */
export const idChunk = 1000

/** A decoded candidate row with the facts claim selection looks at. */
interface Candidate extends ClaimOrder.ClaimFacts {
  readonly decoded: SqliteOutboxRows.DecodedRow
}

const candidateOf = (decoded: SqliteOutboxRows.DecodedRow): Candidate => {
  const row = decoded.row
  return {
    decoded,
    createdAt: DateTime.unsafeMake(row.created_at),
    seq: row.seq,
    envelopeId: row.envelope_id,
    status: decoded.status,
    orderingKey: Option.fromNullable(row.ordering_key),
    claimVersion: row.claim_version,
    claimedAt: row.claimed_at === null ? Option.none() : Option.some(DateTime.unsafeMake(row.claimed_at))
  }
}

/**
 * Raises the partition's fence to the token's version, or fails with `StaleFencingToken` when the token
 * is below it.
 *
 * @since 0.1.0
 */
export const raiseFence = (
  st: SqliteOutboxSchema.Statements,
  conn: Connection,
  operation: string,
  partitionKey: string,
  token: LeaseToken.LeaseTokenLike
): Effect.Effect<void, SqlError | StoreUnavailable | StaleFencingToken> =>
  Effect.flatMap(select(fenceOf, operation, conn, st.raiseFence, [partitionKey, token.version]), (accepted) =>
    accepted.length > 0
      ? Effect.void
      : Effect.flatMap(
          select(fenceOf, operation, conn, st.readFence, [partitionKey]),
          (current): Effect.Effect<never, StoreUnavailable | StaleFencingToken> => {
            const mark = current[0] ?? 0
            return Fence.admit(mark, token.version) === "stale"
              ? Effect.fail(belowHighWaterMark(operation, partitionKey, token, mark))
              : Effect.fail(
                  new StoreUnavailable({
                    operation,
                    partitionKey,
                    cause: `the fence row rejected version ${token.version} at high-water mark ${mark}`
                  })
                )
          }
        )
  )

/** Reads and decodes the claim candidates (a row that does not decode fails the claim). */
const candidates = (
  { bind, st }: ClaimContext,
  conn: Connection,
  partitionKey: string,
  version: number,
  staleCutoff: number | undefined,
  limit: number
): Effect.Effect<Array<Candidate>, SqlError | CorruptRecord> =>
  Effect.flatMap(
    run(conn, st.selectClaimable, bind.selectClaimable(partitionKey, version, staleCutoff, limit)),
    (rows) => {
      const out: Array<Candidate> = []
      for (const row of rows) {
        const decoded = SqliteOutboxRows.decodeRowFields(row)
        if (Either.isLeft(decoded)) return Effect.fail(decoded.left)
        out.push(candidateOf(decoded.right))
      }
      return Effect.succeed(out)
    }
  )

/**
 * The claim of up to `limit` records of a partition for the token, on `conn` inside a transaction.
 *
 * @since 0.1.0
 */
export const claimIn = (
  ctx: ClaimContext,
  conn: Connection,
  partitionKey: string,
  token: LeaseToken.LeaseTokenLike,
  limit: number
): Effect.Effect<ClaimBatch, SqlError | StoreUnavailable | StaleFencingToken | CorruptRecord> =>
  Effect.gen(function* () {
    const { bind, st, staleMillis } = ctx
    yield* raiseFence(st, conn, "claim", partitionKey, token)
    if (limit <= 0) return ClaimBatch([])
    const now = yield* Clock.currentTimeMillis
    const staleCutoff = staleMillis === undefined ? undefined : now - staleMillis
    const found = yield* candidates(ctx, conn, partitionKey, token.version, staleCutoff, limit)
    const chosen = ClaimOrder.selectFrom(found, limit, {
      version: token.version,
      nowMillis: now,
      staleClaimAfterMillis: staleMillis
    })
    if (chosen.length === 0) return ClaimBatch([])
    const updated = new Set<string>()
    for (const ids of chunksOf(
      chosen.map((c) => c.decoded.row.id),
      idChunk
    )) {
      const claimedIds = yield* select(
        idsOf,
        "claim",
        conn,
        st.claimUpdate(ids.length),
        bind.claimUpdate(ids, token, now, partitionKey, staleCutoff)
      )
      for (const id of claimedIds) updated.add(id)
    }
    // read back: the candidates were read under this transaction's write lock; the update changed
    // exactly the claim fields, which are applied to them here
    const applied: SqliteOutboxRows.AppliedClaim = {
      owner: token.owner,
      version: token.version,
      at: DateTime.unsafeMake(now)
    }
    const claimed: Array<OutboxRecord.OutboxRecord> = []
    for (const c of chosen) {
      if (updated.has(c.decoded.row.id)) claimed.push(SqliteOutboxRows.toRecord(c.decoded, applied, c.createdAt))
    }
    claimed.sort(ClaimOrder.compareAge)
    return ClaimBatch(claimed)
  })
