/**
 * The `OutboxStore` port (SPEC §2) and the shared core every backend goes through.
 *
 * Backends implement {@link Backend} (storage only). {@link make} wraps a backend with what must not
 * drift between backends: argument validation (`InvalidArgument`), token validity (R-CLAIM-1, R-DONE-1),
 * record validation and defaults (R-PERSIST-2/4/5), id generation, limit normalisation (R-CLAIM-3),
 * one span per public operation, and the in-process wake-up of idle drainers after a persist (SPEC §13,
 * `WakeHub`). {@link validateStoreOptions} checks the options every backend accepts.
 * Design notes: docs/design.md.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Chunk from "effect/Chunk"
import * as Option from "effect/Option"
import type * as Stream from "effect/Stream"
import * as LeaseToken from "../domain/LeaseToken.js"
import {
  type ClaimTruncated,
  type CorruptRecord,
  type DepthUnsupported,
  DuplicateRecord,
  type ExpireIncomplete,
  InvalidArgument,
  InvalidConfiguration,
  InvalidRecord,
  StaleFencingToken,
  type StoreUnavailable,
  type TransactionConflict
} from "../domain/OutboxError.js"
import * as OutboxRecord from "../domain/OutboxRecord.js"
import * as PrepareBatch from "./PrepareBatch.js"
import { WakeHub } from "./WakeHub.js"
import * as Traced from "./Traced.js"

/**
 * What a claim returns: the claimed records in age order, and — when the backend stopped early on a
 * transient failure after claiming some records (R-CLAIM-8) — the report of that short batch. The
 * records belong to the caller either way.
 *
 * @since 0.1.0
 */
export interface ClaimBatch {
  readonly records: ReadonlyArray<OutboxRecord.OutboxRecord>
  readonly truncated: Option.Option<ClaimTruncated>
}

/**
 * Builds a {@link ClaimBatch}.
 *
 * @since 0.1.0
 */
export const ClaimBatch = (
  records: ReadonlyArray<OutboxRecord.OutboxRecord>,
  truncated: Option.Option<ClaimTruncated> = Option.none()
): ClaimBatch => ({ records, truncated })

/**
 * What a successful persist reports: the ids stored, and the ids skipped because their identity
 * already existed (R-PERSIST-1/2/3).
 *
 * @since 0.1.0
 */
export interface PersistReport {
  readonly persisted: ReadonlyArray<string>
  readonly skipped: ReadonlyArray<string>
  /**
   * For each id in `skipped` (same order), the id of the stored record that holds its identity (for an
   * in-batch duplicate, the id of the first record of the batch with that identity).
   */
  readonly existingIds: ReadonlyArray<string>
}

/**
 * Options of `persist`.
 *
 * @since 0.1.0
 */
export interface PersistOptions {
  /**
   * Replace a *terminal* (completed or expired) record holding the same identity instead of skipping
   * (the one exception to R-PERSIST-1, used by dead-letter redrive). A non-terminal holder is still
   * skipped. Default false.
   */
  readonly replaceTerminal?: boolean | undefined
}

/**
 * Errors a claim may fail with (R-CLAIM-10), plus `CorruptRecord` when a stored row cannot be read and
 * `InvalidArgument` for an empty partition key or a limit that is not a safe integer.
 *
 * @since 0.1.0
 */
export type ClaimError = StaleFencingToken | TransactionConflict | StoreUnavailable | CorruptRecord | InvalidArgument

/**
 * The outbox store port. Every operation is scoped to one partition except `complete` and `release`,
 * which address records by id. When a mutating operation succeeds, its effect is durable (memory
 * excepted).
 *
 * @since 0.1.0
 */
