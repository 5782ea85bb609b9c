/**
 * The waves of a batch (SPEC §6 steps 4-6). A wave is the next record of up to `maxConcurrency` groups
 * (see `Turns`); while the sink's sends finish at once (without waiting: in-memory, buffered and no-op
 * sinks), a wave offers every lane instead, so a batch needs as many waves as its longest key chain rather
 * than one per `maxConcurrency` lanes. Either way a wave's sends start together right after its lease
 * check, at most `maxConcurrency` of them in flight, and a lane whose send did not start keeps its turn for
 * the next wave. Expired and poison records are disposed of without a send; the rest are sent after one
 * lease check (none when the lease moved: the batch stops `StaleFencingToken`) and checked again after
 * their sends (lost: not completed, `OutboxDuplicateRisk`). A record with a younger sibling is completed
 * inside its wave, before that sibling is sent, and the wave's other records in the same call; the completes
 * of a wave without such a record wait for one call at the end of the batch. A transient failure releases the
 * record and the untried rest of its group; a record left claimed releases the rest of its group. Nothing ever
 * overtakes a head of its key.
 *
 * @since 0.1.0
 */
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Metric from "effect/Metric"
import type * as MetricLabel from "effect/MetricLabel"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import type { OutboxRecord } from "../../domain/OutboxRecord.js"
import { RoutePausedCode, type SendError } from "../../services/Sink.js"
import {
  type BatchRuntime,
  type BatchState,
  delivered,
  type Outcome,
  runtime as batchRuntime,
  type Slot,
  untried
} from "./BatchState.js"
import * as Disposal from "./Disposal.js"
import type { BoundMetric } from "../../services/BoundMetric.js"
import { type Instance, routeMetrics, type RouteMetrics } from "./Instance.js"
import * as Lease from "./Lease.js"
import * as Sender from "./Sender.js"
import { isExpired, isPoison } from "./Settings.js"
import * as Settle from "./Settle.js"
import * as SinkHealth from "./SinkHealth.js"
import * as Turns from "./Turns.js"

/** A wave's slots, and which of them go out (the others are expired or poison). */
interface Prepared {
  readonly slots: Array<Slot>
  readonly toSend: Array<Slot>
  readonly unsendable: Array<Unsendable>
}

/** The wave's slots, and which of them go out (the others are expired or poison). */
const prepare = (instance: Instance, lanes: ReadonlyArray<Turns.Lane>, nowMillis: number): Prepared => {
  const slots: Array<Slot> = []
  const toSend: Array<Slot> = []
  const unsendable: Array<Unsendable> = []
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
    if (isExpired(record, nowMillis)) unsendable.push([slot, "expired"])
    else if (isPoison(record, nowMillis, instance.config)) unsendable.push([slot, "poison"])
    else toSend.push(slot)
  }
  return { slots, toSend, unsendable }
}

type Unsendable = readonly [Slot, "expired" | "poison"]

/** The pre-send lease check; without the lease held, no record of the wave is sent. Returns whether to send. */
const maySend = (
  instance: Instance,
  toSend: ReadonlyArray<Slot>,
  token: LeaseToken.LeaseToken,
  state: BatchState
): Effect.Effect<boolean> =>
  Effect.map(Lease.checkAgain(instance, token, state), (before) => {
    state.leaseHeldAt = undefined
    if (before === "held") return true
    for (const slot of toSend) {
      slot.outcome =
        before === "lost"
          ? { _tag: "Fenced", error: Lease.moved(instance, "send", token, slot.record.id) }
          : // the lease cannot be verified right now: do not send; try again in a later cycle
            { _tag: "Deferred", retryAfterMillis: undefined }
    }
    return false
  })

/** Sorts the send results into the sent slots and the failed ones (a send cut off at the deadline failed). */
const sortResults = (
  instance: Instance,
  toSend: ReadonlyArray<Slot>,
  state: BatchState
): { readonly sent: Array<Slot>; readonly failed: Array<readonly [Slot, SendError]> } => {
  const sent: Array<Slot> = []
  const failed: Array<readonly [Slot, SendError]> = []
  for (const slot of toSend) {
    if (slot.outcome !== undefined) continue
    // a send still running at the deadline was interrupted: a transient failure
    const result = slot.result ?? Either.left(instance.timeoutError())
    state.inFlight.delete(slot.record.id)
    if (Either.isRight(result)) sent.push(slot)
    else failed.push([slot, result.left])
  }
  return { sent, failed }
}

