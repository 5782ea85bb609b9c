/**
 * The SQLite backend of the CLI (loaded on demand by `Backends.layer`, so that a command that opens no
 * store — `--help`, a refused setting — runs without the SQLite packages installed): the database file
 * and the SQLite stores and inspection with the configured table prefix.
 *
 * @since 0.1.0
 */
import * as Layer from "effect/Layer"
import * as SqliteDatabase from "../../layers/sqlite/SqliteDatabase.js"
import * as SqliteDeadLetterStore from "../../layers/sqlite/SqliteDeadLetterStore.js"
import * as SqliteInspection from "../../layers/sqlite/SqliteInspection.js"
import * as SqliteLeaseStore from "../../layers/sqlite/SqliteLeaseStore.js"
import * as SqliteOutboxStore from "../../layers/sqlite/SqliteOutboxStore.js"
import * as SqliteWakeSignal from "../../layers/sqlite/SqliteWakeSignal.js"
import type { Stores } from "./Backends.js"
import type { StoreSettings } from "./Settings.js"

/**
 * The SQLite stores and inspection for the settings (tables created when missing); with `wake` (the relay)
 * also the `SqliteWakeSignal`, so commits of other processes end the relay's idle pauses.
 *
 * @since 0.1.0
 */
export const layer = (settings: StoreSettings, wake = false): Layer.Layer<Stores, unknown> => {
  const tablePrefix = settings.sqliteTablePrefix
  const database = SqliteDatabase.layer({ filename: settings.sqliteFile, synchronous: settings.sqliteSynchronous })
  const outbox = SqliteOutboxStore.layerWith({ tablePrefix })
  const stores = Layer.mergeAll(
    Layer.provideMerge(SqliteDeadLetterStore.layerWith({ tablePrefix }), outbox),
    SqliteLeaseStore.layerWith({ tablePrefix })
  )
  const withInspection = Layer.provideMerge(SqliteInspection.layerWith({ tablePrefix }), stores)
  const withWake = wake ? Layer.merge(withInspection, SqliteWakeSignal.layerWith({ tablePrefix })) : withInspection
  return Layer.provide(withWake, database)
}
