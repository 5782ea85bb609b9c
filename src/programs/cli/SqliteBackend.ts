/**
 * The SQLite backend of the CLI (loaded on demand by `Backends.layer`, so that a command that opens no
 * store — `--help`, a refused setting — runs without the SQLite packages installed): the database file
 * and the SQLite stores and inspection with the configured table prefix.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as SqliteDatabase from "../../layers/sqlite/SqliteDatabase.js"
import * as SqliteDeadLetterStore from "../../layers/sqlite/SqliteDeadLetterStore.js"
import * as SqliteInspection from "../../layers/sqlite/SqliteInspection.js"
import * as SqliteLeaseStore from "../../layers/sqlite/SqliteLeaseStore.js"
import * as SqliteOutboxStore from "../../layers/sqlite/SqliteOutboxStore.js"
import * as SqliteWakeSignal from "../../layers/sqlite/SqliteWakeSignal.js"
import { type OpenOptions, type Stores, storeTables } from "./Backends.js"
import { CliFailure, type StoreSettings } from "./Settings.js"

const Names = Schema.Array(Schema.Struct({ name: Schema.String }))

/** Fails with "no such table" (exit 2) unless every store table exists in the file. */
const tablesExist = (file: string, prefix: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql`SELECT name FROM sqlite_master WHERE type = 'table'`.pipe(
      Effect.flatMap(Schema.decodeUnknown(Names))
    )
    const present = new Set(rows.map((row) => row.name))
    const missing = storeTables.map((table) => `${prefix}${table}`).filter((table) => !present.has(table))
    if (missing.length > 0) {
      return yield* new CliFailure({
        message: `no such table: ${missing.join(", ")} in ${file} (read-only commands create nothing)`,
        exitCode: 2
      })
    }
  })

/**
 * How the CLI opens the SQLite file: the configured `synchronous`, and for the `relay` WAL checkpoints on a
 * worker thread (`checkpoint: "background"`), so the relay's commits never stop its thread to checkpoint while an
 * application's process writes to the same file; every other command checkpoints inline (SQLite's own way).
 *
 * @since 0.2.0
 */
export const databaseOptions = (
  settings: Pick<StoreSettings, "sqliteFile" | "sqliteSynchronous">,
  options: Pick<OpenOptions, "relay">
): SqliteDatabase.SqliteDatabaseOptions => ({
  filename: settings.sqliteFile,
  synchronous: settings.sqliteSynchronous,
  checkpoint: options.relay === true ? "background" : "inline"
})

/**
 * The SQLite stores and inspection for the settings (tables created when missing, except for a read-only
 * command: then a missing table is "no such table", exit 2); opened for the `relay` also the
 * `SqliteWakeSignal`, so commits of other processes end the relay's idle pauses, and the database's WAL
 * checkpoints on a worker thread (see {@link databaseOptions}).
 *
 * @since 0.1.0
 */
export const layer = (
  settings: StoreSettings,
  options: OpenOptions = { readOnly: false }
): Layer.Layer<Stores, unknown> => {
  const tablePrefix = settings.sqliteTablePrefix
  const database = SqliteDatabase.layer(databaseOptions(settings, options))
  const outbox = SqliteOutboxStore.layerWith({ tablePrefix })
  const stores = Layer.mergeAll(
    Layer.provideMerge(SqliteDeadLetterStore.layerWith({ tablePrefix }), outbox),
    SqliteLeaseStore.layerWith({ tablePrefix })
  )
  const withInspection = Layer.provideMerge(SqliteInspection.layerWith({ tablePrefix }), stores)
  const withWake =
    options.relay === true ? Layer.merge(withInspection, SqliteWakeSignal.layerWith({ tablePrefix })) : withInspection
  const checked = options.readOnly
    ? Layer.unwrapEffect(Effect.as(tablesExist(settings.sqliteFile, tablePrefix), withWake))
    : withWake
  return Layer.provide(checked, database)
}
