/**
 * The PostgreSQL `DeadLetterStore` (SPEC §5) over `@effect/sql-pg`.
 *
 * Entries live in `<schema>.<prefix>outbox_dead_letter`: payload as `bytea`, headers as JSON text,
 * `failed_at` as epoch milliseconds, optional fields as NULL. Indexes on `(failed_at, id)`,
 * `(route_id, failed_at, id)` and `(category, failed_at, id)` serve the filters in age order.
 * `deleteWhere` and `purge` delete in chunks (one short statement each).
 *
 * These are the storage primitives of `DeadLetterStore.make`. A redrive runs in one transaction, its entries
 * read `FOR UPDATE`: with the PostgreSQL outbox store on the same client (whose persist joins an enclosing
 * transaction) either every entry is redriven and deleted, or nothing is. The layer runs its migrations under an advisory lock
 * (`<prefix>outbox_dead_letter_migrations`).
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
import { BigIntColumn, storeTableNames } from "./PostgresOutboxSchema.js"
import { decodeRows, migrateStore } from "./PostgresOutboxStore.js"
import * as PostgresTransaction from "./PostgresTransaction.js"
import * as SqlDeadLetterRow from "../sql/SqlDeadLetterRow.js"

/**
 * Options of the PostgreSQL dead-letter store.
 *
 * @since 0.1.0
 */
export interface PostgresDeadLetterStoreOptions {
  /** Schema of the table (created when missing). Default `public`. */
  readonly schema?: string | undefined
  /** Prefix of the table and index names (letters, digits, `_`). Default none. */
  readonly tablePrefix?: string | undefined
  /** How many entries one statement of `deleteWhere`/`purge` deletes (default 500). */
  readonly deleteChunk?: number | undefined
}

const namesOf = (options: PostgresDeadLetterStoreOptions) =>
  storeTableNames(
    "PostgresDeadLetterStore",
    options,
    "outbox_dead_letter",
    Number.isFinite(options.deleteChunk ?? 500) ? [] : ["deleteChunk must be a finite number"]
  )

const Rows = Schema.Array(SqlDeadLetterRow.row(BigIntColumn))

const IdRows = Schema.Array(Schema.Struct({ id: Schema.String }))

/** The `LIMIT` of a selection (NULL is none). */
const sqlLimit = (selection: DeadLetterStore.Selection): number | null =>
  Number.isFinite(selection.limit) ? selection.limit : null

/** The WHERE clause of a selection: `$1` route, `$2` category, `$3` since, `$4` before (NULL = unset). */
const filterClause =
  "($1::text IS NULL OR route_id = $1) AND ($2::text IS NULL OR category = $2) AND ($3::bigint IS NULL OR failed_at >= $3) AND ($4::bigint IS NULL OR failed_at < $4)"

const filterParams = (selection: DeadLetterStore.Selection): ReadonlyArray<unknown> => [
  selection.routeId ?? null,
  selection.category ?? null,
  selection.sinceMillis ?? null,
  selection.beforeMillis ?? null
]

/**
 * Creates the dead-letter table and its indexes when missing. Run by the layers; exposed for
 * applications that run migrations as a separate step.
 *
 * @since 0.1.0
 */
export const migrate = (
  options: PostgresDeadLetterStoreOptions = {}
): Effect.Effect<void, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const names = yield* namesOf(options)
    const p = names.prefix
    yield* migrateStore(names, [
      [
        "0001_create_outbox_dead_letter",
        [
          `CREATE TABLE IF NOT EXISTS ${names.table} (
  id text PRIMARY KEY,
  record_id text NOT NULL,
  partition_key text NOT NULL,
  envelope_id text NOT NULL,
  binding_id text NOT NULL,
  payload bytea NOT NULL,
  headers text NOT NULL,
  ordering_key text,
  route_id text,
  address text,
  category text NOT NULL,
  reason text NOT NULL,
  error_code text NOT NULL,
  last_error text NOT NULL,
  attempts integer NOT NULL,
  failed_at bigint NOT NULL
)`,
          `CREATE INDEX IF NOT EXISTS "${p}outbox_dead_letter_age" ON ${names.table} (failed_at, id)`,
          `CREATE INDEX IF NOT EXISTS "${p}outbox_dead_letter_route" ON ${names.table} (route_id, failed_at, id)`,
          `CREATE INDEX IF NOT EXISTS "${p}outbox_dead_letter_category" ON ${names.table} (category, failed_at, id)`
        ]
      ]
    ])
  })

