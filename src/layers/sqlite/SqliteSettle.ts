/**
 * Complete and release of the SQLite outbox store (R-DONE-1..3): a guarded update per chunk of ids that
 * applies only the ids claimed by the token, then `StaleFencingToken` naming the others (not
 * all-or-nothing). Calls made outside a caller's transaction in one turn of the event loop share one
 * transaction with each other and with the claims of that turn (`SqliteGroupCommit`, `groupCommit`
 * option), each keeping its own outcome.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as SqlClock from "../sql/SqlClock.js"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import { type StaleFencingToken, StoreUnavailable } from "../../domain/OutboxError.js"
import { notClaimedBy } from "../../services/OutboxStore.js"
import * as SqlOutboxStatements from "../sql/SqlOutboxStatements.js"
import { idChunk } from "./SqliteClaim.js"
import type * as SqliteOutboxSchema from "./SqliteOutboxSchema.js"
import { chunksOf, idsOf, select } from "./SqliteStatement.js"
import type * as SqliteGroupCommit from "./SqliteGroupCommit.js"
import type { Transactions } from "./SqliteTransaction.js"

/** One `complete` or `release` call (its ids without duplicates). */
interface SettleCall {
  readonly operation: "complete" | "release"
  readonly ids: ReadonlyArray<string>
  readonly token: LeaseToken.LeaseTokenLike
  /** The caller's clock reading: `completed_at` / `terminal_at` of a complete. */
  readonly now: number
}

/** The ids a call's updates changed: `all` of them, or the set of those they changed. */
type Matched = typeof all | ReadonlySet<string>
const all = "all"

/** How one complete/release statement can fail before the ids are known. */
type SettleFailure = SqlError | StoreUnavailable

/**
 * Complete or release of ids claimed by a token.
 *
 * @since 0.1.0
 */
export type Settle = (
  operation: "complete" | "release",
  ids: ReadonlyArray<string>,
  token: LeaseToken.LeaseTokenLike
) => Effect.Effect<void, StaleFencingToken | StoreUnavailable>

/**
 * Builds complete/release over the store's statements and runner; `group` is the store's group commit
 * (undefined when `groupCommit` is off).
 *
 * @since 0.1.0
 */
export const make = (
  st: SqliteOutboxSchema.Statements,
  bind: SqlOutboxStatements.Binds,
  tx: Transactions,
  group: SqliteGroupCommit.Submit | undefined
): Settle => {
  /** One guarded update of a chunk of ids; returns the ids it changed. */
  const settleChunk = (
    conn: Connection,
    { now, operation, token }: SettleCall,
    chunk: ReadonlyArray<string>
  ): Effect.Effect<Array<string>, SettleFailure> =>
    operation === "complete"
      ? select(idsOf, operation, conn, st.complete(chunk.length), bind.complete(chunk, token, now))
      : select(idsOf, operation, conn, st.release(chunk.length), bind.release(chunk, token))

  /**
   * Runs the guarded updates of one call on `conn`; returns the ids they changed, or `all` when they changed
   * every id of the call (the common case: no set of matched ids is built for it).
   */
  const applySettle = (conn: Connection, request: SettleCall): Effect.Effect<Matched, SettleFailure> =>
    request.ids.length <= idChunk
      ? Effect.map(settleChunk(conn, request, request.ids), (done) =>
          done.length === request.ids.length ? all : new Set(done)
        )
      : Effect.gen(function* () {
          const matched = new Set<string>()
          for (const chunk of chunksOf(request.ids, idChunk)) {
            for (const id of yield* settleChunk(conn, request, chunk)) matched.add(id)
          }
          return matched.size === request.ids.length ? all : matched
        })

  return (operation, ids, token) =>
    Effect.gen(function* () {
      const unique = SqlOutboxStatements.withoutRepeats(ids)
      const now = yield* SqlClock.nowMillis
      const outer = yield* Effect.serviceOption(SqlClient.TransactionConnection)
      const call: SettleCall = { operation, ids: unique, token, now }
      const matched =
        group !== undefined && Option.isNone(outer)
          ? yield* group(0, unique.length > idChunk, (conn) => applySettle(conn, call))
          : // inside a caller's transaction (or without group commit): one guarded UPDATE is atomic on its
            // own; several chunks share one transaction
            yield* tx.withConnection(
              (conn, nested) =>
                unique.length <= idChunk
                  ? applySettle(conn, call)
                  : tx.inTransaction((c) => applySettle(c, call))(conn, nested),
              unique.length <= idChunk ? "always" : "outside a caller's transaction"
            )
      if (matched === all) return
      return yield* notClaimedBy(
        operation,
        token,
        ids.filter((id) => !matched.has(id))
      )
    }).pipe(StoreUnavailable.refailTag("SqlError", operation))
}
