/**
 * The PostgreSQL outbox schema (SPEC §3.4): table and index names for a schema and table prefix, the
 * migrations that create them, the SQL text of every statement the store issues, and the decoding of
 * rows into records.
 *
 * Times are `bigint` epoch milliseconds; `ordering_key` is NULL for keyless records; `status` is held to
 * the four record states by a CHECK constraint; `terminal_at` drives the retention sweep. The fence
 * (claim high-water mark) and the seq counter live in separate tables, so a persist inside a long
 * business transaction never holds the row a claim of its partition locks.
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { InvalidConfiguration } from "../../domain/OutboxError.js"
import * as OutboxRecord from "../../domain/OutboxRecord.js"
import * as SqlDialect from "../sql/SqlDialect.js"
import * as SqlOutboxRow from "../sql/SqlOutboxRow.js"
import * as SqlOutboxStatements from "../sql/SqlOutboxStatements.js"

/**
 * The quoted, schema-qualified names of the outbox tables and the bare names of their indexes.
 *
 * @since 0.1.0
 */
export interface TableNames {
  /** The schema (unquoted). */
  readonly schema: string
  /** The table prefix (unquoted). */
  readonly prefix: string
  readonly outbox: string
  readonly fence: string
  readonly seq: string
  readonly migrations: string
  readonly claimIndex: string
  readonly keyIndex: string
  /** The channel persist notifies on commit (see `PostgresWakeSignal`). */
  readonly channel: string
  /** The key of the advisory lock that serialises migrations of this schema and prefix. */
  readonly migrationLock: string
}

const identifierPattern = /^[A-Za-z_][A-Za-z0-9_]*$/

/** Problems with a schema name and a table prefix, for `InvalidConfiguration`. */
const namingProblems = (schema: string, prefix: string): Array<string> => {
  const problems: Array<string> = []
  if (!identifierPattern.test(schema) || schema.length > 40) {
    problems.push(`schema ${JSON.stringify(schema)} must match ${identifierPattern.source} (at most 40 characters)`)
  }
  if (prefix.length > 0 && (!identifierPattern.test(prefix) || prefix.length > 20)) {
    problems.push(
      `tablePrefix ${JSON.stringify(prefix)} must match ${identifierPattern.source} (at most 20 characters)`
    )
  }
  return problems
}

/**
 * Validates a schema name and a table prefix (letters, digits and `_`, not starting with a digit; the
 * prefix may be empty) and derives the names from them.
 *
 * @since 0.1.0
 */
export const tableNames = (
  component: string,
  schema: string,
  prefix: string
): Either.Either<TableNames, InvalidConfiguration> => {
  const problems = namingProblems(schema, prefix)
  if (problems.length > 0) return Either.left(new InvalidConfiguration({ component, problems }))
  const q = (name: string) => `"${schema}"."${prefix}${name}"`
  return Either.right({
    schema,
    prefix,
    outbox: q("outbox"),
    fence: q("outbox_fence"),
    seq: q("outbox_seq"),
    migrations: q("outbox_migrations"),
    claimIndex: `${prefix}outbox_claim`,
    keyIndex: `${prefix}outbox_claimed_key`,
    channel: `${schema}.${prefix}outbox`,
    migrationLock: `effect-outbox:${schema}.${prefix}outbox`
  })
}

/**
 * The names of a store with one table (the lease and dead-letter stores): the quoted table
 * `<schema>.<prefix><base>`, its migrations table and migration lock key.
 *
 * @since 0.1.0
 */
export interface StoreTableNames {
  readonly schema: string
  readonly prefix: string
  readonly table: string
  readonly migrations: string
  readonly lock: string
}

/**
 * Validates a schema name and a table prefix like {@link tableNames} (plus the store's own `problems`)
 * and derives the names of a one-table store whose table is `<prefix><base>`.
 *
 * @since 0.1.0
 */
export const storeTableNames = (
  component: string,
  options: { readonly schema?: string | undefined; readonly tablePrefix?: string | undefined },
  base: string,
  problems: ReadonlyArray<string> = []
): Either.Either<StoreTableNames, InvalidConfiguration> => {
  const schema = options.schema ?? "public"
  const prefix = options.tablePrefix ?? ""
  const all = [...namingProblems(schema, prefix), ...problems]
  if (all.length > 0) return Either.left(new InvalidConfiguration({ component, problems: all }))
  return Either.right({
    schema,
    prefix,
    table: `"${schema}"."${prefix}${base}"`,
    migrations: `"${schema}"."${prefix}${base}_migrations"`,
    lock: `effect-outbox:${schema}.${prefix}${base}`
  })
}

/**
 * The migrations, in order: each is a list of statements run in one transaction under the migration
 * advisory lock, and recorded in `<prefix>outbox_migrations`.
 *
 * The head-of-line index holds only **claimed** records with an ordering key: only a claimed record can
 * block an older-first claim of its key (R-HOL), so the check reads a small index of the records in
 * flight, never the backlog.
 *
 * @since 0.1.0
 */
