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
 *
 * Stale reclaim (R-CLAIM-6) is off unless `staleClaimAfter` is given; it compares `claimedAt` with this
 * process's clock, so the threshold must exceed the worst clock skew between the processes sharing the
 * file plus the longest batch.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as ClaimOrder from "../../domain/ClaimOrder.js"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import { type CorruptRecord, InvalidConfiguration, InvalidRecord, StoreUnavailable } from "../../domain/OutboxError.js"
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
import * as SqliteOutboxSchema from "./SqliteOutboxSchema.js"

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
}

/** Ids per guarded UPDATE (keeps the bound values well under SQLite's limit). */
const idChunk = 1000
/** Partition keys per `listPartitions` page. */
const partitionPage = 100
/** Statements per retention sweep. */
const sweepStatements = 20

/** Row decoders, compiled once. */
const rowsOf = <A, I>(schema: Schema.Schema<A, I>) => Schema.decodeUnknownEither(Schema.Array(schema))
const decodeFence = rowsOf(Schema.Struct({ max_version: Schema.Number }))
const decodeSeq = rowsOf(Schema.Struct({ seq_counter: Schema.Number }))
const decodePartitions = rowsOf(Schema.Struct({ partition_key: Schema.String }))
const decodeIds = rowsOf(SqliteOutboxSchema.IdRow)
const decodeIdentities = rowsOf(SqliteOutboxSchema.IdentityRow)
const decodeCount = rowsOf(SqliteOutboxSchema.CountRow)

/**
 * True for a SQL failure caused by another connection's lock (`SQLITE_BUSY*`, `SQLITE_LOCKED*`).
 *
 * @since 0.1.0
 */
