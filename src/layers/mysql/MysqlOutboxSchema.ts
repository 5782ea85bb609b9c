/**
 * The MySQL / MariaDB outbox schema (SPEC §3.5): table and index names for a database and table prefix,
 * the migrations that create them, the SQL text of every statement the store issues, and what the store
 * checks of a record before storing it.
 *
 * InnoDB tables in `utf8mb4` with a binary, no-pad collation (so keys compare byte for byte: `a` and
 * `a ` and `A` are three partitions). Times are `BIGINT` epoch milliseconds; `ordering_key` is NULL for
 * keyless records; `status` is held to the four record states by a CHECK constraint. MySQL has no partial
 * indexes: the stored generated column `live` (1 for `pending` and `claimed`, 0 for terminal records)
 * follows the partition key in the claim index, so the claim reads live records in age order straight off
 * the index, past the terminal records its retention keeps. Fence (claim high-water mark) and seq counter
 * live in separate tables, so a persist inside a long business transaction never holds the row a claim
 * of its partition locks. Indexed text columns hold at most 255 characters (InnoDB's 3072-byte key limit).
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { InvalidConfiguration } from "../../domain/OutboxError.js"
import type * as OutboxRecord from "../../domain/OutboxRecord.js"
import * as SqlDialect from "../sql/SqlDialect.js"
import * as SqlOutboxStatements from "../sql/SqlOutboxStatements.js"

/**
 * The quoted, database-qualified names of the outbox tables and the bare names of their indexes.
 *
 * @since 0.1.0
 */
export interface TableNames {
  /** The database (unquoted), or `undefined` for the connection's current database. */
  readonly database: string | undefined
  /** The table prefix (unquoted). */
  readonly prefix: string
  readonly outbox: string
  readonly fence: string
  readonly seq: string
  readonly migrations: string
  readonly claimIndex: string
  readonly keyIndex: string
  readonly terminalIndex: string
  /** The name of the `GET_LOCK` lock that serialises migrations of this database and prefix. */
  readonly migrationLock: string
}

const identifierPattern = /^[A-Za-z_][A-Za-z0-9_]*$/

/** Problems with a database name and a table prefix, for `InvalidConfiguration`. */
const namingProblems = (database: string | undefined, prefix: string): Array<string> => {
  const problems: Array<string> = []
  if (database !== undefined && (!identifierPattern.test(database) || database.length > 40)) {
    problems.push(`database ${JSON.stringify(database)} must match ${identifierPattern.source} (at most 40 characters)`)
  }
  if (prefix.length > 0 && (!identifierPattern.test(prefix) || prefix.length > 20)) {
    problems.push(
      `tablePrefix ${JSON.stringify(prefix)} must match ${identifierPattern.source} (at most 20 characters)`
    )
  }
  return problems
}

/** A quoted table name, database-qualified when a database is given. */
const quoted = (database: string | undefined, table: string): string =>
  database === undefined ? `\`${table}\`` : `\`${database}\`.\`${table}\``

/**
 * The name of a `GET_LOCK` lock for a key: MySQL limits lock names to 64 characters, so long keys are
 * hashed.
 *
 * @since 0.1.0
 */
export const lockName = (key: string): string =>
  key.length <= 64 ? key : `effect-outbox:${createHash("sha256").update(key).digest("hex").slice(0, 40)}`

/**
 * Validates a database name and a table prefix (letters, digits and `_`, not starting with a digit; the
 * prefix may be empty) and derives the names from them.
 *
 * @since 0.1.0
 */
export const tableNames = (
  component: string,
  database: string | undefined,
  prefix: string
): Either.Either<TableNames, InvalidConfiguration> => {
  const problems = namingProblems(database, prefix)
  if (problems.length > 0) return Either.left(new InvalidConfiguration({ component, problems }))
  return Either.right({
    database,
    prefix,
    outbox: quoted(database, `${prefix}outbox`),
    fence: quoted(database, `${prefix}outbox_fence`),
    seq: quoted(database, `${prefix}outbox_seq`),
    migrations: quoted(database, `${prefix}outbox_migrations`),
    claimIndex: `${prefix}outbox_claim`,
    keyIndex: `${prefix}outbox_claimed_key`,
    terminalIndex: `${prefix}outbox_terminal`,
    migrationLock: lockName(`effect-outbox:${database ?? ""}.${prefix}outbox`)
  })
}

