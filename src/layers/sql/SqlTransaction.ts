/**
 * How the server-backed SQL stores (PostgreSQL, MySQL) run statements: on the connection of a caller's
 * `sql.withTransaction` when there is one (inside a savepoint, R-PERSIST-6), else on a connection reserved
 * from the pool for the operation, inside the store's own transaction (the dialect's begin statement …
 * `COMMIT`).
 *
 * - A failure of the body, of `COMMIT` or of the connection itself rolls back (or, when the connection
 *   is gone, leaves the server to abort the transaction) and is returned as a typed failure, never a
 *   defect: nothing of a failed operation is applied.
 * - Failures the dialect calls conflicts (serialization failures, deadlocks, lock-wait timeouts) of a
 *   transaction the store owns are retried at once, a bounded number of times; inside a caller's
 *   transaction they are returned (the caller's transaction is doomed anyway).
 * - Bodies are short runs of statements and are not interrupted half-way.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"

/**
 * Attempts after the first for a transaction that failed with a conflict.
 *
 * @since 0.1.0
 */
export const conflictRetries = 5

/**
 * A connection reserved from the client's pool for the enclosing scope (which returns it when it closes),
 * acquired without interruption. `@effect/sql-pg` hands a reserved connection over through a callback of the
 * pool with no canceller: a caller interrupted while it waits for one (a relay stopping, a drainer whose lease
 * was lost, while the pool is busy or opening a connection) would leave the connection checked out for good.
 * The pool then shrinks by one each time until every operation waits forever, and closing it never ends. As
 * `sql.withTransaction` does, the wait for the connection is not interrupted: the connection always reaches
 * the scope, and an interrupted caller returns it at once. That wait is as long as the pool's for a free
 * connection: bounded by the client's `connectTimeout` (`PgClient`) when one is set.
 *
 * @since 0.2.0
 */
export const reserveConnection = (sql: SqlClient.SqlClient): Effect.Effect<Connection, SqlError, Scope.Scope> =>
  Effect.uninterruptible(sql.reserve)

/**
 * Runs `f` on a connection reserved with {@link reserveConnection}, returned to the pool when `f` ends (however
 * it ends).
 *
 * @since 0.2.0
 */
export const withReservedConnection = <A, E>(
  sql: SqlClient.SqlClient,
  f: (conn: Connection) => Effect.Effect<A, E>
): Effect.Effect<A, E | SqlError> => Effect.scoped(Effect.flatMap(reserveConnection(sql), f))

/**
 * The statement runner of one store.
 *
 * @since 0.1.0
 */
export interface Transactions {
  /** Runs one statement on a connection; rows come back untransformed. */
  readonly run: (
    conn: Connection,
    text: string,
    params: ReadonlyArray<unknown>
  ) => Effect.Effect<ReadonlyArray<unknown>, SqlError>
  /**
   * Runs `body` in a transaction (a savepoint inside a caller's transaction), retrying conflicts of its own.
   * The body sees the transaction as `SqlClient.TransactionConnection`, so statements of the client and of
   * other stores made inside it join it — unless `options.connectionOnly`: a body that runs statements on
   * `conn` and nothing else (no client statement, no other store) needs no such context, and is spared the
   * change of context per transaction.
   */
  readonly transact: <A, E>(
    body: (conn: Connection) => Effect.Effect<A, E | SqlError>,
    options?: TransactOptions
  ) => Effect.Effect<A, E | SqlError>
  /** Runs `body` on a connection outside any transaction of the store's (the caller's, when there is one). */
  readonly standalone: <A, E>(
    body: (conn: Connection) => Effect.Effect<A, E | SqlError>
  ) => Effect.Effect<A, E | SqlError>
}

/**
 * Options of {@link Transactions.transact}.
 *
 * @since 0.1.0
 */
export interface TransactOptions {
  /**
   * The body runs statements on the connection it is given and nothing else, so it is not shown the
   * transaction as `SqlClient.TransactionConnection` (default false: it is).
   */
  readonly connectionOnly?: boolean | undefined
}

