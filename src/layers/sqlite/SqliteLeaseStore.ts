/**
 * The SQLite `LeaseStore` (SPEC §4) over `@effect/sql`.
 *
 * One row per partition in `<prefix>outbox_lease (partition_key, owner, version, expires_at,
 * released)`; `expires_at` is epoch milliseconds. Acquire is a single conditional upsert that only
 * takes over a row that is released or expired and bumps its version, so concurrent acquirers (in this
 * process or in others sharing the file) have exactly one winner. Renew and release are conditional
 * updates on `(owner, version, released = 0)`. The row is kept after release, so the version high-water
 * mark survives it. Writes asked for in one turn of the event loop outside a caller's transaction share one
 * transaction (one commit), each keeping its own outcome; reads are grouped likewise (see `current`). The
 * layer creates the table with its own migrations table (`<prefix>outbox_lease_migrations`). Time comes
 * from `Clock`.
 *
 * @since 0.1.0
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type { LeaseTokenLike } from "../../domain/LeaseToken.js"
import { type InvalidConfiguration, StoreUnavailable } from "../../domain/OutboxError.js"
import { groupLookupsPerTurn } from "../../services/EventLoop.js"
import * as LeaseStore from "../../services/LeaseStore.js"
import * as SqliteGroupCommit from "./SqliteGroupCommit.js"
import { retryBusy, retryBusyOutsideTransaction, tablePrefix } from "./SqliteSupport.js"
import * as SqliteTransaction from "./SqliteTransaction.js"

/**
 * Options of the SQLite lease store.
 *
 * @since 0.1.0
 */
export interface SqliteLeaseStoreOptions {
  /**
   * Prefix of the table names (`<prefix>outbox_lease`, `<prefix>outbox_lease_migrations`): letters,
   * digits and `_`, not starting with a digit. Default `""`.
   */
  readonly tablePrefix?: string | undefined
}

const LeaseRow = Schema.Struct({
  owner: Schema.String,
  version: Schema.Int,
  expires_at: Schema.Int,
  released: Schema.Int
})
type LeaseRow = typeof LeaseRow.Type

const decodeRows = Schema.decodeUnknown(Schema.Array(LeaseRow))

/** A lease row read together with the rows of other partitions (see `current`). */
const KeyedLeaseRow = Schema.Struct({ partition_key: Schema.String, ...LeaseRow.fields })
type KeyedLeaseRow = typeof KeyedLeaseRow.Type

const decodeKeyedRows = Schema.decodeUnknown(Schema.Array(KeyedLeaseRow))

/**
 * Sizes of the grouped lease read's `IN` list: a group's partitions are padded (repeating the last one) to
 * the next of these, so that a handful of statement texts serve every group size.
 */
const groupReadSizes = [1, 2, 4, 8, 16, 32, 64] as const
/** The largest of `groupReadSizes`: partitions read by one statement. */
const groupReadChunk = 64

const isInt = (u: unknown): u is number => typeof u === "number" && Number.isSafeInteger(u)
/** A structural check accepting a subset of what `LeaseRow` decodes (safe integers, a string owner). */
const isLeaseRow = (u: unknown): u is LeaseRow =>
  typeof u === "object" &&
  u !== null &&
  typeof Reflect.get(u, "owner") === "string" &&
  isInt(Reflect.get(u, "version")) &&
  isInt(Reflect.get(u, "expires_at")) &&
  isInt(Reflect.get(u, "released"))

const isKeyedLeaseRow = (u: unknown): u is KeyedLeaseRow =>
  isLeaseRow(u) && typeof Reflect.get(u, "partition_key") === "string"

const storedOf = (row: LeaseRow): LeaseStore.StoredLease => ({
  owner: row.owner,
  version: row.version,
  expiresAtMillis: row.expires_at,
  released: row.released !== 0
})

