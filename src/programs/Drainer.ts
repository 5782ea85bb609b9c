/**
 * The drainer (SPEC §6): drains one partition while its owner holds the partition's lease.
 *
 * One cycle ({@link Drainer.drainOnce}):
 * 1. Reads the live lease (`LeaseStore.current`); without a valid, unexpired lease of `owner` it skips
 *    (counts `DrainSkippedNoLease`).
 * 2. When expired records are dropped (`onExpired: "drop"`), sweeps them with `expire` at most once per
 *    `expireInterval`. With the DLQ policy they are handled on the claim path so their envelope reaches
 *    the dead-letter queue.
 * 3. Claims up to the current batch size and sets the gauges `OutboxClaimBatchSize`, `OutboxDepth`,
 *    `OutboxClaimedDepth` (a failing count is counted in `OutboxDepthFailures`; draining goes on).
 * 4. Groups the batch by ordering key in age order (keyless records are groups of one) and runs at most
 *    `maxConcurrency` groups at once, each strictly in order. The work goes in **waves**: a wave is the
 *    next record of up to `maxConcurrency` groups, i.e. the records sent concurrently. Groups of several
 *    records take turns (round robin, in age order of their heads), so that a wave is full as long as
 *    records with a successor are left; groups of one fill the rest of a wave. Lease checks and completes
 *    are per wave, not per record (below). One sender fiber runs a wave's sends one after another as
 *    long as they finish without waiting (no fiber or timer per record); a send that has to wait leaves
 *    the rest of the wave to a new sender, so the waiting sends are in flight together.
 * 5. Per record: expired → dead-letter (`expired`) or drop, then complete. Poison (`replayCount >
 *    maxReplayAttempts` and `now - firstAttemptedAt >= replayBudget`; an empty `firstAttemptedAt`
 *    never poisons) → dead-letter (`poison`) or drop, then complete, without sending, with a WARN log.
 *    Otherwise: before the wave's sends, the live lease must still carry the claim's version (else the
 *    cycle stops with `StaleFencingToken` and nothing of the wave is sent); send with `sendTimeout` (one
 *    deadline per wave, which every send of the wave starts under); check the lease again (lost → no
 *    complete, `OutboxDuplicateRisk`); complete. A record with a younger sibling in the batch is completed
 *    inside its wave, before that sibling is sent; the completes of the others (keyless records, last
 *    records of their key) go in one call at the end of the batch, after one more lease check. When a
 *    wave makes no store call after its second check (no complete, release or dead-letter write), that
 *    check also stands as the next one: nothing was sent, written or awaited in between.
 * 6. Permanent send failure → dead-letter (`permanent`) or drop, then complete. Transient failure →
 *    release the record and the untried rest of its group and stop that group. A failing complete or
 *    dead-letter write leaves the record claimed and releases the untried rest. Nothing ever overtakes
 *    a head of its key. Records left claimed this way are retried by the next cycles of this drainer
 *    (complete again when the record was delivered, else release) while the lease version is unchanged.
 * 7. A watchdog abandons a batch that outlives `batchTimeout + watchdogGrace`: counts
 *    `OutboxDrainStalled` and fails with {@link DrainStalled}. Interrupting a cycle stops taking new
 *    records, lets in-flight ones finish within `finalDrainBudget` and releases everything still held.
 *
 * The loop ({@link Drainer.run}) adapts the batch size (a full batch doubles it up to `maxBatchSize`, an
 * empty one halves it down to `minBatchSize`) and backs off while idle on an exponential schedule with
 * jitter (`idleBackoffMin` → `idleBackoffMax`), reset after work. A `Retry-After` from the sink is
 * honoured as a minimum pause. Store errors of a cycle are logged and backed off; a lost lease
 * (`StaleFencingToken`) or a stall ends the loop with that error so a supervisor (the relay) can act.
 *
 * Depth gauges cost two counts; they are refreshed at most once per `gaugeInterval` (default 1 s).
 * Idle cycles open no span of their own; a cycle that claimed records runs in a `Drainer.batch` span.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import { type DeadLetterCategory, DeadLetterEntry } from "../domain/DeadLetterEntry.js"
import * as LeaseTokenModule from "../domain/LeaseToken.js"
import {
  type CorruptRecord,
  DrainStalled,
  InvalidConfiguration,
  type InvalidArgument,
  type InvalidRecord,
  StaleFencingToken,
  type StoreUnavailable,
  type TransactionConflict
} from "../domain/OutboxError.js"
import type { OutboxRecord } from "../domain/OutboxRecord.js"
import { DeadLetterStore, type DeadLetterStoreService } from "../services/DeadLetterStore.js"
import { yieldToEventLoop } from "../services/EventLoop.js"
import { LeaseStore } from "../services/LeaseStore.js"
import * as OutboxMetrics from "../services/OutboxMetrics.js"
import { OutboxStore } from "../services/OutboxStore.js"
import { type SendError, Sink } from "../services/Sink.js"
import { SendError as SendErrorClass } from "../services/Sink.js"

/**
 * The watchdog error, defined with every other error in `OutboxError` and re-exported here.
 *
 * @since 0.1.0
 */
export { DrainStalled }

/**
 * What to do with a record that will not be delivered: write it to the dead-letter queue, or drop it
 * (counted in `MessagesDropped`). Either way the record is then completed.
 *
 * @since 0.1.0
 */
export type Disposal = "dlq" | "drop"

/**
 * Options of a drainer. Only `partitionKey` and `owner` are required; the rest default to SPEC §6.
 *
 * @since 0.1.0
 */
export interface DrainerOptions {
  /** The partition to drain. */
  readonly partitionKey: string
  /** The lease owner this drainer works for: only a live lease of this owner lets it drain. */
  readonly owner: string
  /** Route tag for metrics, when the partition serves one route. */
  readonly routeId?: string | undefined
  /** Initial claim size (default 100). */
  readonly batchSize?: number | undefined
  /** Lower bound of the adaptive claim size (default 10, at most `batchSize`). */
  readonly minBatchSize?: number | undefined
  /** Upper bound of the adaptive claim size (default 500). */
  readonly maxBatchSize?: number | undefined
  /** Groups in flight at once (default 10). */
  readonly maxConcurrency?: number | undefined
  /** Timeout of one send; a timeout is a transient failure (default 30 s). */
  readonly sendTimeout?: Duration.DurationInput | undefined
  /** Claims a record may take before the poison gate can close (default 5). */
  readonly maxReplayAttempts?: number | undefined
  /** Time since the first attempt before the poison gate can close (default 15 min). */
  readonly replayBudget?: Duration.DurationInput | undefined
  /** Expired records: dead-letter (default) or drop. */
  readonly onExpired?: Disposal | undefined
  /** Permanent send failures: dead-letter (default) or drop. */
  readonly onPermanentFailure?: Disposal | undefined
  /** Poison records: dead-letter (default) or drop. */
  readonly onPoison?: Disposal | undefined
  /** Minimum time between expiry sweeps when expired records are dropped (default 1 min). */
  readonly expireInterval?: Duration.DurationInput | undefined
  /** First idle pause (default 100 ms). */
  readonly idleBackoffMin?: Duration.DurationInput | undefined
  /** Longest idle pause (default 30 s). */
  readonly idleBackoffMax?: Duration.DurationInput | undefined
  /** Expected upper bound of one batch (default 5 min). */
  readonly batchTimeout?: Duration.DurationInput | undefined
  /** Added to `batchTimeout` before the watchdog fires (default 30 s). */
  readonly watchdogGrace?: Duration.DurationInput | undefined
  /** How long an interrupted cycle may take to finish in-flight sends and release the rest (default 10 s). */
  readonly finalDrainBudget?: Duration.DurationInput | undefined
  /** Minimum time between depth-gauge refreshes (default 1 s; 0 refreshes every cycle). */
  readonly gaugeInterval?: Duration.DurationInput | undefined
}

