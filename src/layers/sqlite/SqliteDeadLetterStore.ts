/**
 * The SQLite `DeadLetterStore` (SPEC §5) over `@effect/sql`.
 *
 * Entries live in `<prefix>outbox_dead_letter`: payload as a BLOB, headers as JSON text, `failed_at` as
 * epoch milliseconds, optional fields as NULL. Indexes on `(failed_at, id)`, `(route_id, failed_at, id)`
 * and `(category, failed_at, id)` serve the filters in age order. `deleteWhere` and `purge` delete in
 * chunks (one short statement each) so a large cleanup never holds the write lock for long.
 *
 * Redrive persists through the `OutboxStore` service and deletes the entries in one
 * `sql.withTransaction`: with the SQLite outbox store (whose persist joins an enclosing transaction)
 * either every entry is redriven and deleted, or nothing is. The layer creates its table with its own
 * migrations table (`<prefix>outbox_dead_letter_migrations`).
 *
 * @since 0.1.0
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { DeadLetterCategory, DeadLetterEntry, type DeadLetterFilter } from "../../domain/DeadLetterEntry.js"
import { DuplicateRecord, InvalidConfiguration, NotFound, StoreUnavailable } from "../../domain/OutboxError.js"
import { Headers } from "../../domain/OutboxRecord.js"
import {
  DeadLetterStore,
  type DeadLetterStoreService,
  redriveOne,
  validateEntry
} from "../../services/DeadLetterStore.js"
import { OutboxStore } from "../../services/OutboxStore.js"
import { isBusy } from "./SqliteOutboxStore.js"

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

const prefixPattern = /^[A-Za-z_][A-Za-z0-9_]*$/

const namesOf = (options: SqliteDeadLetterStoreOptions): Either.Either<Names, InvalidConfiguration> => {
  const prefix = options.tablePrefix ?? ""
  if (prefix.length > 0 && !prefixPattern.test(prefix)) {
    return Either.left(
      new InvalidConfiguration({
        component: "SqliteDeadLetterStore",
        problems: [`tablePrefix ${JSON.stringify(prefix)} must match ${prefixPattern.source}`]
      })
    )
  }
  return Either.right({
    table: `${prefix}outbox_dead_letter`,
    migrations: `${prefix}outbox_dead_letter_migrations`,
    ageIndex: `${prefix}outbox_dead_letter_age`,
    routeIndex: `${prefix}outbox_dead_letter_route`,
    categoryIndex: `${prefix}outbox_dead_letter_category`
  })
}

const Row = Schema.Struct({
  id: Schema.String,
  record_id: Schema.String,
  partition_key: Schema.String,
  envelope_id: Schema.String,
  binding_id: Schema.String,
  payload: Schema.Uint8ArrayFromSelf,
  headers: Schema.parseJson(Headers),
  ordering_key: Schema.NullOr(Schema.String),
  route_id: Schema.NullOr(Schema.String),
  address: Schema.NullOr(Schema.String),
  category: DeadLetterCategory,
  reason: Schema.String,
  error_code: Schema.String,
  last_error: Schema.String,
  attempts: Schema.NonNegativeInt,
  failed_at: Schema.Int
})
type Row = typeof Row.Type

const decodeRows = Schema.decodeUnknown(Schema.Array(Row))

const IdRow = Schema.Struct({ id: Schema.String })
const decodeIds = Schema.decodeUnknown(Schema.Array(IdRow))

/** A row as an entry; the payload is copied out of the driver's buffer into a plain `Uint8Array`. */
const fromRow = (row: Row): DeadLetterEntry =>
  new DeadLetterEntry(
    {
      id: row.id,
      recordId: row.record_id,
      partitionKey: row.partition_key,
      envelopeId: row.envelope_id,
      bindingId: row.binding_id,
      payload: new Uint8Array(row.payload),
      headers: row.headers,
      ...(row.ordering_key === null ? {} : { orderingKey: row.ordering_key }),
      ...(row.route_id === null ? {} : { routeId: row.route_id }),
      ...(row.address === null ? {} : { address: row.address }),
      category: row.category,
      reason: row.reason,
      errorCode: row.error_code,
      lastError: row.last_error,
      attempts: row.attempts,
      failedAt: DateTime.unsafeMake(row.failed_at)
    },
    { disableValidation: true }
  )

const columns = `id, record_id, partition_key, envelope_id, binding_id, payload, headers, ordering_key, route_id,
  address, category, reason, error_code, last_error, attempts, failed_at`

