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
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type { InvalidConfiguration } from "../../domain/OutboxError.js"
import * as OutboxRecord from "../../domain/OutboxRecord.js"
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

/**
 * The non-terminal predicate, written identically everywhere so the partial indexes apply. A row with an
 * unknown (corrupt) status counts as live, so the claim walk reports it.
 */
const live = (alias: string): string => `${alias}.status NOT IN ('completed', 'expired')`

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
export const columns: ReadonlyArray<string> = [
  "id",
  "partition_key",
  "envelope_id",
  "binding_id",
  "route_id",
  "address",
  "payload",
  "headers",
  "ordering_key",
  "created_at",
  "expires_at",
  "seq",
  "status",
  "claimed_by",
  "claim_version",
  "claimed_at",
  "first_attempted_at",
  "replay_count",
  "completed_at"
]

/** The columns a persist writes, in bind order. */
const insertColumns = [
  "id",
  "partition_key",
  "envelope_id",
  "binding_id",
  "route_id",
  "address",
  "payload",
  "headers",
  "ordering_key",
  "created_at",
  "expires_at",
  "seq",
  "status"
] as const

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
 * The SQL text of every statement the store issues, for one table prefix and stale-reclaim setting.
 * Exposed so tests can `EXPLAIN QUERY PLAN` them and the benchmark can issue the very same statements
 * on a raw connection. Every value is a `?` parameter; only validated table names are interpolated.
 *
 * @since 0.1.0
 */
export interface Statements {
  /** Params: partitionKey, count. Returns `seq_counter` (the last seq of the allocated block). */
  readonly allocateSeq: string
  /** Multi-row insert of `rows` records (`insertWidth` params each); returns the inserted ids. */
  readonly insert: (rows: number) => string
  /** Params: partitionKey, envelopeId, bindingId. Returns `id`. */
  readonly findIdentity: string
  /** Params: id. Returns the identity columns of the record holding the id. */
  readonly findById: string
  /** Params: partitionKey, envelopeId, bindingId. Deletes a terminal holder of the identity. */
  readonly deleteTerminalIdentity: string
  /** Params: partitionKey, version. Raises the fence; returns `max_version` only when accepted. */
  readonly raiseFence: string
  /** Params: partitionKey. Returns `max_version`. */
  readonly readFence: string
  /**
   * The claim selection: candidate rows in age order (rows with an unknown status come back too, so
   * decoding reports them as corrupt). Params: partitionKey, version, [staleCutoff],
   * version, [staleCutoff], limit (the stale cutoff only when stale reclaim is configured).
   */
  readonly selectClaimable: string
  /**
   * The guarded claim update for `n` ids. Params: owner, version, now, now, ids…, partitionKey, version,
   * [staleCutoff]. Returns the ids it claimed (the records are the candidates read in the same
   * transaction with the claim applied).
   */
  readonly claimUpdate: (n: number) => string
  /** Complete `n` ids: params now, now, ids…, owner, version. Returns the completed ids. */
  readonly complete: (n: number) => string
  /** Release `n` ids: params ids…, owner, version. Returns the released ids. */
  readonly release: (n: number) => string
  /** Params: now, partitionKey, before. Returns the expired ids. */
  readonly expire: string
  /** Params: partitionKey, limit. */
  readonly queryPending: string
  /** Params: partitionKey. Returns `n`. */
  readonly countPending: string
  /** Params: partitionKey. Returns `n`. */
  readonly countClaimed: string
  /** Params: after (exclusive), limit. Returns `partition_key`. */
  readonly listPartitions: string
  /** Params: cutoff, chunk. Deletes terminal rows older than the cutoff; returns the deleted ids. */
  readonly sweep: string
}

/**
 * `n` comma-separated `?` placeholders, without spaces: the SQL client keys its prepared-statement
 * cache by the statement text and hashes the whole text on every execution, so long lists stay short.
 */
const placeholders = (n: number): string => (n <= 0 ? "" : "?" + ",?".repeat(n - 1))

/**
 * Memoises a statement builder by its size argument (a handful of sizes recur: full batches and the
 * last partial one), so the text of a large statement is not rebuilt on every call. Bounded.
 */
const bySize = (build: (n: number) => string): ((n: number) => string) => {
  const built = new Map<number, string>()
  return (n) => {
    let text = built.get(n)
    if (text === undefined) {
      if (built.size >= 64) built.clear()
      text = build(n)
      built.set(n, text)
    }
    return text
  }
}

/**
 * Builds the {@link Statements} for a set of table names.
 *
 * @since 0.1.0
 */