export interface OutboxStoreService {
  /**
   * Stores new records as `pending`, idempotently per `(partitionKey, envelopeId, bindingId)`:
   * existing identities are skipped (never overwritten). Assigns `seq` per partition in batch order and
   * `createdAt = now` when absent; generates time-ordered ids when absent. Fails with `DuplicateRecord`
   * when every record of a non-empty batch was skipped, and with `InvalidRecord` (storing nothing) on
   * bad input. On SQLite it joins an enclosing `sql.withTransaction`.
   */
  readonly persist: (
    records: ReadonlyArray<OutboxRecord.NewOutboxRecord>,
    options?: PersistOptions
  ) => Effect.Effect<PersistReport, DuplicateRecord | InvalidRecord | StoreUnavailable>
  /**
   * Claims the oldest `limit` claimable records of a partition in age order, honouring head-of-line
   * per ordering key and the partition's fence high-water mark (which every accepted claim raises, also
   * one that finds nothing or has `limit <= 0`).
   */
  readonly claim: (
    partitionKey: string,
    token: LeaseToken.LeaseTokenLike,
    limit: number
  ) => Effect.Effect<ClaimBatch, ClaimError>
  /**
   * Marks claimed records completed. Each must be `claimed` by exactly this token's owner and version,
   * else `StaleFencingToken` naming the ids. One id per call is the well-defined case; with several
   * ids the memory store is all-or-nothing, while SQLite and DynamoDB may leave earlier matches applied.
   */
  readonly complete: (
    ids: ReadonlyArray<string>,
    token: LeaseToken.LeaseTokenLike
  ) => Effect.Effect<void, StaleFencingToken | InvalidArgument | StoreUnavailable>
  /**
   * Returns claimed records to `pending` (keeping `claimVersion`, `replayCount`, `firstAttemptedAt`).
   * Same matching rules and multi-id caveat as `complete`.
   */
  readonly release: (
    ids: ReadonlyArray<string>,
    token: LeaseToken.LeaseTokenLike
  ) => Effect.Effect<void, StaleFencingToken | InvalidArgument | StoreUnavailable>
  /**
   * Moves `pending` records of the partition whose `expiresAt` is strictly before `before` to `expired`,
   * fenced like a claim (and raising the high-water mark). Returns the count.
   */
  readonly expire: (
    before: DateTime.Utc,
    partitionKey: string,
    token: LeaseToken.LeaseTokenLike
  ) => Effect.Effect<number, StaleFencingToken | ExpireIncomplete | InvalidArgument | StoreUnavailable>
  /**
   * A preview of at most `limit` pending records, sorted by age within the result. Which records are
   * chosen when more exist is backend-defined: never use it to choose work.
   */
  readonly queryPending: (
    partitionKey: string,
    limit: number
  ) => Effect.Effect<ReadonlyArray<OutboxRecord.OutboxRecord>, InvalidArgument | StoreUnavailable | CorruptRecord>
  /** Exact count of pending records of the partition. */
  readonly countPending: (
    partitionKey: string
  ) => Effect.Effect<number, DepthUnsupported | InvalidArgument | StoreUnavailable>
  /** Exact count of claimed records of the partition. */
  readonly countClaimed: (
    partitionKey: string
  ) => Effect.Effect<number, DepthUnsupported | InvalidArgument | StoreUnavailable>
  /**
   * The partition keys holding non-terminal records (may include partitions that just emptied; never
   * omits one with pending work; never reads every record).
   */
  readonly listPartitions: Stream.Stream<string, StoreUnavailable>
}

/**
 * The `OutboxStore` service tag.
 *
 * @since 0.1.0
 */
export class OutboxStore extends Context.Tag("effect-outbox/OutboxStore")<OutboxStore, OutboxStoreService>() {}

/**
 * What a backend implements. Inputs are already validated by the core: tokens are valid, records are
 * prepared (ids, defaults, `createdAt`), limits are integers.
 *
 * @since 0.1.0
 */
