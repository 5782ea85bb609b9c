/**
 * How the PostgreSQL stores run statements: on the connection of a caller's `sql.withTransaction` when
 * there is one (inside a savepoint, R-PERSIST-6), else on a connection reserved from the pool for the
 * operation, inside the store's own `BEGIN … COMMIT`.
 *
 * - A failure of the body, of `COMMIT` or of the connection itself rolls back (or, when the connection
 *   is gone, leaves PostgreSQL to abort the transaction) and is returned as a typed failure, never a
 *   defect: nothing of a failed operation is applied.
 * - Serialization failures and deadlocks (SQLSTATE 40001/40P01) of a transaction the store owns are
 *   retried at once, a bounded number of times; inside a caller's transaction they are returned (the
 *   caller's transaction is doomed anyway).
 * - Bodies are short runs of statements and are not interrupted half-way.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import { isConflict } from "./PostgresOutboxSchema.js"

/**
 * Attempts after the first for a transaction that failed with a serialization failure or deadlock.
 *
 * @since 0.1.0
 */
export const conflictRetries = 5

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
   * other stores made inside it join it.
   */
  readonly transact: <A, E>(
    body: (conn: Connection) => Effect.Effect<A, E | SqlError>
  ) => Effect.Effect<A, E | SqlError>
  /** Runs `body` on a connection outside any transaction of the store's (the caller's, when there is one). */
  readonly standalone: <A, E>(
    body: (conn: Connection) => Effect.Effect<A, E | SqlError>
  ) => Effect.Effect<A, E | SqlError>
}

const control = {
  begin: "BEGIN",
  commit: "COMMIT",
  rollback: "ROLLBACK",
  savepoint: "SAVEPOINT effect_outbox",
  release: "RELEASE SAVEPOINT effect_outbox",
  rollbackSavepoint: "ROLLBACK TO SAVEPOINT effect_outbox"
} as const

/**
 * Builds the runner on a `SqlClient` (a `PgClient`).
 *
 * @since 0.1.0
 */
export const make = (sql: SqlClient.SqlClient): Transactions => {
  const run: Transactions["run"] = (conn, text, params) => conn.execute(text, params, undefined)

  const withConnection = <A, E>(
    f: (conn: Connection, nested: boolean) => Effect.Effect<A, E>
  ): Effect.Effect<A, E | SqlError> =>
    Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) =>
      Option.isNone(outer)
        ? Effect.scoped(Effect.flatMap(sql.reserve, (conn) => f(conn, false)))
        : f(outer.value[0], true)
    )

  const undo = (conn: Connection, nested: boolean): Effect.Effect<void> =>
    (nested
      ? Effect.zipRight(run(conn, control.rollbackSavepoint, []), run(conn, control.release, []))
      : run(conn, control.rollback, [])
    ).pipe(
      Effect.asVoid,
      Effect.catchAll((error) => Effect.logDebug("outbox rollback failed (the connection may be gone)", error))
    )

  const inTransaction =
    <A, E>(body: (conn: Connection) => Effect.Effect<A, E | SqlError>) =>
    (conn: Connection, nested: boolean, depth: number): Effect.Effect<A, E | SqlError> =>
      Effect.uninterruptible(
        Effect.flatMap(run(conn, nested ? control.savepoint : control.begin, []), () =>
          Effect.matchCauseEffect(Effect.provideService(body(conn), SqlClient.TransactionConnection, [conn, depth]), {
            onFailure: (cause) => Effect.zipRight(undo(conn, nested), Effect.failCause(cause)),
            onSuccess: (value) =>
              Effect.matchEffect(run(conn, nested ? control.release : control.commit, []), {
                onFailure: (error) => Effect.zipRight(undo(conn, nested), Effect.fail(error)),
                onSuccess: () => Effect.succeed(value)
              })
          })
        )
      )

  const transact: Transactions["transact"] = (body) =>
    Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) =>
      Option.isSome(outer)
        ? inTransaction(body)(outer.value[0], true, outer.value[1] + 1)
        : Effect.retry(
            withConnection((conn, nested) => inTransaction(body)(conn, nested, 0)),
            {
              schedule: Schedule.recurs(conflictRetries),
              while: isConflict
            }
          )
    )

  const standalone: Transactions["standalone"] = (body) => withConnection((conn) => body(conn))

  return { run, transact, standalone }
}