/** Defers the transient failures, disposes of the permanent ones, and keeps the sink's failure streak. */
const handleFailures = (
  instance: Instance,
  failed: ReadonlyArray<readonly [Slot, SendError]>,
  nowMillis: number,
  state: BatchState,
  batch: BatchRuntime
): Effect.Effect<void> =>
  Effect.gen(function* () {
    let transient: SendError | undefined
    let transientRoute = ""
    let transients = 0
    for (const [slot, error] of failed) {
      if (error.retryable) {
        yield* Effect.logDebug("transient send failure; deferring the rest of the group").pipe(
          Effect.annotateLogs({ recordId: slot.record.id, code: error.code })
        )
        slot.outcome = { _tag: "Deferred", retryAfterMillis: error.retryAfterMillis }
        if (error.code === RoutePausedCode) {
          // the route is paused by a SinkRouter: not a failure of the sink, and not the partition's streak
          state.counters.routePaused += 1
          continue
        }
        state.counters.sinkFailures += 1
        transient = error
        transientRoute = slot.record.routeId
        transients += 1
        continue
      }
      yield* Disposal.disposeSlot(instance, slot, instance.config.onPermanentFailure, {
        category: "permanent",
        reason: "the sink rejected the record permanently",
        errorCode: error.code,
        lastError: error.message,
        details: { error: error.message }
      })
    }
    countByRoute(
      instance,
      failed.map(([slot]) => slot),
      (metrics) => metrics.bound.failures,
      batch.labels
    )
    if (transient !== undefined) {
      yield* SinkHealth.failed(
        instance.sinkHealth,
        nowMillis,
        transients,
        `${transient.code}: ${transient.message}`
      ).pipe(Effect.annotateLogs({ route: transientRoute }))
    }
  })

/** Increments a route-following counter once per route of the slots' records (no effect: a bound metric). */
const countByRoute = (
  instance: Instance,
  slots: ReadonlyArray<Slot>,
  counter: (metrics: RouteMetrics) => BoundMetric<number>,
  labels: ReadonlyArray<MetricLabel.MetricLabel>
): void => {
  const first = slots[0]
  if (first === undefined) return
  const firstMetrics = routeMetrics(instance, first.record)
  let counts: Map<RouteMetrics, number> | undefined
  for (let i = 1; i < slots.length; i++) {
    const slot = slots[i]
    if (slot === undefined) continue
    const metrics = routeMetrics(instance, slot.record)
    if (metrics === firstMetrics && counts === undefined) continue
    // records of several routes: count each route apart
    counts ??= new Map([[firstMetrics, i]])
    counts.set(metrics, (counts.get(metrics) ?? 0) + 1)
  }
  if (counts === undefined) counter(firstMetrics).update(slots.length, labels)
  else for (const [metrics, n] of counts) counter(metrics).update(n, labels)
}

/** The lease check after the sends: held → the sent records are to be completed; else they stay claimed. */
const afterSends = (
  instance: Instance,
  sent: ReadonlyArray<Slot>,
  token: LeaseToken.LeaseToken,
  state: BatchState,
  nowMillis: number
): Effect.Effect<void> | undefined => {
  // the last read stands: held, known without an effect
  if (Lease.stands(instance, token, nowMillis)) return heldAfterSends(instance, sent, state)
  return Effect.flatMap(Lease.check(instance, token), (after) =>
    after !== "held" ? keepSent(instance, sent, token, after) : (heldAfterSends(instance, sent, state) ?? Effect.void)
  )
}

/** The lease was held after the sends: the sent records are to be completed. */
const heldAfterSends = (instance: Instance, sent: ReadonlyArray<Slot>, state: BatchState): undefined => {
  state.leaseHeldAt = instance.storeCalls
  for (const slot of sent) slot.how = "delivered"
  return undefined
}

/** Sent records whose lease is not known to be held: they stay claimed, and are not completed now. */
const keepSent = (
  instance: Instance,
  sent: ReadonlyArray<Slot>,
  token: LeaseToken.LeaseToken,
  after: "lost" | "unknown"
): Effect.Effect<void> =>
  Effect.gen(function* () {
    const recordIds = sent.map((s) => s.record.id).join(",")
    if (after === "unknown") {
      // sent, but the lease cannot be verified: leave them claimed and complete them in a later cycle
      yield* Effect.logWarning("lease unreadable after send; completing in a later cycle").pipe(
        Effect.annotateLogs({ recordIds })
      )
      for (const slot of sent) {
        instance.toComplete.set(slot.record.id, slot.record)
        slot.outcome = { _tag: "LeftClaimed", delivered: true }
      }
      return
    }
    yield* Metric.incrementBy(instance.metrics.duplicateRisk, sent.length)
    yield* Effect.logWarning("lease lost during send; not completing (may be delivered again)").pipe(
      Effect.annotateLogs({ recordIds, version: token.version })
    )
    for (const slot of sent) {
      slot.outcome = { _tag: "Lost", error: Lease.moved(instance, "complete", token, slot.record.id) }
    }
  })

