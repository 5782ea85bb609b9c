/**
 * The PostgreSQL `InboxStore` (SPEC §12): the shared SQL inbox (`SqlInbox`) on `@effect/sql-pg`, tables
 * `<schema>.<prefix>inbox_processed` and `<schema>.<prefix>inbox_mark` created at layer start under an
 * advisory lock (`<prefix>inbox_processed_migrations`). A unit is a `sql.withTransaction` on the client
 * (READ COMMITTED), so a handler's statements on the same `PgClient` join it. Concurrent units recording
 * one id queue on its row: the later one sees the id once the first commits and answers `Duplicate`,
 * without running its handler. Serialization failures and deadlocks fail with `TransactionConflict` (the
 * message may be retried); they are not retried here, since a handler may already have run.
 *
 * @since 0.1.0
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { InvalidConfiguration, StoreUnavailable } from "../../domain/OutboxError.js"
import * as InboxStore from "../../services/InboxStore.js"
import * as SqlInbox from "../sql/SqlInbox.js"
import { isConflict, storeTableNames } from "./PostgresOutboxSchema.js"
import { migrateStore } from "./PostgresOutboxStore.js"

/**
 * Options of the PostgreSQL inbox store.
 *
 * @since 0.1.0
 */
export interface PostgresInboxStoreOptions extends InboxStore.InboxOptions {
  /** Schema of the tables (created when missing). Default `public`. */
  readonly schema?: string | undefined
  /** Prefix of the table names (letters, digits, `_`). Default none. */
  readonly tablePrefix?: string | undefined
}

const namesOf = (options: PostgresInboxStoreOptions) =>
  Effect.map(storeTableNames("PostgresInboxStore", options, "inbox_processed"), (names) => ({
    ...names,
    marks: `"${names.schema}"."${names.prefix}inbox_mark"`,
    index: `"${names.prefix}inbox_processed_at"`
  }))

/**
 * Creates the inbox tables when missing. Run by the layers; exposed for applications that migrate as a
 * separate step.
 *
 * @since 0.1.0
 */
export const migrate = (
  options: PostgresInboxStoreOptions = {}
): Effect.Effect<void, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const names = yield* namesOf(options)
    yield* migrateStore(names, [
      [
        "0001_create_inbox",
        [
          `CREATE TABLE IF NOT EXISTS ${names.table} (
  consumer text NOT NULL,
  message_id text NOT NULL,
  partition_key text NOT NULL,
  processed_at bigint NOT NULL,
  PRIMARY KEY (consumer, message_id)
)`,
          `CREATE INDEX IF NOT EXISTS ${names.index} ON ${names.table} (processed_at)`,
          `CREATE TABLE IF NOT EXISTS ${names.marks} (
  consumer text NOT NULL,
  partition_key text NOT NULL,
  ordering_key text NOT NULL,
  seq bigint NOT NULL,
  updated_at bigint NOT NULL,
  PRIMARY KEY (consumer, partition_key, ordering_key)
)`
        ]
      ]
    ])
  })

/**
 * Builds the store over the `SqlClient` (a `PgClient`) in context (does not migrate; the layers do).
 *
 * @since 0.1.0
 */
export const make = (
  options: PostgresInboxStoreOptions = {}
): Effect.Effect<InboxStore.InboxStoreService, InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const valid = yield* InboxStore.validateOptions("PostgresInboxStore", options)
    const names = yield* namesOf(options)
    const backend = yield* SqlInbox.make({
      name: "postgres",
      placeholder: (n) => `$${n}`,
      processedTable: names.table,
      markTable: names.marks,
      trimStatement:
        `DELETE FROM ${names.table} WHERE ctid = ANY(ARRAY(SELECT ctid FROM ${names.table} ` +
        `WHERE processed_at < $1 ORDER BY processed_at LIMIT $2)) RETURNING 1`,
      isBusy: () => false,
      isConflict
    })
    return InboxStore.make(backend, valid)
  })

/**
 * A PostgreSQL inbox store layer with the given options; creates the tables first.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: PostgresInboxStoreOptions
): Layer.Layer<InboxStore.InboxStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Layer.effect(InboxStore.InboxStore, Effect.zipRight(migrate(options), make(options)))

/**
 * The PostgreSQL inbox store layer: schema `public`, no prefix, 7-day dedupe window.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<InboxStore.InboxStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =
  layerWith({})
