/**
 * A convenience layer that opens a SQLite database (through `@effect/sql-sqlite-node`) the way the
 * SQLite stores expect it: for a file database WAL journaling, `synchronous = FULL` (a committed
 * transaction survives power loss), a busy timeout (several processes may share one file) and foreign
 * keys; `":memory:"` is supported (WAL does nothing there and is not requested). The parent directory
 * of a file database is created when missing. A relay's process can have the WAL checkpointed on a worker thread
 * instead of on its commits (the `checkpoint` option, `SqliteCheckpoint`).
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import type { ConfigError } from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as fs from "node:fs"
import * as path from "node:path"
import { StoreUnavailable } from "../../domain/OutboxError.js"
import * as SqliteCheckpoint from "./SqliteCheckpoint.js"
import { beginImmediate, rolledBackAlready } from "./SqliteTransaction.js"

/**
 * Options of {@link layer}.
 *
 * @since 0.1.0
 */
export interface SqliteDatabaseOptions {
  /** Path of the database file, or `":memory:"` for a private in-memory database. */
  readonly filename: string
  /**
   * How long a statement waits for another connection's lock before failing with `SQLITE_BUSY`
   * (default 5 seconds). The stores retry busy failures a few more times on top of it.
   */
  readonly busyTimeout?: Duration.DurationInput | undefined
  /** `PRAGMA synchronous` for file databases (default `FULL`). */
  readonly synchronous?: "OFF" | "NORMAL" | "FULL" | "EXTRA" | undefined
  /**
   * Where a file database's WAL checkpoints run (default `"inline"`):
   *
   * - `"inline"`: SQLite's own way: the commit that takes the log past 1000 pages copies it into the database file
   *   and syncs it before it returns, on the process's thread.
   * - `"background"`: on a worker thread with a connection of its own, from the moment the log first reaches 4 MiB
   *   (`SqliteCheckpoint`); no commit of this connection stops the thread to checkpoint, and should the worker
   *   fail the connection checkpoints on its commits again. Meant for a process that runs a relay beside an
   *   application's process on the same file (the CLI's `relay` runs so): measured with a steady producer in the
   *   other process, the relay's delivery p99 falls to about half (bench/drain.ts). The application's own
   *   process had better keep `"inline"`: with both processes in the background the same run was slower than
   *   with both inline, and so was a relay in the application's process, on its one connection.
   *
   * `":memory:"` and `file:` URIs always checkpoint inline.
   *
   * @since 0.2.0
   */
  readonly checkpoint?: "background" | "inline" | undefined
}

/**
 * True for the names SQLite treats as a private in-memory database.
 *
 * @since 0.1.0
 */
export const isMemory = (filename: string): boolean =>
  filename === ":memory:" || filename === "" || filename.startsWith("file::memory:")

/**
 * Creates the missing directories above the file one level at a time, from the deepest existing one
 * down. (A recursive `mkdirSync` loops forever on ENOENT under a path that cannot hold directories,
 * such as `/proc/x/y.db`; this fails at once instead.)
 */
const makeParents = (directory: string): void => {
  const missing: Array<string> = []
  let current = directory
  while (!fs.existsSync(current)) {
    missing.push(current)
    const parent = path.dirname(current)
    if (parent === current) break
    current = parent
  }
  for (const dir of missing.reverse()) fs.mkdirSync(dir)
}

/** A file database named by a path: not in memory, not a `file:` URI. */
const isPath = (filename: string): boolean => !isMemory(filename) && !filename.startsWith("file:")

const ensureParentDirectory = (filename: string): Effect.Effect<void, StoreUnavailable> =>
  !isPath(filename)
    ? Effect.void
    : Effect.try({
        try: () => makeParents(path.dirname(path.resolve(filename))),
        catch: StoreUnavailable.wrap("open")
      })

/**
 * Opens the database and provides `SqlClient` (and the SQLite-specific `SqliteClient`). The
 * connection is closed when the layer's scope closes.
 *
 * @since 0.1.0
 */
