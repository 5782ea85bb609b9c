/**
 * The state of one claimed batch, shared by its waves: what is still held or in flight, the completes
 * deferred to the end of the batch, whether the lease was found moved, and the batch's counters.
 *
 * @since 0.1.0
 */
import type * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type * as Either from "effect/Either"
import type * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import type * as MetricLabel from "effect/MetricLabel"
import * as Runtime from "effect/Runtime"
import type { StaleFencingToken } from "../../domain/OutboxError.js"
import type { OutboxRecord } from "../../domain/OutboxRecord.js"
import type { SendError } from "../../services/Sink.js"
import type { Disposal } from "./Settings.js"
import type { Lane } from "./Turns.js"

/**
 * How a record of a wave ended.
 *
 * @since 0.1.0
 */
export type Outcome =
  | { readonly _tag: "Delivered" }
  | { readonly _tag: "Disposed"; readonly how: Disposal }
  | { readonly _tag: "Deferred"; readonly retryAfterMillis: number | undefined }
  | { readonly _tag: "LeftClaimed"; readonly delivered: boolean }
  | { readonly _tag: "Fenced"; readonly error: StaleFencingToken }
  | { readonly _tag: "Lost"; readonly error: StaleFencingToken }
  | { readonly _tag: "Untried" }

/**
 * The outcome of a delivered and completed record.
 *
 * @since 0.1.0
 */
export const delivered: Outcome = { _tag: "Delivered" }

/**
 * The outcome of a record whose send its wave did not start (its lane has its turn in a later wave).
 *
 * @since 0.1.0
 */
export const untried: Outcome = { _tag: "Untried" }

/**
 * A record of a wave: its lane, its send result, how it is to be completed, and its outcome once known.
 *
 * @since 0.1.0
 */
export interface Slot {
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

/**
 * What the waves of one batch share: a starter of fibers on the batch fiber's runtime (a fiber started
 * this way runs on the spot until it has to wait), its clock and its metric labels.
 *
 * @since 0.1.0
 */
export interface BatchRuntime {
  readonly fork: <A, E>(effect: Effect.Effect<A, E>) => Fiber.RuntimeFiber<A, E>
  readonly clock: Clock.Clock
  /** The batch fiber's metric labels (`FiberRef.currentMetricLabels`), for the waves' bound metrics. */
  readonly labels: ReadonlyArray<MetricLabel.MetricLabel>
}

/**
 * The batch fiber's {@link BatchRuntime}: the sends run on its runtime (log annotations, span), its
 * clock stamps the waves.
 *
 * @since 0.1.0
 */
export const runtime: Effect.Effect<BatchRuntime> = Effect.map(
  Effect.all([Effect.runtime<never>(), Effect.clock, FiberRef.get(FiberRef.currentMetricLabels)]),
  ([fiberRuntime, clock, labels]) => ({ fork: Runtime.runFork(fiberRuntime), clock, labels })
)

/**
 * What a batch did to its records.
 *
 * @since 0.1.0
 */
export interface Counters {
  delivered: number
  deadLettered: number
  dropped: number
  deferred: number
  leftClaimed: number
  retryAfterMillis: number | undefined
  /** Sends refused at once because their route is paused (`Sink.RoutePausedCode`). */
  routePaused: number
  /** Other transient send failures. */
  sinkFailures: number
}

/**
 * A record done with that has no successor in its group, and how it is to be completed.
 *
 * @since 0.1.0
 */
export interface Flush {
  readonly record: OutboxRecord
  readonly how: Disposal | "delivered"
}

/**
 * Mutable state of one batch, shared by its groups.
 *
 * @since 0.1.0
 */
export interface BatchState {
  readonly held: Map<string, OutboxRecord>
  readonly inFlight: Set<string>
  /** Completes that wait for one call at the end of the batch (nothing of their key waits behind them). */
  toFlush: Array<Flush>
  stopRequested: boolean
  fenced: StaleFencingToken | undefined
  /**
   * The drainer's store-call count when a lease check after a wave's sends last found the lease held;
   * `undefined` once another wave's sends have started. While it equals the current count, nothing has
   * been sent, written or awaited since that check, so the check also stands for the next one.
   */
  leaseHeldAt: number | undefined
  /**
   * The last wave's sends were not followed by a lease read: the end-of-batch complete goes through the
   * backend's `LeaseFence`, whose one statement is that check (SPEC §13).
   */
  leaseUnverified: boolean
  readonly counters: Counters
}

/** The records by id (no pair per record on the way). */
const heldOf = (records: ReadonlyArray<OutboxRecord>): Map<string, OutboxRecord> => {
  const held = new Map<string, OutboxRecord>()
  for (const record of records) held.set(record.id, record)
  return held
}

/**
 * The state of a batch that holds `records`.
 *
 * @since 0.1.0
 */
export const make = (records: ReadonlyArray<OutboxRecord>): BatchState => ({
  held: heldOf(records),
  inFlight: new Set(),
  toFlush: [],
  stopRequested: false,
  fenced: undefined,
  leaseHeldAt: undefined,
  leaseUnverified: false,
  counters: {
    delivered: 0,
    deadLettered: 0,
    dropped: 0,
    deferred: 0,
    leftClaimed: 0,
    retryAfterMillis: undefined,
    routePaused: 0,
    sinkFailures: 0
  }
})
