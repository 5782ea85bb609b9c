/**
 * The SQLite `InboxStore` (SPEC §12): the shared SQL inbox (`SqlInbox`) on a SQLite database, tables
 * `<prefix>inbox_processed` and `<prefix>inbox_mark` created by the layer's own migrations
 * (`<prefix>inbox_migrations`). A unit is a transaction on the client (`SqliteDatabase.writeTransactionOn`:
 * `sql.withTransaction` beginning `BEGIN IMMEDIATE`), so a handler's statements on the same client join it
 * (a savepoint inside a caller's transaction). It takes the database's write lock as it begins, waiting for
 * another process's with the fiber asleep (up to the busy timeout): units in other processes sharing the
 * file wait for it and then see the id. Lock failures before the id is recorded are retried; after that only
 * the caller may retry.
 *
 * @since 0.1.0
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { type InvalidConfiguration, StoreUnavailable } from "../../domain/OutboxError.js"
import * as InboxStore from "../../services/InboxStore.js"
import * as SqlInbox from "../sql/SqlInbox.js"
import { writeTransactionOn } from "./SqliteDatabase.js"
import { isBusy, retryBusyOutsideTransaction, tablePrefix } from "./SqliteSupport.js"

/**
 * Options of the SQLite inbox store.
 *
 * @since 0.1.0
 */
export interface SqliteInboxStoreOptions extends InboxStore.InboxOptions {
  /** Prefix of the table names (letters, digits, `_`, not starting with a digit). Default `""`. */
  readonly tablePrefix?: string | undefined
}

const migrations = (prefix: string) => ({
  "1_create_inbox": Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql.unsafe(`CREATE TABLE IF NOT EXISTS "${prefix}inbox_processed" (
      consumer TEXT NOT NULL,
      message_id TEXT NOT NULL,
      partition_key TEXT NOT NULL,
      processed_at INTEGER NOT NULL,
      PRIMARY KEY (consumer, message_id)
    )`)
    yield* sql.unsafe(
      `CREATE INDEX IF NOT EXISTS "${prefix}inbox_processed_at" ON "${prefix}inbox_processed" (processed_at)`
    )
    yield* sql.unsafe(`CREATE TABLE IF NOT EXISTS "${prefix}inbox_mark" (
      consumer TEXT NOT NULL,
      partition_key TEXT NOT NULL,
      ordering_key TEXT NOT NULL,
      seq INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      PRIMARY KEY (consumer, partition_key, ordering_key)
    ) WITHOUT ROWID`)
  })
})

/**
 * The dialect of the shared SQL inbox for SQLite with the given table prefix.
 *
 * @since 0.1.0
 */
export const dialect = (prefix: string): SqlInbox.SqlInboxDialect => ({
  name: "sqlite",
  placeholder: () => "?",
  processedTable: `"${prefix}inbox_processed"`,
  markTable: `"${prefix}inbox_mark"`,
  trimStatement:
    `DELETE FROM "${prefix}inbox_processed" WHERE rowid IN (SELECT rowid FROM "${prefix}inbox_processed" ` +
    `INDEXED BY "${prefix}inbox_processed_at" WHERE processed_at < ? ORDER BY processed_at LIMIT ?) RETURNING 1`,
  isBusy,
  isConflict: () => false,
  // a unit always writes (the message's id): it takes the write lock as it begins, without blocking the thread
  transaction: writeTransactionOn
})

/**
 * Creates the inbox tables when missing. Run by the layers; exposed for applications that migrate as a
 * separate step.
 *
 * @since 0.1.0
 */
export const migrate = (
  options: SqliteInboxStoreOptions = {}
): Effect.Effect<void, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const prefix = yield* tablePrefix("SqliteInboxStore", options.tablePrefix)
    yield* Migrator.make({})({
      loader: Migrator.fromRecord(migrations(prefix)),
      table: `${prefix}inbox_migrations`
    }).pipe(retryBusyOutsideTransaction, StoreUnavailable.refail("migrate"))
  })

/**
 * Builds the store over the `SqlClient` in context (does not migrate; the layers do).
 *
 * @since 0.1.0
 */
export const make = (
  options: SqliteInboxStoreOptions = {}
): Effect.Effect<InboxStore.InboxStoreService, InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const valid = yield* InboxStore.validateOptions("SqliteInboxStore", options)
    const prefix = yield* tablePrefix("SqliteInboxStore", options.tablePrefix)
    return InboxStore.make(yield* SqlInbox.make(dialect(prefix)), valid)
  })

/**
 * A SQLite inbox store layer with the given options; creates the tables first.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: SqliteInboxStoreOptions
): Layer.Layer<InboxStore.InboxStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Layer.effect(InboxStore.InboxStore, Effect.zipRight(migrate(options), make(options)))

/**
 * The SQLite inbox store layer with default table names and a 7-day dedupe window.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<InboxStore.InboxStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =
  layerWith({})
