/**
 * How the MySQL stores run statements: the shared runner (`SqlTransaction`) — on the connection of a
 * caller's `sql.withTransaction` when there is one (inside a savepoint, R-PERSIST-6), else on a connection
 * reserved for the operation inside the store's own transaction, opened `READ COMMITTED` (a locking read of
 * a missing row then takes no gap lock, so claims and persists of other partitions never queue behind it).
 * Deadlocks (1213) and lock-wait timeouts (1205) of a transaction the store owns are rolled back and
 * retried a bounded number of times. Writes report affected rows (MySQL has no `RETURNING`).
 *
 * @since 0.1.0
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as SqlTransaction from "../sql/SqlTransaction.js"
import { isConflict } from "./MysqlOutboxSchema.js"

/**
 * What a write reports: rows it matched (the client's default `FOUND_ROWS`) and the statement's insert id
 * (the value of `LAST_INSERT_ID(expr)` when the statement set one, else 0).
 *
 * @since 0.1.0
 */
export interface WriteResult {
  readonly affectedRows: number
  readonly insertId: number
}

/**
 * The statement runner of one MySQL store.
 *
 * @since 0.1.0
 */
export interface Transactions extends SqlTransaction.Transactions {
  /** Runs one write and returns what it reports. */
  readonly write: (
    conn: Connection,
    text: string,
    params: ReadonlyArray<unknown>
  ) => Effect.Effect<WriteResult, SqlError>
  /** Runs statements that cannot be prepared (DDL, several statements in one text), without parameters. */
  readonly unprepared: (conn: Connection, text: string) => Effect.Effect<ReadonlyArray<unknown>, SqlError>
}

const numberField = (value: unknown, name: string): number => {
  if (typeof value !== "object" || value === null) return 0
  const n: unknown = Reflect.get(value, name)
  return typeof n === "number" ? n : typeof n === "string" ? Number(n) : 0
}

/**
 * Builds the runner on a `SqlClient` (a `MysqlClient`).
 *
 * @since 0.1.0
 */
export const make = (sql: SqlClient.SqlClient): Transactions => {
  const unprepared: Transactions["unprepared"] = (conn, text) => conn.executeUnprepared(text, [], undefined)
  const base = SqlTransaction.make(sql, {
    begin: "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION",
    isConflict,
    control: unprepared
  })
  const write: Transactions["write"] = (conn, text, params) =>
    Effect.map(conn.executeRaw(text, params), (result) => ({
      affectedRows: numberField(result, "affectedRows"),
      insertId: numberField(result, "insertId")
    }))
  return { ...base, write, unprepared }
}
