/**
 * The drain loop (SPEC §6 step 7): cycles forever, adapting the claim size (a full batch doubles it up
 * to `maxBatchSize`, an empty one halves it down to `minBatchSize`) and backing off while idle on an
 * exponential schedule with jitter (`idleBackoffMin` → `idleBackoffMax`), reset after work. An idle
 * pause ends as soon as a persist of this process signals the partition (`WakeHub`, SPEC §13) or a
 * `WakeSignal` in the context fires for it; a lost signal only delays work until the pause ends. A sink's `Retry-After` is a minimum pause, logged at WARN
 * (at most once per minute and partition). Store errors of a cycle are logged and backed off; a lost
 * lease (`StaleFencingToken`) or a stall ends the loop with that error. A relay runs the loop in turns
 * (`runTurn`): after every cycle it is asked whether the turn ends, and the loop then returns between two
 * cycles, holding nothing in flight.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Metric from "effect/Metric"
import * as Schedule from "effect/Schedule"
import type { DrainStalled, StaleFencingToken } from "../../domain/OutboxError.js"
import { yieldToEventLoop } from "../../services/EventLoop.js"
import * as Cycle from "./Cycle.js"
import { type Instance, routeMetricsFor } from "./Instance.js"
import { type DrainerSettings, nextBatchSize } from "./Settings.js"
import * as SinkHealth from "./SinkHealth.js"
import * as Watchdog from "./Watchdog.js"

/**
 * Errors that end the loop: the lease was lost, or the watchdog fired.
 *
 * @since 0.1.0
 */
export type DrainError = StaleFencingToken | DrainStalled

/**
 * The idle back-off: exponential from `idleBackoffMin`, capped at `idleBackoffMax`, jittered to 80-100 %.
 *
 * @since 0.1.0
 */
export const idleSchedule = (config: Pick<DrainerSettings, "idleBackoffMin" | "idleBackoffMax">) =>
  Schedule.exponential(config.idleBackoffMin, 2).pipe(
    Schedule.modifyDelay((delay) => Duration.min(delay, config.idleBackoffMax)),
    Schedule.jitteredWith({ min: 0.8, max: 1 })
  )

/** Logs a sink-requested pause: WARN at most once per interval, DEBUG otherwise. */
const logPause = (instance: Instance, last: { at: number }, millis: number): Effect.Effect<void> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => {
    const partition = instance.config.partitionKey
    const message = `partition ${partition} paused for ${Duration.format(Duration.millis(millis))} at the sink's request`
    const annotations = { partition, pauseMillis: millis }
    if (now - last.at < Duration.toMillis(SinkHealth.interval)) {
      return Effect.logDebug(message).pipe(Effect.annotateLogs(annotations))
    }
    last.at = now
    return Effect.logWarning(message).pipe(Effect.annotateLogs(annotations))
  })

const tolerated = (instance: Instance, cycle: Effect.Effect<Cycle.CycleResult, Cycle.CycleError>) =>
  cycle.pipe(
    Effect.catchTags({
      TransactionConflict: () => Effect.succeed(undefined),
      // the loop claims with its own partition key and batch size, both checked when it was built
      InvalidArgument: (error) => Effect.die(error),
      StoreUnavailable: (error) =>
        Effect.logWarning("drain cycle failed; backing off").pipe(
          Effect.annotateLogs({ partition: instance.config.partitionKey, error: error.message }),
          Effect.as(undefined)
        ),
      CorruptRecord: (error) =>
        Effect.logError("corrupt record; backing off").pipe(
          Effect.annotateLogs({ partition: instance.config.partitionKey, error: error.message }),
          Effect.as(undefined)
        )
    })
  )

/**
 * Makes the partition's delivery, failure, dead-letter and completion counters exist at zero (a counter
 * that appears only with its first increment hides that first increment from `rate()` and `increase()`).
 */
const startCounters = (instance: Instance): Effect.Effect<void> => {
  const base = routeMetricsFor(instance.config.partitionKey, instance.config.routeId)
  return Effect.forEach(
    [
      base.delivered,
      base.failures,
      base.dlq.poison,
      base.dlq.permanent,
      base.dlq.expired,
      instance.metrics.completions
    ],
    (counter) => Metric.incrementBy(counter, 0),
    { discard: true }
  )
}

/**
 * Whether a drainer's turn ends, asked after every cycle with its result (`undefined` when the cycle
 * failed and was backed off) and the number of records earlier cycles left claimed (`stranded`).
 *
 * @since 0.1.0
 */
