/**
 * The SQLite outbox schema (SPEC §3.2): table and index definitions, the migrations that create them,
 * the SQL text of every statement the store issues and the values a persist binds. Reading rows back is
 * `SqliteOutboxRows`.
 *
 * Times are integer epoch milliseconds. `ordering_key` is NULL for keyless records. `terminal_at` is
 * set when a record becomes completed or expired and drives the retention sweep. Design notes:
 * docs/design/sqlite.md.
 *
 * @since 0.1.0
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { InvalidConfiguration } from "../../domain/OutboxError.js"
import * as OutboxRecord from "../../domain/OutboxRecord.js"
import * as SqlDialect from "../sql/SqlDialect.js"
import * as SqlOutboxStatements from "../sql/SqlOutboxStatements.js"
import { tablePrefix } from "./SqliteSupport.js"

/**
 * The names of the outbox tables and indexes for a table prefix.
 *
 * @since 0.1.0
 */
export interface TableNames {
  readonly outbox: string
  readonly fence: string
  readonly migrations: string
  readonly identityIndex: string
  readonly claimIndex: string
  /** The head-of-line index: claimed records with an ordering key (see {@link createStatements}). */
  readonly keyIndex: string
  /** The head-of-line index of the first schema (every live keyed record), dropped by the second migration. */
  readonly firstKeyIndex: string
  readonly expiryIndex: string
  readonly terminalIndex: string
}

/**
 * Validates a table prefix (letters, digits and `_`, not starting with a digit; empty allowed) and
 * derives the table names from it.
 *
 * @since 0.1.0
 */
export const tableNames = (prefix: string): Either.Either<TableNames, InvalidConfiguration> => {
  const checked = tablePrefix("SqliteOutboxStore", prefix)
  if (Either.isLeft(checked)) return Either.left(checked.left)
  return Either.right({
    outbox: `${prefix}outbox`,
    fence: `${prefix}outbox_fence`,
    migrations: `${prefix}outbox_migrations`,
    identityIndex: `${prefix}outbox_identity`,
    claimIndex: `${prefix}outbox_claim`,
    keyIndex: `${prefix}outbox_claimed_key`,
    firstKeyIndex: `${prefix}outbox_key`,
    expiryIndex: `${prefix}outbox_expiry`,
    terminalIndex: `${prefix}outbox_terminal`
  })
}

/** The head-of-line index (see {@link createStatements}). */
const keyIndexStatement = (t: TableNames): string =>
  `CREATE INDEX IF NOT EXISTS ${t.keyIndex} ON ${t.outbox} (partition_key, ordering_key, created_at, seq, claim_version, claimed_at)
  WHERE ordering_key IS NOT NULL AND status = 'claimed'`

/**
 * The DDL of the current schema, as a new database gets it (the first migration; the second one brings a
 * database made by the first schema up to date). The head-of-line index holds only claimed records with
 * an ordering key (R-CLAIM-5; see docs/design/sqlite.md).
 *
 * @since 0.1.0
 */
export const createStatements = (t: TableNames): ReadonlyArray<string> => [
  `CREATE TABLE IF NOT EXISTS ${t.outbox} (
  id TEXT PRIMARY KEY NOT NULL,
  partition_key TEXT NOT NULL,
  envelope_id TEXT NOT NULL,
  binding_id TEXT NOT NULL,
  route_id TEXT NOT NULL DEFAULT '',
  address TEXT NOT NULL DEFAULT '',
  payload BLOB NOT NULL,
  headers TEXT NOT NULL DEFAULT '{}',
  ordering_key TEXT,
  created_at INTEGER NOT NULL,
  expires_at INTEGER,
  seq INTEGER NOT NULL,
  status TEXT NOT NULL,
  claimed_by TEXT,
  claim_version INTEGER NOT NULL DEFAULT 0,
  claimed_at INTEGER,
  first_attempted_at INTEGER,
  replay_count INTEGER NOT NULL DEFAULT 0,
  completed_at INTEGER,
  terminal_at INTEGER
)`,
  `CREATE TABLE IF NOT EXISTS ${t.fence} (
  partition_key TEXT PRIMARY KEY NOT NULL,
  max_version INTEGER NOT NULL DEFAULT 0,
  seq_counter INTEGER NOT NULL DEFAULT 0
)`,
  `CREATE UNIQUE INDEX IF NOT EXISTS ${t.identityIndex} ON ${t.outbox} (partition_key, envelope_id, binding_id)`,
  `CREATE INDEX IF NOT EXISTS ${t.claimIndex} ON ${t.outbox} (partition_key, created_at, seq, status)
  WHERE status NOT IN ('completed', 'expired')`,
  keyIndexStatement(t),
  `CREATE INDEX IF NOT EXISTS ${t.expiryIndex} ON ${t.outbox} (partition_key, expires_at)
  WHERE expires_at IS NOT NULL AND status = 'pending'`,
  `CREATE INDEX IF NOT EXISTS ${t.terminalIndex} ON ${t.outbox} (terminal_at) WHERE terminal_at IS NOT NULL`
]