/**
 * The resolved settings of a drainer (every default filled in).
 *
 * @since 0.1.0
 */
export interface DrainerSettings {
  readonly partitionKey: string
  readonly owner: string
  readonly routeId: string | undefined
  readonly batchSize: number
  readonly minBatchSize: number
  readonly maxBatchSize: number
  readonly maxConcurrency: number
  readonly sendTimeout: Duration.Duration
  readonly maxReplayAttempts: number
  readonly replayBudget: Duration.Duration
  readonly onExpired: Disposal
  readonly onPermanentFailure: Disposal
  readonly onPoison: Disposal
  readonly expireInterval: Duration.Duration
  readonly idleBackoffMin: Duration.Duration
  readonly idleBackoffMax: Duration.Duration
  readonly batchTimeout: Duration.Duration
  readonly watchdogGrace: Duration.Duration
  readonly finalDrainBudget: Duration.Duration
  readonly gaugeInterval: Duration.Duration
}

const positiveInt = (value: number | undefined, fallback: number): number =>
  value !== undefined && Number.isFinite(value) && value >= 1 ? Math.floor(value) : fallback

/**
 * Fills in the SPEC §6 defaults.
 *
 * @since 0.1.0
 */
export const settings = (options: DrainerOptions): DrainerSettings => {
  const batchSize = positiveInt(options.batchSize, 100)
  const maxBatchSize = Math.max(batchSize, positiveInt(options.maxBatchSize, 500))
  return {
    partitionKey: options.partitionKey,
    owner: options.owner,
    routeId: options.routeId,
    batchSize,
    minBatchSize: Math.min(batchSize, positiveInt(options.minBatchSize, 10)),
    maxBatchSize,
    maxConcurrency: positiveInt(options.maxConcurrency, 10),
    sendTimeout: Duration.decode(options.sendTimeout ?? "30 seconds"),
    maxReplayAttempts: Math.max(0, Math.floor(options.maxReplayAttempts ?? 5)),
    replayBudget: Duration.decode(options.replayBudget ?? "15 minutes"),
    onExpired: options.onExpired ?? "dlq",
    onPermanentFailure: options.onPermanentFailure ?? "dlq",
    onPoison: options.onPoison ?? "dlq",
    expireInterval: Duration.decode(options.expireInterval ?? "1 minute"),
    idleBackoffMin: Duration.decode(options.idleBackoffMin ?? "100 millis"),
    idleBackoffMax: Duration.decode(options.idleBackoffMax ?? "30 seconds"),
    batchTimeout: Duration.decode(options.batchTimeout ?? "5 minutes"),
    watchdogGrace: Duration.decode(options.watchdogGrace ?? "30 seconds"),
    finalDrainBudget: Duration.decode(options.finalDrainBudget ?? "10 seconds"),
    gaugeInterval: Duration.decode(options.gaugeInterval ?? "1 second")
  }
}

/**
 * The adaptive claim size: a full batch doubles it (up to `maxBatchSize`), an empty one halves it
 * (down to `minBatchSize`), anything else keeps it.
 *
 * @since 0.1.0
 */
export const nextBatchSize = (
  current: number,
  claimed: number,
  bounds: Pick<DrainerSettings, "minBatchSize" | "maxBatchSize">
): number => {
  if (claimed >= current) return Math.min(bounds.maxBatchSize, current * 2)
  if (claimed === 0) return Math.max(bounds.minBatchSize, Math.floor(current / 2))
  return current
}

/**
 * The poison gate: `replayCount > maxReplayAttempts` **and** `now - firstAttemptedAt >= replayBudget`.
 * A record with no `firstAttemptedAt` is never poison.
 *
 * @since 0.1.0
 */
export const isPoison = (
  record: Pick<OutboxRecord, "replayCount" | "firstAttemptedAt">,
  nowMillis: number,
  gate: Pick<DrainerSettings, "maxReplayAttempts" | "replayBudget">
): boolean =>
  record.replayCount > gate.maxReplayAttempts &&
  Option.isSome(record.firstAttemptedAt) &&
  nowMillis - DateTime.toEpochMillis(record.firstAttemptedAt.value) >= Duration.toMillis(gate.replayBudget)

/**
 * True when the record's `expiresAt` is strictly before now.
 *
 * @since 0.1.0
 */
export const isExpired = (record: Pick<OutboxRecord, "expiresAt">, nowMillis: number): boolean =>
  Option.isSome(record.expiresAt) && DateTime.toEpochMillis(record.expiresAt.value) < nowMillis

/**
 * Splits a claimed batch (in age order) into groups: one per ordering key in age order of its first
 * record, each keyless record a group of its own.
 *
 * @since 0.1.0
 */
export const groupByKey = (records: ReadonlyArray<OutboxRecord>): Array<Array<OutboxRecord>> => {
  const groups: Array<Array<OutboxRecord>> = []
  const byKey = new Map<string, Array<OutboxRecord>>()
  for (const record of records) {
    if (Option.isNone(record.orderingKey)) {
      groups.push([record])
      continue
    }
    const existing = byKey.get(record.orderingKey.value)
    if (existing !== undefined) existing.push(record)
    else {
      const group = [record]
      byKey.set(record.orderingKey.value, group)
      groups.push(group)
    }
  }
  return groups
}

/**
 * What one cycle did.
 *
 * @since 0.1.0
 */
export interface CycleResult {
  /** False when the cycle was skipped for want of a valid lease. */
  readonly leased: boolean
  /** The claim limit used. */
  readonly limit: number
  /** Records claimed. */
  readonly claimed: number
  /** Records sent and completed. */
  readonly delivered: number
  /** Records written to the dead-letter queue and completed. */
  readonly deadLettered: number
  /** Records dropped by policy and completed. */
  readonly dropped: number
  /** Records released back to pending (transient failure, untried tail, interruption). */
  readonly deferred: number
  /** Records left claimed (failed complete or dead-letter write, lost lease after send). */
  readonly leftClaimed: number
  /** Records expired by the sweep. */
  readonly swept: number
  /** The largest `Retry-After` a sink asked for, in milliseconds. */
  readonly retryAfterMillis: number | undefined
}

/**
 * Errors that end a cycle.
 *
 * @since 0.1.0
 */
export type CycleError =
  StaleFencingToken | TransactionConflict | StoreUnavailable | CorruptRecord | InvalidArgument | DrainStalled

