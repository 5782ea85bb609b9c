/**
 * How the SQLite outbox store runs statements: on the connection of a caller's `sql.withTransaction` when
 * there is one (inside a savepoint, R-PERSIST-6), else on a connection reserved for the operation, in the
 * store's own `BEGIN … COMMIT`.
 *
 * - A failure of the body or of `COMMIT` rolls back and is returned; a rollback SQLite already did itself
 *   (after `SQLITE_FULL` or an I/O error) is not a second failure.
 * - A transaction of the store's own takes SQLite's write lock up front (`BEGIN IMMEDIATE`) without
 *   blocking the thread: the `BEGIN` runs under a zero busy timeout, and while another connection (another
 *   process) holds the lock it is tried again every millisecond, the fiber sleeping in between, for as long as
 *   the connection's busy timeout allows. SQLite's own busy handler would sleep on the thread, 1, 2, 5, 10 ms…
 *   between its tries, and its statements after the `BEGIN` then never wait for the lock.
 * - Busy failures are retried briefly where the store owns the transaction (`SqliteSupport.retryBusy`);
 *   inside a caller's transaction only the caller may retry.
 * - Bodies are short runs of statements and are not interrupted half-way.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import { StoreUnavailable } from "../../domain/OutboxError.js"
import { run } from "./SqliteStatement.js"
import { isBusy, retryBusy } from "./SqliteSupport.js"

/**
 * The statement runner of the store.
 *
 * @since 0.1.0
 */
export interface Transactions {
  /**
   * Runs `f` on the caller's transaction connection (`nested`) when there is one, else on a reserved
   * connection; busy failures are retried on a reserved connection, and inside the caller's transaction
   * only when `retry` is `"always"`.
   */
  readonly withConnection: <A, E>(
    f: (conn: Connection, nested: boolean) => Effect.Effect<A, E>,
    retry: "always" | "outside a caller's transaction"
  ) => Effect.Effect<A, E | SqlError>
  /** Runs `body` in a transaction on `conn` (a savepoint when `nested`); any failure rolls it back. */
  readonly inTransaction: <A, E>(
    body: (conn: Connection) => Effect.Effect<A, E | SqlError>
  ) => (conn: Connection, nested: boolean) => Effect.Effect<A, E | SqlError>
  /** {@link inTransaction} on a connection, SQL failures as `StoreUnavailable` of the operation. */
  readonly transact: <A, E extends { readonly _tag: string }>(
    operation: string,
    partitionKey: string | undefined,
    body: (conn: Connection) => Effect.Effect<A, E | SqlError>
  ) => Effect.Effect<A, Exclude<E, { readonly _tag: "SqlError" }> | StoreUnavailable>
  /** Runs `body` outside any transaction of the store's, SQL failures as `StoreUnavailable`. */
  readonly standalone: <A, E extends { readonly _tag: string }>(
    operation: string,
    partitionKey: string | undefined,
    body: (conn: Connection) => Effect.Effect<A, E | SqlError>
  ) => Effect.Effect<A, Exclude<E, { readonly _tag: "SqlError" }> | StoreUnavailable>
}

/** Statements of the store's own transactions (never interpolated with values). */
const control = {
  begin: "BEGIN IMMEDIATE",
  readBusyTimeout: "PRAGMA busy_timeout",
  noBusyWait: "PRAGMA busy_timeout = 0",
  commit: "COMMIT",
  rollback: "ROLLBACK",
  savepoint: "SAVEPOINT outbox_store",
  release: "RELEASE SAVEPOINT outbox_store",
  rollbackSavepoint: "ROLLBACK TO SAVEPOINT outbox_store"
} as const

/** The message of the driver error under an `SqlError`, on one line. */
const causeMessage = (error: SqlError): string => {
  const cause: unknown = error.cause
  const text =
    typeof cause === "object" && cause !== null && "message" in cause && typeof cause.message === "string"
      ? cause.message
      : error.message
  return text.split("\n")[0] ?? text
}

/**
 * A `ROLLBACK` (or `ROLLBACK TO SAVEPOINT`) that failed because there is nothing to roll back: SQLite had
 * already ended the transaction (after `SQLITE_FULL` or an I/O error), or its `BEGIN` never succeeded.
 *
 * @since 0.2.0
 */
export const rolledBackAlready = (error: SqlError): boolean =>
  /no transaction is active|no such savepoint/.test(causeMessage(error))

/** Undoes a transaction or savepoint after a failure; a failing rollback is logged, the failure kept. */
const undo = (conn: Connection, nested: boolean): Effect.Effect<void> =>
  (nested
    ? Effect.zipRight(run(conn, control.rollbackSavepoint, []), run(conn, control.release, []))
    : run(conn, control.rollback, [])
  ).pipe(
    Effect.asVoid,
    Effect.catchAll((error) =>
      rolledBackAlready(error) ? Effect.void : Effect.logWarning(`outbox rollback failed: ${causeMessage(error)}`)
    )
  )

