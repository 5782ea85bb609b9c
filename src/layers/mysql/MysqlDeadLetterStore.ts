/**
 * The MySQL `DeadLetterStore` (SPEC §5) over `@effect/sql-mysql2`.
 *
 * Entries live in `<database>.<prefix>outbox_dead_letter`: payload as `LONGBLOB`, headers as JSON text,
 * `failed_at` as epoch milliseconds, optional fields as NULL. Indexes on `(failed_at, id)`,
 * `(route_id, failed_at, id)` and `(category, failed_at, id)` serve the filters in age order.
 * `deleteWhere` and `purge` delete in chunks (one short `DELETE … ORDER BY … LIMIT` each). A write of an
 * existing id is the server's duplicate-key error (1062), reported as `DuplicateRecord`.
 *
 * These are the storage primitives of `DeadLetterStore.make`. A redrive runs in one transaction, its entries
 * read `FOR UPDATE`: with the MySQL outbox store on the same client (whose persist joins an enclosing
 * transaction) either every entry is redriven and deleted, or nothing is. The layer runs its migrations
 * under a `GET_LOCK` named lock (`<prefix>outbox_dead_letter_migrations`).
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type { DeadLetterEntry } from "../../domain/DeadLetterEntry.js"
import { InvalidConfiguration, StoreUnavailable } from "../../domain/OutboxError.js"
import * as DeadLetterStore from "../../services/DeadLetterStore.js"
import { OutboxStore } from "../../services/OutboxStore.js"
import * as SqlDeadLetterRow from "../sql/SqlDeadLetterRow.js"
import { BigIntColumn } from "../sql/SqlOutboxRow.js"
import { decodeRows } from "./MysqlClaim.js"
import { errno, storeTableNames, tableOptions } from "./MysqlOutboxSchema.js"
import { migrateStore } from "./MysqlOutboxStore.js"
import * as MysqlTransaction from "./MysqlTransaction.js"

/**
 * Options of the MySQL dead-letter store.
 *
 * @since 0.1.0
 */
export interface MysqlDeadLetterStoreOptions {
  /** Database of the table (created when missing). Default: the connection's current database. */
  readonly database?: string | undefined
  /** Prefix of the table and index names (letters, digits, `_`). Default none. */
  readonly tablePrefix?: string | undefined
  /** How many entries one statement of `deleteWhere`/`purge` deletes (default 500). */
  readonly deleteChunk?: number | undefined
}

const namesOf = (options: MysqlDeadLetterStoreOptions) =>
  storeTableNames(
    "MysqlDeadLetterStore",
    options,
    "outbox_dead_letter",
    Number.isFinite(options.deleteChunk ?? 500) ? [] : ["deleteChunk must be a finite number"]
  )

const Rows = Schema.Array(SqlDeadLetterRow.row(BigIntColumn))

/** No limit: the largest `LIMIT` MySQL takes. */
const noLimit = "18446744073709551615"

/** The `LIMIT` of a selection. */
const sqlLimit = (selection: DeadLetterStore.Selection): number | string =>
  Number.isFinite(selection.limit) ? selection.limit : noLimit

/** The WHERE clause of a selection: route, category, since, before (each given twice; NULL = unset). */
const filterClause =
  "(? IS NULL OR route_id = ?) AND (? IS NULL OR category = ?) AND (? IS NULL OR failed_at >= ?) AND (? IS NULL OR failed_at < ?)"

const filterParams = (selection: DeadLetterStore.Selection): ReadonlyArray<unknown> =>
  [
    selection.routeId ?? null,
    selection.category ?? null,
    selection.sinceMillis ?? null,
    selection.beforeMillis ?? null
  ].flatMap((value) => [value, value])

const idList = (n: number) => `(${"?" + ",?".repeat(Math.max(0, n - 1))})`

/**
 * Creates the dead-letter table and its indexes when missing. Run by the layers; exposed for
 * applications that run migrations as a separate step.
 *
 * @since 0.1.0
 */
export const migrate = (
  options: MysqlDeadLetterStoreOptions = {}
): Effect.Effect<void, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const names = yield* namesOf(options)
    const p = names.prefix
    yield* migrateStore(names, (collation) => [
      [
        "0001_create_outbox_dead_letter",
        [
          `CREATE TABLE IF NOT EXISTS ${names.table} (
  id VARCHAR(255) NOT NULL PRIMARY KEY,
  record_id VARCHAR(255) NOT NULL,
  partition_key VARCHAR(255) NOT NULL,
  envelope_id VARCHAR(255) NOT NULL,
  binding_id VARCHAR(255) NOT NULL,
  payload LONGBLOB NOT NULL,
  headers LONGTEXT NOT NULL,
  ordering_key VARCHAR(255) NULL,
  route_id VARCHAR(255) NULL,
  address TEXT NULL,
  category VARCHAR(32) NOT NULL,
  reason LONGTEXT NOT NULL,
  error_code TEXT NOT NULL,
  last_error LONGTEXT NOT NULL,
  attempts INT NOT NULL,
  failed_at BIGINT NOT NULL,
  KEY \`${p}outbox_dead_letter_age\` (failed_at, id),
  KEY \`${p}outbox_dead_letter_route\` (route_id, failed_at, id),
  KEY \`${p}outbox_dead_letter_category\` (category, failed_at, id)
) ${tableOptions(collation)}`
        ]
      ]
    ])
  })

