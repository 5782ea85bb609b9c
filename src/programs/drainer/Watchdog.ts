/**
 * The batch watchdog's timer (SPEC §6 step 8). A drainer's loop keeps one timer fiber for as long as it
 * runs; each batch arms a deadline `watchdog` ahead with it and waits for its waves' fiber or the deadline,
 * whichever comes first. Without the loop's timer (a drainer's `drainOnce` called on its own) the wait is a
 * race of the fiber against a sleep, as it was for every batch before: a race forks two fibers, starts a timer
 * and interrupts the loser, which cost a cycle of one record about a third of its time.
 *
 * The timer sleeps until the earliest armed deadline, or its `watchdog` period when none is armed. Every
 * deadline is armed one period after the instant it is armed at (the timer carries the period, so a wait
 * cannot arm another), so none is ever earlier than the instant the timer wakes at next: a deadline fires
 * when it is due, never later. Time comes from the `Clock` (`TestClock`
 * drives it in tests).
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
  readonly watchdog: Duration.Duration
  readonly armed: Set<Deadline>
}

/** Fires the due deadlines, then sleeps until the next one (or a whole `watchdog`, with none armed). */
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
        return clock.sleep(next === Number.POSITIVE_INFINITY ? timer.watchdog : Duration.millis(next - now))
      })
    )
  )

/**
 * Starts a loop's timer for deadlines `watchdog` ahead; it stops when the scope closes.
 *
 * @since 0.1.0
 */
export const start = (watchdog: Duration.Duration): Effect.Effect<Timer, never, Scope.Scope> =>
  Effect.suspend(() => {
    const timer: Timer = { watchdog, armed: new Set() }
    return Effect.as(Effect.forkScoped(keep(timer)), timer)
  })

/**
 * Waits for `fiber` at most a watchdog period: its exit when it ends in time, none when the deadline passes
 * first. Given the loop's timer, the deadline is armed with it, its own period ahead (so the timer's rule
 * holds by construction); given only a duration, the wait is a race against a sleep. Interrupting the wait
 * disarms the deadline and leaves the fiber running.
 *
 * @since 0.1.0
 */
export const awaitFiber = <A, E>(
  watch: Timer | Duration.Duration,
  fiber: Fiber.RuntimeFiber<A, E>
): Effect.Effect<Option.Option<Exit.Exit<A, E>>> => {
  if (Duration.isDuration(watch)) return Effect.timeoutOption(Fiber.await(fiber), watch)
  const timer = watch
  return Effect.clockWith((clock) =>
    Effect.async<Option.Option<Exit.Exit<A, E>>>((resume) => {
      let done = false
      const observer = (exit: Exit.Exit<A, E>): void => {
        if (done) return
        done = true
        timer.armed.delete(deadline)
        resume(Effect.succeed(Option.some(exit)))
      }
      const deadline: Deadline = {
        at: clock.unsafeCurrentTimeMillis() + Duration.toMillis(timer.watchdog),
        fire: () => {
          if (done) return
          done = true
          fiber.removeObserver(observer)
          resume(Effect.succeed(Option.none()))
        }
      }
      timer.armed.add(deadline)
      // called at once when the fiber has already ended
      fiber.addObserver(observer)
      return Effect.sync(() => {
        done = true
        timer.armed.delete(deadline)
        fiber.removeObserver(observer)
      })
    })
  )
}
