/**
 * What the SQL backends' shared statements (`SqlOutboxStatements`, `SqlInspection`) leave to the database:
 * how a parameter and an id list are written and bound, the live-record predicate their partial indexes
 * are declared with (or, without partial indexes, the indexed column that stands for it), index hints,
 * whether a write can return the ids it changed (`RETURNING`) and how a bounded delete is written. Every
 * value is a bound parameter; a dialect only ever writes placeholders and validated, already quoted
 * identifiers.
 *
 * @since 0.1.0
 */

/**
 * Placeholders of one statement, numbered in the order they are written (which is the bind order).
 *
 * @since 0.1.0
 */
export interface Placeholders {
  /** The next parameter. */
  readonly next: () => string
  /** A membership test of `column` in a list of `n` ids bound by {@link SqlDialect.bindIds}. */
  readonly inIds: (column: string, n: number) => string
}

/**
 * A SQL dialect (see the module doc).
 *
 * @since 0.1.0
 */
export interface SqlDialect {
  readonly name: "sqlite" | "postgres" | "mysql"
  /** A fresh numbering of the placeholders of one statement. */
  readonly placeholders: () => Placeholders
  /** Appends the bound values of an id list written with {@link Placeholders.inIds}. */
  readonly bindIds: (params: Array<unknown>, ids: ReadonlyArray<string>) => void
  /**
   * The non-terminal predicate on `alias`, written exactly as the partial indexes declare it (a row with an
   * unknown status counts as live where the database allows one, so the claim walk reports it).
   */
  readonly live: (alias: string) => string
  /** The index hint after a table reference (`INDEXED BY` in SQLite), or nothing. */
  readonly indexedBy: (index: string) => string
  /** `column` written so the planner does not pick an index on it (SQLite's unary `+`), or as is. */
  readonly unindexed: (column: string) => string
  /** The column a `DELETE … WHERE key IN (SELECT key …)` addresses rows by. */
  readonly rowKey: string
  /**
   * The clause after a write that returns the ids it changed (`RETURNING id`), or nothing where the
   * database has none (MySQL): the backend then counts affected rows and reads back what it needs.
   */
  readonly returning: string
  /**
   * True where a single-table `DELETE … ORDER BY … LIMIT n` is the bounded delete (MySQL, which cannot
   * `DELETE … WHERE key IN (SELECT … FROM` the same table `LIMIT n)`).
   */
  readonly limitedDelete: boolean
}

/**
 * SQLite: `?` placeholders bound in text order, id lists spelled out (`IN (?,?,…)`), index hints.
 *
 * @since 0.1.0
 */
export const sqlite: SqlDialect = {
  name: "sqlite",
  placeholders: () => ({
    next: () => "?",
    // without spaces: the client hashes the statement text on every execution
    inIds: (column, n) => `${column} IN (${n <= 0 ? "" : "?" + ",?".repeat(n - 1)})`
  }),
  bindIds: (params, ids) => {
    for (const id of ids) params.push(id)
  },
  live: (alias) => `${alias}.status NOT IN ('completed', 'expired')`,
  indexedBy: (index) => ` INDEXED BY ${index}`,
  unindexed: (column) => `+${column}`,
  rowKey: "rowid",
  returning: "\nRETURNING id",
  limitedDelete: false
}

/**
 * PostgreSQL: `$n` placeholders, an id list bound as one `text[]` value, no hints.
 *
 * @since 0.1.0
 */
export const postgres: SqlDialect = {
  name: "postgres",
  placeholders: () => {
    let n = 0
    return {
      next: () => `$${++n}`,
      inIds: (column) => `${column} = ANY($${++n}::text[])`
    }
  },
  bindIds: (params, ids) => {
    params.push(ids)
  },
  live: (alias) => `${alias}.status IN ('pending', 'claimed')`,
  indexedBy: () => "",
  unindexed: (column) => column,
  rowKey: "id",
  returning: "\nRETURNING id",
  limitedDelete: false
}

/**
 * MySQL 8 and MariaDB (InnoDB): `?` placeholders bound in text order, id lists spelled out, no partial
 * indexes (the live predicate is the stored generated column `live`, which leads the claim index after
 * the partition key), `FORCE INDEX` hints, no `RETURNING` (writes report affected rows), bounded deletes
 * with `DELETE … ORDER BY … LIMIT`.
 *
 * @since 0.1.0
 */
export const mysql: SqlDialect = {
  name: "mysql",
  placeholders: () => ({
    next: () => "?",
    inIds: (column, n) => `${column} IN (${n <= 0 ? "NULL" : "?" + ",?".repeat(n - 1)})`
  }),
  bindIds: (params, ids) => {
    for (const id of ids) params.push(id)
  },
  live: (alias) => `${alias}.live = 1`,
  indexedBy: (index) => ` FORCE INDEX (\`${index}\`)`,
  unindexed: (column) => column,
  rowKey: "id",
  returning: "",
  limitedDelete: true
}
