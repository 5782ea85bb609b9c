/**
 * The storage of the SQL inbox backends (SPEC §12), written once for every dialect: two tables,
 * `<prefix>inbox_processed (consumer, message_id, partition_key, processed_at)` keyed by
 * `(consumer, message_id)` with an index on `processed_at`, and `<prefix>inbox_mark (consumer,
 * partition_key, ordering_key, seq, updated_at)` keyed by the first three.
 *
 * A unit is the client's `sql.withTransaction` (or the dialect's `transaction`; a savepoint inside a caller's
 * transaction), so the handler's statements on the same client join it. Its first statement inserts the id
 * (`ON CONFLICT DO NOTHING`): a second unit recording the same id waits on that row until the first commits (then it
 * sees a duplicate) or rolls back (then it records it). The mark is raised by one conditional upsert
 * (`… DO UPDATE … WHERE seq < excluded.seq`), which locks the key's row until commit. A trim batch deletes
 * the oldest ids below a time through the `processed_at` index, at most a batch per statement. Every value
 * is a bound parameter.
 *
 * A lock failure the dialect calls busy (SQLite's `SQLITE_BUSY`, after its busy timeout) — of the id's insert or
 * of the unit's opening — starts the unit again, at most 20 more times, but only while no attempt has recorded the
 * id (so no handler ran) and never inside a caller's transaction (its locks are the caller's to retry).
 *
 * A dialect without `ON CONFLICT … RETURNING` (MySQL) gives its own `writes`: the same two conditional
 * writes and the trim batch with the same meaning, in its own statements.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { ParseError } from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { StoreUnavailable, TransactionConflict } from "../../domain/OutboxError.js"
import type * as InboxStore from "../../services/InboxStore.js"

/**
 * What the shared SQL inbox needs to know about its database.
 *
 * @since 0.1.0
 */
export interface SqlInboxDialect {
  /** `sqlite`, `postgres`, … (errors, spans). */
  readonly name: string
  /** The n-th (1-based) placeholder of a statement. */
  readonly placeholder: (n: number) => string
  /** Quoted, qualified name of the processed-ids table. */
  readonly processedTable: string
  /** Quoted, qualified name of the marks table. */
  readonly markTable: string
  /**
   * The trim batch statement: deletes at most `$2` ids with `processed_at < $1`, oldest first, returning
   * one row per deleted id.
   */
  readonly trimStatement: string
  /** A lock failure another attempt may get past (SQLite busy) — retried while no handler has run. */
  readonly isBusy: (error: SqlError) => boolean
  /** A serialization failure or deadlock: `TransactionConflict`, the caller may retry the message. */
  readonly isConflict: (error: SqlError) => boolean
  /**
   * The dialect's own writes, for a database without `ON CONFLICT … RETURNING` (then `trimStatement` is
   * not used): each runs on the client in context, inside the unit's transaction for the first two.
   */
  readonly writes?: SqlInboxWrites | undefined
  /**
   * How a unit's transaction runs on the client (default `sql.withTransaction`): SQLite's begins with the
   * write lock taken, waiting for another process's lock with the fiber asleep
   * (`SqliteDatabase.writeTransactionOn`).
   *
   * @since 0.2.0
   */
  readonly transaction?: SqlInboxTransaction | undefined
}

/**
 * A dialect's transaction on a client: {@link SqlInboxDialect.transaction}.
 *
 * @since 0.2.0
 */
export type SqlInboxTransaction = (
  sql: SqlClient.SqlClient
) => <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>

/**
 * The writes of a dialect that cannot use the shared statements: {@link SqlInboxDialect.writes}.
 *
 * @since 0.1.0
 */