/** Short, bounded retry of busy failures (they never happen on `:memory:`). */
const busyRetry = Schedule.exponential(Duration.millis(5), 2).pipe(
  Schedule.jittered,
  Schedule.either(Schedule.spaced(Duration.millis(200))),
  Schedule.intersect(Schedule.recurs(12))
)

/** Handlers turning driver and row-decoding failures into `StoreUnavailable` (for `Effect.catchTags`). */
const storeErrors = (operation: string) => {
  const fail = (cause: SqlError | ParseResult.ParseError) => Effect.fail(new StoreUnavailable({ operation, cause }))
  return { SqlError: fail, ParseError: fail }
}

/** The filter's limit: absent or `+Infinity` → none (`-1` for SQLite); else floored, at least 0. */
const limitOf = (filter: DeadLetterFilter): number => {
  const limit = filter.limit
  if (limit === undefined || limit === Number.POSITIVE_INFINITY) return -1
  return Number.isFinite(limit) && limit > 0 ? Math.floor(limit) : 0
}

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
      Effect.retry({ schedule: busyRetry, while: isBusy }),
      Effect.mapError((cause) => new StoreUnavailable({ operation: "migrate", cause }))
    )
  })

const chunksOf = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

/** Bound parameters per `IN (…)` list (far below SQLite's limit). */
const idChunk = 500

/**
 * Builds a SQLite dead-letter store over the `SqlClient` and `OutboxStore` in context. Does not run
 * migrations (the layers do; see {@link migrate}).
 *
 * @since 0.1.0
 */
