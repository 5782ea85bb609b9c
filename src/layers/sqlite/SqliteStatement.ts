/**
 * Running the SQLite outbox store's statements on a connection and reading their results: one column
 * of every row (checked structurally, decoded with Schema only when the check fails) or whole outbox
 * rows (`CorruptRecord` on a bad row).
 *
 * @since 0.1.0
 */
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type { CorruptRecord } from "../../domain/OutboxError.js"
import { StoreUnavailable } from "../../domain/OutboxError.js"
import type * as OutboxRecord from "../../domain/OutboxRecord.js"
import * as SqliteOutboxRows from "./SqliteOutboxRows.js"
import { decodeAll } from "../DecodeAll.js"

/** Row decoders, compiled once: they only run to describe a row that failed its structural check. */
const rowsOf = <A, I>(schema: Schema.Schema<A, I>) => Schema.decodeUnknownEither(Schema.Array(schema))
const decodeFence = rowsOf(Schema.Struct({ max_version: Schema.Number }))
const decodePartitions = rowsOf(Schema.Struct({ partition_key: Schema.String }))
const decodeIds = rowsOf(SqliteOutboxRows.IdRow)
/** Decodes identity rows (`partition_key`, `envelope_id`, `binding_id`). */
export const decodeIdentities = rowsOf(SqliteOutboxRows.IdentityRow)
const decodeCount = rowsOf(SqliteOutboxRows.CountRow)

/**
 * Reads one column of every row. A row whose column fails `check` (a subset of what `decode`'s schema
 * accepts) sends the whole result through `decode`, which then accepts it or describes the problem as
 * a `StoreUnavailable`: acceptance is the schema's, without running it on well-formed results.
 */
const columnOf =
  <A>(
    column: string,
    check: (u: unknown) => u is A,
    decode: (rows: unknown) => Either.Either<ReadonlyArray<Record<string, A>>, ParseResult.ParseError>
  ) =>
  (operation: string, rows: ReadonlyArray<unknown>): Either.Either<Array<A>, StoreUnavailable> => {
    const out: Array<A> = []
    for (const row of rows) {
      const value: unknown = typeof row === "object" && row !== null ? Reflect.get(row, column) : undefined
      if (!check(value)) {
        const decoded = decode(rows)
        return Either.isRight(decoded)
          ? Either.right(decoded.right.map((r) => r[column]).filter((v): v is A => v !== undefined))
          : Either.left(new StoreUnavailable({ operation, cause: decoded.left }))
      }
      out.push(value)
    }
    return Either.right(out)
  }

const isString = (u: unknown): u is string => typeof u === "string"
const isNumber = (u: unknown): u is number => typeof u === "number"
/** Reads the `id` column of every row. */
export const idsOf = columnOf("id", isString, decodeIds)
/** Reads the `max_version` column of every row. */
export const fenceOf = columnOf("max_version", isNumber, decodeFence)
/** Reads the `partition_key` column of every row. */
export const partitionsOf = columnOf("partition_key", isString, decodePartitions)
/** Reads the `n` column of every row. */
export const countOf = columnOf("n", isNumber, decodeCount)

const decodeSeqBlocks = rowsOf(Schema.Struct({ partition_key: Schema.String, seq_counter: Schema.Number }))

/**
 * Reads `partition_key` and `seq_counter` of every row (the seq blocks of a multi-partition persist),
 * checked structurally, described through the schema when a row fails the check.
 */
export const seqBlocksOf = (
  operation: string,
  rows: ReadonlyArray<unknown>
): Either.Either<Array<{ readonly partitionKey: string; readonly last: number }>, StoreUnavailable> => {
  const out: Array<{ readonly partitionKey: string; readonly last: number }> = []
  for (const row of rows) {
    const partitionKey: unknown =
      typeof row === "object" && row !== null ? Reflect.get(row, "partition_key") : undefined
    const last: unknown = typeof row === "object" && row !== null ? Reflect.get(row, "seq_counter") : undefined
    if (!isString(partitionKey) || !isNumber(last)) {
      const decoded = decodeSeqBlocks(rows)
      return Either.isRight(decoded)
        ? Either.right(decoded.right.map((r) => ({ partitionKey: r.partition_key, last: r.seq_counter })))
        : Either.left(new StoreUnavailable({ operation, cause: decoded.left }))
    }
    out.push({ partitionKey, last })
  }
  return Either.right(out)
}

/** Splits items into chunks of at most `size`. */
export const chunksOf = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  if (items.length <= size) return [items]
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

/** Lifts an `Either` into an effect without an extra step for the common `Right`. */
export const fromEither = <A, E>(either: Either.Either<A, E>): Effect.Effect<A, E> =>
  Either.isRight(either) ? Effect.succeed(either.right) : Effect.fail(either.left)

/** Runs one statement on a connection; rows come back untransformed (the store names its columns). */
export const run = (
  conn: Connection,
  text: string,
  params: ReadonlyArray<unknown>
): Effect.Effect<ReadonlyArray<unknown>, SqlError> => conn.execute(text, params, undefined)

/** Runs a statement and reads one column of its rows (`StoreUnavailable` when a row lacks it). */
export const select = <A>(
  read: (operation: string, rows: ReadonlyArray<unknown>) => Either.Either<Array<A>, StoreUnavailable>,
  operation: string,
  conn: Connection,
  text: string,
  params: ReadonlyArray<unknown>
): Effect.Effect<Array<A>, SqlError | StoreUnavailable> =>
  Effect.flatMap(run(conn, text, params), (rows) => fromEither(read(operation, rows)))

/** Runs a statement returning outbox rows and decodes them into records (`CorruptRecord` on a bad row). */
export const records = (
  conn: Connection,
  text: string,
  params: ReadonlyArray<unknown>
): Effect.Effect<Array<OutboxRecord.OutboxRecord>, SqlError | CorruptRecord> =>
  Effect.flatMap(run(conn, text, params), (rows) => decodeAll(rows, SqliteOutboxRows.decodeRow))