/**
 * Builds a PostgreSQL dead-letter store over the `SqlClient` and `OutboxStore` in context. Does not run
 * migrations (the layers do; see {@link migrate}).
 *
 * @since 0.1.0
 */
export const make = (
  options: PostgresDeadLetterStoreOptions = {}
): Effect.Effect<DeadLetterStore.DeadLetterStoreService, InvalidConfiguration, SqlClient.SqlClient | OutboxStore> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const outbox = yield* OutboxStore
    const names = yield* namesOf(options)
    const deleteChunk = Math.max(1, Math.floor(options.deleteChunk ?? 500))
    const tx = PostgresTransaction.make(sql)
    const t = names.table

    const entries = (operation: string, text: string, params: ReadonlyArray<unknown>) =>
      tx
        .standalone((conn) => Effect.flatMap(tx.run(conn, text, params), decodeRows(operation, Rows)))
        .pipe(
          Effect.map((rows) => rows.map(SqlDeadLetterRow.toEntry)),
          StoreUnavailable.refailTag("SqlError", operation)
        )

    const ids = (operation: string, text: string, params: ReadonlyArray<unknown>) =>
      tx
        .standalone((conn) => Effect.flatMap(tx.run(conn, text, params), decodeRows(operation, IdRows)))
        .pipe(StoreUnavailable.refailTag("SqlError", operation))

    const insert = (entry: DeadLetterEntry) =>
      ids(
        "write",
        `INSERT INTO ${t} (${SqlDeadLetterRow.columns}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
ON CONFLICT (id) DO NOTHING RETURNING id`,
        [
          entry.id,
          entry.recordId,
          entry.partitionKey,
          entry.envelopeId,
          entry.bindingId,
          entry.payload,
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
      ).pipe(Effect.map((inserted) => inserted.length > 0))

    // a redrive reads its entries inside its transaction and locks them: a concurrent redrive of the same
    // entries waits, then finds them gone
    const get = (operation: string, toGet: ReadonlyArray<string>) =>
      entries(
        operation,
        `SELECT ${SqlDeadLetterRow.columns} FROM ${t} WHERE id = ANY($1::text[])${operation === "redrive" ? " FOR UPDATE" : ""}`,
        [toGet]
      )

    const select = (selection: DeadLetterStore.Selection) =>
      entries(
        "list",
        `SELECT ${SqlDeadLetterRow.columns} FROM ${t} WHERE ${filterClause} ORDER BY failed_at, id LIMIT $5`,
        [...filterParams(selection), sqlLimit(selection)]
      )

    const remove = (operation: string, toRemove: ReadonlyArray<string>) =>
      Effect.map(
        ids(operation, `DELETE FROM ${t} WHERE id = ANY($1::text[]) RETURNING id`, [toRemove]),
        (rows) => rows.length
      )

    /** Deletes matching entries oldest first, `deleteChunk` per statement, until none match or `limit` is reached. */
    const removeWhere = (operation: string, selection: DeadLetterStore.Selection) =>
      DeadLetterStore.removeInChunks(selection, deleteChunk, (n) =>
        Effect.map(
          ids(
            operation,
            `DELETE FROM ${t} WHERE id IN (
  SELECT id FROM ${t} WHERE ${filterClause} ORDER BY failed_at, id LIMIT $5)
RETURNING id`,
            [...filterParams(selection), n]
          ),
          (deleted) => deleted.length
        )
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
 * A PostgreSQL dead-letter store layer with the given options; runs the migrations first. Redrive goes
 * through the `OutboxStore` (inside one transaction with the entry deletes).
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: PostgresDeadLetterStoreOptions
): Layer.Layer<
  DeadLetterStore.DeadLetterStore,
  StoreUnavailable | InvalidConfiguration,
  SqlClient.SqlClient | OutboxStore
> => Layer.effect(DeadLetterStore.DeadLetterStore, Effect.zipRight(migrate(options), make(options)))

/**
 * The PostgreSQL dead-letter store layer with default names (schema `public`, no prefix).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<
  DeadLetterStore.DeadLetterStore,
  StoreUnavailable | InvalidConfiguration,
  SqlClient.SqlClient | OutboxStore
> = layerWith({})