export interface Backend extends Omit<OutboxStoreService, "persist"> {
  /** Backend name for errors and logs: `memory`, `sqlite`, `dynamodb`. */
  readonly name: string
  /** Backend-specific validation of one prepared record (e.g. item size); a reason string rejects it. */
  readonly validate?: (record: OutboxRecord.PreparedRecord) => string | undefined
  /**
   * Stores the new records (non-empty batch), skipping existing identities (and repeated identities in
   * the batch after the first). A record whose id is already used by a different identity must fail the
   * whole batch with `InvalidRecord`. With `replaceTerminal`, a terminal holder of the identity is
   * removed and the new record stored in its place.
   */
  readonly persist: (
    records: ReadonlyArray<OutboxRecord.PreparedRecord>,
    options: { readonly replaceTerminal: boolean }
  ) => Effect.Effect<PersistReport, InvalidRecord | StoreUnavailable>
}

/**
 * Options every backend layer accepts.
 *
 * @since 0.1.0
 */
export interface StoreOptions {
  /**
   * Wall-clock stale reclaim (R-CLAIM-6): a record claimed longer ago than this is claimable again even
   * at the same token version. Must exceed the worst clock skew between nodes plus the longest batch.
   */
  readonly staleClaimAfter?: Duration.DurationInput | undefined
  /** How long terminal records are kept before removal (default 1 hour). */
  readonly retention?: Duration.DurationInput | undefined
}

/**
 * {@link StoreOptions} after {@link validateStoreOptions}: plain milliseconds, defaults applied.
 *
 * @since 0.1.0
 */
export interface ValidStoreOptions {
  /** Stale reclaim threshold (R-CLAIM-6); `undefined` when not configured (the backend's default applies). */
  readonly staleClaimAfterMillis: number | undefined
  /** How long terminal records are kept (default 1 hour). */
  readonly retentionMillis: number
}

/**
 * The retention every backend applies when none is configured (1 hour), in milliseconds.
 *
 * @since 0.1.0
 */
export const defaultRetentionMillis: number = 60 * 60 * 1000

/** Milliseconds of a duration input, or `undefined` when it does not decode to a finite positive duration. */
const positiveMillis = (input: Duration.DurationInput): number | undefined => {
  const decoded = Duration.decodeUnknown(input)
  if (Option.isNone(decoded)) return undefined
  const millis = Duration.toMillis(decoded.value)
  return Number.isFinite(millis) && millis > 0 ? millis : undefined
}

/**
 * Checks the options every backend accepts, the same way for each: `staleClaimAfter` and `retention`,
 * when given, must be finite positive durations. Fails with `InvalidConfiguration` naming every problem;
 * `backend` is its component (the layer's module name, e.g. `SqliteOutboxStore`).
 *
 * @since 0.1.0
 */
export const validateStoreOptions = (
  backend: string,
  options: StoreOptions
): Effect.Effect<ValidStoreOptions, InvalidConfiguration> => {
  const problems: Array<string> = []
  const staleClaimAfterMillis =
    options.staleClaimAfter === undefined ? undefined : positiveMillis(options.staleClaimAfter)
  if (options.staleClaimAfter !== undefined && staleClaimAfterMillis === undefined) {
    problems.push("staleClaimAfter must be a finite positive duration")
  }
  const retentionMillis = options.retention === undefined ? defaultRetentionMillis : positiveMillis(options.retention)
  if (retentionMillis === undefined) problems.push("retention must be a finite positive duration")
  if (problems.length > 0 || retentionMillis === undefined) {
    return Effect.fail(new InvalidConfiguration({ component: backend, problems }))
  }
  return Effect.succeed({ staleClaimAfterMillis, retentionMillis })
}

/**
 * Validates a batch of new records and fills every default (see `PrepareBatch`).
 *
 * @since 0.1.0
 */
export const prepare = PrepareBatch.prepare

const checkToken = (
  operation: string,
  token: unknown,
  partitionKey: string | undefined,
  recordIds?: ReadonlyArray<string>
): Effect.Effect<void, StaleFencingToken> => {
  const reason = LeaseToken.invalidReason(token)
  if (reason === undefined) return Effect.void
  return Effect.fail(
    new StaleFencingToken({
      operation,
      reason: `invalid token: ${reason}`,
      partitionKey,
      recordIds,
      owner: typeof token === "object" && token !== null ? stringOrUndefined(Reflect.get(token, "owner")) : undefined,
      version:
        typeof token === "object" && token !== null ? numberOrUndefined(Reflect.get(token, "version")) : undefined
    })
  )
}

