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
import * as Metric from "effect/Metric"
import * as Random from "effect/Random"
import type { DrainStalled, StaleFencingToken } from "../../domain/OutboxError.js"
import { yieldToEventLoop } from "../../services/EventLoop.js"
import type { WakeHubService } from "../../services/WakeHub.js"
import { unlessThrough } from "../../services/WakeSignal.js"
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
 * The idle back-off of one turn: exponential from `idleBackoffMin` (doubling), capped at `idleBackoffMax`,
 * each pause jittered to 80-100 % of its step.
 *
 * @since 0.2.0
 */
export interface IdleBackoff {
  /** The next pause in milliseconds (the first after a reset: `idleBackoffMin`, jittered); advances. */
  readonly nextMillis: Effect.Effect<number>
  /** Sleeps for the next pause. */
  readonly next: Effect.Effect<void>
  /** Starts the back-off again from `idleBackoffMin`. */
  readonly reset: () => void
}

/**
 * Builds the idle back-off of a turn. Plain arithmetic, not a `Schedule` driver: a drainer pauses after
 * every claim that comes back empty, so the pause's own cost is paid at every idle poll. The jitter is
 * `Random`'s, the sleep `Effect.sleep` (the context's `Clock`; `TestClock` in tests).
 *
 * @since 0.2.0
 */
export const idleBackoff = (config: Pick<DrainerSettings, "idleBackoffMin" | "idleBackoffMax">): IdleBackoff => {
  const min = Duration.toMillis(config.idleBackoffMin)
  const max = Duration.toMillis(config.idleBackoffMax)
  let step = min
  const nextMillis = Effect.map(Random.nextRange(0.8, 1), (jitter) => {
    const millis = Math.min(step, max) * jitter
    if (step < max) step *= 2
    return millis
  })
  return {
    nextMillis,
    next: Effect.flatMap(nextMillis, (millis) => Effect.sleep(Duration.millis(millis))),
    reset: () => {
      step = min
    }
  }
}

/** The prototype of Effect's live clock (`Clock.make()`), whose sleep is a `setTimeout`. */
const liveClock: unknown = Object.getPrototypeOf(Clock.make())

/** The longest timer `setTimeout` keeps (longer ones fire at once); the live clock never fires beyond it. */
const maxTimerMillis = 2 ** 31 - 1

/**
 * Sleeps `millis` or until the hub signals the partition after `mark`, whichever comes first.
 *
 * On Effect's live clock this is one asynchronous step holding one timer (the one the clock's own sleep
 * would set) and one hub waiter. On any other clock (`TestClock` in tests, a program's own) it is the
 * clock's sleep raced with the hub's wait, which forks two fibers and interrupts one: measured at about
 * 70 µs of the thread a pause against 5 µs for the single step, paid at every idle poll of every partition.
 *
 * @since 0.2.0
 */
export const sleepOrWork = (
  hub: WakeHubService,
  partitionKey: string,
  mark: number,
  millis: number
): Effect.Effect<void> =>
  Effect.clockWith((clock) =>
    Object.getPrototypeOf(clock) === liveClock
      ? Effect.async<void>((resume) => {
          let timer: ReturnType<typeof setTimeout> | undefined
          let done = false
          const finish = () => {
            if (done) return
            done = true
            if (timer !== undefined) clearTimeout(timer)
            resume(Effect.void)
          }
          const cancel = hub.onWork(partitionKey, mark, finish)
          if (!done && millis <= maxTimerMillis) {
            timer = setTimeout(() => {
              cancel()
              finish()
            }, millis)
          }
          return Effect.sync(() => {
            done = true
            cancel()
            if (timer !== undefined) clearTimeout(timer)
          })
        })
      : Effect.raceFirst(clock.sleep(Duration.millis(millis)), hub.awaitWork(partitionKey, mark))
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
    const idle = idleBackoff(config)
    const pause = idle.next
    // a source that signals through this hub wakes the pause below without a wait of its own
    const wake = unlessThrough(instance.wake, instance.hub)
    const hub = instance.hub
    const partitionKey = config.partitionKey
    // the in-process wake-up: the generation is taken before each cycle's claim, so a persist of this
    // process committed while a claim that comes back empty runs ends the pause that follows at once
    let mark = hub.mark()
    // the wait for a backend's signal starts before the claim that may come back empty (armed after every
    // cycle that made progress, and again before every idle pause), so a persist committed while that claim
    // runs is not missed; a signal that fired meanwhile only costs one more claim. When it fires it signals
    // the partition on the hub and disarms, so a pause waits on the hub alone
    let armed: object | undefined
    const arm: Effect.Effect<void> =
      wake === undefined
        ? Effect.void
        : Effect.suspend(() => {
            if (armed !== undefined) return Effect.void
            const signal = {}
            armed = signal
            return Effect.asVoid(
              Effect.fork(
                Effect.zipRight(
                  wake.awaitWork(partitionKey),
                  Effect.sync(() => {
                    if (armed === signal) armed = undefined
                    hub.signal(partitionKey)
                  })
                )
              )
            )
          })
    const lastPauseLog = { at: Number.NEGATIVE_INFINITY }
    const idlePause: Effect.Effect<void> = Effect.zipRight(
      arm,
      Effect.flatMap(idle.nextMillis, (millis) => sleepOrWork(hub, partitionKey, mark, millis))
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
        idle.reset()
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