/**
 * The names of a store with one table (the lease and dead-letter stores): the quoted table
 * `<database>.<prefix><base>`, its migrations table and migration lock name.
 *
 * @since 0.1.0
 */
export interface StoreTableNames {
  readonly database: string | undefined
  readonly prefix: string
  readonly table: string
  readonly migrations: string
  readonly lock: string
}

/**
 * Validates a database name and a table prefix like {@link tableNames} (plus the store's own `problems`)
 * and derives the names of a one-table store whose table is `<prefix><base>`.
 *
 * @since 0.1.0
 */
export const storeTableNames = (
  component: string,
  options: { readonly database?: string | undefined; readonly tablePrefix?: string | undefined },
  base: string,
  problems: ReadonlyArray<string> = []
): Either.Either<StoreTableNames, InvalidConfiguration> => {
  const database = options.database
  const prefix = options.tablePrefix ?? ""
  const all = [...namingProblems(database, prefix), ...problems]
  if (all.length > 0) return Either.left(new InvalidConfiguration({ component, problems: all }))
  return Either.right({
    database,
    prefix,
    table: quoted(database, `${prefix}${base}`),
    migrations: quoted(database, `${prefix}${base}_migrations`),
    lock: lockName(`effect-outbox:${database ?? ""}.${prefix}${base}`)
  })
}

/**
 * The table options every table of the stores is created with: InnoDB, `utf8mb4` in the given binary
 * collation (see {@link collationQuery}).
 *
 * @since 0.1.0
 */
export const tableOptions = (collation: string): string => `ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}`

/**
 * Lists the binary `utf8mb4` collations the server has, best first by {@link pickCollation}.
 *
 * @since 0.1.0
 */
export const collationQuery = `SELECT COLLATION_NAME AS name FROM information_schema.COLLATIONS
WHERE COLLATION_NAME IN ('utf8mb4_0900_bin', 'utf8mb4_nopad_bin', 'utf8mb4_bin')`

/**
 * The collation of the tables: byte order without trailing-space padding (`utf8mb4_0900_bin` on MySQL 8,
 * `utf8mb4_nopad_bin` on MariaDB), `utf8mb4_bin` only where neither exists.
 *
 * @since 0.1.0
 */
export const pickCollation = (available: ReadonlyArray<string>): string =>
  ["utf8mb4_0900_bin", "utf8mb4_nopad_bin"].find((c) => available.includes(c)) ?? "utf8mb4_bin"

/**
 * The migrations, in order: each is a list of statements run under the migration lock and recorded in
 * `<prefix>outbox_migrations`. Indexes are declared in `CREATE TABLE` (MySQL 8 has no
 * `CREATE INDEX IF NOT EXISTS`).
 *
 * - `outbox_claim (partition_key, live, created_at, seq, status)`: the claim's age-ordered walk of live
 *   records and the pending/claimed counts (covering).
 * - `outbox_claimed_key (partition_key, ordering_key, status, created_at, seq)`: the head-of-line check
 *   reads only the claimed records of one key (R-HOL).
 *
 * @since 0.1.0
 */
