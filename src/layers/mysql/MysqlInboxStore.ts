/**
 * The MySQL / MariaDB `InboxStore` (SPEC §12): the shared SQL inbox (`SqlInbox`) on
 * `@effect/sql-mysql2`, tables `<database>.<prefix>inbox_processed` and `<database>.<prefix>inbox_mark`
 * created at layer start under the `GET_LOCK` migration lock (`<prefix>inbox_processed_migrations`). A
 * unit is a `sql.withTransaction` on the client, so a handler's statements on the same `MysqlClient` join
 * it.
 *
 * MySQL has no `ON CONFLICT … RETURNING`, so the writes are its own, with the shared meaning:
 * - the id is recorded by a plain `INSERT`; a duplicate key (1062) means "already recorded". A unit
 *   recording an id another open unit recorded waits on that row: once the other commits it sees the
 *   duplicate (`Duplicate`, its handler not run), once the other rolls back it records the id;
 * - the mark is read `FOR UPDATE` (locking the key's row until commit), then raised by an `UPDATE` when
 *   below, or inserted when absent (a concurrent first insert, 1062, is read again);
 * - a trim batch is `DELETE … ORDER BY processed_at LIMIT n` through the `processed_at` index.
 *
 * Deadlocks (1213) and lock-wait timeouts (1205) fail the unit with a retryable error (`TransactionConflict`,
 * or `StoreUnavailable` when a write of the unit reports them): the message may be retried. They are not
 * retried here, since a handler may already have run. Consumer names, message ids,
 * partition and ordering keys hold at most 255 characters (the key columns).
 *
 * @since 0.1.0
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { type InvalidConfiguration, StoreUnavailable } from "../../domain/OutboxError.js"
import * as InboxStore from "../../services/InboxStore.js"
import * as SqlInbox from "../sql/SqlInbox.js"
import { BigIntColumn } from "../sql/SqlOutboxRow.js"
import { errno, isConflict, storeTableNames, tableOptions } from "./MysqlOutboxSchema.js"
import { migrateStore } from "./MysqlOutboxStore.js"

/**
 * Options of the MySQL inbox store.
 *
 * @since 0.1.0
 */
export interface MysqlInboxStoreOptions extends InboxStore.InboxOptions {
  /** Database of the tables (created when missing). Default: the connection's current database. */
  readonly database?: string | undefined
  /** Prefix of the table names (letters, digits, `_`). Default none. */
  readonly tablePrefix?: string | undefined
}

const namesOf = (options: MysqlInboxStoreOptions) =>
  Effect.map(storeTableNames("MysqlInboxStore", options, "inbox_processed"), (names) => ({
    ...names,
    marks:
      names.database === undefined
        ? `\`${names.prefix}inbox_mark\``
        : `\`${names.database}\`.\`${names.prefix}inbox_mark\``,
    index: `\`${names.prefix}inbox_processed_at\``
  }))

/**
 * Creates the inbox tables when missing. Run by the layers; exposed for applications that migrate as a
 * separate step.
 *
 * @since 0.1.0
 */
export const migrate = (
  options: MysqlInboxStoreOptions = {}
): Effect.Effect<void, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const names = yield* namesOf(options)
    yield* migrateStore(names, (collation) => [
      [
        "0001_create_inbox",
        [
          `CREATE TABLE IF NOT EXISTS ${names.table} (
  consumer VARCHAR(255) NOT NULL,
  message_id VARCHAR(255) NOT NULL,
  partition_key VARCHAR(255) NOT NULL,
  processed_at BIGINT NOT NULL,
  PRIMARY KEY (consumer, message_id),
  KEY ${names.index} (processed_at)
) ${tableOptions(collation)}`,
          `CREATE TABLE IF NOT EXISTS ${names.marks} (
  consumer VARCHAR(255) NOT NULL,
  partition_key VARCHAR(255) NOT NULL,
  ordering_key VARCHAR(255) NOT NULL,
  seq BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (consumer, partition_key, ordering_key)
) ${tableOptions(collation)}`
        ]
      ]
    ])
  })

const SeqRows = Schema.Array(Schema.Struct({ seq: BigIntColumn }))

