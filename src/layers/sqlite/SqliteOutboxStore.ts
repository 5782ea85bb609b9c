/**
 * The SQLite `OutboxStore` (SPEC §3.2), the embedded default backend, on `@effect/sql` (provide a
 * `SqlClient`, e.g. with `SqliteDatabase.layer({ filename })`).
 *
 * - The layer runs its own migrations (recorded in `<prefix>outbox_migrations`) and never assumes it
 *   owns the database: leases and dead letters keep their own tables.
 * - Persist joins an enclosing `sql.withTransaction` (R-PERSIST-6): business rows and outbox records
 *   commit or roll back together.
 * - Claim is one transaction: raise the fence → select the claimable, head-of-line-respecting
 *   candidates in age order through the claim index (the final choice is `ClaimOrder.select`) →
 *   guarded update repeating the predicate, returning the ids it changed → read back: the candidate
 *   rows were read under the same write lock, so the claimed records are those rows with the claim
 *   applied.
 * - Complete and release are one guarded UPDATE per 1000 ids (one transaction when there are more).
 *   With several ids the matching ones are applied and stay applied; the call then fails with
 *   `StaleFencingToken` naming the ids that did not match (R-DONE-3: not all-or-nothing).
 * - Every transaction the store starts opens with a write, so it takes the write lock up front (like
 *   `BEGIN IMMEDIATE`): several processes may drain one WAL file, waiting on the busy timeout instead
 *   of failing on a stale read snapshot. A statement still failing with `SQLITE_BUSY`/`SQLITE_LOCKED`
 *   is retried a few times with short sleeps (never inside a caller's own transaction: a caller sharing
 *   the file between processes should begin its transaction with a write, or retry on
 *   `StoreUnavailable`); any other SQL failure is `StoreUnavailable` with the cause.
 * - A stored row that cannot be decoded (unknown status, malformed headers JSON, wrong column types)
 *   fails the operation that reads it with `CorruptRecord` naming the record; it is never skipped, so a
 *   corrupt row in the way blocks claims of its partition until it is repaired or removed.
 * - Terminal records are removed after `retention` by a sweep that runs at most once per
 *   `sweepInterval`, on the claim path, in bounded chunks.
 * - Hot path: statements run directly on the client's connection (reserved per operation, or the
 *   connection of the caller's transaction) inside the store's own `BEGIN … COMMIT` or savepoint, with
 *   one span per public operation (from the store core) rather than one per statement; rows and
 *   result columns are checked structurally and go through their Schema only when the check fails
 *   (acceptance is the Schema's; it then names the problem); records are built without re-validation.
 *   Rows come back with the column names the store selects (the client's `transformResultNames`, if
 *   any, is not applied to the store's own statements).
 *
 * Stale reclaim (R-CLAIM-6) is off unless `staleClaimAfter` is given; it compares `claimedAt` with this
 * process's clock, so the threshold must exceed the worst clock skew between the processes sharing the
 * file plus the longest batch.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as ClaimOrder from "../../domain/ClaimOrder.js"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import {
  type CorruptRecord,
  InvalidConfiguration,
  InvalidRecord,
  type StaleFencingToken,
  StoreUnavailable
} from "../../domain/OutboxError.js"
import * as OutboxRecord from "../../domain/OutboxRecord.js"
import {
  type Backend,
  belowHighWaterMark,
  ClaimBatch,
  make as makeStore,
  notClaimedBy,
  OutboxStore,
  type PersistReport,
  type StoreOptions
} from "../../services/OutboxStore.js"
import { type GroupMember, groupPerTurn } from "../../services/EventLoop.js"
import * as SqliteOutboxSchema from "./SqliteOutboxSchema.js"
import { busyRetry, isBusy, retryBusy } from "./SqliteSupport.js"

/**
 * Options of the SQLite outbox store.
 *
 * @since 0.1.0
 */
export interface SqliteOutboxStoreOptions extends StoreOptions {
  /** Prefix of every table and index name (letters, digits, `_`). Default none. */
  readonly tablePrefix?: string | undefined
  /** Minimum time between two retention sweeps (default 1 minute). */
  readonly sweepInterval?: Duration.DurationInput | undefined
  /** Rows deleted per sweep statement (default 500); a sweep runs at most 20 of them. */
  readonly sweepChunk?: number | undefined
  /**
   * Group commit of `complete` and `release` (default true): calls made outside a caller's transaction
   * while one is waiting share one transaction, so drainers of several partitions pay one commit (one
   * `fsync` with `synchronous = FULL`) between them instead of one each. Every call still gets its own
   * outcome: its matching ids applied, the others named in its `StaleFencingToken`. False runs each call
   * as its own statement.
   */
  readonly groupCommit?: boolean | undefined
}

