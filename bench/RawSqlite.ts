/**
 * better-sqlite3 as the benches' raw baselines call it, without Effect or the store (typed here: the package ships
 * no declarations; only what the benches use).
 */
import { createRequire } from "node:module"

/** A prepared statement. */
export interface RawStatement {
  run(...params: ReadonlyArray<unknown>): { readonly changes: number }
  all(...params: ReadonlyArray<unknown>): Array<Record<string, unknown>>
  /** Switches the statement to rows as arrays of values (better-sqlite3's raw mode). */
  raw(on: true): RawValuesStatement
}

/** A statement in raw mode: each row an array of its values, in the order of the statement's columns. */
export interface RawValuesStatement {
  all(...params: ReadonlyArray<unknown>): Array<ReadonlyArray<unknown>>
}

/** A database connection. */
export interface RawDatabase {
  prepare(sql: string): RawStatement
  exec(sql: string): void
  pragma(sql: string): unknown
  close(): void
}

/** better-sqlite3's `Database` constructor. */
export const RawSqlite: new (filename: string) => RawDatabase = createRequire(import.meta.url)("better-sqlite3")

/**
 * How a raw baseline reads the claim's candidate rows: `"objects"`, better-sqlite3's default (a row object built
 * through V8's API, a property at a time), or `"values"`, raw mode (an array of values a row), as the store reads
 * them (`SqliteOutboxRows.rowOfValues`).
 */
export type RawRows = "objects" | "values"

/**
 * The ids of the claim's candidates (the first column of the store's `selectClaimable`): read through `objects`
 * as row objects, or through `values` (the same statement in raw mode) when given.
 */
export const candidateIds = (
  objects: RawStatement,
  values: RawValuesStatement | undefined,
  params: ReadonlyArray<unknown>
): Array<string> =>
  values === undefined
    ? objects.all(...params).map((row) => String(row["id"]))
    : values.all(...params).map((row) => String(row[0]))