/** The number of rows a write reports (`affectedRows` of mysql2's result header). */
const affectedRows = (result: unknown): number => {
  if (typeof result !== "object" || result === null) return 0
  const n: unknown = Reflect.get(result, "affectedRows")
  return typeof n === "number" ? n : 0
}

/** The MySQL writes of the shared inbox (see the module doc). */
const writes = (names: Effect.Effect.Success<ReturnType<typeof namesOf>>): SqlInbox.SqlInboxWrites => {
  const key = "consumer = ? AND partition_key = ? AND ordering_key = ?"
  const lockMark = `SELECT seq FROM ${names.marks} WHERE ${key} FOR UPDATE`
  const insertMark = `INSERT INTO ${names.marks} (consumer, partition_key, ordering_key, seq, updated_at) VALUES (?, ?, ?, ?, ?)`
  const updateMark = `UPDATE ${names.marks} SET seq = ?, updated_at = ? WHERE ${key}`
  const record = `INSERT INTO ${names.table} (consumer, message_id, partition_key, processed_at) VALUES (?, ?, ?, ?)`
  const trim = `DELETE FROM ${names.table} WHERE processed_at < ? ORDER BY processed_at LIMIT ?`
  const duplicate = (error: unknown) => errno(error) === 1062

  const raiseMark: SqlInbox.SqlInboxWrites["raiseMark"] = (sql, mark, seq, nowMillis) => {
    const params = [mark.consumer, mark.partitionKey, mark.orderingKey]
    const attempt = (firstTry: boolean): Effect.Effect<InboxStore.RaiseResult, SqlError | StoreUnavailable> =>
      Effect.gen(function* () {
        const rows = yield* Effect.flatMap(sql.unsafe(lockMark, params), Schema.decodeUnknown(SeqRows)).pipe(
          Effect.catchTag("ParseError", (cause) =>
            Effect.fail(new StoreUnavailable({ operation: "Inbox.raiseMark", partitionKey: mark.partitionKey, cause }))
          )
        )
        const stored = rows[0]?.seq
        if (stored !== undefined) {
          if (stored >= seq) return { raised: false, mark: stored } as const
          yield* sql.unsafe(updateMark, [seq, nowMillis, ...params])
          return { raised: true } as const
        }
        const inserted = yield* sql.unsafe(insertMark, [...params, seq, nowMillis]).pipe(
          Effect.as(true),
          Effect.catchIf(
            (error) => firstTry && duplicate(error),
            () => Effect.succeed(false)
          )
        )
        // another unit inserted the key's first mark meanwhile (and committed): read it, locked, again
        return inserted ? ({ raised: true } as const) : yield* attempt(false)
      })
    return attempt(true)
  }

  return {
    record: (sql, entry) =>
      sql.unsafe(record, [entry.consumer, entry.messageId, entry.partitionKey, entry.processedAtMillis]).pipe(
        Effect.as(true),
        Effect.catchIf(duplicate, () => Effect.succeed(false))
      ),
    raiseMark,
    trim: (sql, beforeMillis, limit) => Effect.map(sql.unsafe(trim, [beforeMillis, limit]).raw, affectedRows)
  }
}

/**
 * Builds the store over the `SqlClient` (a `MysqlClient`) in context (does not migrate; the layers do).
 *
 * @since 0.1.0
 */
export const make = (
  options: MysqlInboxStoreOptions = {}
): Effect.Effect<InboxStore.InboxStoreService, InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const valid = yield* InboxStore.validateOptions("MysqlInboxStore", options)
    const names = yield* namesOf(options)
    const backend = yield* SqlInbox.make({
      name: "mysql",
      placeholder: () => "?",
      processedTable: names.table,
      markTable: names.marks,
      trimStatement: "",
      isBusy: () => false,
      isConflict,
      writes: writes(names)
    })
    return InboxStore.make(backend, valid)
  })

/**
 * A MySQL inbox store layer with the given options; creates the tables first.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: MysqlInboxStoreOptions
): Layer.Layer<InboxStore.InboxStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Layer.effect(InboxStore.InboxStore, Effect.zipRight(migrate(options), make(options)))

/**
 * The MySQL inbox store layer: the connection's database, no prefix, 7-day dedupe window.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<InboxStore.InboxStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =
  layerWith({})
