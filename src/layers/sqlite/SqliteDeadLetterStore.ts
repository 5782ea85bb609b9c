/**
 * The SQLite `DeadLetterStore` (SPEC §5) over `@effect/sql`.
 *
 * Entries live in `<prefix>outbox_dead_letter`: payload as a BLOB, headers as JSON text, `failed_at` as
 * epoch milliseconds, optional fields as NULL. Indexes on `(failed_at, id)`, `(route_id, failed_at, id)`
 * and `(category, failed_at, id)` serve the filters in age order. `deleteWhere` and `purge` delete in
 * chunks (one short statement each) so a large cleanup never holds the write lock for long.
 *
 * These are the storage primitives of `DeadLetterStore.make`. Every write (a redrive, an entry's insert, a
 * chunk of deletes) runs in a transaction that takes the write lock as it begins, waiting for another
 * process's lock with the fiber asleep (`SqliteDatabase.writeTransactionOn`), or in the caller's. A redrive
 * is one transaction:
 * with the SQLite outbox store (whose persist joins an enclosing transaction) either every entry is
 * redriven and deleted, or nothing is. The layer creates its table with its own migrations table
 * (`<prefix>outbox_dead_letter_migrations`).
 *
 * @since 0.1.0
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { DeadLetterEntry } from "../../domain/DeadLetterEntry.js"
import { InvalidConfiguration, StoreUnavailable } from "../../domain/OutboxError.js"
import * as DeadLetterStore from "../../services/DeadLetterStore.js"
import { OutboxStore } from "../../services/OutboxStore.js"
import { writeTransactionOn } from "./SqliteDatabase.js"
import { isBusy, retryBusy, retryBusyOutsideTransaction, tablePrefix } from "./SqliteSupport.js"
import * as SqlDeadLetterRow from "../sql/SqlDeadLetterRow.js"

/**
 * Options of the SQLite dead-letter store.
 *
 * @since 0.1.0
 */
export interface SqliteDeadLetterStoreOptions {
  /**
   * Prefix of the table and index names (`<prefix>outbox_dead_letter`, …): letters, digits and `_`,
   * not starting with a digit. Default `""`.
   */
  readonly tablePrefix?: string | undefined
  /** How many entries one statement of `deleteWhere`/`purge` deletes (default 500). */
  readonly deleteChunk?: number | undefined
}

/** The names derived from a table prefix. */
interface Names {
  readonly table: string
  readonly migrations: string
  readonly ageIndex: string
  readonly routeIndex: string
  readonly categoryIndex: string
}

const namesOf = (options: SqliteDeadLetterStoreOptions): Either.Either<Names, InvalidConfiguration> =>
  Either.map(tablePrefix("SqliteDeadLetterStore", options.tablePrefix), (prefix) => ({
    table: `${prefix}outbox_dead_letter`,
    migrations: `${prefix}outbox_dead_letter_migrations`,
    ageIndex: `${prefix}outbox_dead_letter_age`,
    routeIndex: `${prefix}outbox_dead_letter_route`,
    categoryIndex: `${prefix}outbox_dead_letter_category`
  }))

const Row = SqlDeadLetterRow.row(Schema.Int)

const decodeRows = Schema.decodeUnknown(Schema.Array(Row))

const IdRow = Schema.Struct({ id: Schema.String })
const decodeIds = Schema.decodeUnknown(Schema.Array(IdRow))

/** A failure a redrive transaction is retried on: a lock failure, also as the cause of `StoreUnavailable`. */
const isBusyFailure = (error: unknown): boolean =>
  isBusy(error) || (error instanceof StoreUnavailable && isBusy(error.cause))