export const migrations = (
  t: TableNames
): ReadonlyArray<readonly [name: string, statements: ReadonlyArray<string>]> => [
  [
    "0001_create_outbox",
    [
      `CREATE TABLE IF NOT EXISTS ${t.outbox} (
  id text PRIMARY KEY,
  partition_key text NOT NULL,
  envelope_id text NOT NULL,
  binding_id text NOT NULL,
  route_id text NOT NULL DEFAULT '',
  address text NOT NULL DEFAULT '',
  payload bytea NOT NULL,
  headers text NOT NULL DEFAULT '{}',
  ordering_key text,
  created_at bigint NOT NULL,
  expires_at bigint,
  seq bigint NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'claimed', 'completed', 'expired')),
  claimed_by text,
  claim_version bigint NOT NULL DEFAULT 0,
  claimed_at bigint,
  first_attempted_at bigint,
  replay_count integer NOT NULL DEFAULT 0,
  completed_at bigint,
  terminal_at bigint
)`,
      `CREATE TABLE IF NOT EXISTS ${t.fence} (
  partition_key text PRIMARY KEY,
  max_version bigint NOT NULL DEFAULT 0
)`,
      `CREATE TABLE IF NOT EXISTS ${t.seq} (
  partition_key text PRIMARY KEY,
  seq_counter bigint NOT NULL DEFAULT 0
)`,
      `CREATE UNIQUE INDEX IF NOT EXISTS "${t.prefix}outbox_identity" ON ${t.outbox} (partition_key, envelope_id, binding_id)`,
      `CREATE INDEX IF NOT EXISTS "${t.claimIndex}" ON ${t.outbox} (partition_key, created_at, seq) INCLUDE (status)
  WHERE status IN ('pending', 'claimed')`,
      `CREATE INDEX IF NOT EXISTS "${t.keyIndex}" ON ${t.outbox} (partition_key, ordering_key, created_at, seq)
  WHERE ordering_key IS NOT NULL AND status = 'claimed'`,
      `CREATE INDEX IF NOT EXISTS "${t.prefix}outbox_expiry" ON ${t.outbox} (partition_key, expires_at)
  WHERE expires_at IS NOT NULL AND status = 'pending'`,
      `CREATE INDEX IF NOT EXISTS "${t.prefix}outbox_terminal" ON ${t.outbox} (terminal_at) WHERE terminal_at IS NOT NULL`
    ]
  ]
]

/**
 * The stored columns, in the order the store selects them.
 *
 * @since 0.1.0
 */
export const columns: ReadonlyArray<string> = SqlOutboxStatements.columns

/**
 * The SQL text of every statement the store issues: the shared statements (`SqlOutboxStatements`, bound
 * with `SqlOutboxStatements.binds(SqlDialect.postgres)`; their id lists are one `text[]` parameter, so
 * their text does not depend on the list's length) and PostgreSQL's own fence, seq allocation, insert and
 * notify. Exposed so tests can `EXPLAIN` them and the benchmark can issue the very same statements on a
 * raw connection. Every value is a `$n` parameter; only validated names are interpolated.
 *
 * @since 0.1.0
 */
export interface Statements extends Omit<SqlOutboxStatements.Statements, "claimUpdate" | "complete" | "release"> {
  /**
   * Params: partitionKey, version. The fence in one statement (R-CLAIM-2, R-EXP-1): creates the partition's
   * fence row at `version` when missing, else raises its mark to `version` when below it, and locks the row
   * until the transaction ends either way (as `SELECT … FOR UPDATE` would). Returns the mark after it
   * (`max_version`): above `version`, the token is stale, and the caller's rollback undoes the row's
   * rewrite (its value is unchanged).
   */
  readonly admitFence: string
  /** Params: partitionKeys[], counts[]. Returns `partition_key`, `seq_counter` (the last seq of each block). */
  readonly allocateSeq: string
  /**
   * Inserts records given as one array per column (id, partition_key, envelope_id, binding_id, route_id,
   * address, payload, headers, ordering_key, created_at, expires_at, seq), in array order, skipping
   * existing ids and identities. Returns the inserted ids.
   */
  readonly insert: string
  /** Params: channel, partitionKeys[]. */
  readonly notify: string
  /** The guarded claim update. Params: `SqlOutboxStatements.Binds.claimUpdate`. Returns the claimed ids. */
  readonly claimUpdate: string
  /** Params: `SqlOutboxStatements.Binds.complete`. Returns the completed ids. */
  readonly complete: string
  /** Params: `SqlOutboxStatements.Binds.release`. Returns the released ids. */
  readonly release: string
}

/** Any length: PostgreSQL binds an id list as one array parameter. */
const anyLength = 0

/**
 * Builds the {@link Statements} for a set of names.
 *
 * @since 0.1.0
 */