/** A slot to be completed (sent, dead-lettered or dropped) and not settled yet. */
type Completable = Slot & { readonly how: NonNullable<Slot["how"]> }

/** Whether a slot is to be completed and not settled yet. */
const completable = (slot: Slot): slot is Completable => slot.how !== undefined && slot.outcome === undefined

/**
 * Completes the wave's records in one call when one of them has a younger sibling (that sibling is sent only
 * after it): the wave's other records join that call, so they are done sooner and neither the batch nor the
 * drainer's list of completes to retry holds them until its end. A wave without such a record defers its
 * completes to the end of the batch (one call for all of them). `undefined` when there is nothing to complete now.
 */
const completeWave = (
  instance: Instance,
  slots: ReadonlyArray<Slot>,
  token: LeaseToken.LeaseToken,
  state: BatchState,
  batch: BatchRuntime
): Effect.Effect<void> | undefined => {
  const completeNow = slots.filter(completable)
  if (!completeNow.some((slot) => slot.hasNext)) {
    for (const slot of completeNow) {
      const how = slot.how
      state.toFlush.push({ record: slot.record, how })
      // until the deferred complete succeeds, a later cycle of this epoch completes it
      instance.toComplete.set(slot.record.id, slot.record)
      slot.outcome = how === "delivered" ? delivered : { _tag: "Disposed", how }
    }
    return undefined
  }
  return Effect.flatMap(
    Settle.completeMany(
      instance,
      completeNow.map((s) => s.record.id),
      token
    ),
    (failed) => {
      const doneAt = batch.clock.unsafeCurrentTimeMillis()
      const latency = instance.metrics.bound.latency
      let failures: Array<readonly [Slot, string]> | undefined
      for (const slot of completeNow) {
        const { how, record } = slot
        const error = failed.size === 0 ? undefined : failed.get(record.id)
        if (error !== undefined) {
          ;(failures ??= []).push([slot, error.message])
          instance.toComplete.set(record.id, record)
          slot.outcome = { _tag: "LeftClaimed", delivered: true }
          continue
        }
        if (how === "delivered") {
          latency.update(Math.max(0, doneAt - DateTime.toEpochMillis(record.createdAt)), batch.labels)
          slot.outcome = delivered
        } else if (how !== undefined) slot.outcome = { _tag: "Disposed", how }
      }
      return failures === undefined ? Effect.void : completesFailed(instance, failures)
    }
  )
}

/** Logs the wave's completes that failed (their records stay claimed) and counts the sent ones at risk. */
const completesFailed = (instance: Instance, failures: ReadonlyArray<readonly [Slot, string]>): Effect.Effect<void> =>
  Effect.gen(function* () {
    let duplicateRisk = 0
    for (const [{ how, record }, message] of failures) {
      if (how === "delivered") duplicateRisk += 1
      yield* Effect.logError(
        how === "delivered"
          ? "complete after send failed; record stays claimed"
          : "complete after disposal failed; record stays claimed"
      ).pipe(Effect.annotateLogs({ recordId: record.id, error: message }))
    }
    if (duplicateRisk > 0) yield* Metric.incrementBy(instance.metrics.duplicateRisk, duplicateRisk)
  })

/**
 * What a wave leaves for the next ones: the lanes that go on (to the back of the queue) and the lanes
 * whose send did not start (back to the front, in order).
 *
 * @since 0.1.0
 */
export interface WaveEnd {
  readonly stillRunning: Array<Turns.Lane>
  readonly notStarted: Array<Turns.Lane>
}

/**
 * Settles every record of the wave: its lane goes on, keeps its turn (send not started), or its group
 * stops here. Returns the lanes that go on or keep their turn, and the untried records to release.
 */