const stringOrUndefined = (u: unknown): string | undefined => (typeof u === "string" ? u : undefined)
const numberOrUndefined = (u: unknown): number | undefined => (typeof u === "number" ? u : undefined)

/**
 * The largest limit a backend is handed (DynamoDB's `Limit` is a 32-bit integer); a larger valid limit
 * means "everything" and is lowered to it.
 *
 * @since 0.1.0
 */
export const maxLimit = 2_147_483_647

/**
 * Normalises a claim/query limit: non-finite or non-positive → 0, else its integer part, at most
 * {@link maxLimit}. The core accepts only safe integers (see {@link make}), so a backend sees
 * `min(max(0, limit), maxLimit)`.
 *
 * @since 0.1.0
 */
export const normaliseLimit = (limit: number): number =>
  Number.isFinite(limit) && limit > 0 ? Math.min(Math.floor(limit), maxLimit) : 0

const invalidArgument = (operation: string, argument: string, reason: string): Effect.Effect<never, InvalidArgument> =>
  Effect.fail(new InvalidArgument({ operation, argument, reason }))

const isPartitionKey = (u: unknown): u is string => typeof u === "string" && u.length > 0

/** A limit is a safe integer; `<= 0` selects nothing (R-CLAIM-3). */
const isLimit = (u: unknown): u is number => typeof u === "number" && Number.isSafeInteger(u)

const isIdList = (u: unknown): u is ReadonlyArray<string> => {
  if (!Array.isArray(u)) return false
  for (const id of u) if (typeof id !== "string" || id.length === 0) return false
  return true
}

/** Checks a partition key, then (when given) a limit; `undefined` when both are valid. */
const checkPartition = (
  operation: string,
  partitionKey: unknown,
  limit?: unknown
): Effect.Effect<never, InvalidArgument> | undefined => {
  if (!isPartitionKey(partitionKey)) return invalidArgument(operation, "partitionKey", "must be a non-empty string")
  if (limit !== undefined && !isLimit(limit)) return invalidArgument(operation, "limit", "must be a safe integer")
  return undefined
}

/** The length of an array argument, 0 for anything else (for span attributes). */
const sizeOf = (u: unknown): number => (Array.isArray(u) ? u.length : 0)

const checkIds = (operation: string, ids: unknown): Effect.Effect<never, InvalidArgument> | undefined =>
  isIdList(ids) ? undefined : invalidArgument(operation, "ids", "must be an array of non-empty strings")

/** The span of one public operation (made when a tracer is installed, see `Traced`). */
const span = Traced.span

/** Wakes the idle drainers of this process for every partition of a persisted batch (SPEC §13). */
const wakePartitions = (records: ReadonlyArray<{ readonly partitionKey: string }>): Effect.Effect<void> =>
  Effect.map(WakeHub, (hub) => {
    let previous: string | undefined
    for (const record of records) {
      if (record.partitionKey === previous) continue
      previous = record.partitionKey
      hub.signal(record.partitionKey)
    }
  })

/**
 * Wraps a backend with the shared core.
 *
 * @since 0.1.0
 */
