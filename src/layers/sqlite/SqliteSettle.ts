/**
 * Complete and release of the SQLite outbox store (R-DONE-1..3): a guarded update per chunk of ids that
 * applies only the ids claimed by the token, then `StaleFencingToken` naming the others (not
 * all-or-nothing). Calls made outside a caller's transaction in one turn of the event loop share one
 * transaction (group commit, `groupCommit` option), each keeping its own outcome.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as SqlClock from "../sql/SqlClock.js"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import { type StaleFencingToken, StoreUnavailable } from "../../domain/OutboxError.js"
import { type GroupMember, groupPerTurn } from "../../services/EventLoop.js"
import { notClaimedBy } from "../../services/OutboxStore.js"
import type * as SqlOutboxStatements from "../sql/SqlOutboxStatements.js"
import { idChunk } from "./SqliteClaim.js"
import type * as SqliteOutboxSchema from "./SqliteOutboxSchema.js"
import { chunksOf, idsOf, select } from "./SqliteStatement.js"
import { isBusy } from "./SqliteSupport.js"
import type { Transactions } from "./SqliteTransaction.js"

/** One `complete` or `release` call (its ids without duplicates). */
interface SettleCall {
  readonly operation: "complete" | "release"
  readonly ids: ReadonlyArray<string>
  readonly token: LeaseToken.LeaseTokenLike
  /** The caller's clock reading: `completed_at` / `terminal_at` of a complete. */
  readonly now: number
}

/** How one complete/release statement can fail before the ids are known. */
type SettleFailure = SqlError | StoreUnavailable

/** A call waiting for a group commit, and where its result goes. */
type SettleRequest = GroupMember<SettleCall, Set<string>, SettleFailure>

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
 * Builds complete/release over the store's statements and runner.
 *
 * @since 0.1.0
 */
export const make = (
  st: SqliteOutboxSchema.Statements,
  bind: SqlOutboxStatements.Binds,
  tx: Transactions,
  groupCommit: boolean
): Settle => {
  /** Runs the guarded updates of one call on `conn`; returns the ids they changed. */
  const applySettle = (conn: Connection, request: SettleCall): Effect.Effect<Set<string>, SettleFailure> =>
    Effect.gen(function* () {
      const { now, operation, token } = request
      const matched = new Set<string>()
      for (const chunk of chunksOf(request.ids, idChunk)) {
        const done =
          operation === "complete"
            ? yield* select(idsOf, operation, conn, st.complete(chunk.length), bind.complete(chunk, token, now))
            : yield* select(idsOf, operation, conn, st.release(chunk.length), bind.release(chunk, token))
        for (const id of done) matched.add(id)
      }
      return matched
    })

  /**
   * Runs the waiting calls of one group. One call with one chunk runs as a single autocommitted
   * statement; more share one transaction, each call keeping its own result (a guarded UPDATE is atomic
   * on its own, and a failing statement undoes only itself). A busy failure fails the whole transaction,
   * which is rolled back and retried; a failing `COMMIT` fails every call of the group. Total: every
   * call's deferred is completed, whatever happens.
   */
  const runGroup = (group: ReadonlyArray<SettleRequest>): Effect.Effect<void> => {
    const only = group.length === 1 ? group[0] : undefined
    const results = new Map<SettleRequest, Either.Either<Set<string>, SettleFailure>>()
    const body = (conn: Connection): Effect.Effect<void, SettleFailure> =>
      Effect.forEach(
        group,
        (request) =>
          Effect.flatMap(Effect.either(applySettle(conn, request)), (result) => {
            if (Either.isLeft(result) && isBusy(result.left)) return Effect.fail(result.left)
            results.set(request, result)
            return Effect.void
          }),
        { discard: true }
      )
    const run =
      only !== undefined && only.ids.length <= idChunk
        ? tx.withConnection(body, "always")
        : tx.withConnection(tx.inTransaction(body), "always")
    return Effect.matchCauseEffect(run, {
      onFailure: (cause) =>
        Effect.forEach(group, (request) => Deferred.failCause(request.done, cause), { discard: true }),
      onSuccess: () =>
        Effect.forEach(
          group,
          (request) => {
            const result = results.get(request)
            return result === undefined
              ? Deferred.die(request.done, new Error("group commit left a call without a result"))
              : Deferred.complete(request.done, result)
          },
          { discard: true }
        )
    })
  }

  /** Joins the next group commit and waits for its own result ({@link runGroup}). */
  const settleGrouped = groupPerTurn<SettleCall, Set<string>, SettleFailure>(runGroup)

  return (operation, ids, token) =>
    Effect.gen(function* () {
      const unique = Array.from(new Set(ids))
      const now = yield* SqlClock.nowMillis
      const outer = yield* Effect.serviceOption(SqlClient.TransactionConnection)
      const call: SettleCall = { operation, ids: unique, token, now }
      const matched =
        groupCommit && Option.isNone(outer)
          ? yield* settleGrouped(call)
          : // inside a caller's transaction (or without group commit): one guarded UPDATE is atomic on its
            // own; several chunks share one transaction
            yield* tx.withConnection(
              (conn, nested) =>
                unique.length <= idChunk
                  ? applySettle(conn, call)
                  : tx.inTransaction((c) => applySettle(c, call))(conn, nested),
              unique.length <= idChunk ? "always" : "outside a caller's transaction"
            )
      if (matched.size === unique.length) return
      return yield* notClaimedBy(
        operation,
        token,
        ids.filter((id) => !matched.has(id))
      )
    }).pipe(StoreUnavailable.refailTag("SqlError", operation))
}