/**
 * Runs the outbox migrations with `@effect/sql`'s `Migrator`, recording them in
 * `<prefix>outbox_migrations` (never in a table other stores use). Idempotent; safe to run from several
 * processes on one file.
 *
 * @since 0.1.0
 */
export const migrate = (
  t: TableNames
): Effect.Effect<ReadonlyArray<readonly [number, string]>, Migrator.MigrationError | SqlError, SqlClient.SqlClient> =>
  Migrator.make({})({
    table: t.migrations,
    loader: Migrator.fromRecord({
      "0001_create_outbox": Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        for (const statement of createStatements(t)) yield* sql.unsafe(statement)
      }),
      // the first schema's head-of-line index covered every live keyed record
      "0002_claimed_key_index": Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* sql.unsafe(`DROP INDEX IF EXISTS ${t.firstKeyIndex}`)
        yield* sql.unsafe(keyIndexStatement(t))
      })
    })
  })

/**
 * The stored columns, in the order the store selects them.
 *
 * @since 0.1.0
 */
export const columns: ReadonlyArray<string> = SqlOutboxStatements.columns

/** The columns a persist writes, in bind order. */
const insertColumns = [...SqlOutboxStatements.recordColumns, "status"]

/**
 * Number of bound values per inserted row.
 *
 * @since 0.1.0
 */
export const insertWidth = insertColumns.length

/**
 * Rows per multi-row INSERT (keeps the bound values well under SQLite's 32766 limit).
 *
 * @since 0.1.0
 */
export const insertChunk = 500

/**
 * The SQL text of every statement the store issues, for one table prefix and stale-reclaim setting: the
 * shared statements (`SqlOutboxStatements`, bound with `SqlOutboxStatements.binds(SqlDialect.sqlite)`)
 * and SQLite's own seq allocation, insert and fence. Exposed so tests can `EXPLAIN QUERY PLAN` them and
 * the benchmark can issue the very same statements on a raw connection. Every value is a `?` parameter;
 * only validated table names are interpolated.
 *
 * @since 0.1.0
 */
export interface Statements extends SqlOutboxStatements.Statements {
  /**
   * Allocates a seq block for each of `partitions` partitions in one statement. Params: partitionKey, count
   * for each (distinct partition keys). Returns `partition_key` and `seq_counter` (the last seq of its
   * block) per partition.
   */
  readonly allocateSeqs: (partitions: number) => string
  /** Multi-row insert of `rows` records (`insertWidth` params each); returns the inserted ids. */
  readonly insert: (rows: number) => string
  /** Params: partitionKey, version. Raises the fence; returns `max_version` only when accepted. */
  readonly raiseFence: string
  /** Params: partitionKey. Returns `max_version`. */
  readonly readFence: string
}

/**
 * Builds the {@link Statements} for a set of table names.
 *
 * @since 0.1.0
 */
export const statements = (t: TableNames, options: { readonly staleReclaim: boolean }): Statements => {
  const row = `(?${",?".repeat(insertWidth - 1)})`
  return {
    ...SqlOutboxStatements.statements(
      SqlDialect.sqlite,
      {
        outbox: t.outbox,
        partitions: t.fence,
        claimIndex: t.claimIndex,
        keyIndex: t.keyIndex,
        terminalIndex: t.terminalIndex
      },
      options
    ),
    allocateSeqs: SqlOutboxStatements.bySize(
      (
        partitions
      ) => `INSERT INTO ${t.fence} (partition_key, max_version, seq_counter) VALUES (?, 0, ?)${", (?, 0, ?)".repeat(
        Math.max(0, partitions - 1)
      )}
ON CONFLICT (partition_key) DO UPDATE SET seq_counter = seq_counter + excluded.seq_counter
RETURNING partition_key, seq_counter`
    ),
    insert: SqlOutboxStatements.bySize(
      (rows) =>
        `INSERT INTO ${t.outbox} (${insertColumns.join(", ")}) VALUES ${row}${`,${row}`.repeat(Math.max(0, rows - 1))}
ON CONFLICT DO NOTHING RETURNING id`
    ),
    raiseFence: `INSERT INTO ${t.fence} (partition_key, max_version, seq_counter) VALUES (?, ?, 0)
ON CONFLICT (partition_key) DO UPDATE SET max_version = excluded.max_version WHERE max_version <= excluded.max_version
RETURNING max_version`,
    readFence: `SELECT max_version FROM ${t.fence} WHERE partition_key = ?`
  }
}

/**
 * The bound values of one record for {@link Statements.insert}, in column order.
 *
 * @since 0.1.0
 */
export const insertValues = (record: OutboxRecord.PreparedRecord, seq: number): ReadonlyArray<unknown> => {
  const values: Array<unknown> = []
  pushInsertValues(values, record, seq)
  return values
}

/**
 * Appends the bound values of one record for {@link Statements.insert} to `values` (what
 * {@link insertValues} returns, without an intermediate array).
 *
 * @since 0.1.0
 */
export const pushInsertValues = (values: Array<unknown>, record: OutboxRecord.PreparedRecord, seq: number): void => {
  SqlOutboxStatements.pushRecordValues(values, record, seq)
  values.push("pending")
}