export const statements = (t: TableNames, options: { readonly staleReclaim: boolean }): Statements => {
  const oCols = columns.map((c) => `o.${c}`).join(", ")
  const claimable = options.staleReclaim
    ? "(o.status <> 'claimed' OR o.claim_version < ? OR o.claimed_at IS NULL OR o.claimed_at < ?)"
    : "(o.status <> 'claimed' OR o.claim_version < ?)"
  const blocking = options.staleReclaim
    ? "b.status = 'claimed' AND b.claim_version >= ? AND b.claimed_at IS NOT NULL AND b.claimed_at >= ?"
    : "b.status = 'claimed' AND b.claim_version >= ?"
  const row = `(${placeholders(insertWidth)})`
  return {
    allocateSeq: `INSERT INTO ${t.fence} (partition_key, max_version, seq_counter) VALUES (?, 0, ?)
ON CONFLICT (partition_key) DO UPDATE SET seq_counter = seq_counter + excluded.seq_counter
RETURNING seq_counter`,
    insert: bySize(
      (rows) =>
        `INSERT INTO ${t.outbox} (${insertColumns.join(", ")}) VALUES ${row}${`,${row}`.repeat(Math.max(0, rows - 1))}
ON CONFLICT DO NOTHING RETURNING id`
    ),
    findIdentity: `SELECT id FROM ${t.outbox} WHERE partition_key = ? AND envelope_id = ? AND binding_id = ?`,
    findById: `SELECT partition_key, envelope_id, binding_id FROM ${t.outbox} WHERE id = ?`,
    deleteTerminalIdentity: `DELETE FROM ${t.outbox}
WHERE partition_key = ? AND envelope_id = ? AND binding_id = ? AND status IN ('completed', 'expired')`,
    raiseFence: `INSERT INTO ${t.fence} (partition_key, max_version, seq_counter) VALUES (?, ?, 0)
ON CONFLICT (partition_key) DO UPDATE SET max_version = excluded.max_version WHERE max_version <= excluded.max_version
RETURNING max_version`,
    readFence: `SELECT max_version FROM ${t.fence} WHERE partition_key = ?`,
    selectClaimable: `SELECT ${oCols} FROM ${t.outbox} AS o INDEXED BY ${t.claimIndex}
WHERE o.partition_key = ? AND ${live("o")} AND ${claimable}
  AND (o.ordering_key IS NULL OR NOT EXISTS (
    SELECT 1 FROM ${t.outbox} AS b INDEXED BY ${t.keyIndex}
    WHERE b.partition_key = o.partition_key AND b.ordering_key = o.ordering_key AND b.status = 'claimed'
      AND (b.created_at, b.seq) < (o.created_at, o.seq) AND ${blocking}))
ORDER BY o.created_at, o.seq
LIMIT ?`,
    claimUpdate: bySize(
      (n) => `UPDATE ${t.outbox} AS o SET status = 'claimed', claimed_by = ?, claim_version = ?,
  claimed_at = ?, first_attempted_at = coalesce(first_attempted_at, ?), replay_count = replay_count + 1
WHERE o.id IN (${placeholders(n)}) AND +o.partition_key = ? AND +o.status IN ('pending', 'claimed') AND ${claimable}
RETURNING id`
    ),
    complete: bySize(
      (n) => `UPDATE ${t.outbox} SET status = 'completed', completed_at = ?, terminal_at = ?
WHERE id IN (${placeholders(n)}) AND status = 'claimed' AND claimed_by = ? AND claim_version = ?
RETURNING id`
    ),
    release: bySize(
      (n) => `UPDATE ${t.outbox} SET status = 'pending', claimed_by = NULL, claimed_at = NULL
WHERE id IN (${placeholders(n)}) AND status = 'claimed' AND claimed_by = ? AND claim_version = ?
RETURNING id`
    ),
    expire: `UPDATE ${t.outbox} SET status = 'expired', terminal_at = ?
WHERE partition_key = ? AND expires_at IS NOT NULL AND status = 'pending' AND expires_at < ?
RETURNING id`,
    queryPending: `SELECT ${oCols} FROM ${t.outbox} AS o INDEXED BY ${t.claimIndex}
WHERE o.partition_key = ? AND ${live("o")} AND o.status = 'pending'
ORDER BY o.created_at, o.seq
LIMIT ?`,
    countPending: `SELECT count(*) AS n FROM ${t.outbox} AS o INDEXED BY ${t.claimIndex}
WHERE o.partition_key = ? AND ${live("o")} AND o.status = 'pending'`,
    countClaimed: `SELECT count(*) AS n FROM ${t.outbox} AS o INDEXED BY ${t.claimIndex}
WHERE o.partition_key = ? AND ${live("o")} AND o.status = 'claimed'`,
    listPartitions: `SELECT f.partition_key FROM ${t.fence} AS f
WHERE f.partition_key > ? AND EXISTS (
  SELECT 1 FROM ${t.outbox} AS o INDEXED BY ${t.claimIndex} WHERE o.partition_key = f.partition_key AND ${live("o")})
ORDER BY f.partition_key
LIMIT ?`,
    sweep: `DELETE FROM ${t.outbox} WHERE rowid IN (
  SELECT rowid FROM ${t.outbox} INDEXED BY ${t.terminalIndex} WHERE terminal_at IS NOT NULL AND terminal_at < ? LIMIT ?)
RETURNING id`
  }
}

/** The stored text of headers (`{}` without serialising when there are none). */
const headersText = (headers: OutboxRecord.Headers): string => {
  for (const _ in headers) return JSON.stringify(headers)
  return "{}"
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
  values.push(
    record.id,
    record.partitionKey,
    record.envelopeId,
    record.bindingId,
    record.routeId,
    record.address,
    record.payload,
    headersText(record.headers),
    Option.getOrNull(record.orderingKey),
    DateTime.toEpochMillis(record.createdAt),
    Option.isSome(record.expiresAt) ? DateTime.toEpochMillis(record.expiresAt.value) : null,
    seq,
    "pending"
  )
}