/**
 * What a dialect decides about its transactions.
 *
 * @since 0.1.0
 */
export interface TransactionDialect {
  /** True for a failure after which the whole transaction may simply be run again. */
  readonly isConflict: (error: unknown) => boolean
  /** The statement (or statements) that open a transaction of the store's own. */
  readonly begin: string
  /**
   * Runs a transaction-control statement (begin, commit, savepoints); the statement runner when not
   * given. MySQL sends them unprepared (its `begin` is two statements).
   */
  readonly control?: ((conn: Connection, text: string) => Effect.Effect<unknown, SqlError>) | undefined
}

const control = {
  commit: "COMMIT",
  rollback: "ROLLBACK",
  savepoint: "SAVEPOINT effect_outbox",
  release: "RELEASE SAVEPOINT effect_outbox",
  rollbackSavepoint: "ROLLBACK TO SAVEPOINT effect_outbox"
} as const

/**
 * Builds the runner on a `SqlClient` for a dialect.
 *
 * @since 0.1.0
 */
export const make = (sql: SqlClient.SqlClient, dialect: TransactionDialect): Transactions => {
  const run: Transactions["run"] = (conn, text, params) => conn.execute(text, params, undefined)
  const { begin, isConflict } = dialect
  const exec = dialect.control ?? ((conn: Connection, text: string) => run(conn, text, []))

  const withConnection = <A, E>(
    f: (conn: Connection, nested: boolean) => Effect.Effect<A, E>
  ): Effect.Effect<A, E | SqlError> =>
    Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) =>
      Option.isNone(outer) ? withReservedConnection(sql, (conn) => f(conn, false)) : f(outer.value[0], true)
    )

  const undo = (conn: Connection, nested: boolean): Effect.Effect<void> =>
    (nested
      ? Effect.zipRight(exec(conn, control.rollbackSavepoint), exec(conn, control.release))
      : exec(conn, control.rollback)
    ).pipe(
      Effect.asVoid,
      Effect.catchAll((error) => Effect.logDebug("outbox rollback failed (the connection may be gone)", error))
    )

  const inTransaction =
    <A, E>(body: (conn: Connection) => Effect.Effect<A, E | SqlError>, connectionOnly: boolean) =>
    (conn: Connection, nested: boolean, depth: number): Effect.Effect<A, E | SqlError> =>
      Effect.uninterruptible(
        Effect.flatMap(exec(conn, nested ? control.savepoint : begin), () =>
          Effect.matchCauseEffect(
            connectionOnly
              ? body(conn)
              : Effect.provideService(body(conn), SqlClient.TransactionConnection, [conn, depth]),
            {
              onFailure: (cause) => Effect.zipRight(undo(conn, nested), Effect.failCause(cause)),
              onSuccess: (value) =>
                Effect.matchEffect(exec(conn, nested ? control.release : control.commit), {
                  onFailure: (error) => Effect.zipRight(undo(conn, nested), Effect.fail(error)),
                  onSuccess: () => Effect.succeed(value)
                })
            }
          )
        )
      )

  const transact: Transactions["transact"] = <A, E>(
    body: (conn: Connection) => Effect.Effect<A, E | SqlError>,
    options?: TransactOptions
  ) =>
    Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) => {
      const run = inTransaction(body, options?.connectionOnly === true)
      if (Option.isSome(outer)) return run(outer.value[0], true, outer.value[1] + 1)
      const once = withReservedConnection(sql, (conn) => run(conn, false, 0))
      // a conflict runs the whole transaction again at once, at most `conflictRetries` times (a plain
      // catch per attempt: the hot path pays for no schedule)
      const attempt = (retriesLeft: number): Effect.Effect<A, E | SqlError> =>
        retriesLeft === 0 ? once : Effect.catchIf(once, isConflict, () => attempt(retriesLeft - 1))
      return attempt(conflictRetries)
    })

  const standalone: Transactions["standalone"] = (body) => withConnection((conn) => body(conn))

  return { run, transact, standalone }
}