/**
 * Errors that end the loop: the lease was lost, or the watchdog fired.
 *
 * @since 0.1.0
 */
export type DrainError = StaleFencingToken | DrainStalled

/**
 * A drainer of one partition.
 *
 * @since 0.1.0
 */
export interface Drainer {
  readonly settings: DrainerSettings
  /** One cycle with the given claim limit (default: the current adaptive batch size). */
  readonly drainOnce: (limit?: number) => Effect.Effect<CycleResult, CycleError>
  /** The loop: cycles forever, adapting the batch size and backing off while idle. */
  readonly run: Effect.Effect<never, DrainError>
  /** The current adaptive batch size. */
  readonly batchSize: Effect.Effect<number>
}

type Outcome =
  | { readonly _tag: "Delivered" }
  | { readonly _tag: "Disposed"; readonly how: Disposal }
  | { readonly _tag: "Deferred"; readonly retryAfterMillis: number | undefined }
  | { readonly _tag: "LeftClaimed"; readonly delivered: boolean }
  | { readonly _tag: "Fenced"; readonly error: StaleFencingToken }
  | { readonly _tag: "Lost"; readonly error: StaleFencingToken }

/** A started group: its records (one ordering key, age order) and the index of its next record. */
interface Lane {
  readonly group: ReadonlyArray<OutboxRecord>
  next: number
}

/** A record of a wave: its lane, its send result, how it is to be completed, and its outcome once known. */
interface Slot {
  readonly lane: Lane
  readonly record: OutboxRecord
  /** A younger record of its group follows it in this batch. */
  readonly hasNext: boolean
  /** The send's result, once it returned. */
  result: Either.Either<void, SendError> | undefined
  /** Set when the record is to be completed: sent, or dead-lettered / dropped. */
  how: Disposal | "delivered" | undefined
  outcome: Outcome | undefined
}

const delivered: Outcome = { _tag: "Delivered" }

/** What the waves of one batch share: a synchronous runner on the batch fiber's runtime, and its clock. */
interface BatchRuntime {
  readonly run: <A, E>(effect: Effect.Effect<A, E>) => Exit.Exit<A, E>
  readonly clock: Clock.Clock
}

interface Counters {
  delivered: number
  deadLettered: number
  dropped: number
  deferred: number
  leftClaimed: number
  retryAfterMillis: number | undefined
}

/** Mutable state of one batch, shared by its groups. */
class BatchState {
  readonly held: Map<string, OutboxRecord>
  readonly inFlight = new Set<string>()
  /**
   * Records done with (sent, or dead-lettered / dropped) that have no successor in their group: their
   * completes wait for one call at the end of the batch (nothing of their key waits behind them).
   */
  toFlush: Array<{ readonly record: OutboxRecord; readonly how: Disposal | "delivered" }> = []
  stopRequested = false
  fenced: StaleFencingToken | undefined = undefined
  /**
   * The drainer's store-call count (see `storeCalls`) when a lease check after a wave's sends last found
   * the lease held; `undefined` once another wave's sends have started. While it equals the current count,
   * nothing has been sent, written or awaited since that check, so the check also stands for the next
   * one (the next wave's pre-send check, or the end-of-batch check).
   */
  leaseHeldAt: number | undefined = undefined
  readonly counters: Counters = {
    delivered: 0,
    deadLettered: 0,
    dropped: 0,
    deferred: 0,
    leftClaimed: 0,
    retryAfterMillis: undefined
  }
  constructor(records: ReadonlyArray<OutboxRecord>) {
    this.held = new Map(records.map((r) => [r.id, r]))
  }
}

/**
 * Builds a drainer. Fails with `InvalidConfiguration` when a policy dead-letters but no
 * `DeadLetterStore` is provided (the dead-letter store is optional when every policy drops).
 *
 * @since 0.1.0
 */
export const make = (
  options: DrainerOptions
): Effect.Effect<Drainer, InvalidConfiguration, OutboxStore | LeaseStore | Sink> =>
  Effect.gen(function* () {
    const config = settings(options)
    const store = yield* OutboxStore
    const leases = yield* LeaseStore
    const sink = yield* Sink
    const dlq = yield* Effect.serviceOption(DeadLetterStore)
    const problems: Array<string> = []
    if (config.partitionKey.length === 0) problems.push("partitionKey is empty")
    if (config.owner.length === 0) problems.push("owner is empty")
    if (Option.isNone(dlq)) {
      for (const [name, policy] of [
        ["onExpired", config.onExpired],
        ["onPermanentFailure", config.onPermanentFailure],
        ["onPoison", config.onPoison]
      ] as const) {
        if (policy === "dlq") problems.push(`${name} is "dlq" but no DeadLetterStore is provided`)
      }
    }
    if (problems.length > 0) return yield* new InvalidConfiguration({ component: "Drainer", problems })
    return makeWith(config, store, leases, sink, Option.getOrUndefined(dlq))
  })

