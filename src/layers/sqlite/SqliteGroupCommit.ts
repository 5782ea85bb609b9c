/**
 * Group commit of the SQLite stores: the outbox store's claims, expiry sweeps, completes and releases (and,
 * in a group of its own, the lease store's writes) made outside a caller's transaction in one turn of the
 * event loop share one transaction, so the drainers of several partitions pay one commit (one `fsync` with
 * `synchronous = FULL`) between them instead of one each. A persist that wakes every partition's drainer at
 * once (SPEC §13) is then followed by one claim commit, not one per partition; a batch's completes may share
 * a commit with the next claims (SPEC §13, relay cost). Persists are not grouped: a group's wait is an
 * asynchronous step, and an interrupted persist must not commit after its caller left.
 *
 * - Every member keeps its own outcome (R-DONE-3 for completes and releases; a claim's failure is its own).
 * - A claim or an expiry sweep stays one transaction (SPEC §3.2): inside a shared group it runs in its own
 *   savepoint, so one that fails half-way (a stale token, a corrupt row) undoes only its own writes; a
 *   guarded UPDATE of a complete or release is atomic on its own.
 * - Completes, releases and expiry sweeps of a group run before its claims, so a completed head lets a
 *   claim of the same group take its younger siblings (R-CLAIM-5 sees the committed state of the group so
 *   far).
 * - A member's result is handed back only after the group's `COMMIT` succeeded: a claim's records are
 *   claimed durably before they are sent. A claim's wait for its group is not interruptible, so records
 *   it claimed always reach its caller (who releases them when it is shutting down). A busy failure rolls
 *   the whole group back and retries it (`SqliteSupport.retryBusy`); a failing `BEGIN` or `COMMIT` fails
 *   every member of the group.
 *
 * @since 0.1.0
 */
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { type GroupMember, groupPerTurn } from "../../services/EventLoop.js"
import { isBusy } from "./SqliteSupport.js"
import type { Transactions } from "./SqliteTransaction.js"

/**
 * One piece of work of a group, as the group runner sees it.
 */
interface Work {
  /** Members of rank 0 (completes, releases, expiry sweeps) run before those of rank 1 (claims). */
  readonly rank: 0 | 1
  /**
   * Runs the work on the group's connection (`shared`: inside the group's transaction, with other work)
   * and keeps its outcome; fails only with a busy failure, which rolls the group back for a retry.
   */
  readonly apply: (conn: Connection, shared: boolean) => Effect.Effect<void, SqlError>
  /** The work is several statements that must be atomic (see {@link Submit}). */
  readonly transactional: boolean
}

type Member = GroupMember<Work, void, SqlError>

/**
 * Runs `body` as part of the next group commit and returns its own outcome.
 *
 * - `rank` 0 for completes, releases and expiry sweeps, 1 for claims (see the module doc).
 * - `transactional`: the body issues several statements that must be atomic; alone in its group it then
 *   gets `BEGIN … COMMIT`, in a shared group a savepoint. A lone body that is not gets `BEGIN … COMMIT` as
 *   well (never autocommit), so that no write of the group waits for the lock on the thread
 *   (`SqliteTransaction`).
 *
 * @since 0.1.0
 */
export type Submit = <A, E>(
  rank: 0 | 1,
  transactional: boolean,
  body: (conn: Connection) => Effect.Effect<A, E | SqlError>
) => Effect.Effect<A, E | SqlError>

const isBusySqlError = (error: unknown): error is SqlError => error instanceof SqlError && isBusy(error)

/**
 * Builds the group commit over the store's statement runner.
 *
 * @since 0.1.0
 */
export const make = (tx: Transactions): Submit => {
  /**
   * Runs one group: a lone member as itself (in its own transaction when it needs one), several in one
   * transaction, completes and releases first. Total: every member is answered.
   */
  const runGroup = (group: ReadonlyArray<Member>): Effect.Effect<void> => {
    const ordered = group.length === 1 ? group : [...group].sort((a, b) => a.rank - b.rank)
    const only = ordered.length === 1 ? ordered[0] : undefined
    const run =
      only !== undefined
        ? tx.withConnection(
            // a lone guarded UPDATE runs in a transaction too: its wait for the write lock is then the
            // store's `BEGIN IMMEDIATE`, which does not block the thread; alone, in autocommit, the statement
            // would wait in SQLite's busy handler, asleep on the thread
            only.transactional
              ? (conn) => only.apply(conn, false)
              : tx.inTransaction((conn) => only.apply(conn, false)),
            "always"
          )
        : tx.withConnection(
            tx.inTransaction((conn) =>
              Effect.forEach(ordered, (member) => member.apply(conn, true), { discard: true })
            ),
            "always"
          )
    return Effect.matchCause(run, {
      onFailure: (cause) => {
        for (const member of group) member.done.failCause(cause)
      },
      onSuccess: () => {
        for (const member of group) member.done.succeed(undefined)
      }
    })
  }

  const grouped = groupPerTurn<Work, void, SqlError>(runGroup)

  return <A, E>(rank: 0 | 1, transactional: boolean, body: (conn: Connection) => Effect.Effect<A, E | SqlError>) =>
    Effect.suspend(() => {
      // the outcome of the last attempt (a busy retry of the group runs the body again)
      let outcome: Either.Either<A, E | SqlError> | undefined
      const apply = (conn: Connection, shared: boolean): Effect.Effect<void, SqlError> =>
        Effect.flatMap(
          // transactional work is atomic on its own: its transaction (alone) or savepoint (shared) is
          // rolled back when it fails, and only its outcome is kept
          Effect.either(transactional ? tx.inTransaction(body)(conn, shared) : body(conn)),
          (result) => {
            if (Either.isLeft(result) && isBusySqlError(result.left)) return Effect.fail(result.left)
            outcome = result
            return Effect.void
          }
        )
      const submitted = Effect.flatMap(grouped({ rank, apply, transactional }), () =>
        outcome === undefined ? Effect.dieMessage("group commit left a call without a result") : outcome
      )
      // a claim's records reach its caller once its group ran: an interruption while it waits would leave
      // them claimed by a caller that never saw them (completes and releases may be abandoned: their
      // caller learns nothing it relies on)
      return rank === 1 ? Effect.uninterruptible(submitted) : submitted
    })
}
