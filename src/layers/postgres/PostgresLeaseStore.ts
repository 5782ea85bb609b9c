/**
 * The PostgreSQL `LeaseStore` (SPEC §4) over `@effect/sql-pg`.
 *
 * One row per partition in `<schema>.<prefix>outbox_lease (partition_key, owner, version, expires_at,
 * released)`; `expires_at` is epoch milliseconds. Acquire is one conditional upsert that takes over only
 * a row that is released or expired and bumps its version: concurrent acquirers (in any process) queue on
 * the row and exactly one wins. Renew and release are conditional updates on `(owner, version, not
 * released)`. The row is kept after release, so the version high-water mark survives it. A write that
 * matches nothing reads the row on the same connection to report it. Reads outside a caller's transaction
 * are grouped per turn of the event loop (`groupLookupsPerTurn`): the drainers of every partition checking their
 * leases at once share one `= ANY($1)` statement, each read still made after it was asked for; inside a
 * caller's transaction a read runs on that transaction's connection. These are the storage primitives of
 * `LeaseStore.make` (validation, tokens, expiry by `Clock`, spans). The layer runs its migrations under an
 * advisory lock (`<prefix>outbox_lease_migrations`).
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { LeaseTokenLike } from "../../domain/LeaseToken.js"
import { InvalidConfiguration, StoreUnavailable } from "../../domain/OutboxError.js"
import { groupLookupsPerTurn } from "../../services/EventLoop.js"
import * as LeaseStore from "../../services/LeaseStore.js"
import { BigIntColumn, storeTableNames } from "./PostgresOutboxSchema.js"
import { decodeRows, migrateStore } from "./PostgresOutboxStore.js"
import * as PostgresTransaction from "./PostgresTransaction.js"

/**
 * Options of the PostgreSQL lease store.
 *
 * @since 0.1.0
 */
export interface PostgresLeaseStoreOptions {
  /** Schema of the table (created when missing). Default `public`. */
  readonly schema?: string | undefined
  /** Prefix of the table names (letters, digits, `_`). Default none. */
  readonly tablePrefix?: string | undefined
}

const LeaseRows = Schema.Array(
  Schema.Struct({ owner: Schema.String, version: BigIntColumn, expires_at: BigIntColumn, released: Schema.Boolean })
)
type LeaseRow = (typeof LeaseRows.Type)[number]

const KeyedLeaseRows = Schema.Array(Schema.Struct({ partition_key: Schema.String, ...LeaseRows.value.fields }))

/** A safe integer from a number or from a `bigint` column's decimal text; `undefined` otherwise. */
const intOf = (value: unknown): number | undefined => {
  if (typeof value === "number") return Number.isSafeInteger(value) ? value : undefined
  if (typeof value !== "string" || !/^-?[0-9]{1,15}$/.test(value)) return undefined
  return Number(value)
}

/**
 * A keyed lease row checked structurally, accepting a subset of what `KeyedLeaseRows` decodes (the hot path
 * of the drainer's lease checks); `undefined` for anything else, which then goes through the Schema.
 */
const keyedStoredOf = (row: unknown): readonly [string, LeaseStore.StoredLease] | undefined => {
  if (typeof row !== "object" || row === null) return undefined
  const partitionKey: unknown = Reflect.get(row, "partition_key")
  const owner: unknown = Reflect.get(row, "owner")
  const released: unknown = Reflect.get(row, "released")
  const version = intOf(Reflect.get(row, "version"))
  const expiresAtMillis = intOf(Reflect.get(row, "expires_at"))
  if (typeof partitionKey !== "string" || typeof owner !== "string" || typeof released !== "boolean") return undefined
  if (version === undefined || expiresAtMillis === undefined) return undefined
  return [partitionKey, { owner, version, expiresAtMillis, released }]
}

const namesOf = (options: PostgresLeaseStoreOptions) => storeTableNames("PostgresLeaseStore", options, "outbox_lease")

const storedOf = (row: LeaseRow): LeaseStore.StoredLease => ({
  owner: row.owner,
  version: row.version,
  expiresAtMillis: row.expires_at,
  released: row.released
})

/**
 * Creates the lease table when missing. Run by the layers; exposed for applications that run migrations
 * as a separate step.
 *
 * @since 0.1.0
 */
export const migrate = (
  options: PostgresLeaseStoreOptions = {}
): Effect.Effect<void, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const names = yield* namesOf(options)
    yield* migrateStore(names, [
      [
        "0001_create_outbox_lease",
        [
          `CREATE TABLE IF NOT EXISTS ${names.table} (
  partition_key text PRIMARY KEY,
  owner text NOT NULL,
  version bigint NOT NULL,
  expires_at bigint NOT NULL,
  released boolean NOT NULL DEFAULT false
)`
        ]
      ]
    ])
  })

/**
 * Builds a PostgreSQL lease store over the `SqlClient` in context. Does not run migrations (the layers
 * do; see {@link migrate}).
 *
 * @since 0.1.0
 */