export const migrations = (
  t: TableNames,
  collation: string
): ReadonlyArray<readonly [name: string, statements: ReadonlyArray<string>]> => [
  [
    "0001_create_outbox",
    [
      `CREATE TABLE IF NOT EXISTS ${t.outbox} (
  id VARCHAR(255) NOT NULL PRIMARY KEY,
  partition_key VARCHAR(255) NOT NULL,
  envelope_id VARCHAR(255) NOT NULL,
  binding_id VARCHAR(255) NOT NULL,
  route_id TEXT NOT NULL,
  address TEXT NOT NULL,
  payload LONGBLOB NOT NULL,
  headers LONGTEXT NOT NULL,
  ordering_key VARCHAR(255) NULL,
  created_at BIGINT NOT NULL,
  expires_at BIGINT NULL,
  seq BIGINT NOT NULL,
  status VARCHAR(16) NOT NULL,
  claimed_by TEXT NULL,
  claim_version BIGINT NOT NULL DEFAULT 0,
  claimed_at BIGINT NULL,
  first_attempted_at BIGINT NULL,
  replay_count INT NOT NULL DEFAULT 0,
  completed_at BIGINT NULL,
  terminal_at BIGINT NULL,
  live TINYINT AS (IF(status IN ('completed', 'expired'), 0, 1)) STORED,
  CONSTRAINT \`${t.prefix}outbox_status\` CHECK (status IN ('pending', 'claimed', 'completed', 'expired')),
  UNIQUE KEY \`${t.prefix}outbox_identity\` (partition_key, envelope_id, binding_id),
  KEY \`${t.claimIndex}\` (partition_key, live, created_at, seq, status),
  KEY \`${t.keyIndex}\` (partition_key, ordering_key, status, created_at, seq),
  KEY \`${t.prefix}outbox_expiry\` (partition_key, status, expires_at),
  KEY \`${t.terminalIndex}\` (terminal_at)
) ${tableOptions(collation)}`,
      `CREATE TABLE IF NOT EXISTS ${t.fence} (
  partition_key VARCHAR(255) NOT NULL PRIMARY KEY,
  max_version BIGINT NOT NULL DEFAULT 0
) ${tableOptions(collation)}`,
      `CREATE TABLE IF NOT EXISTS ${t.seq} (
  partition_key VARCHAR(255) NOT NULL PRIMARY KEY,
  seq_counter BIGINT NOT NULL DEFAULT 0
) ${tableOptions(collation)}`
    ]
  ]
]

/**
 * The SQL text of every statement the store issues: the shared statements (`SqlOutboxStatements` over
 * `SqlDialect.mysql`, bound with `SqlOutboxStatements.binds(SqlDialect.mysql)`; without `RETURNING` their
 * writes report affected rows) and MySQL's own fence, seq allocation, insert and read-backs. Exposed so
 * tests can `EXPLAIN` them and the benchmark can issue the very same statements on a raw connection.
 * Every value is a `?` parameter; only validated names are interpolated.
 *
 * @since 0.1.0
 */
export interface Statements extends SqlOutboxStatements.Statements {
  /** Params: partitionKey. Locks the fence row; returns `max_version`. */
  readonly lockFence: string
  /**
   * Params: partitionKey, version, version. Creates the fence row at `version` when missing, else raises its
   * mark to `version` when below it (`GREATEST`: a higher mark stays), and locks the row either way.
   */
  readonly admitFence: string
  /**
   * Params: partitionKey, n, n. Adds `n` to the partition's seq counter (creating it at `n`); the new
   * counter is the statement's insert id (`LAST_INSERT_ID(expr)`) when it updated, `n` when it inserted.
   */
  readonly allocateSeq: string
  /** The insert of `n` records, skipping existing ids and identities. Params: `n` × {@link recordColumns}. */
  readonly insert: (n: number) => string
  /** Params: `n` ids. Returns `id`, `partition_key`, `seq` of the records holding them. */
  readonly readBack: (n: number) => string
  /** Params: `n` ids, owner, version, claimedAt. Returns the ids claimed by that token at that time. */
  readonly claimedBack: (n: number) => string
  /** Params: `n` ids, owner, version. Locks and returns the ids claimed by that token. */
  readonly lockClaimed: (n: number) => string
}

/**
 * The columns an insert writes, in bind order (`status` is written as `pending`).
 *
 * @since 0.1.0
 */
export const recordColumns = SqlOutboxStatements.recordColumns

/**
 * Builds the {@link Statements} for a set of names.
 *
 * @since 0.1.0
 */