export interface SqlInboxWrites {
  /** Records the id unless it is recorded (false then, nothing written). */
  readonly record: (
    sql: SqlClient.SqlClient,
    entry: InboxStore.ProcessedEntry
  ) => Effect.Effect<boolean, SqlError | StoreUnavailable>
  /** Raises the mark to `seq` when it is below (or absent); else reports the stored mark. */
  readonly raiseMark: (
    sql: SqlClient.SqlClient,
    key: InboxStore.MarkKey,
    seq: number,
    nowMillis: number
  ) => Effect.Effect<InboxStore.RaiseResult, SqlError | StoreUnavailable>
  /** Deletes at most `limit` ids with `processed_at < beforeMillis`, oldest first; returns how many. */
  readonly trim: (
    sql: SqlClient.SqlClient,
    beforeMillis: number,
    limit: number
  ) => Effect.Effect<number, SqlError | StoreUnavailable>
}

/** Attempts after the first one on a busy failure before the id is recorded. */
const busyRetries = 20

const raisedResult: InboxStore.RaiseResult = { raised: true }

const IntColumn = Schema.Union(Schema.Int, Schema.compose(Schema.NumberFromString, Schema.Int))
const SeqRows = Schema.Array(Schema.Struct({ seq: IntColumn }))
const AnyRows = Schema.Array(Schema.Unknown)

/**
 * The statements of the tables, the same text for every dialect apart from names and placeholders.
 *
 * @since 0.1.0
 */
export const statements = (d: SqlInboxDialect) => {
  const p = d.placeholder
  return {
    record:
      `INSERT INTO ${d.processedTable} (consumer, message_id, partition_key, processed_at) ` +
      `VALUES (${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}) ON CONFLICT (consumer, message_id) DO NOTHING RETURNING processed_at`,
    raise:
      `INSERT INTO ${d.markTable} AS m (consumer, partition_key, ordering_key, seq, updated_at) ` +
      `VALUES (${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)}) ` +
      `ON CONFLICT (consumer, partition_key, ordering_key) DO UPDATE SET seq = excluded.seq, ` +
      `updated_at = excluded.updated_at WHERE m.seq < excluded.seq RETURNING seq`,
    mark:
      `SELECT seq FROM ${d.markTable} WHERE consumer = ${p(1)} AND partition_key = ${p(2)} ` +
      `AND ordering_key = ${p(3)}`,
    isProcessed: `SELECT 1 AS found FROM ${d.processedTable} WHERE consumer = ${p(1)} AND message_id = ${p(2)}`,
    trim: d.trimStatement
  }
}

/**
 * Builds the backend on the `SqlClient` in context (tables must exist; the layers create them).
 *
 * @since 0.1.0
 */
