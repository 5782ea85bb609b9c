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
import type { Stores } from "./Backends.js"
import type { StoreSettings } from "./Settings.js"

/**
 * The SQLite stores and inspection for the settings (tables created when missing).
 *
 * @since 0.1.0
 */
export const layer = (settings: StoreSettings): Layer.Layer<Stores, unknown> => {
  const tablePrefix = settings.sqliteTablePrefix
  const database = SqliteDatabase.layer({ filename: settings.sqliteFile, synchronous: settings.sqliteSynchronous })
  const outbox = SqliteOutboxStore.layerWith({ tablePrefix })
  const stores = Layer.mergeAll(
    Layer.provideMerge(SqliteDeadLetterStore.layerWith({ tablePrefix }), outbox),
    SqliteLeaseStore.layerWith({ tablePrefix })
  )
  return Layer.provide(Layer.provideMerge(SqliteInspection.layerWith({ tablePrefix }), stores), database)
}
