/**
 * The MySQL `LeaseStore` (SPEC §4) over `@effect/sql-mysql2`.
 *
 * One row per partition in `<database>.<prefix>outbox_lease (partition_key, owner, version, expires_at,
 * released)`; `expires_at` is epoch milliseconds. Acquire inserts the row when the partition has none
 * (`INSERT IGNORE`: of concurrent first acquirers exactly one inserts, the others wait on its key and
 * skip), else takes over a released or expired row with one conditional update that bumps the version and
 * reports the new version through `LAST_INSERT_ID(expr)`: concurrent acquirers queue on the row and exactly
 * one wins. Renew and release are conditional updates on `(owner, version, not released)`. The row is
 * kept after release, so the version high-water mark survives it. A write that matches nothing reads the
 * row on the same connection to report it. Reads outside a caller's transaction are grouped per turn of
 * the event loop (`groupLookupsPerTurn`, one `IN (…)` statement); inside a caller's transaction a read runs
 * on that transaction's connection. These are the storage primitives of `LeaseStore.make` (validation,
 * tokens, expiry by `Clock`, spans). The layer runs its migrations under a `GET_LOCK` named lock
 * (`<prefix>outbox_lease_migrations`).
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
import { BigIntColumn } from "../sql/SqlOutboxRow.js"
import { decodeRows } from "./MysqlClaim.js"
import { storeTableNames, tableOptions } from "./MysqlOutboxSchema.js"
import { migrateStore } from "./MysqlOutboxStore.js"
import * as MysqlTransaction from "./MysqlTransaction.js"

/**
 * Options of the MySQL lease store.
 *
 * @since 0.1.0
 */
export interface MysqlLeaseStoreOptions {
  /** Database of the table (created when missing). Default: the connection's current database. */
  readonly database?: string | undefined
  /** Prefix of the table names (letters, digits, `_`). Default none. */
  readonly tablePrefix?: string | undefined
}

const KeyedLeaseRows = Schema.Array(
  Schema.Struct({
    partition_key: Schema.String,
    owner: Schema.String,
    version: BigIntColumn,
    expires_at: BigIntColumn,
    released: BigIntColumn
  })
)
type KeyedLeaseRow = (typeof KeyedLeaseRows.Type)[number]

const namesOf = (options: MysqlLeaseStoreOptions) => storeTableNames("MysqlLeaseStore", options, "outbox_lease")

const storedOf = (row: KeyedLeaseRow): LeaseStore.StoredLease => ({
  owner: row.owner,
  version: row.version,
  expiresAtMillis: row.expires_at,
  released: row.released !== 0
})

/**
 * Creates the lease table when missing. Run by the layers; exposed for applications that run migrations
 * as a separate step.
 *
 * @since 0.1.0
 */
export const migrate = (
  options: MysqlLeaseStoreOptions = {}
): Effect.Effect<void, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const names = yield* namesOf(options)
    yield* migrateStore(names, (collation) => [
      [
        "0001_create_outbox_lease",
        [
          `CREATE TABLE IF NOT EXISTS ${names.table} (
  partition_key VARCHAR(255) NOT NULL PRIMARY KEY,
  owner TEXT NOT NULL,
  version BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  released TINYINT NOT NULL DEFAULT 0
) ${tableOptions(collation)}`
        ]
      ]
    ])
  })

/**
 * Builds a MySQL lease store over the `SqlClient` in context. Does not run migrations (the layers do;
 * see {@link migrate}).
 *
 * @since 0.1.0
 */
