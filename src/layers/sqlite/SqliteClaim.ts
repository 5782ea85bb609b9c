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
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type * as ClaimOrder from "../../domain/ClaimOrder.js"
import * as Fence from "../../domain/Fence.js"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import { type CorruptRecord, type StaleFencingToken, StoreUnavailable } from "../../domain/OutboxError.js"
import { belowHighWaterMark } from "../../services/OutboxStore.js"
import * as SqlClaim from "../sql/SqlClaim.js"
import type * as SqlOutboxStatements from "../sql/SqlOutboxStatements.js"
import type * as SqliteOutboxSchema from "./SqliteOutboxSchema.js"
import * as SqliteOutboxRows from "./SqliteOutboxRows.js"
import { chunksOf, fenceOf, idsOf, select } from "./SqliteStatement.js"

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

const candidateOf = (decoded: SqliteOutboxRows.DecodedRow, previous: Candidate | undefined): Candidate => {
  const row = decoded.row
  return {
    decoded,
    createdAt: SqlClaim.createdAtOf(row.created_at, previous),
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

/**
 * The claim of up to `limit` records of a partition for a token (`SqlClaim.claimWith` over SQLite's
 * steps), on a connection inside a transaction.
 *
 * @since 0.1.0
 */
export const make = ({ bind, st, staleMillis }: ClaimContext) =>
  SqlClaim.claimWith<Connection, Candidate, SqlError | StoreUnavailable | StaleFencingToken | CorruptRecord>(
    {
      fence: (conn, partitionKey, token) => raiseFence(st, conn, "claim", partitionKey, token),
      candidates: (conn, partitionKey, version, staleCutoff, limit) =>
        Effect.flatMap(
          // rows read as arrays of values (see `SqliteOutboxRows.rowOfValues`): the claim's rows are the relay's
          // largest read
          conn.executeValues(st.selectClaimable, bind.selectClaimable(partitionKey, version, staleCutoff, limit)),
          (rows) => {
            const out: Array<Candidate> = []
            let previous: Candidate | undefined
            for (const values of rows) {
              const decoded = SqliteOutboxRows.decodeRowFields(SqliteOutboxRows.rowOfValues(values))
              if (Either.isLeft(decoded)) return Effect.fail(decoded.left)
              previous = candidateOf(decoded.right, previous)
              out.push(previous)
            }
            return Effect.succeed(out)
          }
        ),
      idOf: (candidate) => candidate.decoded.row.id,
      update: (conn, ids, token, now, partitionKey, staleCutoff) =>
        Effect.gen(function* () {
          const updated = new Set<string>()
          for (const chunk of chunksOf(ids, idChunk)) {
            const claimedIds = yield* select(
              idsOf,
              "claim",
              conn,
              st.claimUpdate(chunk.length),
              bind.claimUpdate(chunk, token, now, partitionKey, staleCutoff)
            )
            for (const id of claimedIds) updated.add(id)
          }
          return updated
        }),
      claimed: (candidate, stamp) =>
        SqliteOutboxRows.toRecord(candidate.decoded, stamp, candidate.createdAt, candidate.orderingKey)
    },
    staleMillis
  )