export const isBusy = (error: unknown): boolean => {
  if (typeof error !== "object" || error === null || Reflect.get(error, "_tag") !== "SqlError") return false
  const cause: unknown = Reflect.get(error, "cause")
  if (typeof cause !== "object" || cause === null) return false
  const code: unknown = Reflect.get(cause, "code")
  return typeof code === "string" && (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED"))
}

/** Short, bounded retry of busy failures (they never happen on `:memory:`, so tests on TestClock never sleep). */
const busyRetry = Schedule.exponential(Duration.millis(5), 2).pipe(
  Schedule.jittered,
  Schedule.either(Schedule.spaced(Duration.millis(200))),
  Schedule.intersect(Schedule.recurs(12))
)

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

const chunksOf = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

/**
 * Builds the SQLite outbox store on the `SqlClient` in context, running the migrations first.
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
    const problems: Array<string> = []
    if (staleMillis !== undefined && !(staleMillis > 0)) problems.push("staleClaimAfter must be positive")
    if (!(retentionMillis >= 0)) problems.push("retention must not be negative")
    if (problems.length > 0) return yield* new InvalidConfiguration({ component: "SqliteOutboxStore", problems })

    yield* SqliteOutboxSchema.migrate(names).pipe(
      Effect.retry({ schedule: busyRetry, while: isBusy }),
      Effect.mapError((cause) => new StoreUnavailable({ operation: "migrate", cause }))
    )

    const st = SqliteOutboxSchema.statements(names, { staleReclaim: staleMillis !== undefined })
    const lastSweep = yield* Ref.make(yield* Clock.currentTimeMillis)

    /** Runs a statement and decodes its rows with `schema` (a row that does not decode is a store failure). */
    const query = <A>(
      operation: string,
      decode: (rows: unknown) => Either.Either<ReadonlyArray<A>, ParseResult.ParseError>,
      text: string,
      params: ReadonlyArray<unknown>
    ): Effect.Effect<ReadonlyArray<A>, SqlError | StoreUnavailable> =>
      Effect.flatMap(sql.unsafe<object>(text, params), (rows) => {
        const decoded = decode(rows)
        return Either.isRight(decoded)
          ? Effect.succeed(decoded.right)
          : Effect.fail(new StoreUnavailable({ operation, cause: decoded.left }))
      })

    /** Runs a statement returning outbox rows and decodes them into records (`CorruptRecord` on a bad row). */
    const records = (
      text: string,
      params: ReadonlyArray<unknown>
    ): Effect.Effect<Array<OutboxRecord.OutboxRecord>, SqlError | CorruptRecord> =>
      Effect.flatMap(sql.unsafe<object>(text, params), (rows) => {
        const out: Array<OutboxRecord.OutboxRecord> = []
        for (const row of rows) {
          const decoded = SqliteOutboxSchema.decodeRow(row)
          if (Either.isLeft(decoded)) return Effect.fail(decoded.left)
          out.push(decoded.right)
        }
        return Effect.succeed(out)
      })

    /**
     * Runs `effect` in a transaction (a savepoint inside a caller's transaction), retrying busy failures
     * only when the store owns the transaction, and turns SQL failures into `StoreUnavailable`.
     */
    const transact = <A, E extends { readonly _tag: string }>(
      operation: string,
      partitionKey: string | undefined,
      effect: Effect.Effect<A, E | SqlError>
    ): Effect.Effect<A, Exclude<E, SqlError> | StoreUnavailable> =>
      Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) => {
        const tx = sql.withTransaction(effect)
        return Option.isSome(outer) ? tx : Effect.retry(tx, { schedule: busyRetry, while: isBusy })
      }).pipe(unavailable(operation, partitionKey))

    /** Retries busy failures of a statement outside any transaction and maps SQL failures. */
    const standalone = <A, E extends { readonly _tag: string }>(
      operation: string,
      partitionKey: string | undefined,
      effect: Effect.Effect<A, E | SqlError>
    ): Effect.Effect<A, Exclude<E, SqlError> | StoreUnavailable> =>
      Effect.retry(effect, { schedule: busyRetry, while: isBusy }).pipe(unavailable(operation, partitionKey))

    /** Raises the partition's fence to the token's version, or fails when the token is below it. */
    const raiseFence = (operation: string, partitionKey: string, token: LeaseToken.LeaseTokenLike) =>
      Effect.gen(function* () {
        const accepted = yield* query(operation, decodeFence, st.raiseFence, [partitionKey, token.version])
        if (accepted.length > 0) return
        const current = yield* query(operation, decodeFence, st.readFence, [partitionKey])
        return yield* belowHighWaterMark(operation, partitionKey, token, current[0]?.max_version ?? token.version)
      })

    /** Deletes terminal records older than the retention, at most once per sweep interval. */
    const maybeSweep = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const due = yield* Ref.modify(lastSweep, (last) =>
        now - last >= sweepIntervalMillis ? [true, now] : [false, last]
      )
      if (!due) return
      const cutoff = now - retentionMillis
      for (let i = 0; i < sweepStatements; i++) {
        const deleted = yield* standalone("sweep", undefined, sql.unsafe<object>(st.sweep, [cutoff, sweepChunk]))
        if (deleted.length < sweepChunk) break
      }
    }).pipe(
      Effect.catchAll((error) => Effect.logWarning("outbox retention sweep failed", error)),
      Effect.annotateLogs("backend", "sqlite")
    )

    const idReused = (record: OutboxRecord.PreparedRecord, index: number): InvalidRecord =>
      new InvalidRecord({
        index,
        recordId: record.id,
        partitionKey: record.partitionKey,
        reason: `id ${record.id} is already used by a record with another identity`
      })

    /** Fails with `InvalidRecord` when the record's id is stored under another identity. */
    const rejectIdHeldByOther = (record: OutboxRecord.PreparedRecord, index: number) =>
      Effect.flatMap(query("persist", decodeIdentities, st.findById, [record.id]), (holders) => {
        const holder = holders[0]
        return holder !== undefined &&
          OutboxRecord.identityKey({
            partitionKey: holder.partition_key,
            envelopeId: holder.envelope_id,
            bindingId: holder.binding_id
          }) !== OutboxRecord.identityKey(record)
          ? Effect.fail(idReused(record, index))
          : Effect.void
      })

    const persist: Backend["persist"] = (batch, { replaceTerminal }) =>
      transact(
        "persist",
        batch[0]?.partitionKey,
        Effect.gen(function* () {
          // in-batch duplicates: the first record of an identity wins (R-PERSIST-3)
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
          // seq blocks from the fence row, in the same transaction (R-PERSIST-4); gaps are allowed
          const perPartition = new Map<string, number>()
          for (const { record } of unique) {
            perPartition.set(record.partitionKey, (perPartition.get(record.partitionKey) ?? 0) + 1)
          }
          const nextSeq = new Map<string, number>()
          for (const [partitionKey, count] of perPartition) {
            const rows = yield* query("persist", decodeSeq, st.allocateSeq, [partitionKey, count])
            const last = rows[0]?.seq_counter
            if (last === undefined) {
              return yield* new StoreUnavailable({ operation: "persist", partitionKey, cause: "no seq allocated" })
            }
            nextSeq.set(partitionKey, last - count + 1)
          }
          if (replaceTerminal) {
            // an id held by another identity is rejected against the state before the batch, also when
            // that holder is a terminal record this batch replaces (as the model and memory store do)
            for (const { record, index } of unique) yield* rejectIdHeldByOther(record, index)
            for (const { record } of unique) {
              yield* sql.unsafe(st.deleteTerminalIdentity, [record.partitionKey, record.envelopeId, record.bindingId])
            }
          }
          const inserted = new Set<string>()
          for (const chunk of chunksOf(unique, SqliteOutboxSchema.insertChunk)) {
            const values: Array<unknown> = []
            for (const { record } of chunk) {
              const seq = nextSeq.get(record.partitionKey) ?? 0
              nextSeq.set(record.partitionKey, seq + 1)
              values.push(...SqliteOutboxSchema.insertValues(record, seq))
            }
            const rows = yield* query("persist", decodeIds, st.insert(chunk.length), values)
            for (const row of rows) inserted.add(row.id)
          }
          // not inserted: an existing identity (skip) or an id held by a different identity (reject)
          const notInserted = [
            ...unique.filter(({ record }) => !inserted.has(record.id)),
            ...duplicateOf.flatMap(({ index }) => {
              const record = batch[index]
              return record === undefined ? [] : [{ record, index }]
            })
          ].sort((a, b) => a.index - b.index)
          for (const { record, index } of notInserted) yield* rejectIdHeldByOther(record, index)
          const holderOf = new Map<number, string>()
          for (const { record, index } of unique) {
            if (inserted.has(record.id)) {
              holderOf.set(index, record.id)
              continue
            }
            const holder = yield* query("persist", decodeIds, st.findIdentity, [
              record.partitionKey,
              record.envelopeId,
              record.bindingId
            ])
            const existing = holder[0]?.id
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
      )

    const claim: Backend["claim"] = (partitionKey, token, limit) =>
      transact(
        "claim",
        partitionKey,
        Effect.gen(function* () {
          yield* raiseFence("claim", partitionKey, token)
          if (limit <= 0) return ClaimBatch([])
          const now = yield* Clock.currentTimeMillis
          const stale = staleMillis === undefined ? [] : [now - staleMillis]
          const rows = yield* sql.unsafe<object>(st.selectClaimable, [
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
          const updated = new Set<string>()
          for (const ids of chunksOf(
            chosen.map((c) => c.decoded.row.id),
            idChunk
          )) {
            const rows = yield* query("claim", decodeIds, st.claimUpdate(ids.length), [
              token.owner,
              token.version,
              now,
              now,
              ...ids,
              partitionKey,
              token.version,
              ...stale
            ])
            for (const row of rows) updated.add(row.id)
          }
          // read back: the candidates were read under this transaction's write lock; the update changed
          // exactly the claim fields, which are applied to them here
          const applied = { owner: token.owner, version: token.version, at: DateTime.unsafeMake(now) }
          const claimed = chosen
            .filter((c) => updated.has(c.decoded.row.id))
            .map((c) => SqliteOutboxSchema.toRecord(c.decoded, applied, c.createdAt))
          claimed.sort(ClaimOrder.compareAge)
          return ClaimBatch(claimed)
        })
      ).pipe(Effect.tap(() => maybeSweep))

    /** The guarded update of complete/release; fails naming the ids that did not match, after committing the rest. */
    const settle = (
      operation: "complete" | "release",
      ids: ReadonlyArray<string>,
      token: LeaseToken.LeaseTokenLike
    ) => {
      const unique = Array.from(new Set(ids))
      const work = Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const matched = new Set<string>()
        for (const chunk of chunksOf(unique, idChunk)) {
          const rows =
            operation === "complete"
              ? yield* query(operation, decodeIds, st.complete(chunk.length), [
                  now,
                  now,
                  ...chunk,
                  token.owner,
                  token.version
                ])
              : yield* query(operation, decodeIds, st.release(chunk.length), [...chunk, token.owner, token.version])
          for (const row of rows) matched.add(row.id)
        }
        return ids.filter((id) => !matched.has(id))
      })
      // one guarded UPDATE is atomic on its own; several chunks share one transaction
      return (
        unique.length <= idChunk ? standalone(operation, undefined, work) : transact(operation, undefined, work)
      ).pipe(
        Effect.flatMap((mismatched) =>
          mismatched.length === 0 ? Effect.void : Effect.fail(notClaimedBy(operation, token, mismatched))
        )
      )
    }

    const expire: Backend["expire"] = (before, partitionKey, token) =>
      transact(
        "expire",
        partitionKey,
        Effect.gen(function* () {
          yield* raiseFence("expire", partitionKey, token)
          const now = yield* Clock.currentTimeMillis
          const rows = yield* sql.unsafe<object>(st.expire, [now, partitionKey, DateTime.toEpochMillis(before)])
          return rows.length
        })
      )

    const count = (operation: "countPending" | "countClaimed", text: string) => (partitionKey: string) =>
      standalone(
        operation,
        partitionKey,
        Effect.map(query(operation, decodeCount, text, [partitionKey]), (rows) => rows[0]?.n ?? 0)
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
        standalone("queryPending", partitionKey, records(st.queryPending, [partitionKey, limit])),
      countPending: count("countPending", st.countPending),
      countClaimed: count("countClaimed", st.countClaimed),
      listPartitions: Stream.paginateChunkEffect("", (after: string) =>
        standalone(
          "listPartitions",
          undefined,
          query("listPartitions", decodePartitions, st.listPartitions, [after, partitionPage])
        ).pipe(
          Effect.map((rows) => {
            const keys = rows.map((row) => row.partition_key)
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