export const make = (backend: Backend): OutboxStoreService =>
  OutboxStore.of({
    persist: (records, options) =>
      Effect.gen(function* () {
        if (!Array.isArray(records)) {
          return yield* new InvalidRecord({ index: 0, reason: "the batch must be an array of records" })
        }
        if (records.length === 0) return { persisted: [], skipped: [], existingIds: [] }
        const prepared = yield* prepare(records, backend.validate)
        const report = yield* backend.persist(prepared, { replaceTerminal: options?.replaceTerminal === true })
        if (report.persisted.length === 0) {
          return yield* new DuplicateRecord({
            ids: report.skipped,
            partitionKey: prepared[0]?.partitionKey,
            existingIds: report.existingIds
          })
        }
        yield* wakePartitions(prepared)
        return report
      }).pipe(span("OutboxStore.persist", { "outbox.records": sizeOf(records) })),
    claim: (partitionKey, token, limit) =>
      (
        checkPartition("claim", partitionKey, limit) ??
        checkToken("claim", token, partitionKey).pipe(
          Effect.zipRight(backend.claim(partitionKey, token, normaliseLimit(limit)))
        )
      ).pipe(span("OutboxStore.claim", { "outbox.partition": partitionKey, "outbox.limit": limit })),
    complete: (ids, token) =>
      (
        checkIds("complete", ids) ??
        checkToken("complete", token, undefined, ids).pipe(
          Effect.zipRight(ids.length === 0 ? Effect.void : backend.complete(ids, token))
        )
      ).pipe(span("OutboxStore.complete", { "outbox.records": sizeOf(ids) })),
    release: (ids, token) =>
      (
        checkIds("release", ids) ??
        checkToken("release", token, undefined, ids).pipe(
          Effect.zipRight(ids.length === 0 ? Effect.void : backend.release(ids, token))
        )
      ).pipe(span("OutboxStore.release", { "outbox.records": sizeOf(ids) })),
    expire: (before, partitionKey, token) =>
      (
        checkPartition("expire", partitionKey) ??
        (DateTime.isDateTime(before) ? undefined : invalidArgument("expire", "before", "must be a DateTime")) ??
        checkToken("expire", token, partitionKey).pipe(Effect.zipRight(backend.expire(before, partitionKey, token)))
      ).pipe(span("OutboxStore.expire", { "outbox.partition": partitionKey })),
    queryPending: (partitionKey, limit) =>
      (
        checkPartition("queryPending", partitionKey, limit) ??
        (limit <= 0 ? Effect.succeed([]) : backend.queryPending(partitionKey, normaliseLimit(limit)))
      ).pipe(span("OutboxStore.queryPending", { "outbox.partition": partitionKey })),
    countPending: (partitionKey) =>
      (checkPartition("countPending", partitionKey) ?? backend.countPending(partitionKey)).pipe(
        span("OutboxStore.countPending", { "outbox.partition": partitionKey })
      ),
    countClaimed: (partitionKey) =>
      (checkPartition("countClaimed", partitionKey) ?? backend.countClaimed(partitionKey)).pipe(
        span("OutboxStore.countClaimed", { "outbox.partition": partitionKey })
      ),
    listPartitions: backend.listPartitions
  })

/**
 * The stale-fence error a backend raises when a token is below the partition's high-water mark.
 *
 * @since 0.1.0
 */
export const belowHighWaterMark = (
  operation: string,
  partitionKey: string,
  token: LeaseToken.LeaseTokenLike,
  highWaterMark: number
): StaleFencingToken =>
  new StaleFencingToken({
    operation,
    partitionKey,
    owner: token.owner,
    version: token.version,
    highWaterMark,
    reason: `token version ${token.version} is below the partition's fence high-water mark ${highWaterMark}`
  })

/**
 * The stale-fence error a backend raises when records are not claimed by the token (R-DONE-2).
 *
 * @since 0.1.0
 */
export const notClaimedBy = (
  operation: string,
  token: LeaseToken.LeaseTokenLike,
  recordIds: ReadonlyArray<string>
): StaleFencingToken =>
  new StaleFencingToken({
    operation,
    owner: token.owner,
    version: token.version,
    recordIds,
    reason: `records are not claimed by ${token.owner} at version ${token.version}`
  })

/**
 * One keyset page of `listPartitions` for `Stream.paginateChunkEffect`: the keys read, and the cursor of
 * the next page (the last key) unless the page came back short.
 *
 * @since 0.1.0
 */
export const partitionPage = (
  keys: ReadonlyArray<string>,
  pageSize: number
): readonly [Chunk.Chunk<string>, Option.Option<string>] => {
  const last = keys[keys.length - 1]
  return [Chunk.fromIterable(keys), keys.length < pageSize || last === undefined ? Option.none() : Option.some(last)]
}