export const layer = (
  options: SqliteDatabaseOptions
): Layer.Layer<SqlClient.SqlClient | SqliteClient.SqliteClient, ConfigError | StoreUnavailable> => {
  const memory = isMemory(options.filename)
  const busyMillis = Math.max(0, Math.floor(Duration.toMillis(options.busyTimeout ?? Duration.seconds(5))))
  const synchronous = options.synchronous ?? "FULL"
  const client = Layer.unwrapEffect(
    Effect.as(
      ensureParentDirectory(options.filename),
      SqliteClient.layer({ filename: options.filename, disableWAL: memory })
    )
  )
  const background = isPath(options.filename) && options.checkpoint === "background"
  const pragmas = Layer.scopedDiscard(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      // pragma values cannot be bound as parameters; these are validated constants
      yield* sql.unsafe(`PRAGMA busy_timeout = ${busyMillis}`)
      yield* sql.unsafe("PRAGMA foreign_keys = ON")
      if (!memory) yield* sql.unsafe(`PRAGMA synchronous = ${synchronous}`)
      if (background) yield* SqliteCheckpoint.run({ filename: path.resolve(options.filename) })
    }).pipe(StoreUnavailable.refail("open"))
  )
  return Layer.provideMerge(pragmas, client)
}

/** The statements of {@link withWriteTransaction} but its `BEGIN`, as `@effect/sql`'s own transactions issue them. */
const unprepared = (conn: Connection, text: string): Effect.Effect<void, SqlError> =>
  Effect.asVoid(conn.executeUnprepared(text, [], undefined))

/** A rollback that found nothing to roll back succeeds (`SqliteTransaction.rolledBackAlready`). */
const undone = (rollback: Effect.Effect<void, SqlError>): Effect.Effect<void, SqlError> =>
  Effect.catchIf(rollback, rolledBackAlready, () => Effect.void)

/**
 * {@link withWriteTransaction} on a given client (the SQLite inbox's units run in it).
 *
 * @since 0.2.0
 */
export const writeTransactionOn = (
  sql: SqlClient.SqlClient
): (<A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>) =>
  SqlClient.makeWithTransaction({
    transactionTag: SqlClient.TransactionConnection,
    spanAttributes: [["db.system.name", "sqlite"]],
    acquireConnection: Effect.flatMap(Scope.make(), (scope) =>
      Effect.map(Scope.extend(sql.reserve, scope), (conn): readonly [Scope.CloseableScope, Connection] => [scope, conn])
    ),
    begin: beginImmediate,
    savepoint: (conn, id) => unprepared(conn, `SAVEPOINT effect_sql_${id}`),
    commit: (conn) => unprepared(conn, "COMMIT"),
    // after a BEGIN that failed (busy past the busy timeout) there is no transaction to roll back
    rollback: (conn) => undone(unprepared(conn, "ROLLBACK")),
    rollbackSavepoint: (conn, id) => undone(unprepared(conn, `ROLLBACK TO SAVEPOINT effect_sql_${id}`))
  })

/**
 * Runs `effect` in a transaction of the database's `SqlClient` that takes SQLite's write lock as it begins
 * (`BEGIN IMMEDIATE`), as the SQLite stores' own transactions do: while another connection holds the lock
 * (another process — a relay beside the application, or the application beside the CLI's relay) it waits
 * with the fiber asleep, trying again every millisecond up to the connection's busy timeout (then it fails
 * with the `SqlError` of `SQLITE_BUSY`), where `sql.withTransaction`'s first write waits in SQLite's busy
 * handler, which sleeps on the thread between its tries and stalls everything else the process runs.
 *
 * Otherwise it is `sql.withTransaction`: statements on the client and the outbox's `persist` inside it join
 * the transaction (R-PERSIST-6), a nested `sql.withTransaction` (or `withWriteTransaction`) is a savepoint,
 * it commits when `effect` succeeds and rolls back when it fails or is interrupted; inside a transaction
 * already it is a savepoint of that one. Meant for transactions that write: a read-only one need not take the
 * write lock.
 *
 * @since 0.2.0
 */
export const withWriteTransaction = <A, E, R>(
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E | SqlError, R | SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => writeTransactionOn(sql)(effect))