const migrations = (names: Names) => ({
  "1_create_outbox_dead_letter": Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE IF NOT EXISTS ${sql(names.table)} (
      id TEXT PRIMARY KEY NOT NULL,
      record_id TEXT NOT NULL,
      partition_key TEXT NOT NULL,
      envelope_id TEXT NOT NULL,
      binding_id TEXT NOT NULL,
      payload BLOB NOT NULL,
      headers TEXT NOT NULL,
      ordering_key TEXT,
      route_id TEXT,
      address TEXT,
      category TEXT NOT NULL,
      reason TEXT NOT NULL,
      error_code TEXT NOT NULL,
      last_error TEXT NOT NULL,
      attempts INTEGER NOT NULL,
      failed_at INTEGER NOT NULL
    )`
    yield* sql`CREATE INDEX IF NOT EXISTS ${sql(names.ageIndex)} ON ${sql(names.table)} (failed_at, id)`
    yield* sql`CREATE INDEX IF NOT EXISTS ${sql(names.routeIndex)} ON ${sql(names.table)} (route_id, failed_at, id)`
    yield* sql`CREATE INDEX IF NOT EXISTS ${sql(names.categoryIndex)} ON ${sql(names.table)} (category, failed_at, id)`
  })
})

/**
 * Creates (or upgrades) the dead-letter table and its indexes. Run by the layers; exposed for
 * applications that run migrations as a separate step.
 *
 * @since 0.1.0
 */
export const migrate = (
  options: SqliteDeadLetterStoreOptions = {}
): Effect.Effect<void, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const names = yield* namesOf(options)
    yield* Migrator.make({})({ loader: Migrator.fromRecord(migrations(names)), table: names.migrations }).pipe(
      retryBusyOutsideTransaction,
      StoreUnavailable.refail("migrate")
    )
  })

const chunksOf = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

/** Bound parameters per `IN (…)` list (far below SQLite's limit). */
const idChunk = 500

/** The `LIMIT` of a selection (SQLite reads `-1` as none). */
const sqlLimit = (selection: DeadLetterStore.Selection): number =>
  Number.isFinite(selection.limit) ? selection.limit : -1

/**
 * Builds a SQLite dead-letter store over the `SqlClient` and `OutboxStore` in context. Does not run
 * migrations (the layers do; see {@link migrate}).
 *
 * @since 0.1.0
 */
export const make = (
  options: SqliteDeadLetterStoreOptions = {}
): Effect.Effect<DeadLetterStore.DeadLetterStoreService, InvalidConfiguration, SqlClient.SqlClient | OutboxStore> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const outbox = yield* OutboxStore
    const names = yield* namesOf(options)
    const deleteChunk = Math.max(1, Math.floor(options.deleteChunk ?? 500))
    if (!Number.isFinite(deleteChunk)) {
      return yield* new InvalidConfiguration({
        component: "SqliteDeadLetterStore",
        problems: ["deleteChunk must be a finite number"]
      })
    }
    const table = sql(names.table)

    const where = (selection: DeadLetterStore.Selection) =>
      sql.and([
        ...(selection.routeId === undefined ? [] : [sql`route_id = ${selection.routeId}`]),
        ...(selection.category === undefined ? [] : [sql`category = ${selection.category}`]),
        ...(selection.sinceMillis === undefined ? [] : [sql`failed_at >= ${selection.sinceMillis}`]),
        ...(selection.beforeMillis === undefined ? [] : [sql`failed_at < ${selection.beforeMillis}`])
      ])

    /**
     * The store's writes take the write lock as their transaction begins, without blocking the thread while
     * another process holds it (`SqliteDatabase.writeTransactionOn`): a redrive, and each statement that writes.
     */
    const writeTransaction = writeTransactionOn(sql)

    /**
     * A writing statement: alone, in a transaction of its own as above (retried on lock failures); inside a
     * caller's transaction, as part of it.
     */
    const write = <A>(statement: Effect.Effect<A, SqlError>): Effect.Effect<A, SqlError> =>
      Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) =>
        Option.isSome(outer) ? statement : retryBusy(writeTransaction(statement))
      )

    const insert = (entry: DeadLetterEntry) =>
      write(
        sql`INSERT INTO ${table} (${sql.literal(SqlDeadLetterRow.columns)}) VALUES (
          ${entry.id}, ${entry.recordId}, ${entry.partitionKey}, ${entry.envelopeId}, ${entry.bindingId},
          ${entry.payload}, ${JSON.stringify(entry.headers)}, ${entry.orderingKey ?? null}, ${entry.routeId ?? null},
          ${entry.address ?? null}, ${entry.category}, ${entry.reason}, ${entry.errorCode}, ${entry.lastError},
          ${entry.attempts}, ${DateTime.toEpochMillis(entry.failedAt)}
        ) ON CONFLICT (id) DO NOTHING RETURNING id`
      ).pipe(
        Effect.flatMap(decodeIds),
        Effect.map((inserted) => inserted.length > 0),
        StoreUnavailable.refail("write")
      )

    const get = (operation: string, ids: ReadonlyArray<string>) =>
      Effect.forEach(chunksOf(ids, idChunk), (chunk) =>
        retryBusyOutsideTransaction(
          sql`SELECT ${sql.literal(SqlDeadLetterRow.columns)} FROM ${table} WHERE id IN ${sql.in(chunk)}`
        ).pipe(Effect.flatMap(decodeRows))
      ).pipe(
        Effect.map((pages) => pages.flat().map(SqlDeadLetterRow.toEntry)),
        StoreUnavailable.refail(operation)
      )

    const select = (selection: DeadLetterStore.Selection) =>
      retryBusyOutsideTransaction(
        sql`SELECT ${sql.literal(SqlDeadLetterRow.columns)} FROM ${table} WHERE ${where(selection)}
          ORDER BY failed_at, id LIMIT ${sqlLimit(selection)}`
      ).pipe(
        Effect.flatMap(decodeRows),
        Effect.map((rows) => rows.map(SqlDeadLetterRow.toEntry)),
        StoreUnavailable.refail("list")
      )

    const remove = (operation: string, ids: ReadonlyArray<string>) =>
      Effect.forEach(chunksOf(ids, idChunk), (chunk) =>
        write(sql`DELETE FROM ${table} WHERE id IN ${sql.in(chunk)} RETURNING id`).pipe(
          Effect.map((rows) => rows.length)
        )
      ).pipe(
        Effect.map((counts) => counts.reduce((a, b) => a + b, 0)),
        StoreUnavailable.refail(operation)
      )

    /** Deletes matching entries oldest first, `deleteChunk` per statement, until none match or `limit` is reached. */
    const removeWhere = (operation: string, selection: DeadLetterStore.Selection) =>
      DeadLetterStore.removeInChunks(selection, deleteChunk, (n) =>
        write(
          sql`DELETE FROM ${table} WHERE id IN (
            SELECT id FROM ${table} WHERE ${where(selection)} ORDER BY failed_at, id LIMIT ${n}
          ) RETURNING id`
        ).pipe(Effect.map((deleted) => deleted.length))
      ).pipe(StoreUnavailable.refail(operation))

    /** One transaction; retried as a whole on lock failures unless inside a caller's transaction. */
    const redriveScope = <A, E>(redrive: Effect.Effect<A, E>): Effect.Effect<A, E | StoreUnavailable> =>
      Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) => {
        const once = writeTransaction(redrive)
        return Option.isSome(outer) ? once : retryBusy(once, isBusyFailure)
      }).pipe(
        Effect.mapError((error): E | StoreUnavailable =>
          error instanceof SqlError ? new StoreUnavailable({ operation: "redrive", cause: error }) : error
        )
      )

    return DeadLetterStore.make({ insert, get, select, remove, removeWhere, redriveScope }, outbox)
  })

/**
 * A SQLite dead-letter store layer with the given options; runs the migrations first. Redrive goes
 * through the `OutboxStore` (inside one transaction with the entry deletes).
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: SqliteDeadLetterStoreOptions
): Layer.Layer<
  DeadLetterStore.DeadLetterStore,
  StoreUnavailable | InvalidConfiguration,
  SqlClient.SqlClient | OutboxStore
> => Layer.effect(DeadLetterStore.DeadLetterStore, Effect.zipRight(migrate(options), make(options)))

/**
 * The SQLite dead-letter store layer with default table names; runs the migrations first.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<
  DeadLetterStore.DeadLetterStore,
  StoreUnavailable | InvalidConfiguration,
  SqlClient.SqlClient | OutboxStore
> = layerWith({})