/**
 * Builds a MySQL dead-letter store over the `SqlClient` and `OutboxStore` in context. Does not run
 * migrations (the layers do; see {@link migrate}).
 *
 * @since 0.1.0
 */
export const make = (
  options: MysqlDeadLetterStoreOptions = {}
): Effect.Effect<DeadLetterStore.DeadLetterStoreService, InvalidConfiguration, SqlClient.SqlClient | OutboxStore> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const outbox = yield* OutboxStore
    const names = yield* namesOf(options)
    const deleteChunk = Math.max(1, Math.floor(options.deleteChunk ?? 500))
    const tx = MysqlTransaction.make(sql)
    const t = names.table

    const entries = (operation: string, text: string, params: ReadonlyArray<unknown>) =>
      tx
        .standalone((conn) => Effect.flatMap(tx.run(conn, text, params), decodeRows(operation, Rows)))
        .pipe(
          Effect.map((rows) => rows.map(SqlDeadLetterRow.toEntry)),
          StoreUnavailable.refailTag("SqlError", operation)
        )

    const write = (operation: string, text: string, params: ReadonlyArray<unknown>) =>
      tx
        .standalone((conn) => Effect.map(tx.write(conn, text, params), (r) => r.affectedRows))
        .pipe(StoreUnavailable.refailTag("SqlError", operation))

    const insert = (entry: DeadLetterEntry) =>
      tx
        .standalone((conn) =>
          tx.write(
            conn,
            `INSERT INTO ${t} (${SqlDeadLetterRow.columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
            [
              entry.id,
              entry.recordId,
              entry.partitionKey,
              entry.envelopeId,
              entry.bindingId,
              Buffer.from(entry.payload.buffer, entry.payload.byteOffset, entry.payload.byteLength),
              JSON.stringify(entry.headers),
              entry.orderingKey ?? null,
              entry.routeId ?? null,
              entry.address ?? null,
              entry.category,
              entry.reason,
              entry.errorCode,
              entry.lastError,
              entry.attempts,
              DateTime.toEpochMillis(entry.failedAt)
            ]
          )
        )
        .pipe(
          Effect.as(true),
          // a duplicate id (ER_DUP_ENTRY): not written
          Effect.catchIf(
            (error) => errno(error) === 1062,
            () => Effect.succeed(false)
          ),
          StoreUnavailable.refailTag("SqlError", "write")
        )

    // a redrive reads its entries inside its transaction and locks them: a concurrent redrive of the same
    // entries waits, then finds them gone
    const get = (operation: string, toGet: ReadonlyArray<string>) =>
      toGet.length === 0
        ? Effect.succeed([])
        : entries(
            operation,
            `SELECT ${SqlDeadLetterRow.columns} FROM ${t} WHERE id IN ${idList(toGet.length)}${operation === "redrive" ? " FOR UPDATE" : ""}`,
            toGet
          )

    const select = (selection: DeadLetterStore.Selection) =>
      entries(
        "list",
        `SELECT ${SqlDeadLetterRow.columns} FROM ${t} WHERE ${filterClause} ORDER BY failed_at, id LIMIT ?`,
        [...filterParams(selection), sqlLimit(selection)]
      )

    const remove = (operation: string, toRemove: ReadonlyArray<string>) =>
      toRemove.length === 0
        ? Effect.succeed(0)
        : write(operation, `DELETE FROM ${t} WHERE id IN ${idList(toRemove.length)}`, toRemove)

    /** Deletes matching entries oldest first, `deleteChunk` per statement, until none match or `limit` is reached. */
    const removeWhere = (operation: string, selection: DeadLetterStore.Selection) =>
      DeadLetterStore.removeInChunks(selection, deleteChunk, (n) =>
        write(operation, `DELETE FROM ${t} WHERE ${filterClause} ORDER BY failed_at, id LIMIT ?`, [
          ...filterParams(selection),
          n
        ])
      )

    /** One transaction (a savepoint inside a caller's); the outbox store's persist joins it. */
    const redriveScope = <A, E>(redrive: Effect.Effect<A, E>): Effect.Effect<A, E | StoreUnavailable> =>
      tx
        .transact(() => redrive)
        .pipe(
          Effect.mapError((error): E | StoreUnavailable =>
            error instanceof SqlError ? new StoreUnavailable({ operation: "redrive", cause: error }) : error
          )
        )

    return DeadLetterStore.make({ insert, get, select, remove, removeWhere, redriveScope }, outbox)
  })

/**
 * A MySQL dead-letter store layer with the given options; runs the migrations first. Redrive goes through
 * the `OutboxStore` (inside one transaction with the entry deletes).
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: MysqlDeadLetterStoreOptions
): Layer.Layer<
  DeadLetterStore.DeadLetterStore,
  StoreUnavailable | InvalidConfiguration,
  SqlClient.SqlClient | OutboxStore
> => Layer.effect(DeadLetterStore.DeadLetterStore, Effect.zipRight(migrate(options), make(options)))

/**
 * The MySQL dead-letter store layer with default names (the connection's database, no prefix).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<
  DeadLetterStore.DeadLetterStore,
  StoreUnavailable | InvalidConfiguration,
  SqlClient.SqlClient | OutboxStore
> = layerWith({})