export const make = (d: SqlInboxDialect): Effect.Effect<InboxStore.InboxBackend, never, SqlClient.SqlClient> =>
  Effect.map(SqlClient.SqlClient, (sql) => {
    const s = statements(d)
    const transaction = d.transaction?.(sql) ?? sql.withTransaction

    const failure = (error: SqlError): StoreUnavailable | TransactionConflict =>
      d.isConflict(error)
        ? new TransactionConflict({ partitionKey: "", operation: "Inbox.process", cause: error })
        : new StoreUnavailable({ operation: "Inbox.process", cause: error })

    const seqOf = (rows: ReadonlyArray<unknown>) =>
      Effect.map(Schema.decodeUnknown(SeqRows)(rows), (decoded) => decoded[0]?.seq)

    const raiseMark = (key: InboxStore.MarkKey, seq: number, nowMillis: number) =>
      Effect.flatMap(
        sql.unsafe(s.raise, [key.consumer, key.partitionKey, key.orderingKey, seq, nowMillis]),
        (raised): Effect.Effect<InboxStore.RaiseResult, SqlError | ParseError> =>
          raised.length > 0
            ? Effect.succeed(raisedResult)
            : Effect.map(
                Effect.flatMap(sql.unsafe(s.mark, [key.consumer, key.partitionKey, key.orderingKey]), seqOf),
                (stored) => ({ raised: false, mark: stored ?? seq })
              )
      )
    const shared: InboxStore.InboxUnit = {
      record: (entry) =>
        Effect.mapBoth(
          sql.unsafe(s.record, [entry.consumer, entry.messageId, entry.partitionKey, entry.processedAtMillis]),
          { onFailure: StoreUnavailable.wrap("Inbox.record", entry.partitionKey), onSuccess: (rows) => rows.length > 0 }
        ),
      raiseMark: (key, seq, nowMillis) =>
        Effect.mapError(raiseMark(key, seq, nowMillis), StoreUnavailable.wrap("Inbox.raiseMark", key.partitionKey))
    }
    const own = d.writes
    const unit: InboxStore.InboxUnit =
      own === undefined
        ? shared
        : {
            record: (entry) =>
              own.record(sql, entry).pipe(Effect.mapError(unavailable("Inbox.record", entry.partitionKey))),
            raiseMark: (key, seq, nowMillis) =>
              own
                .raiseMark(sql, key, seq, nowMillis)
                .pipe(Effect.mapError(unavailable("Inbox.raiseMark", key.partitionKey)))
          }

    // busy: the unit's own statement (a SqlError) or the id's insert (a StoreUnavailable of that SqlError)
    const isBusyFailure = (error: unknown): boolean => {
      const cause = error instanceof StoreUnavailable ? error.cause : error
      return isSqlError(cause) && d.isBusy(cause)
    }

    // Written as plain combinators with no per-call schedule: a unit runs once per delivered message.
    const atomically = <A, E, R>(
      body: (unit: InboxStore.InboxUnit) => Effect.Effect<A, E, R>
    ): Effect.Effect<A, E | StoreUnavailable | TransactionConflict, R> =>
      Effect.suspend(() => {
        // a lock failure is retried only while the id is not recorded yet (no handler ran); an attempt is
        // only made again when none of the previous ones recorded it
        let recorded = false
        const tracked: InboxStore.InboxUnit = {
          record: (entry) =>
            Effect.map(unit.record(entry), (fresh) => {
              recorded = true
              return fresh
            }),
          raiseMark: unit.raiseMark
        }
        const attempt = transaction(body(tracked))
        const run = (retries: number): Effect.Effect<A, E | StoreUnavailable | TransactionConflict, R> =>
          Effect.catchAll(attempt, (error): Effect.Effect<A, E | StoreUnavailable | TransactionConflict, R> => {
            const final = isSqlError(error) ? failure(error) : error
            if (retries === 0 || recorded || !isBusyFailure(error)) return Effect.fail(final)
            // never retried inside a caller's transaction: it holds its own locks, only the caller may retry it
            return Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) =>
              Option.isSome(outer) ? Effect.fail(final) : run(retries - 1)
            )
          })
        return run(busyRetries)
      })

    return {
      name: d.name,
      atomically,
      isProcessed: (consumer, messageId) =>
        sql.unsafe(s.isProcessed, [consumer, messageId]).pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.mapError(StoreUnavailable.wrap("Inbox.isProcessed"))
        ),
      readMark: (key) =>
        sql
          .unsafe(s.mark, [key.consumer, key.partitionKey, key.orderingKey])
          .pipe(
            Effect.flatMap(seqOf),
            Effect.map(Option.fromNullable),
            Effect.mapError(StoreUnavailable.wrap("Inbox.mark", key.partitionKey))
          ),
      trimBatch: (beforeMillis, limit) =>
        (own === undefined
          ? sql.unsafe(s.trim, [beforeMillis, limit]).pipe(
              Effect.flatMap(Schema.decodeUnknown(AnyRows)),
              Effect.map((rows) => rows.length)
            )
          : own.trim(sql, beforeMillis, limit)
        ).pipe(Effect.mapError(unavailable("Inbox.trim")))
    } satisfies InboxStore.InboxBackend
  })

/** A failure as `StoreUnavailable` of the operation (one that already is stays as it is). */
const unavailable =
  (operation: string, partitionKey?: string) =>
  (error: unknown): StoreUnavailable =>
    error instanceof StoreUnavailable ? error : StoreUnavailable.wrap(operation, partitionKey)(error)

const tagOf = (u: unknown): unknown => (typeof u === "object" && u !== null ? Reflect.get(u, "_tag") : undefined)

const isSqlError = (u: unknown): u is SqlError => tagOf(u) === "SqlError"