export const statements = (t: TableNames, options: { readonly staleReclaim: boolean }): Statements => {
  const shared = SqlOutboxStatements.statements(
    SqlDialect.postgres,
    {
      outbox: t.outbox,
      partitions: t.seq,
      claimIndex: t.claimIndex,
      keyIndex: t.keyIndex,
      terminalIndex: `${t.prefix}outbox_terminal`
    },
    options
  )
  return {
    ...shared,
    claimUpdate: shared.claimUpdate(anyLength),
    complete: shared.complete(anyLength),
    release: shared.release(anyLength),
    admitFence: `INSERT INTO ${t.fence} AS f (partition_key, max_version) VALUES ($1, $2)
ON CONFLICT (partition_key) DO UPDATE SET max_version = GREATEST(f.max_version, excluded.max_version)
RETURNING max_version`,
    allocateSeq: `INSERT INTO ${t.seq} AS s (partition_key, seq_counter)
SELECT p, n FROM unnest($1::text[], $2::bigint[]) AS u(p, n) ORDER BY p
ON CONFLICT (partition_key) DO UPDATE SET seq_counter = s.seq_counter + excluded.seq_counter
RETURNING partition_key, seq_counter`,
    insert: `INSERT INTO ${t.outbox} (id, partition_key, envelope_id, binding_id, route_id, address, payload, headers,
  ordering_key, created_at, expires_at, seq, status)
SELECT id, pk, env, bind, route, addr, payload, headers, okey, created, expires, seq, 'pending'
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[], $8::text[],
  $9::text[], $10::bigint[], $11::bigint[], $12::bigint[])
  WITH ORDINALITY AS r(id, pk, env, bind, route, addr, payload, headers, okey, created, expires, seq, ord)
ORDER BY ord
ON CONFLICT DO NOTHING
RETURNING id`,
    notify: `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`
  }
}

/**
 * A `bigint` column: `pg` returns it as a decimal string unless the client parses int8 itself.
 *
 * @since 0.1.0
 */
export const BigIntColumn = SqlOutboxRow.BigIntColumn

/**
 * The stored form of one row, as `pg` returns it.
 *
 * @since 0.1.0
 */
export const Row = SqlOutboxRow.Row

/**
 * @since 0.1.0
 */
export type Row = SqlOutboxRow.Row

/**
 * Decodes one stored row into an `OutboxRecord` (`SqlOutboxRow.decodeRow`).
 *
 * @since 0.1.0
 */
export const decodeRow = SqlOutboxRow.decodeRow

/**
 * The column arrays of {@link Statements.insert} for records with their seqs.
 *
 * @since 0.1.0
 */
export const insertParams = (
  records: ReadonlyArray<readonly [OutboxRecord.PreparedRecord, number]>
): ReadonlyArray<ReadonlyArray<unknown>> => {
  const cols: Array<Array<unknown>> = SqlOutboxStatements.recordColumns.map(() => [])
  const values: Array<unknown> = []
  for (const [record, seq] of records) {
    values.length = 0
    SqlOutboxStatements.pushRecordValues(values, record, seq)
    values.forEach((value, i) => cols[i]?.push(value))
  }
  return cols
}

/**
 * Why a text value cannot be stored in PostgreSQL `text` (a NUL character), or `undefined`.
 *
 * @since 0.1.0
 */
export const textProblem = (record: OutboxRecord.PreparedRecord): string | undefined => {
  const texts: Array<readonly [string, string]> = [
    ["id", record.id],
    ["partitionKey", record.partitionKey],
    ["envelopeId", record.envelopeId],
    ["bindingId", record.bindingId],
    ["routeId", record.routeId],
    ["address", record.address],
    ["orderingKey", Option.getOrElse(record.orderingKey, () => "")]
  ]
  for (const [key, value] of Object.entries(record.headers)) texts.push([`header ${key}`, key + value])
  for (const [name, value] of texts) {
    if (value.includes("\u0000")) return `${name} contains a NUL character, which PostgreSQL text cannot hold`
  }
  return undefined
}

/**
 * True for a SQL failure PostgreSQL reports as a serialization failure (40001) or deadlock (40P01):
 * the transaction may simply be run again.
 *
 * @since 0.1.0
 */
export const isConflict = (error: unknown): boolean => {
  const state = sqlState(error)
  return state === "40001" || state === "40P01"
}

/**
 * The SQLSTATE of a failed statement, when the driver reported one.
 *
 * @since 0.1.0
 */
export const sqlState = (error: unknown): string | undefined => {
  if (typeof error !== "object" || error === null || Reflect.get(error, "_tag") !== "SqlError") return undefined
  const cause: unknown = Reflect.get(error, "cause")
  const code = typeof cause === "object" && cause !== null ? Reflect.get(cause, "code") : undefined
  return typeof code === "string" ? code : undefined
}
