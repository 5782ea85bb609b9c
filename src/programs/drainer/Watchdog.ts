/**
 * The drainer's deadline timers: the batch watchdog's (SPEC §6 step 8) and the waves' `sendTimeout`. A
 * drainer's loop keeps one timer fiber of each for as long as it runs; each batch arms a deadline `watchdog`
 * ahead with the first and waits for its waves' fiber or the deadline, whichever comes first, and each wave
 * that has sends to wait for arms one `sendTimeout` ahead with the second. Without the loop's timers (a
 * drainer's `drainOnce` called on its own) a wait is a race against a sleep, as it was for every batch and
 * wave before: a race forks two fibers, starts a timer and interrupts the loser, which cost a cycle of one
 * record about a third of its time.
 *
 * A timer sleeps until the earliest armed deadline, or its period when none is armed. Every deadline is
 * armed one period after the instant it is armed at (the timer carries the period, so a wait cannot arm
 * another), so none is ever earlier than the instant the timer wakes at next: a deadline fires when it is
 * due, never later. Time comes from the `Clock` (`TestClock` drives it in tests).
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"

/** One armed deadline: the instant it is due (epoch milliseconds) and what happens then. */
interface Deadline {
  readonly at: number
  readonly fire: () => void
}

/**
 * The deadlines one loop's timer keeps.
 *
 * @since 0.1.0
 */
export interface Timer {
  /** How far ahead every deadline is armed, and the longest the timer sleeps. */
  readonly period: Duration.Duration
  readonly armed: Set<Deadline>
}

/** Fires the due deadlines, then sleeps until the next one (or a whole period, with none armed). */
const keep = (timer: Timer): Effect.Effect<never> =>
  Effect.clockWith((clock) =>
    Effect.forever(
      Effect.suspend(() => {
        const now = clock.unsafeCurrentTimeMillis()
        let next = Number.POSITIVE_INFINITY
        for (const deadline of timer.armed) {
          if (deadline.at <= now) {
            timer.armed.delete(deadline)
            deadline.fire()
          } else if (deadline.at < next) next = deadline.at
        }
        return clock.sleep(next === Number.POSITIVE_INFINITY ? timer.period : Duration.millis(next - now))
      })
    )
  )

/**
 * Starts a loop's timer for deadlines `period` ahead; it stops when the scope closes.
 *
 * @since 0.1.0
 */
export const start = (period: Duration.Duration): Effect.Effect<Timer, never, Scope.Scope> =>
  Effect.suspend(() => {
    const timer: Timer = { period, armed: new Set() }
    return Effect.as(Effect.forkScoped(keep(timer)), timer)
  })

/**
 * Waits at most a timer period for `arm`'s signal (called once, at once or later): `true` when it came in
 * time, `false` when the deadline passed first. `arm` may return a function that undoes what it set up; it
 * is called when the wait ends without the signal (the deadline, or an interrupt). Given the loop's timer,
 * the deadline is armed with it; given only a duration, the wait is a race against a sleep. Interrupting
 * the wait disarms the deadline.
 *
 * @since 0.2.0
 */
export const awaitSignal = (
  watch: Timer | Duration.Duration,
  arm: (signal: () => void) => (() => void) | void
): Effect.Effect<boolean> => {
  if (Duration.isDuration(watch)) {
    return Effect.suspend(() => {
      let unarm: (() => void) | void = undefined
      let signalled = false
      return Effect.async<void>((resume) => {
        unarm = arm(() => {
          signalled = true
          resume(Effect.void)
        })
      }).pipe(
        Effect.timeoutOption(watch),
        Effect.map(Option.isSome),
        Effect.ensuring(Effect.sync(() => (signalled ? undefined : unarm?.())))
      )
    })
  }
  const timer = watch
  return Effect.clockWith((clock) =>
    Effect.async<boolean>((resume) => {
      let done = false
      let unarm: (() => void) | void = undefined
      const deadline: Deadline = {
        at: clock.unsafeCurrentTimeMillis() + Duration.toMillis(timer.period),
        fire: () => {
          if (done) return
          done = true
          unarm?.()
          resume(Effect.succeed(false))
        }
      }
      timer.armed.add(deadline)
      unarm = arm(() => {
        if (done) return
        done = true
        timer.armed.delete(deadline)
        resume(Effect.succeed(true))
      })
      return Effect.sync(() => {
        if (done) return
        done = true
        timer.armed.delete(deadline)
        unarm?.()
      })
    })
  )
}

/**
 * Waits for `fiber` at most a timer period: its exit when it ends in time, none when the deadline passes
 * first (see {@link awaitSignal}). Interrupting the wait disarms the deadline and leaves the fiber running.
 *
 * @since 0.1.0
 */
export const awaitFiber = <A, E>(
  watch: Timer | Duration.Duration,
  fiber: Fiber.RuntimeFiber<A, E>
): Effect.Effect<Option.Option<Exit.Exit<A, E>>> =>
  Effect.suspend(() => {
    let ended: Exit.Exit<A, E> | undefined
    return Effect.map(
      awaitSignal(watch, (signal) => {
        const observer = (exit: Exit.Exit<A, E>): void => {
          ended = exit
          signal()
        }
        // called at once when the fiber has already ended
        fiber.addObserver(observer)
        return () => fiber.removeObserver(observer)
      }),
      (inTime) => (inTime && ended !== undefined ? Option.some(ended) : Option.none())
    )
  })