export const make = (
  options: MysqlLeaseStoreOptions = {}
): Effect.Effect<LeaseStore.LeaseStoreService, InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const names = yield* namesOf(options)
    const tx = MysqlTransaction.make(sql)
    const t = names.table
    const columns = "partition_key, owner, version, expires_at, released"
    const selectMany = (n: number) =>
      `SELECT ${columns} FROM ${t} WHERE partition_key IN (${"?" + ",?".repeat(Math.max(0, n - 1))})`

    /** The stored leases of the given partitions, by partition key: one statement. */
    const readMany = (
      conn: Connection,
      keys: ReadonlyArray<string>
    ): Effect.Effect<Map<string, LeaseStore.StoredLease>, SqlError | StoreUnavailable> =>
      Effect.map(
        Effect.flatMap(tx.run(conn, selectMany(keys.length), keys), decodeRows("current", KeyedLeaseRows)),
        (rows) => {
          const byKey = new Map<string, LeaseStore.StoredLease>()
          for (const row of rows) byKey.set(row.partition_key, storedOf(row))
          return byKey
        }
      )

    const readOn = (conn: Connection, partitionKey: string) =>
      Effect.map(readMany(conn, [partitionKey]), (byKey) => byKey.get(partitionKey))

    /** Runs a conditional write; when it matched nothing, reads the row to report it. */
    const conditional = (
      operation: string,
      partitionKey: string,
      write: (conn: Connection) => Effect.Effect<LeaseStore.StoredLease | undefined, SqlError | StoreUnavailable>
    ): Effect.Effect<LeaseStore.WriteOutcome, StoreUnavailable> =>
      tx
        .standalone((conn) =>
          Effect.gen(function* () {
            const written = yield* write(conn)
            if (written !== undefined) return { _tag: "Written" as const, lease: written }
            return { _tag: "Refused" as const, stored: yield* readOn(conn, partitionKey) }
          })
        )
        .pipe(StoreUnavailable.refailTag("SqlError", operation, partitionKey))

    const tryAcquire = (partitionKey: string, owner: string, nowMillis: number, expiresAtMillis: number) =>
      conditional("acquire", partitionKey, (conn) =>
        Effect.gen(function* () {
          const lease = (version: number): LeaseStore.StoredLease => ({
            owner,
            version,
            expiresAtMillis,
            released: false
          })
          const inserted = yield* tx.write(
            conn,
            `INSERT IGNORE INTO ${t} (partition_key, owner, version, expires_at, released) VALUES (?, ?, 1, ?, 0)`,
            [partitionKey, owner, expiresAtMillis]
          )
          if (inserted.affectedRows === 1) return lease(1)
          const taken = yield* tx.write(
            conn,
            `UPDATE ${t} SET owner = ?, version = LAST_INSERT_ID(version + 1), expires_at = ?, released = 0
WHERE partition_key = ? AND (released = 1 OR expires_at <= ?)`,
            [owner, expiresAtMillis, partitionKey, nowMillis]
          )
          return taken.affectedRows === 1 ? lease(taken.insertId) : undefined
        })
      )

    const extend = (partitionKey: string, token: LeaseTokenLike, expiresAtMillis: number) =>
      conditional("renew", partitionKey, (conn) =>
        Effect.map(
          tx.write(
            conn,
            `UPDATE ${t} SET expires_at = ? WHERE partition_key = ? AND owner = ? AND version = ? AND released = 0`,
            [expiresAtMillis, partitionKey, token.owner, token.version]
          ),
          // matched rows (`FOUND_ROWS`): a renew to the same expiry still counts
          (r) =>
            r.affectedRows === 1
              ? { owner: token.owner, version: token.version, expiresAtMillis, released: false }
              : undefined
        )
      )

    const end = (partitionKey: string, token: LeaseTokenLike) =>
      conditional("release", partitionKey, (conn) =>
        Effect.flatMap(
          tx.write(
            conn,
            `UPDATE ${t} SET released = 1 WHERE partition_key = ? AND owner = ? AND version = ? AND released = 0`,
            [partitionKey, token.owner, token.version]
          ),
          (r) => (r.affectedRows === 1 ? readOn(conn, partitionKey) : Effect.succeed(undefined))
        )
      )

    /** Joins the next group of reads (those asked in the same turn of the event loop) and waits for its lease. */
    const readGrouped = groupLookupsPerTurn((keys: ReadonlyArray<string>) =>
      tx.standalone((conn) => readMany(conn, keys))
    )

    const read = (partitionKey: string): Effect.Effect<LeaseStore.StoredLease | undefined, StoreUnavailable> =>
      Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) =>
        (Option.isNone(outer) ? readGrouped(partitionKey) : readOn(outer.value[0], partitionKey)).pipe(
          StoreUnavailable.refailTag("SqlError", "current", partitionKey)
        )
      )

    return LeaseStore.make({ tryAcquire, extend, end, read })
  })

/**
 * A MySQL lease store layer with the given options (`database`, `tablePrefix`); runs the migrations first.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: MysqlLeaseStoreOptions
): Layer.Layer<LeaseStore.LeaseStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Layer.effect(LeaseStore.LeaseStore, Effect.zipRight(migrate(options), make(options)))

/**
 * The MySQL lease store layer with default names (the connection's database, no prefix).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<LeaseStore.LeaseStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =
  layerWith({})