const settle = (
  instance: Instance,
  slots: ReadonlyArray<Slot>,
  state: BatchState
): WaveEnd & { readonly toRelease: Array<ReadonlyArray<OutboxRecord>> } => {
  const counters = state.counters
  const stillRunning: Array<Turns.Lane> = []
  const notStarted: Array<Turns.Lane> = []
  const toRelease: Array<ReadonlyArray<OutboxRecord>> = []
  for (const slot of slots) {
    const { lane, record } = slot
    const outcome: Outcome = slot.outcome ?? { _tag: "Deferred", retryAfterMillis: undefined }
    switch (outcome._tag) {
      case "Untried":
        notStarted.push(lane)
        continue
      case "Delivered":
      case "Disposed":
        state.held.delete(record.id)
        if (outcome._tag === "Delivered") counters.delivered += 1
        else if (outcome.how === "dlq") counters.deadLettered += 1
        else counters.dropped += 1
        if (Turns.advance(lane)) stillRunning.push(lane)
        continue
      case "Deferred":
        if (outcome.retryAfterMillis !== undefined) {
          counters.retryAfterMillis = Math.max(counters.retryAfterMillis ?? 0, outcome.retryAfterMillis)
        }
        toRelease.push(Turns.restOf(lane, lane.next))
        continue
      case "LeftClaimed":
        state.held.delete(record.id)
        counters.leftClaimed += 1
        if (!outcome.delivered) instance.toRelease.set(record.id, record)
        toRelease.push(Turns.restOf(lane, lane.next + 1))
        continue
      case "Fenced":
        state.fenced = outcome.error
        toRelease.push(Turns.restOf(lane, lane.next))
        continue
      case "Lost":
        state.held.delete(record.id)
        counters.leftClaimed += 1
        state.fenced = outcome.error
        toRelease.push(Turns.restOf(lane, lane.next + 1))
        continue
    }
  }
  return { stillRunning, notStarted, toRelease }
}

/**
 * One wave over the lanes of a turn: the next record of each. Sends start together, at most
 * `maxConcurrency` of them in flight; the lanes whose send did not start keep their turn. `lastOffered`
 * says no lane is left after these: when every send started and no record has a successor, this is the
 * batch's last wave, and with a `LeaseFence` its lease check after the sends is left to the end-of-batch
 * complete. Returns the lanes that go on to the next wave, and those that keep their turn.
 *
 * @since 0.1.0
 */
export const runWave = (
  instance: Instance,
  lanes: ReadonlyArray<Turns.Lane>,
  token: LeaseToken.LeaseToken,
  state: BatchState,
  batch: BatchRuntime,
  lastOffered = false
): Effect.Effect<WaveEnd> =>
  Effect.suspend(() => {
    const wave = prepare(instance, lanes, batch.clock.unsafeCurrentTimeMillis())
    const { toSend, unsendable } = wave
    // the common wave: nothing to dispose of, and the lease known held without a read (the last check stands)
    if (unsendable.length === 0 && toSend.length > 0) {
      if (Lease.standsAgain(instance, token, state, batch.clock.unsafeCurrentTimeMillis())) {
        state.leaseHeldAt = undefined
        return Effect.flatMap(sendWave(instance, toSend, state, batch), (result) =>
          afterSending(instance, wave, noteSends(instance, result), token, state, batch, lastOffered)
        )
      }
    }
    return Effect.gen(function* () {
      for (const [slot, category] of unsendable) yield* Disposal.disposeUnsendable(instance, slot, category)
      if (toSend.length === 0) return yield* finish(instance, wave.slots, token, state, batch)
      const started = (yield* maySend(instance, toSend, token, state))
        ? noteSends(instance, yield* sendWave(instance, toSend, state, batch))
        : toSend.length
      return yield* afterSending(instance, wave, started, token, state, batch, lastOffered)
    })
  })

/** Sends the wave's records (see `Sender`), under the send deadline and `maxConcurrency`. */
const sendWave = (
  instance: Instance,
  toSend: ReadonlyArray<Slot>,
  state: BatchState,
  batch: BatchRuntime
): Effect.Effect<Sender.SendAllResult> =>
  Sender.sendAll(
    instance.sink,
    toSend,
    state,
    batch,
    instance.timers?.send ?? instance.config.sendTimeout,
    instance.config.maxConcurrency
  )

/**
 * After {@link sendWave}: keeps the width of the next wave (every lane while sends finish at once, see the
 * module doc) and returns how many of the wave's records, from the first, were started.
 */
const noteSends = (instance: Instance, result: Sender.SendAllResult): number => {
  instance.sendsAtOnce = result.atOnce
  return result.started
}

/**
 * After the sends (`started` of `toSend` were started; all of them when none was to be sent): the failures
 * are handled, the deliveries counted and the lease checked, then the wave is finished.
 */
