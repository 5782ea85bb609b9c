/**
 * The PostgreSQL `LeaseStore` (SPEC §4) over `@effect/sql-pg`.
 *
 * One row per partition in `<schema>.<prefix>outbox_lease (partition_key, owner, version, expires_at,
 * released)`; `expires_at` is epoch milliseconds. Acquire is one conditional upsert that takes over only
 * a row that is released or expired and bumps its version: concurrent acquirers (in any process) queue on
 * the row and exactly one wins. Renew and release are conditional updates on `(owner, version, not
 * released)`. The row is kept after release, so the version high-water mark survives it. The layer runs
 * its migrations under an advisory lock (`<prefix>outbox_lease_migrations`). Time comes from `Clock`.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as LeaseTokenModule from "../../domain/LeaseToken.js"
import {
  InvalidConfiguration,
  LeaseHeld,
  LeaseNotFound,
  type StaleFencingToken,
  type StoreUnavailable
} from "../../domain/OutboxError.js"
import {
  checkAcquire,
  checkToken,
  type Lease,
  LeaseStore,
  type LeaseStoreService,
  notCurrentHolder,
  ttlMillis
} from "../../services/LeaseStore.js"
import { BigIntColumn } from "./PostgresOutboxSchema.js"
import { decodeRows, migrate as runMigrations, unavailable } from "./PostgresOutboxStore.js"
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

const identifier = /^[A-Za-z_][A-Za-z0-9_]*$/

interface Names {
  readonly schema: string
  readonly table: string
  readonly migrations: string
  readonly lock: string
}

const namesOf = (options: PostgresLeaseStoreOptions): Effect.Effect<Names, InvalidConfiguration> => {
  const schema = options.schema ?? "public"
  const prefix = options.tablePrefix ?? ""
  const problems: Array<string> = []
  if (!identifier.test(schema)) problems.push(`schema ${JSON.stringify(schema)} must match ${identifier.source}`)
  if (prefix.length > 0 && !identifier.test(prefix)) {
    problems.push(`tablePrefix ${JSON.stringify(prefix)} must match ${identifier.source}`)
  }
  if (problems.length > 0) return Effect.fail(new InvalidConfiguration({ component: "PostgresLeaseStore", problems }))
  return Effect.succeed({
    schema,
    table: `"${schema}"."${prefix}outbox_lease"`,
    migrations: `"${schema}"."${prefix}outbox_lease_migrations"`,
    lock: `effect-outbox:${schema}.${prefix}outbox_lease`
  })
}

const toLease = (partitionKey: string, row: LeaseRow): Lease => ({
  partitionKey,
  token: new LeaseTokenModule.LeaseToken({ owner: row.owner, version: row.version }, { disableValidation: true }),
  expiresAt: DateTime.unsafeMake(row.expires_at)
})

/** How often an acquire re-reads when the row changed between its upsert and its read. */
const acquireAttempts = 3

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
    const sql = yield* SqlClient.SqlClient
    yield* runMigrations(PostgresTransaction.make(sql), {
      lockKey: names.lock,
      schema: names.schema,
      table: names.migrations,
      migrations: [
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
      ]
    }).pipe(unavailable("migrate"))
  })

/**
 * Builds a PostgreSQL lease store over the `SqlClient` in context. Does not run migrations (the layers
 * do; see {@link migrate}).
 *
 * @since 0.1.0
 */
