/**
 * The drainer's deadline waits: the batch watchdog's (`Watchdog.awaitFiber`) and a wave's for its sends
 * (`Watchdog.awaitSignal`). With a loop's timer and without one (a race): the fiber's exit (or the signal)
 * when it comes in time, none exactly at the deadline, the fiber left running either way, and no deadline
 * left armed once the wait is over or interrupted.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import * as Watchdog from "../src/programs/drainer/Watchdog.js"

const watchdog = Duration.minutes(1)

/**
 * Whether the wait is over with none (the deadline passed), once the fibers the clock woke have run (a few
 * turns of the scheduler): false while it still waits, so a late deadline fails the test at once.
 */
const timedOut = <A, E>(waiting: Fiber.Fiber<Option.Option<Exit.Exit<A, E>>>) =>
  Effect.gen(function* () {
    for (let i = 0; i < 20 && Option.isNone(yield* Fiber.poll(waiting)); i++) yield* Effect.yieldNow()
    const polled = yield* Fiber.poll(waiting)
    return Option.isSome(polled) && Exit.isSuccess(polled.value) && Option.isNone(polled.value.value)
  })

/** A fiber that ends with `value` once `gate` opens. */
const gated = (gate: Deferred.Deferred<void>, value: number) => Effect.fork(Effect.as(Deferred.await(gate), value))

describe("Watchdog.awaitFiber", () => {
  for (const withTimer of [true, false]) {
    const label = withTimer ? "with the loop's timer" : "without a timer (a race)"

    it.scoped(`${label}: the fiber's exit when it ends before the deadline`, () =>
      Effect.gen(function* () {
        const timer = withTimer ? yield* Watchdog.start(watchdog) : undefined
        const gate = yield* Deferred.make<void>()
        const fiber = yield* gated(gate, 7)
        const waiting = yield* Effect.fork(Watchdog.awaitFiber(timer ?? watchdog, fiber))
        yield* TestClock.adjust("59 seconds")
        yield* Deferred.succeed(gate, undefined)
        const result = yield* Fiber.join(waiting)
        expect(Option.map(result, Exit.isSuccess)).toEqual(Option.some(true))
        if (Option.isSome(result) && Exit.isSuccess(result.value)) expect(result.value.value).toBe(7)
        if (timer !== undefined) expect(timer.armed.size).toBe(0)
      })
    )

    it.scoped(`${label}: none exactly at the deadline, not a moment before; the fiber keeps running`, () =>
      Effect.gen(function* () {
        const timer = withTimer ? yield* Watchdog.start(watchdog) : undefined
        // the timer has slept part of a period with nothing armed when the wait starts
        yield* TestClock.adjust("25 seconds")
        const gate = yield* Deferred.make<void>()
        const fiber = yield* gated(gate, 1)
        const waiting = yield* Effect.fork(Watchdog.awaitFiber(timer ?? watchdog, fiber))
        yield* TestClock.adjust("59999 millis")
        expect(yield* Fiber.poll(waiting)).toEqual(Option.none())
        yield* TestClock.adjust("1 millis")
        expect(yield* timedOut(waiting)).toBe(true)
        expect(yield* Fiber.poll(fiber)).toEqual(Option.none())
        if (timer !== undefined) expect(timer.armed.size).toBe(0)
        yield* Deferred.succeed(gate, undefined)
        expect(yield* Fiber.join(fiber)).toBe(1)
      })
    )
  }

  it.scoped(
    "an interrupted wait disarms its deadline and leaves the fiber running; the timer serves the next wait",
    () =>
      Effect.gen(function* () {
        const timer = yield* Watchdog.start(watchdog)
        const gate = yield* Deferred.make<void>()
        const fiber = yield* gated(gate, 3)
        const waiting = yield* Effect.fork(Watchdog.awaitFiber(timer, fiber))
        yield* Effect.yieldNow()
        expect(timer.armed.size).toBe(1)
        yield* Fiber.interrupt(waiting)
        expect(timer.armed.size).toBe(0)
        expect(yield* Fiber.poll(fiber)).toEqual(Option.none())
        // a later wait on the same timer still gets its deadline, exactly
        yield* TestClock.adjust("40 seconds")
        const next = yield* Effect.fork(Watchdog.awaitFiber(timer, fiber))
        yield* TestClock.adjust("59 seconds")
        expect(yield* Fiber.poll(next)).toEqual(Option.none())
        yield* TestClock.adjust("1 second")
        expect(yield* Fiber.join(next)).toEqual(Option.none())
        yield* Deferred.succeed(gate, undefined)
        expect(yield* Fiber.join(fiber)).toBe(3)
      })
  )

  it.scoped("a fiber that already ended: its exit at once, nothing armed", () =>
    Effect.gen(function* () {
      const timer = yield* Watchdog.start(watchdog)
      const fiber = yield* Effect.fork(Effect.succeed(5))
      yield* Fiber.await(fiber)
      const result = yield* Watchdog.awaitFiber(timer, fiber)
      expect(Option.map(result, Exit.isSuccess)).toEqual(Option.some(true))
      expect(timer.armed.size).toBe(0)
    })
  )
})