export type TurnEnd = (result: Cycle.CycleResult | undefined, stranded: number) => Effect.Effect<boolean>

/**
 * The loop of a drainer, until `endTurn` says the turn is over (checked between cycles, so the batch of
 * the last cycle has been finished or released).
 *
 * @since 0.1.0
 */
export const runTurn = (instance: Instance, endTurn: TurnEnd): Effect.Effect<void, DrainError> =>
  // the batches of the turn share one watchdog timer and the waves one send timer (see `Watchdog`),
  // stopped when the turn ends
  Effect.scoped(
    Effect.flatMap(
      Effect.zip(Watchdog.start(instance.watchdog), Watchdog.start(instance.config.sendTimeout)),
      ([watchdog, send]) => {
        const timers = { watchdog, send }
        instance.timers = timers
        return Effect.ensuring(
          Cycle.annotations(instance)(cycles(instance, endTurn)),
          Effect.sync(() => {
            if (instance.timers === timers) instance.timers = undefined
          })
        )
      }
    )
  )

/** The cycles of a turn (see {@link runTurn}). */
const cycles = (instance: Instance, endTurn: TurnEnd): Effect.Effect<void, DrainError> =>
  Effect.gen(function* () {
    const config = instance.config
    yield* startCounters(instance)
    const idle = yield* Schedule.driver(idleSchedule(config))
    const pause = idle.next(undefined).pipe(Effect.catchAll(() => Effect.sleep(config.idleBackoffMax)))
    const wake = instance.wake
    const hub = instance.hub
    // the in-process wake-up: the generation is taken before each cycle's claim, so a persist of this
    // process committed while a claim that comes back empty runs ends the pause that follows at once
    let mark = hub.mark()
    const local = Effect.suspend(() => hub.awaitWork(config.partitionKey, mark))
    // the wait for a backend's signal starts before the claim that may come back empty (armed after every
    // cycle that made progress, and again after every pause), so a persist committed while that claim runs
    // is not missed; a signal that fired meanwhile only costs one more claim
    let armed: Fiber.RuntimeFiber<void> | undefined
    const lastPauseLog = { at: Number.NEGATIVE_INFINITY }
    const idlePause: Effect.Effect<void> =
      wake === undefined
        ? Effect.raceFirst(pause, local)
        : Effect.gen(function* () {
            const signal = armed ?? (yield* Effect.fork(wake.awaitWork(config.partitionKey)))
            armed = signal
            const woken = yield* Effect.raceFirst(
              Effect.as(pause, false),
              Effect.raceFirst(Effect.as(Fiber.await(signal), true), Effect.as(local, false))
            )
            if (woken) armed = undefined
          })
    const arm: Effect.Effect<void> =
      wake === undefined
        ? Effect.void
        : Effect.suspend(() =>
            armed === undefined
              ? Effect.map(Effect.fork(wake.awaitWork(config.partitionKey)), (signal) => {
                  armed = signal
                })
              : Effect.void
          )
    for (;;) {
      // a cycle against an in-memory store and sink never leaves the microtask queue; give the event
      // loop a turn so that timers (lease renewals, sleeps of other fibers) are not starved
      yield* yieldToEventLoop
      mark = hub.mark()
      const result = yield* tolerated(instance, Cycle.cycle(instance))
      if (yield* endTurn(result, instance.toComplete.size + instance.toRelease.size)) return
      if (result === undefined || !result.leased) {
        yield* pause
        continue
      }
      instance.currentBatchSize = nextBatchSize(result.limit, result.claimed, config)
      const progressed = result.delivered + result.deadLettered + result.dropped > 0
      if (result.retryAfterMillis !== undefined && result.retryAfterMillis > 0) {
        yield* logPause(instance, lastPauseLog, result.retryAfterMillis)
        yield* Effect.sleep(Duration.millis(result.retryAfterMillis))
      }
      if (progressed) {
        yield* idle.reset
        yield* arm
      } else if (result.claimed === 0) yield* idlePause
      else if (result.leftClaimed === 0 && result.routePaused > 0 && result.sinkFailures === 0) {
        // only records of paused routes came back (a SinkRouter): a new record wakes the partition at once,
        // so the records of its other routes are not held back behind the paused one
        yield* idlePause
      } else if (result.deferred + result.leftClaimed > 0) yield* pause
    }
  })

const endless: TurnEnd = () => Effect.succeed(false)

/**
 * The loop of a drainer.
 *
 * @since 0.1.0
 */
export const run = (instance: Instance): Effect.Effect<never, DrainError> =>
  Effect.zipRight(runTurn(instance, endless), Effect.never)