/** Ids per guarded UPDATE (keeps the bound values well under SQLite's limit). */
const idChunk = 1000
/** Partition keys per `listPartitions` page. */
const partitionPage = 100
/** Statements per retention sweep. */
const sweepStatements = 20

/** Row decoders, compiled once: they only run to describe a row that failed its structural check. */
const rowsOf = <A, I>(schema: Schema.Schema<A, I>) => Schema.decodeUnknownEither(Schema.Array(schema))
const decodeFence = rowsOf(Schema.Struct({ max_version: Schema.Number }))
const decodeSeq = rowsOf(Schema.Struct({ seq_counter: Schema.Number }))
const decodePartitions = rowsOf(Schema.Struct({ partition_key: Schema.String }))
const decodeIds = rowsOf(SqliteOutboxSchema.IdRow)
const decodeIdentities = rowsOf(SqliteOutboxSchema.IdentityRow)
const decodeCount = rowsOf(SqliteOutboxSchema.CountRow)

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

/** The message of the driver error under an `SqlError`, on one line. */
const causeMessage = (error: SqlError): string => {
  const cause: unknown = error.cause
  const text =
    typeof cause === "object" && cause !== null && "message" in cause && typeof cause.message === "string"
      ? cause.message
      : error.message
  return text.split("\n")[0] ?? text
}

/** A `ROLLBACK` that failed because SQLite had already ended the transaction. */
const rolledBackAlready = (error: SqlError): boolean =>
  /no transaction is active|no such savepoint/.test(causeMessage(error))

const isString = (u: unknown): u is string => typeof u === "string"
const isNumber = (u: unknown): u is number => typeof u === "number"
const idsOf = columnOf("id", isString, decodeIds)
const fenceOf = columnOf("max_version", isNumber, decodeFence)
const seqOf = columnOf("seq_counter", isNumber, decodeSeq)
const partitionsOf = columnOf("partition_key", isString, decodePartitions)
const countOf = columnOf("n", isNumber, decodeCount)

/**
 * Lock-failure recognition and retry, shared by the SQLite stores (defined in `SqliteSupport`).
 *
 * @since 0.1.0
 */
export { isBusy, retryBusy } from "./SqliteSupport.js"

/** A decoded candidate row with the facts claim selection looks at. */
interface Candidate extends ClaimOrder.ClaimFacts {
  readonly decoded: SqliteOutboxSchema.DecodedRow
}

const candidateOf = (decoded: SqliteOutboxSchema.DecodedRow): Candidate => {
  const row = decoded.row
  return {
    decoded,
    createdAt: DateTime.unsafeMake(row.created_at),
    seq: row.seq,
    envelopeId: row.envelope_id,
    status: decoded.status,
    orderingKey: Option.fromNullable(row.ordering_key),
    claimVersion: row.claim_version,
    claimedAt: row.claimed_at === null ? Option.none() : Option.some(DateTime.unsafeMake(row.claimed_at))
  }
}

/** One `complete` or `release` call (its ids without duplicates). */
interface SettleCall {
  readonly operation: "complete" | "release"
  readonly ids: ReadonlyArray<string>
  readonly token: LeaseToken.LeaseTokenLike
  /** The caller's clock reading: `completed_at` / `terminal_at` of a complete. */
  readonly now: number
}

/** A call waiting for a group commit, and where its result goes. */
type SettleRequest = GroupMember<SettleCall, Set<string>, SettleFailure>

/** How one complete/release statement can fail before the ids are known. */
type SettleFailure = SqlError | StoreUnavailable

const chunksOf = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  if (items.length <= size) return [items]
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

/** Lifts an `Either` into an effect without an extra step for the common `Right`. */
const fromEither = <A, E>(either: Either.Either<A, E>): Effect.Effect<A, E> =>
  Either.isRight(either) ? Effect.succeed(either.right) : Effect.fail(either.left)