/** The time between two tries of a `BEGIN IMMEDIATE` that found the write lock taken. */
const lockRetryDelay = Duration.millis(1)

/** The busy timeout SQLite reports (`PRAGMA busy_timeout`), in milliseconds; 0 when it reports none. */
const busyTimeoutOf = (rows: ReadonlyArray<unknown>): number => {
  const row: unknown = rows[0]
  const value: unknown = typeof row === "object" && row !== null ? Reflect.get(row, "timeout") : undefined
  return typeof value === "number" && Number.isSafeInteger(value) && value > 0 ? value : 0
}

/**
 * Opens a transaction with the write lock taken (the store's own, and `SqliteDatabase.withWriteTransaction`'s),
 * without blocking the thread while another connection holds it: `BEGIN IMMEDIATE` under a zero busy timeout
 * (the connection's own restored right after), tried again every {@link lockRetryDelay}
 * (`SqliteSupport.retryBusy`) until it succeeds, fails otherwise, or `busyMillis` passed (then it fails busy,
 * as SQLite's own wait would have).
 */
const beginWrite = (conn: Connection, busyMillis: number): Effect.Effect<void, SqlError> => {
  // a pragma's value cannot be bound; this one is the integer the connection itself reported (busyTimeoutOf)
  const restore = `PRAGMA busy_timeout = ${busyMillis}`
  const attempt: Effect.Effect<void, SqlError> = Effect.zipRight(
    run(conn, control.noBusyWait, []),
    Effect.flatMap(Effect.either(run(conn, control.begin, [])), (begun) =>
      Either.isRight(begun)
        ? // a failed restore after a successful BEGIN leaves no transaction open behind it
          Effect.asVoid(Effect.tapError(run(conn, restore, []), () => undo(conn, false)))
        : Effect.zipRight(run(conn, restore, []), Effect.fail(begun.left))
    )
  )
  return retryBusy(attempt, isBusy, () =>
    Schedule.spaced(lockRetryDelay).pipe(Schedule.upTo(Duration.millis(busyMillis)))
  )
}

/**
 * The `BEGIN` of each connection a transaction began on: {@link beginWrite} with the connection's busy timeout
 * (`PRAGMA busy_timeout`, read once), built once.
 */
const begins = new WeakMap<Connection, Effect.Effect<void, SqlError>>()

/**
 * Begins a transaction on `conn` with SQLite's write lock taken (`BEGIN IMMEDIATE`), waiting while another
 * connection holds the lock with the fiber asleep, up to the connection's busy timeout (read once per
 * connection), then failing busy: the module doc's first rule. The store's own transactions begin so, and
 * `SqliteDatabase.withWriteTransaction` begins an application's.
 *
 * @since 0.2.0
 */
export const beginImmediate = (conn: Connection): Effect.Effect<void, SqlError> => {
  const known = begins.get(conn)
  if (known !== undefined) return known
  return Effect.flatMap(run(conn, control.readBusyTimeout, []), (rows) => {
    const begin = beginWrite(conn, busyTimeoutOf(rows))
    begins.set(conn, begin)
    return begin
  })
}

/**
 * Builds the runner on the store's `SqlClient`. Statements run on the client's connection directly,
 * without the client's per-statement span: every public operation already has one span (from the store
 * core), and a claim or persist issues several statements.
 *
 * @since 0.1.0
 */
export const make = (sql: SqlClient.SqlClient): Transactions => {
  const withConnection: Transactions["withConnection"] = (f, retry) =>
    Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) => {
      if (Option.isNone(outer)) return retryBusy(Effect.scoped(Effect.flatMap(sql.reserve, (conn) => f(conn, false))))
      const inner = f(outer.value[0], true)
      return retry === "always" ? retryBusy(inner) : inner
    })

  const inTransaction: Transactions["inTransaction"] = (body) => (conn, nested) =>
    Effect.uninterruptible(
      Effect.flatMap(nested ? run(conn, control.savepoint, []) : beginImmediate(conn), () =>
        Effect.matchCauseEffect(body(conn), {
          onFailure: (cause) => Effect.zipRight(undo(conn, nested), Effect.failCause(cause)),
          onSuccess: (value) =>
            Effect.matchEffect(run(conn, nested ? control.release : control.commit, []), {
              onFailure: (error) => Effect.zipRight(undo(conn, nested), Effect.fail(error)),
              onSuccess: () => Effect.succeed(value)
            })
        })
      )
    )

  const transact: Transactions["transact"] = (operation, partitionKey, body) =>
    withConnection(inTransaction(body), "outside a caller's transaction").pipe(
      StoreUnavailable.refailTag("SqlError", operation, partitionKey)
    )

  const standalone: Transactions["standalone"] = (operation, partitionKey, body) =>
    withConnection(body, "always").pipe(StoreUnavailable.refailTag("SqlError", operation, partitionKey))

  return { withConnection, inTransaction, transact, standalone }
}
