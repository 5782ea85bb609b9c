/**
 * One drain cycle (SPEC §6 steps 1-3): without a live lease of the owner it is skipped
 * (`DrainSkippedNoLease`); otherwise it retries what earlier cycles left claimed, sweeps expired records
 * when they are dropped (at most once per `expireInterval`), claims up to the limit, runs the batch and
 * then refreshes the depth gauges (at most once per `gaugeInterval`; a failing count is counted, never
 * fatal). The counts come after the batch, never between a claim and its sends: a record claimed after an
 * idle pause goes out without waiting for them, and a claimed depth read at the end of a cycle is what the
 * batch left claimed (stranded records, another owner's), not the batch in flight. Idle cycles open no
 * span; a cycle that claimed records runs in a `Drainer.batch` span.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import type {
  CorruptRecord,
  DrainStalled,
  InvalidArgument,
  StaleFencingToken,
  StoreUnavailable,
  TransactionConflict
} from "../../domain/OutboxError.js"
import * as Batch from "./Batch.js"
import { updateAll } from "../../services/BoundMetric.js"
import type { Instance } from "./Instance.js"
import * as Lease from "./Lease.js"
import * as Settle from "./Settle.js"
import type { ClaimBatch } from "../../services/OutboxStore.js"
import * as Traced from "../../services/Traced.js"

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
  /**
   * The claim came back short of what the partition held (`ClaimTruncated`, a DynamoDB short batch): fewer
   * records than `limit` then say nothing of what is left. Otherwise a claim short of its limit took every
   * record that was claimable when it ran.
   *
   * @since 0.2.0
   */
  readonly truncated: boolean
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
  /** Sends refused at once because their route is paused (a `SinkRouter`). */
  readonly routePaused: number
  /** Other transient send failures. */
  readonly sinkFailures: number
}

/**
 * Errors that end a cycle.
 *
 * @since 0.1.0
 */
export type CycleError =
  StaleFencingToken | TransactionConflict | StoreUnavailable | CorruptRecord | InvalidArgument | DrainStalled

/** Refreshes the depth gauges, at most once per `gaugeInterval` (a failing count is counted, never fatal). */
const refreshGauges = (instance: Instance): Effect.Effect<void> =>
  Effect.gen(function* () {
    const { metrics, store } = instance
    const partitionKey = instance.config.partitionKey
    const now = yield* Clock.currentTimeMillis
    if (now - instance.lastGaugeAt < instance.gaugeIntervalMillis) return
    instance.lastGaugeAt = now
    const pending = yield* Effect.either(store.countPending(partitionKey))
    if (Either.isRight(pending)) yield* Metric.set(metrics.depth, pending.right)
    else yield* Metric.increment(metrics.depthFailures)
    const claimedDepth = yield* Effect.either(store.countClaimed(partitionKey))
    if (Either.isRight(claimedDepth)) yield* Metric.set(metrics.claimedDepth, claimedDepth.right)
    else yield* Metric.increment(metrics.depthFailures)
  })

const sweep = (instance: Instance, token: LeaseToken.LeaseToken): Effect.Effect<number, StaleFencingToken> =>
  Effect.gen(function* () {
    if (instance.config.onExpired !== "drop") return 0
    const now = yield* Clock.currentTimeMillis
    if (now - instance.lastSweepAt < instance.expireIntervalMillis) return 0
    instance.lastSweepAt = now
    const result = yield* Effect.either(
      instance.store.expire(DateTime.unsafeMake(now), instance.config.partitionKey, token)
    )
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
      yield* Metric.incrementBy(instance.metrics.expired, count)
      yield* Metric.incrementBy(instance.metrics.dropped.expired, count)
      yield* Effect.logWarning(`expired records dropped by policy (${count})`).pipe(
        Effect.annotateLogs({ category: "expired", records: count })
      )
    }
    return count
  })

/**
 * The log annotations of a drainer's cycles: its partition and owner.
 *
 * @since 0.2.0
 */
export const annotations =
  (instance: Instance) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.annotateLogs(self, { partition: instance.config.partitionKey, owner: instance.config.owner })

/**
 * One cycle with the given claim limit (default: the current adaptive batch size), its logs annotated with
 * the drainer's partition and owner.
 *
 * @since 0.1.0
 */
export const drainOnce = (instance: Instance, limit?: number): Effect.Effect<CycleResult, CycleError> =>
  annotations(instance)(cycle(instance, limit))

/**
 * One cycle as {@link drainOnce}, without annotating its logs: for the drain loop, which annotates a whole turn
 * of cycles once.
 *
 * @since 0.2.0
 */
export const cycle = (instance: Instance, limit?: number): Effect.Effect<CycleResult, CycleError> =>
  Effect.gen(function* () {
    const claimLimit = limit ?? instance.currentBatchSize
    const live = yield* Lease.live(instance)
    const empty: CycleResult = {
      leased: false,
      limit: claimLimit,
      claimed: 0,
      truncated: false,
      delivered: 0,
      deadLettered: 0,
      dropped: 0,
      deferred: 0,
      leftClaimed: 0,
      swept: 0,
      retryAfterMillis: undefined,
      routePaused: 0,
      sinkFailures: 0
    }
    if (Option.isNone(live)) {
      yield* Metric.increment(instance.metrics.noLease)
      return empty
    }
    const token = live.value
    yield* Settle.retryStranded(instance, token)
    const swept = yield* sweep(instance, token)
    // the claimed batch goes on in a continuation, not in this generator, whose frame would keep every record
    // of the batch alive until the batch ends (see `Batch.run`)
    return yield* Effect.flatMap(instance.store.claim(instance.config.partitionKey, token, claimLimit), (batch) =>
      runClaimed(instance, batch, token, { ...empty, leased: true, swept })
    )
  })

/**
 * The rest of a cycle once its claim returned: the claim's warnings and metrics, the batch, the gauges.
 * `idle` is the cycle's result when the claim came back empty. Nothing here keeps the claimed records past
 * the batch's start.
 */
const runClaimed = (
  instance: Instance,
  batch: ClaimBatch,
  token: LeaseToken.LeaseToken,
  idle: CycleResult
): Effect.Effect<CycleResult, CycleError> => {
  const claimed = batch.records.length
  const truncated = Option.isSome(batch.truncated)
  const warned = Option.match(batch.truncated, {
    onNone: () => Effect.void,
    onSome: (short) => Effect.logWarning("short claim batch").pipe(Effect.annotateLogs({ error: short.message }))
  })
  const counted = Effect.zipRight(warned, Metric.set(instance.metrics.batchSize, claimed))
  if (claimed === 0)
    return Effect.as(Effect.zipRight(counted, refreshGauges(instance)), truncated ? { ...idle, truncated } : idle)
  const replayCounts = updateAll(
    instance.metrics.bound.replayCount,
    batch.records.map((r) => r.replayCount)
  )
  const run = Batch.run(instance, batch.records, token).pipe(
    Traced.span("Drainer.batch", { "outbox.partition": instance.config.partitionKey, "outbox.records": claimed })
  )
  return Effect.flatMap(Effect.zipRight(Effect.zipRight(counted, replayCounts), run), (counters) =>
    // after the batch: the counts' statements never delay its sends
    Effect.as(refreshGauges(instance), { ...idle, claimed, truncated, ...counters })
  )
}