/** Statements of the store's own transactions (never interpolated with values). */
const control = {
  begin: "BEGIN",
  commit: "COMMIT",
  rollback: "ROLLBACK",
  savepoint: "SAVEPOINT outbox_store",
  release: "RELEASE SAVEPOINT outbox_store",
  rollbackSavepoint: "ROLLBACK TO SAVEPOINT outbox_store"
} as const

/**
 * Builds the SQLite outbox store on the `SqlClient` in context, running the migrations first.
 *
 * Statements run on the client's connection directly (`SqlClient.reserve`, or the connection of the
 * caller's `sql.withTransaction`), without the client's per-statement span and scope: every public
 * operation already has one span (from the store core), and a claim or persist issues several
 * statements.
 *
 * @since 0.1.0
 */
export const make = (
  options: SqliteOutboxStoreOptions = {}
): Effect.Effect<OutboxStore["Type"], StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const names = yield* SqliteOutboxSchema.tableNames(options.tablePrefix ?? "")
    const staleMillis =
      options.staleClaimAfter === undefined ? undefined : Duration.toMillis(Duration.decode(options.staleClaimAfter))
    const retentionMillis = Duration.toMillis(Duration.decode(options.retention ?? Duration.hours(1)))
    const sweepIntervalMillis = Duration.toMillis(Duration.decode(options.sweepInterval ?? Duration.minutes(1)))
    const sweepChunk = Math.max(1, Math.floor(options.sweepChunk ?? 500))
    const groupCommit = options.groupCommit ?? true
    const problems: Array<string> = []
    if (staleMillis !== undefined && !(staleMillis > 0)) problems.push("staleClaimAfter must be positive")
    if (!(retentionMillis >= 0)) problems.push("retention must not be negative")
    if (problems.length > 0) return yield* new InvalidConfiguration({ component: "SqliteOutboxStore", problems })

    yield* SqliteOutboxSchema.migrate(names).pipe(
      Effect.retry({ schedule: busyRetry, while: isBusy }),
      Effect.mapError((cause) => new StoreUnavailable({ operation: "migrate", cause }))
    )

    const st = SqliteOutboxSchema.statements(names, { staleReclaim: staleMillis !== undefined })
    /** When the last retention sweep ran (plain state: only read and set between effects). */
    let lastSweep = yield* Clock.currentTimeMillis

    /** Runs one statement on a connection; rows come back untransformed (the store names its columns). */
    const run = (
      conn: Connection,
      text: string,
      params: ReadonlyArray<unknown>
    ): Effect.Effect<ReadonlyArray<unknown>, SqlError> => conn.execute(text, params, undefined)

    /** Runs `f` on the caller's transaction connection when there is one, else on a reserved connection. */
    const withConnection = <A, E>(
      f: (conn: Connection, nested: boolean) => Effect.Effect<A, E>,
      retry: "always" | "outside a caller's transaction"
    ): Effect.Effect<A, E | SqlError> =>
      Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) => {
        if (Option.isNone(outer)) return retryBusy(Effect.scoped(Effect.flatMap(sql.reserve, (conn) => f(conn, false))))
        const inner = f(outer.value[0], true)
        return retry === "always" ? retryBusy(inner) : inner
      })

    /** Undoes a transaction or savepoint after a failure; a failing rollback is logged, the failure kept. */
    const undo = (conn: Connection, nested: boolean): Effect.Effect<void> =>
      (nested
        ? Effect.zipRight(run(conn, control.rollbackSavepoint, []), run(conn, control.release, []))
        : run(conn, control.rollback, [])
      ).pipe(
        Effect.asVoid,
        Effect.catchAll((error) =>
          // after SQLITE_FULL or an I/O error SQLite has already rolled the transaction back itself
          rolledBackAlready(error) ? Effect.void : Effect.logWarning(`outbox rollback failed: ${causeMessage(error)}`)
        )
      )

    /**
     * Runs `body` in a transaction on one connection: `BEGIN … COMMIT`, or a savepoint inside the
     * caller's `sql.withTransaction` (R-PERSIST-6). On any failure (also of `COMMIT`) it is rolled back
     * and the failure returned. The body is a short run of statements and is not interrupted half-way.
     */
    const inTransaction =
      <A, E>(body: (conn: Connection) => Effect.Effect<A, E | SqlError>) =>
      (conn: Connection, nested: boolean): Effect.Effect<A, E | SqlError> =>
        Effect.uninterruptible(
          Effect.flatMap(run(conn, nested ? control.savepoint : control.begin, []), () =>
            Effect.matchCauseEffect(body(conn), {
              onFailure: (cause) => Effect.zipRight(undo(conn, nested), Effect.failCause(cause)),
              onSuccess: (value) =>
                Effect.matchEffect(run(conn, nested ? control.release : control.commit, []), {
                  onFailure: (error) => Effect.zipRight(undo(conn, nested), Effect.fail(error)),
                  onSuccess: () => Effect.succeed(value)
                })
            })
          )
        )

    /**
     * Runs `body` in a transaction (a savepoint inside a caller's transaction), retrying busy failures
     * only when the store owns the transaction, and turns SQL failures into `StoreUnavailable`.
     */
    const transact = <A, E extends { readonly _tag: string }>(
      operation: string,
      partitionKey: string | undefined,
      body: (conn: Connection) => Effect.Effect<A, E | SqlError>
    ): Effect.Effect<A, Exclude<E, SqlError> | StoreUnavailable> =>
      withConnection(inTransaction(body), "outside a caller's transaction").pipe(unavailable(operation, partitionKey))

    /** Runs `body` on a connection outside any transaction of the store's, retrying busy failures. */
    const standalone = <A, E extends { readonly _tag: string }>(
      operation: string,
      partitionKey: string | undefined,
      body: (conn: Connection) => Effect.Effect<A, E | SqlError>
    ): Effect.Effect<A, Exclude<E, SqlError> | StoreUnavailable> =>
      withConnection(body, "always").pipe(unavailable(operation, partitionKey))

    /** Runs a statement and reads one column of its rows (`StoreUnavailable` when a row lacks it). */
    const select = <A>(
      read: (operation: string, rows: ReadonlyArray<unknown>) => Either.Either<Array<A>, StoreUnavailable>,
      operation: string,
      conn: Connection,
      text: string,
      params: ReadonlyArray<unknown>
    ): Effect.Effect<Array<A>, SqlError | StoreUnavailable> =>
      Effect.flatMap(run(conn, text, params), (rows) => fromEither(read(operation, rows)))

    /** Runs a statement returning outbox rows and decodes them into records (`CorruptRecord` on a bad row). */
    const records = (
      conn: Connection,
      text: string,
      params: ReadonlyArray<unknown>
    ): Effect.Effect<Array<OutboxRecord.OutboxRecord>, SqlError | CorruptRecord> =>
      Effect.flatMap(run(conn, text, params), (rows) => {
        const out: Array<OutboxRecord.OutboxRecord> = []
        for (const row of rows) {
          const decoded = SqliteOutboxSchema.decodeRow(row)
          if (Either.isLeft(decoded)) return Effect.fail(decoded.left)
          out.push(decoded.right)
        }
        return Effect.succeed(out)
      })

    /** Raises the partition's fence to the token's version, or fails when the token is below it. */
    const raiseFence = (
      conn: Connection,
      operation: string,
      partitionKey: string,
      token: LeaseToken.LeaseTokenLike
    ): Effect.Effect<void, SqlError | StoreUnavailable | StaleFencingToken> =>
      Effect.flatMap(select(fenceOf, operation, conn, st.raiseFence, [partitionKey, token.version]), (accepted) =>
        accepted.length > 0
          ? Effect.void
          : Effect.flatMap(select(fenceOf, operation, conn, st.readFence, [partitionKey]), (current) =>
              Effect.fail(belowHighWaterMark(operation, partitionKey, token, current[0] ?? token.version))
            )
      )

    /** Deletes terminal records older than the retention, at most once per sweep interval. */
    const sweep = (now: number) =>
      Effect.gen(function* () {
        const cutoff = now - retentionMillis
        for (let i = 0; i < sweepStatements; i++) {
          const deleted = yield* standalone("sweep", undefined, (conn) => run(conn, st.sweep, [cutoff, sweepChunk]))
          if (deleted.length < sweepChunk) break
        }
      }).pipe(
        Effect.catchAll((error) => Effect.logWarning("outbox retention sweep failed", error)),
        Effect.annotateLogs("backend", "sqlite")
      )

    const maybeSweep = Effect.flatMap(Clock.currentTimeMillis, (now) => {
      if (now - lastSweep < sweepIntervalMillis) return Effect.void
      lastSweep = now
      return sweep(now)
    })

    const idReused = (record: OutboxRecord.PreparedRecord, index: number): InvalidRecord =>
      new InvalidRecord({
        index,
        recordId: record.id,
        partitionKey: record.partitionKey,
        reason: `id ${record.id} is already used by a record with another identity`
      })

    /** Fails with `InvalidRecord` when the record's id is stored under another identity. */
    const rejectIdHeldByOther = (
      conn: Connection,
      record: OutboxRecord.PreparedRecord,
      index: number
    ): Effect.Effect<void, SqlError | StoreUnavailable | InvalidRecord> =>
      Effect.flatMap(
        run(conn, st.findById, [record.id]),
        (rows): Effect.Effect<void, StoreUnavailable | InvalidRecord> => {
          if (rows.length === 0) return Effect.void
          const holders = decodeIdentities(rows)
          if (Either.isLeft(holders)) {
            return Effect.fail(new StoreUnavailable({ operation: "persist", cause: holders.left }))
          }
          const holder = holders.right[0]
          return holder !== undefined &&
            OutboxRecord.identityKey({
              partitionKey: holder.partition_key,
              envelopeId: holder.envelope_id,
              bindingId: holder.binding_id
            }) !== OutboxRecord.identityKey(record)
            ? Effect.fail(idReused(record, index))
            : Effect.void
        }
      )

    /**
     * Inserts the records with seq blocks from the fence row, in the same transaction (R-PERSIST-4; gaps
     * are allowed), and returns the ids inserted: `ON CONFLICT DO NOTHING` leaves out a record whose
     * identity (or id) is already stored, also by an earlier record of the same statement.
     */
    const insertRecords = (
      conn: Connection,
      records: ReadonlyArray<OutboxRecord.PreparedRecord>
    ): Effect.Effect<Set<string>, SqlError | StoreUnavailable> =>
      Effect.gen(function* () {
        const perPartition = new Map<string, number>()
        for (const record of records) {
          perPartition.set(record.partitionKey, (perPartition.get(record.partitionKey) ?? 0) + 1)
        }
        const nextSeq = new Map<string, number>()
        for (const [partitionKey, count] of perPartition) {
          const last = (yield* select(seqOf, "persist", conn, st.allocateSeq, [partitionKey, count]))[0]
          if (last === undefined) {
            return yield* new StoreUnavailable({ operation: "persist", partitionKey, cause: "no seq allocated" })
          }
          nextSeq.set(partitionKey, last - count + 1)
        }
        const inserted = new Set<string>()
        for (const chunk of chunksOf(records, SqliteOutboxSchema.insertChunk)) {
          const values: Array<unknown> = []
          for (const record of chunk) {
            const seq = nextSeq.get(record.partitionKey) ?? 0
            nextSeq.set(record.partitionKey, seq + 1)
            SqliteOutboxSchema.pushInsertValues(values, record, seq)
          }
          for (const id of yield* select(idsOf, "persist", conn, st.insert(chunk.length), values)) inserted.add(id)
        }
        return inserted
      })

    /** The records of a batch by first occurrence of their identity (R-PERSIST-3: the first one wins). */
    const dedupe = (batch: ReadonlyArray<OutboxRecord.PreparedRecord>) => {
      const firstOfIdentity = new Map<string, number>()
      const unique: Array<{ readonly record: OutboxRecord.PreparedRecord; readonly index: number }> = []
      const duplicateOf: Array<{ readonly index: number; readonly first: number }> = []
      batch.forEach((record, index) => {
        const identity = OutboxRecord.identityKey(record)
        const first = firstOfIdentity.get(identity)
        if (first === undefined) {
          firstOfIdentity.set(identity, index)
          unique.push({ record, index })
        } else {
          duplicateOf.push({ index, first })
        }
      })
      return { unique, duplicateOf }
    }

    /**
     * The report of a batch some of whose records were not inserted: each of them is an existing
     * identity or a repeat of an earlier record of the batch (skipped), or uses an id held by a different
     * identity (the whole batch fails with `InvalidRecord`; not checked again when `idsChecked`, i.e. every
     * id of the batch was checked before anything was written).
     */
    const reportOf = (
      conn: Connection,
      batch: ReadonlyArray<OutboxRecord.PreparedRecord>,
      { duplicateOf, unique }: ReturnType<typeof dedupe>,
      inserted: ReadonlySet<string>,
      idsChecked: boolean
    ): Effect.Effect<PersistReport, SqlError | StoreUnavailable | InvalidRecord> =>
      Effect.gen(function* () {
        if (!idsChecked) {
          const notInserted = [
            ...unique.filter(({ record }) => !inserted.has(record.id)),
            ...duplicateOf.flatMap(({ index }) => {
              const record = batch[index]
              return record === undefined ? [] : [{ record, index }]
            })
          ].sort((a, b) => a.index - b.index)
          for (const { record, index } of notInserted) yield* rejectIdHeldByOther(conn, record, index)
        }
        const holderOf = new Map<number, string>()
        for (const { record, index } of unique) {
          if (inserted.has(record.id)) {
            holderOf.set(index, record.id)
            continue
          }
          const holder = yield* select(idsOf, "persist", conn, st.findIdentity, [
            record.partitionKey,
            record.envelopeId,
            record.bindingId
          ])
          const existing = holder[0]
          if (existing === undefined) return yield* idReused(record, index)
          holderOf.set(index, existing)
        }
        const skipped: Array<{ readonly index: number; readonly id: string; readonly existing: string }> = []
        for (const { record, index } of unique) {
          if (!inserted.has(record.id)) skipped.push({ index, id: record.id, existing: holderOf.get(index) ?? "" })
        }
        for (const { index, first } of duplicateOf) {
          const record = batch[index]
          if (record !== undefined) skipped.push({ index, id: record.id, existing: holderOf.get(first) ?? "" })
        }
        skipped.sort((a, b) => a.index - b.index)
        const report: PersistReport = {
          persisted: unique.filter(({ record }) => inserted.has(record.id)).map(({ record }) => record.id),
          skipped: skipped.map((s) => s.id),
          existingIds: skipped.map((s) => s.existing)
        }
        return report
      })

    const persistIn = (
      conn: Connection,
      batch: ReadonlyArray<OutboxRecord.PreparedRecord>,
      replaceTerminal: boolean
    ): Effect.Effect<PersistReport, SqlError | StoreUnavailable | InvalidRecord> =>
      Effect.gen(function* () {
        if (!replaceTerminal) {
          // one INSERT of the whole batch leaves out repeated and existing identities by itself; when
          // every record went in, none was repeated or existing and the batch is done
          const inserted = yield* insertRecords(conn, batch)
          if (inserted.size === batch.length) {
            return { persisted: batch.map((record) => record.id), skipped: [], existingIds: [] }
          }
          return yield* reportOf(conn, batch, dedupe(batch), inserted, false)
        }
        const batchIdentities = dedupe(batch)
        // an id held by another identity is rejected against the state before the batch, also when that
        // holder is a terminal record this batch replaces (as the model and memory store do) — for every
        // record of the batch, in-batch repeats included: once the terminal holders are deleted, the old id of
        // a replaced record would no longer be seen as taken
        for (let index = 0; index < batch.length; index++) {
          const record = batch[index]
          if (record !== undefined) yield* rejectIdHeldByOther(conn, record, index)
        }
        for (const { record } of batchIdentities.unique) {
          yield* run(conn, st.deleteTerminalIdentity, [record.partitionKey, record.envelopeId, record.bindingId])
        }
        const inserted = yield* insertRecords(
          conn,
          batchIdentities.unique.map(({ record }) => record)
        )
        return yield* reportOf(conn, batch, batchIdentities, inserted, true)
      })

    const persist: Backend["persist"] = (batch, { replaceTerminal }) =>
      transact("persist", batch[0]?.partitionKey, (conn) => persistIn(conn, batch, replaceTerminal))

    const claimIn = (
      conn: Connection,
      partitionKey: string,
      token: LeaseToken.LeaseTokenLike,
      limit: number
    ): Effect.Effect<ClaimBatch, SqlError | StoreUnavailable | StaleFencingToken | CorruptRecord> =>
      Effect.gen(function* () {
        yield* raiseFence(conn, "claim", partitionKey, token)
        if (limit <= 0) return ClaimBatch([])
        const now = yield* Clock.currentTimeMillis
        const stale = staleMillis === undefined ? [] : [now - staleMillis]
        const rows = yield* run(conn, st.selectClaimable, [
          partitionKey,
          token.version,
          ...stale,
          token.version,
          ...stale,
          limit
        ])
        const candidates: Array<Candidate> = []
        for (const row of rows) {
          const decoded = SqliteOutboxSchema.decodeRowFields(row)
          if (Either.isLeft(decoded)) return yield* decoded.left
          candidates.push(candidateOf(decoded.right))
        }
        // the SQL already applied R-CLAIM-4/5/6; the shared selection makes the final decision
        const chosen = ClaimOrder.selectFrom(candidates, limit, {
          version: token.version,
          nowMillis: now,
          staleClaimAfterMillis: staleMillis
        })
        if (chosen.length === 0) return ClaimBatch([])
        const updated = new Set<string>()
        for (const ids of chunksOf(
          chosen.map((c) => c.decoded.row.id),
          idChunk
        )) {
          const claimedIds = yield* select(idsOf, "claim", conn, st.claimUpdate(ids.length), [
            token.owner,
            token.version,
            now,
            now,
            ...ids,
            partitionKey,
            token.version,
            ...stale
          ])
          for (const id of claimedIds) updated.add(id)
        }
        // read back: the candidates were read under this transaction's write lock; the update changed
        // exactly the claim fields, which are applied to them here
        const applied = SqliteOutboxSchema.batchClaim(token.owner, token.version, DateTime.unsafeMake(now))
        const claimed: Array<OutboxRecord.OutboxRecord> = []
        for (const c of chosen) {
          if (updated.has(c.decoded.row.id)) claimed.push(SqliteOutboxSchema.toRecord(c.decoded, applied, c.createdAt))
        }
        claimed.sort(ClaimOrder.compareAge)
        return ClaimBatch(claimed)
      })

    const claim: Backend["claim"] = (partitionKey, token, limit) =>
      Effect.zipLeft(
        transact("claim", partitionKey, (conn) => claimIn(conn, partitionKey, token, limit)),
        maybeSweep
      )

    /** Runs the guarded updates of one complete/release call on `conn`; returns the ids they changed. */
    const applySettle = (conn: Connection, request: SettleCall): Effect.Effect<Set<string>, SettleFailure> =>
      Effect.gen(function* () {
        const { now, operation, token } = request
        const matched = new Set<string>()
        for (const chunk of chunksOf(request.ids, idChunk)) {
          const done =
            operation === "complete"
              ? yield* select(idsOf, operation, conn, st.complete(chunk.length), [
                  now,
                  now,
                  ...chunk,
                  token.owner,
                  token.version
                ])
              : yield* select(idsOf, operation, conn, st.release(chunk.length), [...chunk, token.owner, token.version])
          for (const id of done) matched.add(id)
        }
        return matched
      })

    /**
     * Runs the waiting calls of one group. One call with one chunk runs as a single autocommitted
     * statement; more share one transaction, each call keeping its own result (a guarded UPDATE is atomic
     * on its own, and a failing statement undoes only itself). A busy failure fails the whole transaction,
     * which is rolled back and retried; a failing `COMMIT` fails every call of the group. Total: every
     * call's deferred is completed, whatever happens.
     */
    const runGroup = (group: ReadonlyArray<SettleRequest>): Effect.Effect<void> => {
      const only = group.length === 1 ? group[0] : undefined
      const results = new Map<SettleRequest, Either.Either<Set<string>, SettleFailure>>()
      const body = (conn: Connection): Effect.Effect<void, SettleFailure> =>
        Effect.forEach(
          group,
          (request) =>
            Effect.flatMap(Effect.either(applySettle(conn, request)), (result) => {
              if (Either.isLeft(result) && isBusy(result.left)) return Effect.fail(result.left)
              results.set(request, result)
              return Effect.void
            }),
          { discard: true }
        )
      const run =
        only !== undefined && only.ids.length <= idChunk
          ? withConnection(body, "always")
          : withConnection(inTransaction(body), "always")
      return Effect.matchCauseEffect(run, {
        onFailure: (cause) =>
          Effect.forEach(group, (request) => Deferred.failCause(request.done, cause), { discard: true }),
        onSuccess: () =>
          Effect.forEach(
            group,
            (request) => {
              const result = results.get(request)
              return result === undefined
                ? Deferred.die(request.done, new Error("group commit left a call without a result"))
                : Deferred.complete(request.done, result)
            },
            { discard: true }
          )
      })
    }

    /**
     * Joins the next group commit and waits for its own result: the calls made in the same turn of the
     * event loop share one transaction ({@link runGroup}).
     */
    const settleGrouped = groupPerTurn<SettleCall, Set<string>, SettleFailure>(runGroup)

    /** The guarded update of complete/release; fails naming the ids that did not match, after committing the rest. */
    const settle = (operation: "complete" | "release", ids: ReadonlyArray<string>, token: LeaseToken.LeaseTokenLike) =>
      Effect.gen(function* () {
        const unique = Array.from(new Set(ids))
        const now = yield* Clock.currentTimeMillis
        const outer = yield* Effect.serviceOption(SqlClient.TransactionConnection)
        const call: SettleCall = { operation, ids: unique, token, now }
        const matched =
          groupCommit && Option.isNone(outer)
            ? yield* settleGrouped(call)
            : // inside a caller's transaction (or without group commit): one guarded UPDATE is atomic on its
              // own; several chunks share one transaction
              yield* withConnection(
                (conn, nested) =>
                  unique.length <= idChunk
                    ? applySettle(conn, call)
                    : inTransaction((c) => applySettle(c, call))(conn, nested),
                unique.length <= idChunk ? "always" : "outside a caller's transaction"
              )
        if (matched.size === unique.length) return
        return yield* notClaimedBy(
          operation,
          token,
          ids.filter((id) => !matched.has(id))
        )
      }).pipe(unavailable(operation, undefined))

    const expire: Backend["expire"] = (before, partitionKey, token) =>
      transact("expire", partitionKey, (conn) =>
        Effect.gen(function* () {
          yield* raiseFence(conn, "expire", partitionKey, token)
          const now = yield* Clock.currentTimeMillis
          const rows = yield* run(conn, st.expire, [now, partitionKey, DateTime.toEpochMillis(before)])
          return rows.length
        })
      )

    const count = (operation: "countPending" | "countClaimed", text: string) => (partitionKey: string) =>
      standalone(operation, partitionKey, (conn) =>
        Effect.map(select(countOf, operation, conn, text, [partitionKey]), (rows) => rows[0] ?? 0)
      )

    const backend: Backend = {
      name: "sqlite",
      persist,
      claim,
      /**
       * Completes the ids that are claimed by the token, in one transaction, and then fails with
       * `StaleFencingToken` naming the ids that were not: with several ids the matching ones stay completed.
       */
      complete: (ids, token) => settle("complete", ids, token),
      /** Releases like {@link complete} completes: matching ids stay released when others mismatch. */
      release: (ids, token) => settle("release", ids, token),
      expire,
      queryPending: (partitionKey, limit) =>
        standalone("queryPending", partitionKey, (conn) => records(conn, st.queryPending, [partitionKey, limit])),
      countPending: count("countPending", st.countPending),
      countClaimed: count("countClaimed", st.countClaimed),
      listPartitions: Stream.paginateChunkEffect("", (after: string) =>
        standalone("listPartitions", undefined, (conn) =>
          select(partitionsOf, "listPartitions", conn, st.listPartitions, [after, partitionPage])
        ).pipe(
          Effect.map((keys) => {
            const last = keys[keys.length - 1]
            return [
              Chunk.fromIterable(keys),
              keys.length < partitionPage || last === undefined ? Option.none<string>() : Option.some(last)
            ] as const
          })
        )
      )
    }
    return makeStore(backend)
  })

const unavailable =
  (operation: string, partitionKey: string | undefined) =>
  <A, E extends { readonly _tag: string }>(
    effect: Effect.Effect<A, E | SqlError>
  ): Effect.Effect<A, Exclude<E, SqlError> | StoreUnavailable> =>
    Effect.catchIf(
      effect,
      (error): error is Extract<E | SqlError, SqlError> => error._tag === "SqlError",
      (cause) => Effect.fail(new StoreUnavailable({ operation, partitionKey, cause }))
    )

/**
 * The SQLite outbox store with the given options (`staleClaimAfter`, `retention`, `tablePrefix`,
 * `sweepInterval`). Requires a `SqlClient`; runs the migrations when built.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: SqliteOutboxStoreOptions
): Layer.Layer<OutboxStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Layer.effect(OutboxStore, make(options))

/**
 * The SQLite outbox store with default options (no stale reclaim, 1 hour retention, no table prefix).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<OutboxStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> = layerWith(
  {}
)