export const statements = (t: TableNames, options: { readonly staleReclaim: boolean }): Statements => {
  const d = SqlDialect.mysql
  const shared = SqlOutboxStatements.statements(
    d,
    {
      outbox: t.outbox,
      partitions: t.seq,
      claimIndex: t.claimIndex,
      keyIndex: t.keyIndex,
      terminalIndex: t.terminalIndex
    },
    options
  )
  const row = `(${recordColumns.map(() => "?").join(",")},'pending')`
  const ids = (n: number) => d.placeholders().inIds("id", n)
  return {
    ...shared,
    // a loose index scan of the claim index (one seek per partition, `live = 1` checked in the index): the
    // shared skip scan's correlated `min()` reads the rest of the index at every step on MariaDB
    listPartitions: `SELECT o.partition_key FROM ${t.outbox} AS o FORCE INDEX (\`${t.claimIndex}\`)
WHERE o.partition_key > ? AND o.live = 1
GROUP BY o.partition_key ORDER BY o.partition_key LIMIT ?`,
    // identity reads during a persist are locking reads: they see the latest committed rows also inside a
    // caller's REPEATABLE READ transaction, whose snapshot may predate a concurrent duplicate
    findIdentity: `${shared.findIdentity} LOCK IN SHARE MODE`,
    findById: `${shared.findById} LOCK IN SHARE MODE`,
    lockFence: `SELECT max_version FROM ${t.fence} WHERE partition_key = ? FOR UPDATE`,
    admitFence: `INSERT INTO ${t.fence} (partition_key, max_version) VALUES (?, ?)
ON DUPLICATE KEY UPDATE max_version = GREATEST(max_version, ?)`,
    allocateSeq: `INSERT INTO ${t.seq} (partition_key, seq_counter) VALUES (?, ?)
ON DUPLICATE KEY UPDATE seq_counter = LAST_INSERT_ID(seq_counter + ?)`,
    insert: SqlOutboxStatements.bySize(
      (n) =>
        `INSERT IGNORE INTO ${t.outbox} (${recordColumns.join(", ")}, status) VALUES ${Array.from({ length: n }, () => row).join(",")}`
    ),
    readBack: SqlOutboxStatements.bySize(
      (n) => `SELECT id, partition_key, seq FROM ${t.outbox} WHERE ${ids(n)} LOCK IN SHARE MODE`
    ),
    claimedBack: SqlOutboxStatements.bySize(
      (n) => `SELECT id FROM ${t.outbox}
WHERE ${ids(n)} AND status = 'claimed' AND claimed_by = ? AND claim_version = ? AND claimed_at = ?`
    ),
    lockClaimed: SqlOutboxStatements.bySize(
      (n) => `SELECT id FROM ${t.outbox}
WHERE ${ids(n)} AND status = 'claimed' AND claimed_by = ? AND claim_version = ? FOR UPDATE`
    )
  }
}

/** Indexed text columns hold at most this many characters. */
const maxKeyLength = 255

/**
 * Why a record cannot be stored as given: a key (id, partition key, envelope id, binding id, ordering
 * key) over 255 characters; `undefined` when it can. Text that is not well-formed UTF-16 (a lone
 * surrogate, which `utf8mb4` cannot hold) never gets here: the store core rejects it in every string
 * field, for every backend, before it asks the backend.
 *
 * @since 0.1.0
 */
export const textProblem = (record: OutboxRecord.PreparedRecord): string | undefined => {
  const name =
    record.id.length > maxKeyLength
      ? "id"
      : record.partitionKey.length > maxKeyLength
        ? "partitionKey"
        : record.envelopeId.length > maxKeyLength
          ? "envelopeId"
          : record.bindingId.length > maxKeyLength
            ? "bindingId"
            : Option.isSome(record.orderingKey) && record.orderingKey.value.length > maxKeyLength
              ? "orderingKey"
              : undefined
  return name === undefined ? undefined : `${name} is longer than ${maxKeyLength} characters (MySQL key column)`
}

/** The MySQL error number of a failed statement, when the driver reported one. */
export const errno = (error: unknown): number | undefined => {
  if (typeof error !== "object" || error === null || Reflect.get(error, "_tag") !== "SqlError") return undefined
  const cause: unknown = Reflect.get(error, "cause")
  if (typeof cause !== "object" || cause === null) return undefined
  const n: unknown = Reflect.get(cause, "errno")
  return typeof n === "number" ? n : undefined
}

/**
 * True for a SQL failure InnoDB reports as a deadlock (1213) or a lock-wait timeout (1205): the
 * transaction may simply be run again.
 *
 * @since 0.1.0
 */
export const isConflict = (error: unknown): boolean => {
  const n = errno(error)
  return n === 1213 || n === 1205
}