const makeWith = (
  config: DrainerSettings,
  store: OutboxStore["Type"],
  leases: LeaseStore["Type"],
  sink: Sink["Type"],
  dlq: DeadLetterStoreService | undefined
): Drainer => {
  const partitionKey = config.partitionKey
  const tag = <Type, In, Out>(metric: Metric.Metric<Type, In, Out>) =>
    OutboxMetrics.tagged(metric, partitionKey, config.routeId)
  const metrics = {
    depth: tag(OutboxMetrics.OutboxDepth),
    claimedDepth: tag(OutboxMetrics.OutboxClaimedDepth),
    batchSize: tag(OutboxMetrics.OutboxClaimBatchSize),
    depthFailures: tag(OutboxMetrics.OutboxDepthFailures),
    completions: tag(OutboxMetrics.OutboxCompletions),
    replayCount: tag(OutboxMetrics.OutboxReplayCount),
    failures: tag(OutboxMetrics.OutboxRecordFailures),
    duplicateRisk: tag(OutboxMetrics.OutboxDuplicateRisk),
    deferred: tag(OutboxMetrics.OutboxDeferred),
    stalled: tag(OutboxMetrics.OutboxDrainStalled),
    noLease: tag(OutboxMetrics.DrainSkippedNoLease),
    expired: tag(OutboxMetrics.MessagesExpired),
    latency: tag(OutboxMetrics.OutboxDrainLatency),
    dlq: {
      poison: Metric.tagged(tag(OutboxMetrics.DLQEntries), "category", "poison"),
      permanent: Metric.tagged(tag(OutboxMetrics.DLQEntries), "category", "permanent"),
      expired: Metric.tagged(tag(OutboxMetrics.DLQEntries), "category", "expired")
    },
    dropped: {
      poison: Metric.tagged(tag(OutboxMetrics.MessagesDropped), "reason", "poison"),
      permanent: Metric.tagged(tag(OutboxMetrics.MessagesDropped), "reason", "permanent"),
      expired: Metric.tagged(tag(OutboxMetrics.MessagesDropped), "reason", "expired")
    }
  }
  const sendTimeoutMillis = Duration.toMillis(config.sendTimeout)
  const gaugeIntervalMillis = Duration.toMillis(config.gaugeInterval)
  const expireIntervalMillis = Duration.toMillis(config.expireInterval)
  const watchdog = Duration.sum(config.batchTimeout, config.watchdogGrace)

  // instance state (one drainer runs one cycle at a time)
  let currentBatchSize = config.batchSize
  // complete, release and dead-letter write calls of the batches so far (see BatchState.leaseHeldAt)
  let storeCalls = 0
  let lastGaugeAt = Number.NEGATIVE_INFINITY
  let lastSweepAt = Number.NEGATIVE_INFINITY
  // records left claimed by an earlier cycle, to complete (delivered) or release (not delivered)
  // while the lease version is unchanged
  const strandedVersion = { value: 0 }
  const toComplete = new Map<string, OutboxRecord>()
  const toRelease = new Map<string, OutboxRecord>()

  /**
   * The live lease's token when it is this owner's, valid and unexpired; `none` when it is not;
   * `"unknown"` when the lease store could not be read (a transient failure is not a lost lease).
   */
  const readLease: Effect.Effect<Option.Option<LeaseTokenModule.LeaseToken> | "unknown"> = Effect.clockWith((clock) =>
    Effect.map(Effect.either(leases.current(partitionKey)), (lease) => {
      if (Either.isLeft(lease)) return lease.left._tag === "LeaseNotFound" ? Option.none() : "unknown"
      const { expiresAt, token } = lease.right
      if (token.owner !== config.owner || !LeaseTokenModule.isValid(token)) return Option.none()
      if (DateTime.toEpochMillis(expiresAt) <= clock.unsafeCurrentTimeMillis()) return Option.none()
      return Option.some(token)
    })
  )

  /** The live lease's token when this owner holds it (an unreadable lease counts as not held). */
  const liveToken: Effect.Effect<Option.Option<LeaseTokenModule.LeaseToken>> = Effect.map(readLease, (read) =>
    read === "unknown" ? Option.none() : read
  )

  const leaseMoved = (operation: string, token: LeaseTokenModule.LeaseTokenLike, recordId: string) =>
    new StaleFencingToken({
      operation,
      partitionKey,
      owner: token.owner,
      version: token.version,
      recordIds: [recordId],
      reason: `the live lease of ${config.owner} no longer carries version ${token.version}`
    })

  /**
   * Whether the live lease still carries the token's version: one lease read, asked before a wave's sends
   * and again after them, before their complete. Never reused across a send or a store call: the check
   * after one wave's sends stands for the next wave's pre-send check (or the end-of-batch check) only when
   * nothing at all came between them (see `BatchState.leaseHeldAt`).
   */
  const checkLease = (token: LeaseTokenModule.LeaseTokenLike): Effect.Effect<"held" | "lost" | "unknown"> =>
    Effect.map(readLease, (live) =>
      live === "unknown"
        ? ("unknown" as const)
        : Option.isSome(live) && live.value.version === token.version
          ? ("held" as const)
          : ("lost" as const)
    )

  /**
   * {@link checkLease}, unless the check after the last wave's sends still stands: nothing was sent, written
   * (no complete, release or dead-letter write) or awaited since it found the lease held.
   */
  const checkLeaseAgain = (
    token: LeaseTokenModule.LeaseTokenLike,
    state: BatchState
  ): Effect.Effect<"held" | "lost" | "unknown"> =>
    state.leaseHeldAt === storeCalls ? Effect.succeed("held") : checkLease(token)

  const refreshGauges = (claimed: number): Effect.Effect<void> =>
    Effect.gen(function* () {
      yield* Metric.set(metrics.batchSize, claimed)
      const now = yield* Clock.currentTimeMillis
      if (now - lastGaugeAt < gaugeIntervalMillis) return
      lastGaugeAt = now
      const pending = yield* Effect.either(store.countPending(partitionKey))
      if (Either.isRight(pending)) yield* Metric.set(metrics.depth, pending.right)
      else yield* Metric.increment(metrics.depthFailures)
      const claimedDepth = yield* Effect.either(store.countClaimed(partitionKey))
      if (Either.isRight(claimedDepth)) yield* Metric.set(metrics.claimedDepth, claimedDepth.right)
      else yield* Metric.increment(metrics.depthFailures)
    })

  const sweep = (token: LeaseTokenModule.LeaseToken): Effect.Effect<number, StaleFencingToken> =>
    Effect.gen(function* () {
      if (config.onExpired !== "drop") return 0
      const now = yield* Clock.currentTimeMillis
      if (now - lastSweepAt < expireIntervalMillis) return 0
      lastSweepAt = now
      const result = yield* Effect.either(store.expire(DateTime.unsafeMake(now), partitionKey, token))
      let count = 0
      if (Either.isRight(result)) count = result.right
      else {
        const error = result.left
        if (error._tag === "StaleFencingToken") return yield* error
        if (error._tag === "ExpireIncomplete") count = error.expired
        yield* Effect.logWarning("expiry sweep failed; will retry next interval").pipe(
          Effect.annotateLogs({ error: error.message })
        )
      }
      if (count > 0) {
        yield* Metric.incrementBy(metrics.expired, count)
        yield* Metric.incrementBy(metrics.dropped.expired, count)
      }
      return count
    })

  /** Writes the record to the dead-letter queue or drops it; fails when the write fails. */
  const dispose = (
    record: OutboxRecord,
    category: DeadLetterCategory,
    policy: Disposal,
    reason: string,
    errorCode: string,
    lastError: string
  ): Effect.Effect<Disposal, InvalidRecord | StoreUnavailable> =>
    Effect.gen(function* () {
      if (policy === "drop" || dlq === undefined) {
        yield* Metric.increment(metrics.dropped[category])
        yield* Effect.logInfo("record dropped by policy").pipe(
          Effect.annotateLogs({ recordId: record.id, category, reason })
        )
        return "drop" as const
      }
      const failedAt = yield* DateTime.now
      const entry = new DeadLetterEntry({
        id: record.id,
        recordId: record.id,
        partitionKey: record.partitionKey,
        envelopeId: record.envelopeId,
        bindingId: record.bindingId,
        payload: record.payload,
        headers: record.headers,
        ...(Option.isSome(record.orderingKey) ? { orderingKey: record.orderingKey.value } : {}),
        routeId: record.routeId,
        address: record.address,
        category,
        reason,
        errorCode,
        lastError,
        attempts: record.replayCount,
        failedAt
      })
      // the entry id is the record id: a retry after a failed complete finds it already written
      storeCalls += 1
      yield* dlq.write(entry).pipe(Effect.catchTag("DuplicateRecord", () => Effect.void))
      yield* Metric.increment(metrics.dlq[category])
      return "dlq" as const
    })

  /**
   * Completes the wave's records in one `complete` call (group commit: a store that pays a transaction
   * per call pays it once per wave). When a multi-id call fails naming some ids, those fail; the others
   * are completed one by one (a `StaleFencingToken` then means the batched call already applied them, as
   * SQLite does for the matching ids). Returns the ids that failed, with their error.
   */
  const completeMany = (
    ids: ReadonlyArray<string>,
    token: LeaseTokenModule.LeaseToken
  ): Effect.Effect<ReadonlyMap<string, StaleFencingToken | StoreUnavailable>> =>
    Effect.gen(function* () {
      const failed: Map<string, StaleFencingToken | StoreUnavailable> = new Map()
      if (ids.length === 0) return failed
      storeCalls += 1
      // the ids are records this drainer claimed: an invalid one is a bug
      const result = yield* Effect.either(
        store.complete(ids, token).pipe(Effect.catchTag("InvalidArgument", Effect.die))
      )
      if (Either.isRight(result)) return failed
      const error = result.left
      const named = error._tag === "StaleFencingToken" && ids.length > 1 ? error.recordIds : undefined
      for (const id of ids) {
        if (named === undefined || named.includes(id)) {
          failed.set(id, error)
          continue
        }
        const single = yield* Effect.either(
          store.complete([id], token).pipe(Effect.catchTag("InvalidArgument", Effect.die))
        )
        if (Either.isLeft(single) && single.left._tag !== "StaleFencingToken") failed.set(id, single.left)
      }
      return failed
    })

  /**
   * Dead-letters or drops a record of a wave that will not be delivered. On success the record joins the
   * wave's completions (`slot.how`); a failed dead-letter write leaves it claimed (`slot.outcome`).
   */
  const disposeSlot = (
    slot: Slot,
    category: DeadLetterCategory,
    policy: Disposal,
    reason: string,
    errorCode: string,
    lastError: string
  ): Effect.Effect<void> =>
    dispose(slot.record, category, policy, reason, errorCode, lastError).pipe(
      Effect.matchEffect({
        onFailure: (error) =>
          Effect.logError("dead-letter write failed; record stays claimed").pipe(
            Effect.annotateLogs({ recordId: slot.record.id, category, error: error.message }),
            Effect.zipRight(
              Effect.sync(() => {
                slot.outcome = { _tag: "LeftClaimed", delivered: false }
              })
            )
          ),
        onSuccess: (how) =>
          Effect.sync(() => {
            slot.how = how
          })
      })
    )

  /** Disposes an expired or poison record (`category`) without sending it. */
  const disposeUnsendable = (slot: Slot, category: "expired" | "poison"): Effect.Effect<void> => {
    const record = slot.record
    if (category === "expired") {
      return Effect.zipRight(
        Metric.increment(metrics.expired),
        disposeSlot(
          slot,
          "expired",
          config.onExpired,
          "expiresAt passed before delivery",
          "expired",
          `expired at ${Option.match(record.expiresAt, { onNone: () => "", onSome: DateTime.formatIso })}`
        )
      )
    }
    const firstAttemptedAt = Option.match(record.firstAttemptedAt, { onNone: () => "", onSome: DateTime.formatIso })
    const budget = Duration.format(config.replayBudget)
    return Effect.logWarning("poison record: replay cap and budget spent; not sending").pipe(
      Effect.annotateLogs({
        recordId: record.id,
        replayCount: record.replayCount,
        maxReplayAttempts: config.maxReplayAttempts,
        firstAttemptedAt,
        replayBudget: budget
      }),
      Effect.zipRight(
        disposeSlot(
          slot,
          "poison",
          config.onPoison,
          `claimed ${record.replayCount} times (max ${config.maxReplayAttempts}) since ${firstAttemptedAt}; budget ${budget} spent`,
          "poison",
          ""
        )
      )
    )
  }

  const timeoutError = new SendErrorClass({
    retryable: true,
    code: "timeout",
    message: `send did not finish within ${sendTimeoutMillis} ms`
  })

  /** Releases records (one call); on failure they are remembered and retried next cycle. */
  const release = (
    records: ReadonlyArray<OutboxRecord>,
    token: LeaseTokenModule.LeaseToken,
    state: BatchState
  ): Effect.Effect<void> =>
    Effect.gen(function* () {
      if (records.length === 0) return
      for (const record of records) state.held.delete(record.id)
      const ids = records.map((r) => r.id)
      storeCalls += 1
      const result = yield* Effect.either(store.release(ids, token))
      if (Either.isRight(result)) {
        state.counters.deferred += records.length
        yield* Metric.incrementBy(metrics.deferred, records.length)
        return
      }
      state.counters.leftClaimed += records.length
      for (const record of records) toRelease.set(record.id, record)
      yield* Effect.logWarning("release failed; records stay claimed until retried").pipe(
        Effect.annotateLogs({ recordIds: ids.join(","), error: result.left.message })
      )
    })

  /**
   * One wave over the groups in flight (`lanes`, at most `maxConcurrency`): the next record of each.
   * Expired and poison records are disposed without a send. The rest are sent after one lease check,
   * each send starting at once, in wave order:
   * - a send that finishes without waiting (in-memory, buffered sinks) is done on the spot, with no fiber
   *   or timer of its own (one sender fiber runs the wave's sends one after another until one waits);
   * - a send that has to wait keeps its sender running in the background while a new sender starts the
   *   next send, so the waiting sends of a wave are in flight together.
   * The sends that had to wait are awaited together under one deadline of `sendTimeout` (a send that
   * outlives it is a transient failure, `timeout`, and is interrupted). Then the lease is checked once
   * more, and the records with a younger sibling are completed in one call (before that sibling is sent);
   * the others' completes are deferred to the end of the batch. Returns the lanes that go on to the next
   * wave.
   */
  const runWave = (
    lanes: ReadonlyArray<Lane>,
    token: LeaseTokenModule.LeaseToken,
    state: BatchState,
    batch: BatchRuntime
  ): Effect.Effect<Array<Lane>> =>
    Effect.gen(function* () {
      const now = batch.clock.unsafeCurrentTimeMillis()
      const slots: Array<Slot> = []
      const toSend: Array<Slot> = []
      let started = 0
      for (const lane of lanes) {
        const record = lane.group[lane.next]
        if (record === undefined) continue
        const slot: Slot = {
          lane,
          record,
          hasNext: lane.next + 1 < lane.group.length,
          result: undefined,
          how: undefined,
          outcome: undefined
        }
        slots.push(slot)
        if (isExpired(record, now)) yield* disposeUnsendable(slot, "expired")
        else if (isPoison(record, now, config)) yield* disposeUnsendable(slot, "poison")
        else toSend.push(slot)
      }

      // one sender runs sends one after another until one of them has to wait
      const sender: Effect.Effect<void> = Effect.suspend(function next(): Effect.Effect<void> {
        const slot = toSend[started]
        if (slot === undefined) return Effect.void
        started += 1
        const id = slot.record.id
        state.inFlight.add(id)
        return Effect.flatMap(Effect.either(sink.send(slot.record)), (result) => {
          slot.result = result
          state.inFlight.delete(id)
          return next()
        })
      })
      const waiting: Array<Fiber.RuntimeFiber<unknown, unknown>> = []
      if (toSend.length > 0) {
        const before = yield* checkLeaseAgain(token, state)
        state.leaseHeldAt = undefined
        if (before !== "held") {
          for (const slot of toSend) {
            slot.outcome =
              before === "lost"
                ? { _tag: "Fenced", error: leaseMoved("send", token, slot.record.id) }
                : // the lease cannot be verified right now: do not send; try again in a later cycle
                  { _tag: "Deferred", retryAfterMillis: undefined }
          }
          started = toSend.length
        }
      }
      while (started < toSend.length) {
        const exit = batch.run(sender)
        if (Exit.isSuccess(exit)) continue
        const defect = Cause.dieOption(exit.cause)
        if (Option.isSome(defect) && Runtime.isAsyncFiberException(defect.value)) {
          waiting.push(defect.value.fiber)
          continue
        }
        // a defect of the sink: stop the wave, interrupting the sends still running
        yield* Effect.forEach(waiting, Fiber.interruptFork, { discard: true })
        return yield* Effect.failCause(exit.cause)
      }
      if (waiting.length > 0) {
        const exits = yield* Effect.forEach(waiting, Fiber.await).pipe(
          Effect.timeoutOption(config.sendTimeout),
          Effect.onExit(() => Effect.forEach(waiting, Fiber.interruptFork, { discard: true }))
        )
        if (Option.isSome(exits)) {
          for (const exit of exits.value) {
            if (Exit.isFailure(exit) && !Cause.isInterruptedOnly(exit.cause)) {
              return yield* Effect.die(Cause.squash(exit.cause))
            }
          }
        }
      }

      const sent: Array<Slot> = []
      let failures = 0
      for (const slot of toSend) {
        if (slot.outcome !== undefined) continue
        // a send still running at the deadline was interrupted: a transient failure
        const result = slot.result ?? Either.left(timeoutError)
        state.inFlight.delete(slot.record.id)
        if (Either.isRight(result)) {
          sent.push(slot)
          continue
        }
        failures += 1
        const error: SendError = result.left
        if (error.retryable) {
          yield* Effect.logDebug("transient send failure; deferring the rest of the group").pipe(
            Effect.annotateLogs({ recordId: slot.record.id, code: error.code })
          )
          slot.outcome = { _tag: "Deferred", retryAfterMillis: error.retryAfterMillis }
          continue
        }
        yield* disposeSlot(
          slot,
          "permanent",
          config.onPermanentFailure,
          "the sink rejected the record permanently",
          error.code,
          error.message
        )
      }
      if (failures > 0) yield* Metric.incrementBy(metrics.failures, failures)

      if (sent.length > 0) {
        const after = yield* checkLease(token)
        if (after === "held") {
          state.leaseHeldAt = storeCalls
          for (const slot of sent) slot.how = "delivered"
        } else if (after === "unknown") {
          // sent, but the lease cannot be verified: leave them claimed and complete them in a later cycle
          yield* Effect.logWarning("lease unreadable after send; completing in a later cycle").pipe(
            Effect.annotateLogs({ recordIds: sent.map((s) => s.record.id).join(",") })
          )
          for (const slot of sent) {
            toComplete.set(slot.record.id, slot.record)
            slot.outcome = { _tag: "LeftClaimed", delivered: true }
          }
        } else {
          yield* Metric.incrementBy(metrics.duplicateRisk, sent.length)
          yield* Effect.logWarning("lease lost during send; not completing (may be delivered again)").pipe(
            Effect.annotateLogs({ recordIds: sent.map((s) => s.record.id).join(","), version: token.version })
          )
          for (const slot of sent) {
            slot.outcome = { _tag: "Lost", error: leaseMoved("complete", token, slot.record.id) }
          }
        }
      }

      // a record with a younger sibling behind it is completed before that sibling is sent; the others'
      // completes are deferred to the end of the batch (one call)
      const completeNow: Array<Slot> = []
      for (const slot of slots) {
        const how = slot.how
        if (how === undefined || slot.outcome !== undefined) continue
        if (slot.hasNext) {
          completeNow.push(slot)
          continue
        }
        state.toFlush.push({ record: slot.record, how })
        // until the deferred complete succeeds, a later cycle of this epoch completes it
        toComplete.set(slot.record.id, slot.record)
        slot.outcome = how === "delivered" ? delivered : { _tag: "Disposed", how }
      }
      if (completeNow.length > 0) {
        const failed = yield* completeMany(
          completeNow.map((s) => s.record.id),
          token
        )
        const doneAt = batch.clock.unsafeCurrentTimeMillis()
        const latencies: Array<number> = []
        let duplicateRisk = 0
        for (const slot of completeNow) {
          const { how, record } = slot
          const error = failed.get(record.id)
          if (error !== undefined) {
            if (how === "delivered") duplicateRisk += 1
            yield* Effect.logError(
              how === "delivered"
                ? "complete after send failed; record stays claimed"
                : "complete after disposal failed; record stays claimed"
            ).pipe(Effect.annotateLogs({ recordId: record.id, error: error.message }))
            toComplete.set(record.id, record)
            slot.outcome = { _tag: "LeftClaimed", delivered: true }
            continue
          }
          if (how === "delivered") {
            latencies.push(Math.max(0, doneAt - DateTime.toEpochMillis(record.createdAt)))
            slot.outcome = delivered
          } else if (how !== undefined) slot.outcome = { _tag: "Disposed", how }
        }
        if (duplicateRisk > 0) yield* Metric.incrementBy(metrics.duplicateRisk, duplicateRisk)
        if (latencies.length > 0) yield* updateAll(metrics.latency, latencies)
      }

      // settle every record of the wave: its lane goes on, or its group stops here
      const counters = state.counters
      const stillRunning: Array<Lane> = []
      for (const slot of slots) {
        const { lane, record } = slot
        const outcome: Outcome = slot.outcome ?? { _tag: "Deferred", retryAfterMillis: undefined }
        switch (outcome._tag) {
          case "Delivered":
          case "Disposed":
            state.held.delete(record.id)
            if (outcome._tag === "Delivered") counters.delivered += 1
            else if (outcome.how === "dlq") counters.deadLettered += 1
            else counters.dropped += 1
            lane.next += 1
            if (lane.next < lane.group.length) stillRunning.push(lane)
            continue
          case "Deferred":
            if (outcome.retryAfterMillis !== undefined) {
              counters.retryAfterMillis = Math.max(counters.retryAfterMillis ?? 0, outcome.retryAfterMillis)
            }
            yield* release(lane.group.slice(lane.next), token, state)
            continue
          case "LeftClaimed":
            state.held.delete(record.id)
            counters.leftClaimed += 1
            if (!outcome.delivered) toRelease.set(record.id, record)
            yield* release(lane.group.slice(lane.next + 1), token, state)
            continue
          case "Fenced":
            state.fenced = outcome.error
            yield* release(lane.group.slice(lane.next), token, state)
            continue
          case "Lost":
            state.held.delete(record.id)
            counters.leftClaimed += 1
            state.fenced = outcome.error
            yield* release(lane.group.slice(lane.next + 1), token, state)
            continue
        }
      }
      return stillRunning
    })

  /** Updates a metric with many values in one step (one read of the fiber's metric labels). */
  const updateAll = <Type, Out>(metric: Metric.Metric<Type, number, Out>, values: ReadonlyArray<number>) =>
    FiberRef.getWith(FiberRef.currentMetricLabels, (labels) =>
      Effect.sync(() => {
        for (const value of values) metric.unsafeUpdate(value, labels)
      })
    )

  /**
   * Completes the records whose completes were deferred to the end of the batch, in one call, after one
   * more lease check: with the lease known lost (or unreadable) they stay claimed — completed by a later
   * cycle of this epoch, or claimed again by the next owner — and are counted as left claimed.
   */
  const flushDeferred = (token: LeaseTokenModule.LeaseToken, state: BatchState): Effect.Effect<void> =>
    Effect.gen(function* () {
      const pending = state.toFlush
      state.toFlush = []
      if (pending.length === 0) return
      const counters = state.counters
      const unaccount = (how: Disposal | "delivered") => {
        if (how === "delivered") counters.delivered -= 1
        else if (how === "dlq") counters.deadLettered -= 1
        else counters.dropped -= 1
        counters.leftClaimed += 1
      }
      const lease = state.fenced !== undefined ? "lost" : yield* checkLeaseAgain(token, state)
      if (lease !== "held") {
        const sent = pending.filter((p) => p.how === "delivered").length
        for (const { how, record } of pending) {
          unaccount(how)
          if (lease === "lost") toComplete.delete(record.id)
        }
        if (lease === "lost" && sent > 0) yield* Metric.incrementBy(metrics.duplicateRisk, sent)
        const first = pending[0]
        // found lost here: the cycle ends stale, like a loss seen after a wave's sends
        if (lease === "lost" && state.fenced === undefined && first !== undefined) {
          state.fenced = leaseMoved("complete", token, first.record.id)
        }
        yield* Effect.logWarning(
          lease === "lost"
            ? "lease lost before the deferred completes; not completing (may be delivered again)"
            : "lease unreadable before the deferred completes; completing in a later cycle"
        ).pipe(Effect.annotateLogs({ records: pending.length, version: token.version }))
        return
      }
      const failed = yield* completeMany(
        pending.map((p) => p.record.id),
        token
      )
      const doneAt = yield* Clock.currentTimeMillis
      const latencies: Array<number> = []
      let duplicateRisk = 0
      for (const { how, record } of pending) {
        const error = failed.get(record.id)
        if (error === undefined) {
          toComplete.delete(record.id)
          if (how === "delivered") latencies.push(Math.max(0, doneAt - DateTime.toEpochMillis(record.createdAt)))
          continue
        }
        unaccount(how)
        if (how === "delivered") duplicateRisk += 1
        yield* Effect.logError("deferred complete failed; record stays claimed").pipe(
          Effect.annotateLogs({ recordId: record.id, error: error.message })
        )
      }
      if (duplicateRisk > 0) yield* Metric.incrementBy(metrics.duplicateRisk, duplicateRisk)
      if (latencies.length > 0) yield* updateAll(metrics.latency, latencies)
    })

  /**
   * Runs the batch in waves (see {@link runWave}). Each wave takes the next record of up to `maxConcurrency`
   * groups; inside a group records go strictly one after another. Groups of several records all start at
   * once and take turns (round robin, in age order of their heads): a group waiting for its turn has
   * nothing in flight (its last record is settled), and with more such groups than `maxConcurrency` every
   * wave stays full instead of the last groups running in half-empty waves. Groups of one only fill the
   * waves: a record with a successor is completed inside its wave, so packing those into the same waves
   * takes fewer `complete` calls, while records without a successor are completed together at the end.
   * A transient failure releases the record and the rest of its group; a record left claimed releases the
   * rest of its group; a lost lease stops the batch.
   */
  const runWaves = (
    groups: ReadonlyArray<ReadonlyArray<OutboxRecord>>,
    token: LeaseTokenModule.LeaseToken,
    state: BatchState
  ): Effect.Effect<void> => Effect.zipRight(waves(groups, token, state), flushDeferred(token, state))

  const waves = (
    groups: ReadonlyArray<ReadonlyArray<OutboxRecord>>,
    token: LeaseTokenModule.LeaseToken,
    state: BatchState
  ): Effect.Effect<void> =>
    Effect.gen(function* () {
      // the next group to start
      let nextGroup = 0
      // the batch fiber's runtime (log annotations, span) runs the sends; its clock stamps the waves
      const batch: BatchRuntime = {
        run: Runtime.runSyncExit(yield* Effect.runtime<never>()),
        clock: yield* Effect.clock
      }
      // started groups waiting for their turn, in turn order: every group of several records starts at once
      // and they take turns (round robin); groups of one start only to fill a wave
      let queue: Array<Lane> = []
      for (;;) {
        for (;;) {
          const group = groups[nextGroup]
          if (group === undefined || (group.length <= 1 && queue.length >= config.maxConcurrency)) break
          nextGroup += 1
          if (group.length > 0) queue.push({ group, next: 0 })
        }
        if (queue.length === 0) return
        // interrupted: the rest stays held and the final drain releases it in one call
        if (state.stopRequested) return
        if (state.fenced !== undefined) {
          const rest: Array<OutboxRecord> = []
          for (const lane of queue) rest.push(...lane.group.slice(lane.next))
          for (let g = nextGroup; g < groups.length; g++) rest.push(...(groups[g] ?? []))
          return yield* release(rest, token, state)
        }
        const turn = queue.slice(0, config.maxConcurrency)
        const waiting = queue.slice(config.maxConcurrency)
        queue = waiting.concat(yield* runWave(turn, token, state, batch))
      }
    })

  /** Releases whatever the batch still holds (bounded by the final-drain budget). */
  const releaseHeld = (state: BatchState, token: LeaseTokenModule.LeaseToken): Effect.Effect<void> =>
    release(Array.from(state.held.values()), token, state).pipe(
      // interruptible, so that the timeout can cut it short inside the uninterruptible final drain
      Effect.interruptible,
      Effect.timeoutOption(config.finalDrainBudget),
      Effect.asVoid
    )

  /** Counts the batch's completions once (per batch rather than per record). */
  const countCompletions = (state: BatchState): Effect.Effect<void> =>
    Effect.suspend(() => {
      const c = state.counters
      const completed = c.delivered + c.deadLettered + c.dropped
      return completed > 0 ? Metric.incrementBy(metrics.completions, completed) : Effect.void
    })

  /** Stops taking records, lets in-flight ones finish within the budget, then releases the rest. */
  const finalDrain = (
    state: BatchState,
    fiber: Fiber.RuntimeFiber<void>,
    token: LeaseTokenModule.LeaseToken
  ): Effect.Effect<void> =>
    Effect.gen(function* () {
      state.stopRequested = true
      const finished = yield* Fiber.await(fiber).pipe(
        Effect.interruptible,
        Effect.timeoutOption(config.finalDrainBudget)
      )
      if (Option.isNone(finished)) yield* Fiber.interruptFork(fiber)
      yield* releaseHeld(state, token)
      yield* countCompletions(state)
      yield* Effect.logInfo("drain interrupted; final drain done").pipe(
        Effect.annotateLogs({ released: state.counters.deferred })
      )
    })

  const runBatch = (
    records: ReadonlyArray<OutboxRecord>,
    token: LeaseTokenModule.LeaseToken
  ): Effect.Effect<Counters, StaleFencingToken | DrainStalled> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.gen(function* () {
        const state = new BatchState(records)
        const grouped = groupByKey(records)
        // groups of several records first (see runWaves); each part keeps age order of its heads
        const groups = grouped.filter((g) => g.length > 1).concat(grouped.filter((g) => g.length <= 1))
        const startedAt = yield* Clock.currentTimeMillis
        const work = runWaves(groups, token, state)
        // a daemon: interrupting the cycle must not interrupt the batch before the final drain ran
        const fiber = yield* Effect.forkDaemon(restore(work))
        const finished = yield* restore(Fiber.await(fiber).pipe(Effect.timeoutOption(watchdog))).pipe(
          Effect.onInterrupt(() => finalDrain(state, fiber, token))
        )
        if (Option.isNone(finished)) {
          state.stopRequested = true
          yield* Fiber.interruptFork(fiber)
          yield* Metric.increment(metrics.stalled)
          yield* countCompletions(state)
          const now = yield* Clock.currentTimeMillis
          const held = state.held.size
          // in-flight records may still be sent by the wedged fiber; release only the untried ones
          for (const id of state.inFlight) state.held.delete(id)
          yield* releaseHeld(state, token)
          yield* Effect.logError("drain watchdog fired; batch abandoned").pipe(
            Effect.annotateLogs({ held, elapsedMillis: now - startedAt })
          )
          return yield* new DrainStalled({ partitionKey, held, elapsedMillis: now - startedAt })
        }
        yield* countCompletions(state)
        const exit = finished.value
        if (Exit.isFailure(exit)) return yield* Effect.failCause(exit.cause)
        if (state.fenced !== undefined) return yield* state.fenced
        return state.counters
      })
    )

  /** Completes or releases records an earlier cycle left claimed, while the version is unchanged. */
  const retryStranded = (token: LeaseTokenModule.LeaseToken): Effect.Effect<void> =>
    Effect.gen(function* () {
      if (strandedVersion.value !== token.version) {
        // a new epoch makes them claimable by version: nothing to do
        toComplete.clear()
        toRelease.clear()
        strandedVersion.value = token.version
        return
      }
      for (const [id, record] of toComplete) {
        const result = yield* Effect.either(store.complete([id], token))
        if (Either.isRight(result)) {
          toComplete.delete(id)
          yield* Metric.increment(metrics.completions)
        } else if (result.left._tag === "StaleFencingToken") {
          toComplete.delete(id)
        } else {
          yield* Effect.logDebug("stranded record still not completed").pipe(
            Effect.annotateLogs({ recordId: record.id })
          )
          break
        }
      }
      for (const [id] of toRelease) {
        const result = yield* Effect.either(store.release([id], token))
        if (Either.isRight(result) || result.left._tag === "StaleFencingToken") toRelease.delete(id)
        else break
      }
    })

  const drainOnce = (limit?: number): Effect.Effect<CycleResult, CycleError> =>
    Effect.gen(function* () {
      const claimLimit = limit ?? currentBatchSize
      const live = yield* liveToken
      const empty: CycleResult = {
        leased: false,
        limit: claimLimit,
        claimed: 0,
        delivered: 0,
        deadLettered: 0,
        dropped: 0,
        deferred: 0,
        leftClaimed: 0,
        swept: 0,
        retryAfterMillis: undefined
      }
      if (Option.isNone(live)) {
        yield* Metric.increment(metrics.noLease)
        return empty
      }
      const token = live.value
      yield* retryStranded(token)
      const swept = yield* sweep(token)
      const batch = yield* store.claim(partitionKey, token, claimLimit)
      if (Option.isSome(batch.truncated)) {
        yield* Effect.logWarning("short claim batch").pipe(
          Effect.annotateLogs({ error: batch.truncated.value.message })
        )
      }
      const records = batch.records
      yield* refreshGauges(records.length)
      if (records.length === 0) return { ...empty, leased: true, swept }
      yield* updateAll(
        metrics.replayCount,
        records.map((r) => r.replayCount)
      )
      const counters = yield* runBatch(records, token).pipe(
        Effect.withSpan("Drainer.batch", {
          captureStackTrace: false,
          attributes: { "outbox.partition": partitionKey, "outbox.records": records.length }
        })
      )
      return {
        leased: true,
        limit: claimLimit,
        claimed: records.length,
        swept,
        ...counters
      }
    }).pipe(Effect.annotateLogs({ partition: partitionKey, owner: config.owner }))

  const idleSchedule = Schedule.exponential(config.idleBackoffMin, 2).pipe(
    Schedule.modifyDelay((delay) => Duration.min(delay, config.idleBackoffMax)),
    Schedule.jitteredWith({ min: 0.8, max: 1 })
  )

  const run: Effect.Effect<never, DrainError> = Effect.gen(function* () {
    const idle = yield* Schedule.driver(idleSchedule)
    const pause = idle.next(undefined).pipe(Effect.catchAll(() => Effect.sleep(config.idleBackoffMax)))
    for (;;) {
      // a cycle against an in-memory store and sink never leaves the microtask queue; give the event
      // loop a turn so that timers (lease renewals, sleeps of other fibers) are not starved
      yield* yieldToEventLoop
      const result = yield* drainOnce().pipe(
        Effect.catchTags({
          TransactionConflict: () => Effect.succeed(undefined),
          // the loop claims with its own partition key and batch size, both checked when it was built
          InvalidArgument: (error) => Effect.die(error),
          StoreUnavailable: (error) =>
            Effect.logWarning("drain cycle failed; backing off").pipe(
              Effect.annotateLogs({ partition: partitionKey, error: error.message }),
              Effect.as(undefined)
            ),
          CorruptRecord: (error) =>
            Effect.logError("corrupt record; backing off").pipe(
              Effect.annotateLogs({ partition: partitionKey, error: error.message }),
              Effect.as(undefined)
            )
        })
      )
      if (result === undefined || !result.leased) {
        yield* pause
        continue
      }
      currentBatchSize = nextBatchSize(result.limit, result.claimed, config)
      const progressed = result.delivered + result.deadLettered + result.dropped > 0
      if (result.retryAfterMillis !== undefined && result.retryAfterMillis > 0) {
        yield* Effect.sleep(Duration.millis(result.retryAfterMillis))
      }
      if (progressed) yield* idle.reset
      else if (result.claimed === 0 || result.deferred + result.leftClaimed > 0) yield* pause
    }
  })

  return {
    settings: config,
    drainOnce,
    run,
    batchSize: Effect.sync(() => currentBatchSize)
  }
}

/**
 * Builds a drainer and runs its loop.
 *
 * @since 0.1.0
 */
export const run = (
  options: DrainerOptions
): Effect.Effect<never, DrainError | InvalidConfiguration, OutboxStore | LeaseStore | Sink> =>
  Effect.flatMap(make(options), (drainer) => drainer.run)