const migrations = (table: string) => ({
  "1_create_outbox_lease": Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE IF NOT EXISTS ${sql(table)} (
      partition_key TEXT PRIMARY KEY NOT NULL,
      owner TEXT NOT NULL,
      version INTEGER NOT NULL,
      expires_at INTEGER NOT NULL,
      released INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID`
  })
})

/**
 * Creates (or upgrades) the lease table. Run by the layer; exposed for applications that run
 * migrations as a separate step.
 *
 * @since 0.1.0
 */
export const migrate = (
  options: SqliteLeaseStoreOptions = {}
): Effect.Effect<void, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const prefix = yield* validPrefix(options)
    yield* Migrator.make({})({
      loader: Migrator.fromRecord(migrations(`${prefix}outbox_lease`)),
      table: `${prefix}outbox_lease_migrations`
    }).pipe(retryBusyOutsideTransaction, StoreUnavailable.refail("migrate"))
  })

const validPrefix = (options: SqliteLeaseStoreOptions): Effect.Effect<string, InvalidConfiguration> =>
  tablePrefix("SqliteLeaseStore", options.tablePrefix)

/**
 * Builds a SQLite lease store over the `SqlClient` in context. Does not run migrations (the layers do;
 * see {@link migrate}).
 *
 * @since 0.1.0
 */
export const make = (
  options: SqliteLeaseStoreOptions = {}
): Effect.Effect<LeaseStore.LeaseStoreService, InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const prefix = yield* validPrefix(options)
    const table = sql(`${prefix}outbox_lease`)

    const rows = <E, R>(query: Effect.Effect<ReadonlyArray<unknown>, E, R>) =>
      Effect.flatMap(query, (raw) => decodeRows(raw))

    const read = (partitionKey: string) =>
      rows(sql`SELECT owner, version, expires_at, released FROM ${table} WHERE partition_key = ${partitionKey}`).pipe(
        Effect.map((found) => found[0])
      )

    /**
     * A conditional write (`RETURNING` the row it wrote) and, when it matched nothing, the row as it stands, on
     * the connection of the transaction it runs in.
     */
    const conditionalIn = (
      partitionKey: string,
      write: Effect.Effect<ReadonlyArray<unknown>, SqlError>
    ): Effect.Effect<LeaseStore.WriteOutcome, SqlError | ParseResult.ParseError> =>
      Effect.flatMap(
        rows(write),
        (written): Effect.Effect<LeaseStore.WriteOutcome, SqlError | ParseResult.ParseError> => {
          const row = written[0]
          if (row !== undefined) return Effect.succeed({ _tag: "Written" as const, lease: storedOf(row) })
          return Effect.map(read(partitionKey), (stored) => ({
            _tag: "Refused" as const,
            stored: stored === undefined ? undefined : storedOf(stored)
          }))
        }
      )

    /**
     * The writes asked for in one turn of the event loop outside a caller's transaction (the acquires of a
     * relay filling its slots, the releases of turns that ended together) share one transaction of the store's
     * own, as the outbox store's completes do (`SqliteGroupCommit`): each write in its own savepoint with its
     * own outcome, a busy failure retrying the group, a failing `BEGIN` or `COMMIT` failing each write of it.
     */
    const group = SqliteGroupCommit.make(SqliteTransaction.make(sql))

    /**
     * Runs a conditional write: with the other writes of its turn (its caller always gets the outcome: the
     * wait is not interrupted), or in a savepoint of the caller's transaction.
     */
    const conditional = (
      operation: string,
      partitionKey: string,
      write: Effect.Effect<ReadonlyArray<unknown>, SqlError>
    ): Effect.Effect<LeaseStore.WriteOutcome, StoreUnavailable> =>
      Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) =>
        Option.isNone(outer)
          ? Effect.uninterruptible(
              // the write's statements run on the group's connection
              group(0, true, (conn) =>
                Effect.provideService(conditionalIn(partitionKey, write), SqlClient.TransactionConnection, [conn, 0])
              )
            )
          : sql.withTransaction(conditionalIn(partitionKey, write))
      ).pipe(StoreUnavailable.refail(operation, partitionKey))

    const tryAcquire = (partitionKey: string, owner: string, nowMillis: number, expiresAtMillis: number) =>
      conditional(
        "acquire",
        partitionKey,
        sql`INSERT INTO ${table} (partition_key, owner, version, expires_at, released)
          VALUES (${partitionKey}, ${owner}, 1, ${expiresAtMillis}, 0)
          ON CONFLICT (partition_key) DO UPDATE SET
            owner = excluded.owner,
            version = ${table}.version + 1,
            expires_at = excluded.expires_at,
            released = 0
          WHERE ${table}.released <> 0 OR ${table}.expires_at <= ${nowMillis}
          RETURNING owner, version, expires_at, released`
      )

    const extend = (partitionKey: string, token: LeaseTokenLike, expiresAtMillis: number) =>
      conditional(
        "renew",
        partitionKey,
        sql`UPDATE ${table} SET expires_at = ${expiresAtMillis}
          WHERE partition_key = ${partitionKey} AND owner = ${token.owner} AND version = ${token.version}
            AND released = 0
          RETURNING owner, version, expires_at, released`
      )

    const end = (partitionKey: string, token: LeaseTokenLike) =>
      conditional(
        "release",
        partitionKey,
        sql`UPDATE ${table} SET released = 1
          WHERE partition_key = ${partitionKey} AND owner = ${token.owner} AND version = ${token.version}
            AND released = 0
          RETURNING owner, version, expires_at, released`
      )

    /**
     * `current` is on the drainer's hot path (checked before and after every wave of sends), so it runs its
     * statement directly on a connection, without the client's per-statement span, and checks rows
     * structurally (the Schema only describes a row that fails the check).
     *
     * Inside a caller's transaction it reads on that transaction's connection. Otherwise reads are grouped,
     * like the outbox store's group commit: the first read of a group waits one turn of the event loop (the
     * other fibers then run until they wait too, adding their reads, e.g. the drainers of the other
     * partitions), and one statement on a reserved connection reads every partition of the group. Each read
     * is thus made after it was asked for, never before: a drainer's check still sees the lease as it is
     * after the sends it follows. Busy failures are retried; any other failure fails every read of the group.
     */
    const groupTexts = new Map(
      groupReadSizes.map((n) => [
        n,
        `SELECT partition_key, owner, version, expires_at, released FROM "${prefix}outbox_lease" ` +
          `WHERE partition_key IN (${Array.from({ length: n }, () => "?").join(",")})`
      ])
    )

    type ReadFailure = SqlError | ParseResult.ParseError
    /** Reads the rows of the given partitions (at most `groupReadChunk`) with one statement. */
    const readChunk = (conn: Connection, keys: ReadonlyArray<string>) => {
      const size = groupReadSizes.find((n) => n >= keys.length) ?? groupReadChunk
      const text = groupTexts.get(size) ?? ""
      const params: Array<string> = keys.slice()
      while (params.length < size) params.push(keys[keys.length - 1] ?? "")
      return Effect.flatMap(
        conn.execute(text, params, undefined),
        (rows): Effect.Effect<ReadonlyArray<KeyedLeaseRow>, ParseResult.ParseError> =>
          rows.every(isKeyedLeaseRow) ? Effect.succeed(rows) : decodeKeyedRows(rows)
      )
    }

    /** The rows of the given partitions, by partition key, on one reserved connection (busy retried). */
    const readMany = (keys: ReadonlyArray<string>): Effect.Effect<Map<string, LeaseRow>, ReadFailure> =>
      retryBusy(
        Effect.scoped(
          Effect.flatMap(sql.reserve, (conn) =>
            Effect.gen(function* () {
              const byKey = new Map<string, LeaseRow>()
              for (let i = 0; i < keys.length; i += groupReadChunk) {
                for (const row of yield* readChunk(conn, keys.slice(i, i + groupReadChunk))) {
                  byKey.set(row.partition_key, row)
                }
              }
              return byKey
            })
          )
        )
      )

    /** Joins the next group of reads (those asked in the same turn of the event loop) and waits for its row. */
    const readGrouped = groupLookupsPerTurn(readMany)

    const readCurrent = (partitionKey: string): Effect.Effect<LeaseRow | undefined, ReadFailure> =>
      Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) =>
        Option.isNone(outer)
          ? readGrouped(partitionKey)
          : Effect.map(readChunk(outer.value[0], [partitionKey]), (rows) => rows[0])
      )

    const readStored = (partitionKey: string) =>
      readCurrent(partitionKey).pipe(
        Effect.map((row) => (row === undefined ? undefined : storedOf(row))),
        StoreUnavailable.refail("current", partitionKey)
      )

    return LeaseStore.make({ tryAcquire, extend, end, read: readStored })
  })

/**
 * A SQLite lease store layer with the given options; runs the migrations first.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: SqliteLeaseStoreOptions
): Layer.Layer<LeaseStore.LeaseStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Layer.effect(LeaseStore.LeaseStore, Effect.zipRight(migrate(options), make(options)))

/**
 * The SQLite lease store layer with default table names; runs the migrations first.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<LeaseStore.LeaseStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =
  layerWith({})
