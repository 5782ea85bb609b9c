/**
 * One claimed batch under its watchdog (SPEC §6 step 8): the waves run in a fiber of their own; a batch
 * that outlives `batchTimeout + watchdogGrace` (timed by the loop's `Watchdog` timer, or by a race outside
 * the loop) is abandoned (`OutboxDrainStalled`, {@link DrainStalled}),
 * and an interrupted batch stops taking records, lets in-flight sends finish within `finalDrainBudget`
 * and releases everything still held.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import { DrainStalled, type StaleFencingToken } from "../../domain/OutboxError.js"
import type { OutboxRecord } from "../../domain/OutboxRecord.js"
import * as BatchState from "./BatchState.js"
import type { Instance } from "./Instance.js"
import { groupByKey } from "./Settings.js"
import * as Settle from "./Settle.js"
import * as Turns from "./Turns.js"
import * as Waves from "./Waves.js"
import * as Watchdog from "./Watchdog.js"

/**
 * Runs `effect` until it ends or `budget` passes, whatever happens to the caller meanwhile: the wait runs
 * in a fiber of its own, interruptible there so that the budget can cut it short, and the caller awaits
 * that fiber uninterruptibly. A final drain runs inside an interrupted fiber, and that fiber may be
 * interrupted again (its relay stops while a failed lease renew is already stopping it): an interruptible
 * wait in the caller's own fiber would end at that second interruption, and the lease would be handed back
 * while sends were still in flight (SPEC §6, shutdown).
 */
const withinBudget = <A>(effect: Effect.Effect<A>, budget: Duration.Duration): Effect.Effect<Option.Option<A>> =>
  Effect.uninterruptible(
    Effect.flatMap(Effect.forkDaemon(Effect.interruptible(Effect.timeoutOption(effect, budget))), Fiber.join)
  )

/** Releases whatever the batch still holds (bounded by the final-drain budget). */
const releaseHeld = (
  instance: Instance,
  state: BatchState.BatchState,
  token: LeaseToken.LeaseToken
): Effect.Effect<void> =>
  Effect.asVoid(
    withinBudget(
      Settle.release(instance, Array.from(state.held.values()), token, state),
      instance.config.finalDrainBudget
    )
  )

/** Counts the batch's completions once (per batch rather than per record). */
const countCompletions = (instance: Instance, state: BatchState.BatchState): Effect.Effect<void> =>
  Effect.suspend(() => {
    const c = state.counters
    const completed = c.delivered + c.deadLettered + c.dropped
    return completed > 0 ? Metric.incrementBy(instance.metrics.completions, completed) : Effect.void
  })

/** Stops taking records, lets in-flight ones finish within the budget, then releases the rest. */
const finalDrain = (
  instance: Instance,
  state: BatchState.BatchState,
  fiber: Fiber.RuntimeFiber<void>,
  token: LeaseToken.LeaseToken
): Effect.Effect<void> =>
  Effect.gen(function* () {
    state.stopRequested = true
    const finished = yield* withinBudget(Fiber.await(fiber), instance.config.finalDrainBudget)
    if (Option.isNone(finished)) yield* Fiber.interruptFork(fiber)
    yield* releaseHeld(instance, state, token)
    yield* countCompletions(instance, state)
    yield* Effect.logInfo("drain interrupted; final drain done").pipe(
      Effect.annotateLogs({ released: state.counters.deferred })
    )
  })

/** Abandons a wedged batch: releases only the untried records and fails with `DrainStalled`. */
const abandon = (
  instance: Instance,
  state: BatchState.BatchState,
  fiber: Fiber.RuntimeFiber<void>,
  token: LeaseToken.LeaseToken,
  startedAt: number
): Effect.Effect<never, DrainStalled> =>
  Effect.gen(function* () {
    state.stopRequested = true
    yield* Fiber.interruptFork(fiber)
    yield* Metric.increment(instance.metrics.stalled)
    yield* countCompletions(instance, state)
    const now = yield* Clock.currentTimeMillis
    const held = state.held.size
    // in-flight records may still be sent by the wedged fiber; release only the untried ones
    for (const id of state.inFlight) state.held.delete(id)
    yield* releaseHeld(instance, state, token)
    yield* Effect.logError("drain watchdog fired; batch abandoned").pipe(
      Effect.annotateLogs({ held, elapsedMillis: now - startedAt })
    )
    return yield* new DrainStalled({ partitionKey: instance.config.partitionKey, held, elapsedMillis: now - startedAt })
  })

/**
 * Runs a claimed batch (in age order) to its end and returns its counters; fails with the lease's
 * `StaleFencingToken` when the lease moved, or `DrainStalled` when the watchdog fired.
 *
 * The batch's state and its groups are built when `run` is called, so call it where the batch starts (the
 * cycle does, with the claim's result): the effect holds the records only through them, and lets go of each
 * record once it is settled (see `Turns`), while the rest of the batch is still in flight. A caller that keeps
 * `records` keeps them all alive until the batch ends.
 *
 * @since 0.1.0
 */
export const run = (
  instance: Instance,
  records: ReadonlyArray<OutboxRecord>,
  token: LeaseToken.LeaseToken
): Effect.Effect<BatchState.Counters, StaleFencingToken | DrainStalled> =>
  runBatch(instance, BatchState.make(records), Turns.orderGroups(groupByKey(records)), token)

/** {@link run} over the batch's state and groups (see `Turns`: it takes the groups over). */
const runBatch = (
  instance: Instance,
  state: BatchState.BatchState,
  groups: Turns.Groups,
  token: LeaseToken.LeaseToken
): Effect.Effect<BatchState.Counters, StaleFencingToken | DrainStalled> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.gen(function* () {
      const startedAt = yield* Clock.currentTimeMillis
      const work = Waves.runWaves(instance, groups, token, state)
      // a daemon: interrupting the cycle must not interrupt the batch before the final drain ran
      const fiber = yield* Effect.forkDaemon(restore(work))
      const finished = yield* restore(Watchdog.awaitFiber(instance.timers?.watchdog ?? instance.watchdog, fiber)).pipe(
        Effect.onInterrupt(() => finalDrain(instance, state, fiber, token))
      )
      if (Option.isNone(finished)) return yield* abandon(instance, state, fiber, token, startedAt)
      yield* countCompletions(instance, state)
      const exit = finished.value
      if (Exit.isFailure(exit)) return yield* Effect.failCause(exit.cause)
      if (state.fenced !== undefined) return yield* state.fenced
      return state.counters
    })
  )
