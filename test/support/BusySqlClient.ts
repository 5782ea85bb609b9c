/**
 * A fault-injecting decorator over the `SqlClient` in context: chosen statements fail with a `SqlError`
 * whose cause carries the driver code `SQLITE_BUSY` (sometimes `SQLITE_LOCKED`), as they do when another
 * connection holds the write lock past the busy timeout. A failed statement is not executed.
 *
 * Faults are drawn from a deterministic generator (a seed replays them), either at a rate or as bursts
 * (the next N matching statements all fail, enough to exhaust a store's busy retry).
 *
 * Transaction control (`BEGIN`, `COMMIT`, `SAVEPOINT`, `RELEASE`) is spared unless `control` is set, and
 * `ROLLBACK` always is. In WAL mode with a deferred `BEGIN` SQLite does not report busy on them, and
 * `@effect/sql` 0.52's `withTransaction` turns a failing `COMMIT` (and the `ROLLBACK` that follows a
 * failed `BEGIN`) into a defect, so faults there test the SQL client rather than the store.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"

/** Mutable fault settings and counters, shared by the test and the decorator. */
export interface BusyFaults {
  /** Faults are injected only while true. */
  enabled: boolean
  /** Probability that a matching statement fails. */
  rate: number
  /** Share of injected faults reported as `SQLITE_LOCKED` instead of `SQLITE_BUSY`. */
  lockedShare: number
  /** The next `burst` matching statements fail (counts down). */
  burst: number
  /** Which statements may fail (default: every statement except transaction control). */
  match: (sql: string) => boolean
  /** Also fail `BEGIN`, `COMMIT`, `SAVEPOINT` and `RELEASE` (default false). */
  control: boolean
  /** Statements seen while enabled. */
  statements: number
  /** Faults injected, by code. */
  busy: number
  locked: number
}

/** A small deterministic generator (mulberry32) so a seed replays the same faults. */
export const seededRandom = (seed: number): (() => number) => {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Fault settings with nothing injected. */
export const makeFaults = (): BusyFaults => ({
  enabled: false,
  rate: 0,
  lockedShare: 0.25,
  burst: 0,
  match: () => true,
  control: false,
  statements: 0,
  busy: 0,
  locked: 0
})

const isRollback = (sql: string): boolean => /^\s*ROLLBACK/i.test(sql)
const isControl = (sql: string): boolean => /^\s*(BEGIN|COMMIT|END|SAVEPOINT|RELEASE)\b/i.test(sql)

/** A driver error shaped like better-sqlite3's `SqliteError` (`code` on the cause). */
const driverError = (code: "SQLITE_BUSY" | "SQLITE_LOCKED"): SqlError =>
  new SqlError({
    cause: Object.assign(new Error(code === "SQLITE_BUSY" ? "database is locked" : "database table is locked"), {
      code
    }),
    message: "Failed to execute statement"
  })

/**
 * Decides whether the statement `sql` fails; when it does, the failure to raise.
 */
const decide = (faults: BusyFaults, random: () => number, sql: string): SqlError | undefined => {
  if (!faults.enabled || isRollback(sql) || (!faults.control && isControl(sql)) || !faults.match(sql)) {
    return undefined
  }
  faults.statements++
  const hit = faults.burst > 0 ? (faults.burst--, true) : random() < faults.rate
  if (!hit) return undefined
  const locked = random() < faults.lockedShare
  if (locked) faults.locked++
  else faults.busy++
  return driverError(locked ? "SQLITE_LOCKED" : "SQLITE_BUSY")
}

const wrapConnection = (inner: Connection, faults: BusyFaults, random: () => number): Connection => {
  const gate = (sql: string): Effect.Effect<void, SqlError> =>
    Effect.suspend(() => {
      const error = decide(faults, random, sql)
      return error === undefined ? Effect.void : Effect.fail(error)
    })
  return {
    execute: (sql, params, transformRows) => Effect.zipRight(gate(sql), inner.execute(sql, params, transformRows)),
    executeRaw: (sql, params) => Effect.zipRight(gate(sql), inner.executeRaw(sql, params)),
    executeStream: (sql, params, transformRows) =>
      Stream.unwrap(Effect.as(gate(sql), inner.executeStream(sql, params, transformRows))),
    executeValues: (sql, params) => Effect.zipRight(gate(sql), inner.executeValues(sql, params)),
    executeUnprepared: (sql, params, transformRows) =>
      Effect.zipRight(gate(sql), inner.executeUnprepared(sql, params, transformRows))
  }
}

/**
 * Builds a `SqlClient` running every statement on `inner`'s connection (held for the statement or the
 * whole transaction, as `inner.reserve` does) through the fault gate.
 */
export const make = (
  inner: SqlClient.SqlClient,
  faults: BusyFaults,
  random: () => number
): Effect.Effect<SqlClient.SqlClient> => {
  const acquirer = Effect.map(inner.reserve, (connection) => wrapConnection(connection, faults, random))
  return SqlClient.make({
    acquirer,
    transactionAcquirer: acquirer,
    compiler: Statement.makeCompilerSqlite(),
    spanAttributes: [["db.system.name", "sqlite"]]
  }).pipe(Effect.provide(Reactivity.layer))
}

/**
 * Replaces the `SqlClient` in context with the fault-injecting decorator. Set `faults.enabled = false`
 * for fault-free reads (state checks).
 */
export const layer = (
  faults: BusyFaults,
  random: () => number
): Layer.Layer<SqlClient.SqlClient, never, SqlClient.SqlClient> =>
  Layer.effect(
    SqlClient.SqlClient,
    Effect.flatMap(SqlClient.SqlClient, (inner) => make(inner, faults, random))
  )
