/**
 * How the PostgreSQL stores run statements: the shared runner (`SqlTransaction`) with `BEGIN` and
 * PostgreSQL's conflicts (serialization failures and deadlocks, SQLSTATE 40001/40P01) — on the connection
 * of a caller's `sql.withTransaction` when there is one (inside a savepoint, R-PERSIST-6), else inside the
 * store's own `BEGIN … COMMIT` on a reserved connection, conflicts of its own retried a bounded number of
 * times.
 *
 * @since 0.1.0
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as SqlTransaction from "../sql/SqlTransaction.js"
import { isConflict } from "./PostgresOutboxSchema.js"

/**
 * Attempts after the first for a transaction that failed with a serialization failure or deadlock.
 *
 * @since 0.1.0
 */
export const conflictRetries = SqlTransaction.conflictRetries

/**
 * The statement runner of one store.
 *
 * @since 0.1.0
 */
export type Transactions = SqlTransaction.Transactions

/**
 * Builds the runner on a `SqlClient` (a `PgClient`).
 *
 * @since 0.1.0
 */
export const make = (sql: SqlClient.SqlClient): Transactions => SqlTransaction.make(sql, { begin: "BEGIN", isConflict })
