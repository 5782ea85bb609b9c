/**
 * What the server-backed SQL outbox stores (PostgreSQL, MySQL) share once persist, claim, complete and
 * release are written per dialect: `expire` in one transaction under the partition's fence (R-EXP-1), the
 * pending and claimed counts, `queryPending`, and the partition listing as keyset pages; every SQL failure
 * is `StoreUnavailable` naming the operation (and partition). {@link make} assembles the store's
 * `Backend` from those and the dialect's own operations.
 *
 * @since 0.1.0
 */
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as SqlClock from "./SqlClock.js"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import type { CorruptRecord, StaleFencingToken } from "../../domain/OutboxError.js"
import { StoreUnavailable } from "../../domain/OutboxError.js"
import type * as OutboxRecord from "../../domain/OutboxRecord.js"
import { type Backend, partitionPage as keysetPage } from "../../services/OutboxStore.js"
import type * as SqlTransaction from "./SqlTransaction.js"

/** Partition keys per `listPartitions` page. */
const partitionPage = 100

const PartitionRows = Schema.Array(Schema.Struct({ partition_key: Schema.String }))

/**
 * The dialect's side of a server-backed SQL store.
 *
 * @since 0.1.0
 */
export interface ServerStoreParts {
  /** Backend name: `postgres`, `mysql`. */
  readonly name: string
  readonly validate: NonNullable<Backend["validate"]>
  readonly persist: Backend["persist"]
  readonly claim: Backend["claim"]
  readonly complete: Backend["complete"]
  readonly release: Backend["release"]
  /** The store's statement runner. */
  readonly tx: SqlTransaction.Transactions
  /** The statements of the shared operations (`expire`: `now, partition, before`). */
  readonly statements: {
    readonly expire: string
    readonly queryPending: string
    readonly countPending: string
    readonly countClaimed: string
    readonly listPartitions: string
  }
  /** Locks the partition's fence row and admits the token (R-EXP-1). */
  readonly fence: (
    conn: Connection,
    operation: string,
    partitionKey: string,
    token: LeaseToken.LeaseTokenLike
  ) => Effect.Effect<void, SqlError | StoreUnavailable | StaleFencingToken>
  /** Runs the expire statement; returns how many records it expired. */
  readonly expireRows: (conn: Connection, params: ReadonlyArray<unknown>) => Effect.Effect<number, SqlError>
  /** Runs a statement returning outbox rows, decoded into records. */
  readonly records: (
    conn: Connection,
    text: string,
    params: ReadonlyArray<unknown>
  ) => Effect.Effect<Array<OutboxRecord.OutboxRecord>, SqlError | CorruptRecord>
  /** Runs a statement and decodes its rows (a mismatch is `StoreUnavailable`). */
  readonly select: <A, I>(
    operation: string,
    schema: Schema.Schema<A, I>,
    conn: Connection,
    text: string,
    params: ReadonlyArray<unknown>
  ) => Effect.Effect<A, SqlError | StoreUnavailable>
  /** The rows of a count statement: one row with the count `n`. */
  readonly countRows: Schema.Schema<
    ReadonlyArray<{ readonly n: number }>,
    ReadonlyArray<{ readonly n: string | number }>
  >
}

/**
 * The store's `Backend`: the dialect's persist, claim, complete and release, and the shared operations.
 *
 * @since 0.1.0
 */
export const make = (parts: ServerStoreParts): Backend => {
  const { tx, statements: st, select } = parts

  const expire: Backend["expire"] = (before, partitionKey, token) =>
    tx
      .transact((conn) =>
        Effect.gen(function* () {
          yield* parts.fence(conn, "expire", partitionKey, token)
          const now = yield* SqlClock.nowMillis
          return yield* parts.expireRows(conn, [now, partitionKey, DateTime.toEpochMillis(before)])
        })
      )
      .pipe(StoreUnavailable.refailTag("SqlError", "expire", partitionKey))

  const count = (operation: "countPending" | "countClaimed", text: string) => (partitionKey: string) =>
    tx
      .standalone((conn) => select(operation, parts.countRows, conn, text, [partitionKey]))
      .pipe(
        Effect.map((rows) => rows[0]?.n ?? 0),
        StoreUnavailable.refailTag("SqlError", operation, partitionKey)
      )

  return {
    name: parts.name,
    validate: parts.validate,
    persist: parts.persist,
    claim: parts.claim,
    complete: parts.complete,
    release: parts.release,
    expire,
    queryPending: (partitionKey, limit) =>
      tx
        .standalone((conn) => parts.records(conn, st.queryPending, [partitionKey, limit]))
        .pipe(StoreUnavailable.refailTag("SqlError", "queryPending", partitionKey)),
    countPending: count("countPending", st.countPending),
    countClaimed: count("countClaimed", st.countClaimed),
    listPartitions: Stream.paginateChunkEffect("", (after: string) =>
      tx
        .standalone((conn) => select("listPartitions", PartitionRows, conn, st.listPartitions, [after, partitionPage]))
        .pipe(
          StoreUnavailable.refailTag("SqlError", "listPartitions"),
          Effect.map((rows) =>
            keysetPage(
              rows.map((row) => row.partition_key),
              partitionPage
            )
          )
        )
    )
  }
}