export const make = (
  options: SqliteDeadLetterStoreOptions = {}
): Effect.Effect<DeadLetterStoreService, InvalidConfiguration, SqlClient.SqlClient | OutboxStore> =>
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

    /** Retries busy failures when not inside a caller's transaction (where only the caller may retry). */
    const retryBusy = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
      Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) =>
        Option.isSome(outer) ? effect : Effect.retry(effect, { schedule: busyRetry, while: isBusy })
      )

    const where = (filter: DeadLetterFilter) =>
      sql.and([
        ...(filter.routeId === undefined ? [] : [sql`route_id = ${filter.routeId}`]),
        ...(filter.category === undefined ? [] : [sql`category = ${filter.category}`]),
        ...(filter.since === undefined ? [] : [sql`failed_at >= ${DateTime.toEpochMillis(filter.since)}`]),
        ...(filter.before === undefined ? [] : [sql`failed_at < ${DateTime.toEpochMillis(filter.before)}`])
      ])

    const selectByIds = (ids: ReadonlyArray<string>) =>
      Effect.forEach(chunksOf(ids, idChunk), (chunk) =>
        Effect.flatMap(sql`SELECT ${sql.literal(columns)} FROM ${table} WHERE id IN ${sql.in(chunk)}`, decodeRows)
      ).pipe(Effect.map((pages) => pages.flat()))

    const write = (entry: DeadLetterEntry) =>
      Effect.gen(function* () {
        const valid = yield* validateEntry(entry)
        const inserted = yield* retryBusy(
          sql`INSERT INTO ${table} (${sql.literal(columns)}) VALUES (
            ${valid.id}, ${valid.recordId}, ${valid.partitionKey}, ${valid.envelopeId}, ${valid.bindingId},
            ${valid.payload}, ${JSON.stringify(valid.headers)}, ${valid.orderingKey ?? null}, ${valid.routeId ?? null},
            ${valid.address ?? null}, ${valid.category}, ${valid.reason}, ${valid.errorCode}, ${valid.lastError},
            ${valid.attempts}, ${DateTime.toEpochMillis(valid.failedAt)}
          ) ON CONFLICT (id) DO NOTHING RETURNING id`
        ).pipe(Effect.flatMap(decodeIds), Effect.catchTags(storeErrors("write")))
        if (inserted.length === 0) {
          return yield* new DuplicateRecord({ ids: [valid.id], partitionKey: valid.partitionKey })
        }
      }).pipe(Effect.withSpan("DeadLetterStore.write", { attributes: { "outbox.partition": entry.partitionKey } }))

    const get = (id: string) =>
      retryBusy(sql`SELECT ${sql.literal(columns)} FROM ${table} WHERE id = ${id}`).pipe(
        Effect.flatMap(decodeRows),
        Effect.catchTags(storeErrors("get")),
        Effect.flatMap((rows) => {
          const row = rows[0]
          return row === undefined
            ? Effect.fail(new NotFound({ entity: "DeadLetterEntry", ids: [id] }))
            : Effect.succeed(fromRow(row))
        }),
        Effect.withSpan("DeadLetterStore.get")
      )

    const list = (filter: DeadLetterFilter) => {
      const limit = limitOf(filter)
      if (limit === 0) return Effect.succeed([])
      return retryBusy(
        sql`SELECT ${sql.literal(columns)} FROM ${table} WHERE ${where(filter)} ORDER BY failed_at, id LIMIT ${limit}`
      ).pipe(
        Effect.flatMap(decodeRows),
        Effect.map((rows) => rows.map(fromRow)),
        Effect.catchTags(storeErrors("list")),
        Effect.withSpan("DeadLetterStore.list")
      )
    }

    const deleteIds = (ids: ReadonlyArray<string>) =>
      Effect.forEach(chunksOf(Array.from(new Set(ids)), idChunk), (chunk) =>
        retryBusy(sql`DELETE FROM ${table} WHERE id IN ${sql.in(chunk)} RETURNING id`).pipe(
          Effect.map((rows) => rows.length)
        )
      ).pipe(
        Effect.map((counts) => counts.reduce((a, b) => a + b, 0)),
        Effect.mapError((cause) => new StoreUnavailable({ operation: "delete", cause })),
        Effect.withSpan("DeadLetterStore.delete", { attributes: { "outbox.ids": ids.length } })
      )

    /** Deletes matching entries oldest first, `deleteChunk` per statement, until none match or `limit` is reached. */
    const deleteMatching = (operation: string, filter: DeadLetterFilter) =>
      Effect.gen(function* () {
        const limit = limitOf(filter)
        let remaining = limit < 0 ? Number.POSITIVE_INFINITY : limit
        let total = 0
        while (remaining > 0) {
          const n = Math.min(deleteChunk, remaining)
          const deleted = yield* retryBusy(
            sql`DELETE FROM ${table} WHERE id IN (
              SELECT id FROM ${table} WHERE ${where(filter)} ORDER BY failed_at, id LIMIT ${n}
            ) RETURNING id`
          )
          total += deleted.length
          remaining -= deleted.length
          if (deleted.length < n) break
        }
        return total
      }).pipe(Effect.mapError((cause) => new StoreUnavailable({ operation, cause })))

    const deleteWhere = (filter: DeadLetterFilter) =>
      deleteMatching("deleteWhere", filter).pipe(Effect.withSpan("DeadLetterStore.deleteWhere"))

    const purge = (before: DateTime.Utc) =>
      deleteMatching("purge", { before }).pipe(Effect.withSpan("DeadLetterStore.purge"))

    const redrive = (ids: ReadonlyArray<string>) => {
      const unique = Array.from(new Set(ids))
      const run = Effect.gen(function* () {
        const found = new Map((yield* selectByIds(unique)).map((row) => [row.id, fromRow(row)]))
        const missing = unique.filter((id) => !found.has(id))
        if (missing.length > 0) return yield* new NotFound({ entity: "DeadLetterEntry", ids: missing })
        const recordIds: Array<string> = []
        for (const id of unique) {
          const entry = found.get(id)
          if (entry === undefined) continue
          const recordId = yield* redriveOne(outbox, entry)
          yield* sql`DELETE FROM ${table} WHERE id = ${id}`
          recordIds.push(recordId)
        }
        return recordIds
      })
      if (unique.length === 0) return Effect.succeed([])
      return retryBusy(sql.withTransaction(run)).pipe(
        Effect.catchTags(storeErrors("redrive")),
        Effect.withSpan("DeadLetterStore.redrive", { attributes: { "outbox.ids": ids.length } })
      )
    }

    return DeadLetterStore.of({ write, get, list, delete: deleteIds, deleteWhere, purge, redrive })
  })

/**
 * A SQLite dead-letter store layer with the given options; runs the migrations first. Redrive goes
 * through the `OutboxStore` (inside one transaction with the entry deletes).
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: SqliteDeadLetterStoreOptions
): Layer.Layer<DeadLetterStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient | OutboxStore> =>
  Layer.effect(DeadLetterStore, Effect.zipRight(migrate(options), make(options)))

/**
 * The SQLite dead-letter store layer with default table names; runs the migrations first.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<
  DeadLetterStore,
  StoreUnavailable | InvalidConfiguration,
  SqlClient.SqlClient | OutboxStore
> = layerWith({})