/** An arm for `awaitSignal` that keeps the signals it is given and counts the undos of what it set up. */
const armProbe = () => {
  const probe = {
    signals: new Array<() => void>(),
    unarmed: 0,
    arm: (signal: () => void) => {
      probe.signals.push(signal)
      return () => void probe.unarmed++
    }
  }
  return probe
}

describe("Watchdog.awaitSignal", () => {
  for (const withTimer of [true, false]) {
    const label = withTimer ? "with the loop's timer" : "without a timer (a race)"

    it.scoped(`${label}: true when the signal comes before the deadline, at once or later`, () =>
      Effect.gen(function* () {
        const timer = withTimer ? yield* Watchdog.start(watchdog) : undefined
        expect(yield* Watchdog.awaitSignal(timer ?? watchdog, (signal) => signal())).toBe(true)
        const probe = armProbe()
        const waiting = yield* Effect.fork(Watchdog.awaitSignal(timer ?? watchdog, probe.arm))
        yield* TestClock.adjust("59 seconds")
        expect(probe.signals.length).toBe(1)
        probe.signals[0]?.()
        expect(yield* Fiber.join(waiting)).toBe(true)
        // what the arm set up stays: the signal came
        expect(probe.unarmed).toBe(0)
        if (timer !== undefined) expect(timer.armed.size).toBe(0)
      })
    )

    it.scoped(`${label}: false exactly at the deadline, not a moment before; a later signal changes nothing`, () =>
      Effect.gen(function* () {
        const timer = withTimer ? yield* Watchdog.start(watchdog) : undefined
        yield* TestClock.adjust("25 seconds")
        const probe = armProbe()
        const waiting = yield* Effect.fork(Watchdog.awaitSignal(timer ?? watchdog, probe.arm))
        yield* TestClock.adjust("59999 millis")
        expect(yield* Fiber.poll(waiting)).toEqual(Option.none())
        yield* TestClock.adjust("1 millis")
        for (let i = 0; i < 20 && Option.isNone(yield* Fiber.poll(waiting)); i++) yield* Effect.yieldNow()
        expect(yield* Fiber.poll(waiting)).toEqual(Option.some(Exit.succeed(false)))
        // the deadline undid what the arm set up, once
        expect(probe.unarmed).toBe(1)
        probe.signals[0]?.()
        expect(yield* Fiber.join(waiting)).toBe(false)
        expect(probe.unarmed).toBe(1)
        if (timer !== undefined) expect(timer.armed.size).toBe(0)
      })
    )
  }

  for (const withTimer of [true, false]) {
    it.scoped(
      `${withTimer ? "with the loop's timer" : "without a timer (a race)"}: an interrupted wait disarms its deadline and undoes what the arm set up`,
      () =>
        Effect.gen(function* () {
          const timer = withTimer ? yield* Watchdog.start(watchdog) : undefined
          const probe = armProbe()
          const waiting = yield* Effect.fork(Watchdog.awaitSignal(timer ?? watchdog, probe.arm))
          yield* Effect.yieldNow()
          if (timer !== undefined) expect(timer.armed.size).toBe(1)
          yield* Fiber.interrupt(waiting)
          expect(probe.unarmed).toBe(1)
          if (timer !== undefined) expect(timer.armed.size).toBe(0)
        })
    )
  }
})
