/**
 * A convenience layer that opens a SQLite database (through `@effect/sql-sqlite-node`) the way the
 * SQLite stores expect it: for a file database WAL journaling, `synchronous = FULL` (a committed
 * transaction survives power loss), a busy timeout (several processes may share one file) and foreign
 * keys; `":memory:"` is supported (WAL does nothing there and is not requested). The parent directory
 * of a file database is created when missing.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import type { ConfigError } from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as path from "node:path"
import { StoreUnavailable } from "../../domain/OutboxError.js"

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

const ensureParentDirectory = (filename: string): Effect.Effect<void, StoreUnavailable> =>
  isMemory(filename) || filename.startsWith("file:")
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
  const pragmas = Layer.effectDiscard(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      // pragma values cannot be bound as parameters; these are validated constants
      yield* sql.unsafe(`PRAGMA busy_timeout = ${busyMillis}`)
      yield* sql.unsafe("PRAGMA foreign_keys = ON")
      if (!memory) yield* sql.unsafe(`PRAGMA synchronous = ${synchronous}`)
    }).pipe(StoreUnavailable.refail("open"))
  )
  return Layer.provideMerge(pragmas, client)
}