export const make = (
  options: PostgresLeaseStoreOptions = {}
): Effect.Effect<LeaseStoreService, InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const names = yield* namesOf(options)
    const tx = PostgresTransaction.make(sql)
    const columns = "owner, version, expires_at, released"

    const query = (operation: string, text: string, params: ReadonlyArray<unknown>) =>
      tx.standalone((conn) => Effect.flatMap(tx.run(conn, text, params), decodeRows(operation, LeaseRows)))

    const read = (operation: string, partitionKey: string) =>
      Effect.map(
        query(operation, `SELECT ${columns} FROM ${names.table} WHERE partition_key = $1`, [partitionKey]),
        (rows) => rows[0]
      )

    /** Explains why a conditional renew/release matched nothing: no live lease, or another holder. */
    const rejected = (operation: string, partitionKey: string, token: LeaseTokenModule.LeaseTokenLike) =>
      Effect.flatMap(read(operation, partitionKey), (row): Effect.Effect<never, LeaseNotFound | StaleFencingToken> =>
        row === undefined || row.released
          ? Effect.fail(new LeaseNotFound({ partitionKey }))
          : Effect.fail(notCurrentHolder(operation, partitionKey, token, row))
      )

    const acquire = (partitionKey: string, owner: string, ttl: Duration.DurationInput) =>
      Effect.gen(function* () {
        yield* checkAcquire(partitionKey, owner)
        const millis = yield* ttlMillis(ttl)
        for (let attempt = 1; ; attempt++) {
          const now = yield* Clock.currentTimeMillis
          const won = yield* query(
            "acquire",
            `INSERT INTO ${names.table} AS l (partition_key, owner, version, expires_at, released)
VALUES ($1, $2, 1, $3, false)
ON CONFLICT (partition_key) DO UPDATE SET owner = excluded.owner, version = l.version + 1,
  expires_at = excluded.expires_at, released = false
WHERE l.released OR l.expires_at <= $4
RETURNING ${columns}`,
            [partitionKey, owner, now + millis, now]
          )
          const lease = won[0]
          if (lease !== undefined) return toLease(partitionKey, lease)
          const row = yield* read("acquire", partitionKey)
          // the holder released or expired between the two statements: try again
          if (row !== undefined && !row.released && row.expires_at > now) {
            return yield* new LeaseHeld({
              partitionKey,
              heldBy: row.owner,
              version: row.version,
              expiresAt: DateTime.unsafeMake(row.expires_at)
            })
          }
          if (attempt >= acquireAttempts) {
            return yield* new LeaseHeld({
              partitionKey,
              heldBy: row?.owner ?? "",
              version: row?.version ?? 0,
              expiresAt: DateTime.unsafeMake(row?.expires_at ?? now)
            })
          }
        }
      }).pipe(
        unavailable("acquire", partitionKey),
        Effect.withSpan("LeaseStore.acquire", { attributes: { "outbox.partition": partitionKey } })
      )

    const renew = (partitionKey: string, token: LeaseTokenModule.LeaseTokenLike, ttl: Duration.DurationInput) =>
      Effect.gen(function* () {
        yield* checkToken("renew", partitionKey, token)
        const millis = yield* ttlMillis(ttl)
        const now = yield* Clock.currentTimeMillis
        const updated = yield* query(
          "renew",
          `UPDATE ${names.table} SET expires_at = $4
WHERE partition_key = $1 AND owner = $2 AND version = $3 AND NOT released
RETURNING ${columns}`,
          [partitionKey, token.owner, token.version, now + millis]
        )
        const row = updated[0]
        if (row !== undefined) return toLease(partitionKey, row)
        return yield* rejected("renew", partitionKey, token)
      }).pipe(
        unavailable("renew", partitionKey),
        Effect.withSpan("LeaseStore.renew", { attributes: { "outbox.partition": partitionKey } })
      )

    const release = (partitionKey: string, token: LeaseTokenModule.LeaseTokenLike) =>
      Effect.gen(function* () {
        yield* checkToken("release", partitionKey, token)
        const updated = yield* query(
          "release",
          `UPDATE ${names.table} SET released = true
WHERE partition_key = $1 AND owner = $2 AND version = $3 AND NOT released
RETURNING ${columns}`,
          [partitionKey, token.owner, token.version]
        )
        if (updated.length === 0) return yield* rejected("release", partitionKey, token)
      }).pipe(
        unavailable("release", partitionKey),
        Effect.withSpan("LeaseStore.release", { attributes: { "outbox.partition": partitionKey } })
      )

    const current = (partitionKey: string) =>
      read("current", partitionKey).pipe(
        Effect.flatMap((row): Effect.Effect<Lease, LeaseNotFound | SqlError> =>
          row === undefined || row.released
            ? Effect.fail(new LeaseNotFound({ partitionKey }))
            : Effect.succeed(toLease(partitionKey, row))
        ),
        unavailable("current", partitionKey)
      )

    return LeaseStore.of({ acquire, renew, release, current })
  })

/**
 * A PostgreSQL lease store layer with the given options (`schema`, `tablePrefix`); runs the migrations
 * first.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: PostgresLeaseStoreOptions
): Layer.Layer<LeaseStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Layer.effect(LeaseStore, Effect.zipRight(migrate(options), make(options)))

/**
 * The PostgreSQL lease store layer with default names (schema `public`, no prefix).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<LeaseStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> = layerWith(
  {}
)