export const make = (
  options: PostgresLeaseStoreOptions = {}
): Effect.Effect<LeaseStore.LeaseStoreService, InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const names = yield* namesOf(options)
    const tx = PostgresTransaction.make(sql)
    const columns = "owner, version, expires_at, released"
    const select = `SELECT ${columns} FROM ${names.table} WHERE partition_key = $1`
    const selectMany = `SELECT partition_key, ${columns} FROM ${names.table} WHERE partition_key = ANY($1::text[])`

    /** The stored lease on a connection, `undefined` when the partition has none. */
    const readOn = (conn: Connection, operation: string, partitionKey: string) =>
      Effect.flatMap(tx.run(conn, select, [partitionKey]), decodeRows(operation, LeaseRows)).pipe(
        Effect.map((rows) => (rows[0] === undefined ? undefined : storedOf(rows[0])))
      )

    /** Runs a conditional write (`RETURNING` the row it wrote); when it matched nothing, reads the row. */
    const conditional = (
      operation: string,
      partitionKey: string,
      text: string,
      params: ReadonlyArray<unknown>
    ): Effect.Effect<LeaseStore.WriteOutcome, StoreUnavailable> =>
      tx
        .standalone((conn) =>
          Effect.gen(function* () {
            const written = (yield* Effect.flatMap(tx.run(conn, text, params), decodeRows(operation, LeaseRows)))[0]
            if (written !== undefined) return { _tag: "Written" as const, lease: storedOf(written) }
            return { _tag: "Refused" as const, stored: yield* readOn(conn, operation, partitionKey) }
          })
        )
        .pipe(StoreUnavailable.refailTag("SqlError", operation, partitionKey))

    const tryAcquire = (partitionKey: string, owner: string, nowMillis: number, expiresAtMillis: number) =>
      conditional(
        "acquire",
        partitionKey,
        `INSERT INTO ${names.table} AS l (partition_key, owner, version, expires_at, released)
VALUES ($1, $2, 1, $3, false)
ON CONFLICT (partition_key) DO UPDATE SET owner = excluded.owner, version = l.version + 1,
  expires_at = excluded.expires_at, released = false
WHERE l.released OR l.expires_at <= $4
RETURNING ${columns}`,
        [partitionKey, owner, expiresAtMillis, nowMillis]
      )

    const extend = (partitionKey: string, token: LeaseTokenLike, expiresAtMillis: number) =>
      conditional(
        "renew",
        partitionKey,
        `UPDATE ${names.table} SET expires_at = $4
WHERE partition_key = $1 AND owner = $2 AND version = $3 AND NOT released
RETURNING ${columns}`,
        [partitionKey, token.owner, token.version, expiresAtMillis]
      )

    const end = (partitionKey: string, token: LeaseTokenLike) =>
      conditional(
        "release",
        partitionKey,
        `UPDATE ${names.table} SET released = true
WHERE partition_key = $1 AND owner = $2 AND version = $3 AND NOT released
RETURNING ${columns}`,
        [partitionKey, token.owner, token.version]
      )

    /** The stored leases of the given partitions, by partition key: one statement. */
    const readMany = (
      conn: Connection,
      keys: ReadonlyArray<string>
    ): Effect.Effect<Map<string, LeaseStore.StoredLease>, SqlError | StoreUnavailable> =>
      Effect.flatMap(tx.run(conn, selectMany, [keys]), (rows) => {
        const byKey = new Map<string, LeaseStore.StoredLease>()
        for (const row of rows) {
          const fast = keyedStoredOf(row)
          if (fast === undefined) {
            return Effect.map(decodeRows("current", KeyedLeaseRows)(rows), (decoded) => {
              for (const found of decoded) byKey.set(found.partition_key, storedOf(found))
              return byKey
            })
          }
          byKey.set(fast[0], fast[1])
        }
        return Effect.succeed(byKey)
      })

    /** Joins the next group of reads (those asked in the same turn of the event loop) and waits for its lease. */
    const readGrouped = groupLookupsPerTurn((keys: ReadonlyArray<string>) =>
      tx.standalone((conn) => readMany(conn, keys))
    )

    const read = (partitionKey: string): Effect.Effect<LeaseStore.StoredLease | undefined, StoreUnavailable> =>
      Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) =>
        (Option.isNone(outer)
          ? readGrouped(partitionKey)
          : Effect.map(readMany(outer.value[0], [partitionKey]), (byKey) => byKey.get(partitionKey))
        ).pipe(StoreUnavailable.refailTag("SqlError", "current", partitionKey))
      )

    return LeaseStore.make({ tryAcquire, extend, end, read })
  })

/**
 * A PostgreSQL lease store layer with the given options (`schema`, `tablePrefix`); runs the migrations
 * first.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: PostgresLeaseStoreOptions
): Layer.Layer<LeaseStore.LeaseStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Layer.effect(LeaseStore.LeaseStore, Effect.zipRight(migrate(options), make(options)))

/**
 * The PostgreSQL lease store layer with default names (schema `public`, no prefix).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<LeaseStore.LeaseStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =
  layerWith({})