const afterSending = (
  instance: Instance,
  { slots, toSend }: Prepared,
  started: number,
  token: LeaseToken.LeaseToken,
  state: BatchState,
  batch: BatchRuntime,
  lastOffered: boolean
): Effect.Effect<WaveEnd> => {
  const notStartedCount = toSend.length - started
  for (let i = started; i < toSend.length; i++) {
    const slot = toSend[i]
    if (slot !== undefined) slot.outcome = untried
  }
  const { failed, sent } = sortResults(instance, toSend, state)
  const last = lastOffered && notStartedCount === 0 && slots.every((slot) => !slot.hasNext)
  if (failed.length > 0) {
    return Effect.zipRight(
      handleFailures(instance, failed, batch.clock.unsafeCurrentTimeMillis(), state, batch),
      Effect.suspend(() => deliveredStage(instance, slots, sent, last, token, state, batch))
    )
  }
  if (sent.length > 0 && instance.sinkHealth.failures > 0) {
    return Effect.zipRight(
      SinkHealth.succeeded(instance.sinkHealth, batch.clock.unsafeCurrentTimeMillis()),
      Effect.suspend(() => deliveredStage(instance, slots, sent, last, token, state, batch))
    )
  }
  return deliveredStage(instance, slots, sent, last, token, state, batch)
}

/**
 * The sent records are counted and the lease checked after their sends, then the wave is finished. `last`:
 * this is the batch's last wave (every send started, no record with a successor).
 */
const deliveredStage = (
  instance: Instance,
  slots: ReadonlyArray<Slot>,
  sent: ReadonlyArray<Slot>,
  last: boolean,
  token: LeaseToken.LeaseToken,
  state: BatchState,
  batch: BatchRuntime
): Effect.Effect<WaveEnd> => {
  let check: Effect.Effect<void> | undefined
  if (sent.length > 0) {
    countByRoute(instance, sent, (metrics) => metrics.bound.delivered, batch.labels)
    // the batch's last wave, with a fenced complete: the check after its sends is the end-of-batch
    // complete itself (`Settle.flushDeferred`), one statement instead of a read and a complete
    if (last && instance.fence !== undefined) {
      for (const slot of sent) slot.how = "delivered"
      state.leaseUnverified = true
    } else {
      check = afterSends(instance, sent, token, state, batch.clock.unsafeCurrentTimeMillis())
    }
  }
  return check === undefined
    ? finish(instance, slots, token, state, batch)
    : Effect.zipRight(
        check,
        Effect.suspend(() => finish(instance, slots, token, state, batch))
      )
}

/** The wave's completes, then its settlement: the lanes that go on, those that keep their turn, the releases. */
const finish = (
  instance: Instance,
  slots: ReadonlyArray<Slot>,
  token: LeaseToken.LeaseToken,
  state: BatchState,
  batch: BatchRuntime
): Effect.Effect<WaveEnd> => {
  const completes = completeWave(instance, slots, token, state, batch)
  return completes === undefined
    ? Effect.suspend(() => settled(instance, slots, token, state))
    : Effect.flatMap(completes, () => settled(instance, slots, token, state))
}

/** Settles the wave (see {@link settle}) and releases what its stopped groups leave untried. */
const settled = (
  instance: Instance,
  slots: ReadonlyArray<Slot>,
  token: LeaseToken.LeaseToken,
  state: BatchState
): Effect.Effect<WaveEnd> => {
  const { notStarted, stillRunning, toRelease } = settle(instance, slots, state)
  const end: WaveEnd = { stillRunning, notStarted }
  if (toRelease.length === 0) return Effect.succeed(end)
  return Effect.as(
    Effect.forEach(toRelease, (records) => Settle.release(instance, records, token, state), { discard: true }),
    end
  )
}

/**
 * Runs the batch in waves, then the end-of-batch completes. An interrupted batch stops taking records
 * (the final drain releases what it holds); a batch that found its lease moved releases the untried rest.
 *
 * @since 0.1.0
 */
export const runWaves = (
  instance: Instance,
  groups: Turns.Groups,
  token: LeaseToken.LeaseToken,
  state: BatchState
): Effect.Effect<void> =>
  Effect.gen(function* () {
    // the batch fiber's runtime (log annotations, span) runs the sends; its clock stamps the waves
    const batch = yield* batchRuntime
    const turns = Turns.make(groups, instance.config.maxConcurrency)
    for (;;) {
      if (turns.done() || state.stopRequested) break
      if (state.fenced !== undefined) {
        yield* Settle.release(instance, turns.untried(), token, state)
        break
      }
      const lanes = turns.take(instance.sendsAtOnce ? Number.POSITIVE_INFINITY : instance.config.maxConcurrency)
      const { notStarted, stillRunning } = yield* runWave(instance, lanes, token, state, batch, turns.exhausted())
      turns.putBack(notStarted)
      turns.requeue(stillRunning)
    }
    yield* Settle.flushDeferred(instance, token, state)
  })
