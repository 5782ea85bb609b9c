/**
 * Sends the records of one wave (SPEC §6 step 5), each send starting at once, in wave order, under one
 * deadline of `sendTimeout`. Sends run one after another on a sender fiber until one of them has to
 * wait; that one keeps running in the background while a new sender starts the next, so the waiting sends
 * of a wave are in flight together, and a send that finishes without waiting (in-memory, buffered sinks)
 * costs no fiber or timer of its own. The wave waits once for all of them: each sender reports its end to
 * a shared count, and the last one wakes the wave. A send still running at the deadline is interrupted and
 * left without a result (a transient `timeout`). A sink defect stops the wave, interrupting the sends
 * still running.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type * as Duration from "effect/Duration"
import type { SinkService } from "../../services/Sink.js"
import type { BatchRuntime, BatchState, Slot } from "./BatchState.js"

/**
 * Sends `toSend`, setting each slot's `result` as its send returns; `state.inFlight` holds the ids of the
 * sends under way.
 *
 * @since 0.1.0
 */
export const sendAll = (
  sink: SinkService,
  toSend: ReadonlyArray<Slot>,
  state: BatchState,
  batch: BatchRuntime,
  sendTimeout: Duration.Duration
): Effect.Effect<void> =>
  Effect.suspend(() => {
    let started = 0
    const waiting = new Set<Fiber.RuntimeFiber<void>>()
    let defect: Cause.Cause<never> | undefined
    let wake: (() => void) | undefined
    // a sender runs sends one after another until one of them has to wait (none after a defect)
    const sender: Effect.Effect<void> = Effect.suspend(function next(): Effect.Effect<void> {
      const slot = toSend[started]
      if (slot === undefined || defect !== undefined) return Effect.void
      started += 1
      const id = slot.record.id
      state.inFlight.add(id)
      return Effect.flatMap(Effect.either(sink.send(slot.record)), (result) => {
        slot.result = result
        state.inFlight.delete(id)
        return next()
      })
    })
    const wakeIfDone = (): void => {
      if (wake === undefined || (waiting.size > 0 && defect === undefined)) return
      const resume = wake
      wake = undefined
      resume()
    }
    const ended = (fiber: Fiber.RuntimeFiber<void>, exit: Exit.Exit<void>): void => {
      waiting.delete(fiber)
      if (Exit.isFailure(exit) && !Cause.isInterruptedOnly(exit.cause)) defect ??= exit.cause
      wakeIfDone()
    }
    while (started < toSend.length && defect === undefined) {
      const fiber = batch.fork(sender)
      const exit = fiber.unsafePoll()
      if (exit !== null) {
        ended(fiber, exit)
        continue
      }
      waiting.add(fiber)
      fiber.addObserver((exit) => ended(fiber, exit))
    }
    if (waiting.size === 0) return defect === undefined ? Effect.void : Effect.failCause(defect)
    return awaitAll(
      waiting,
      (resume) => {
        wake = resume
        wakeIfDone()
      },
      sendTimeout
    ).pipe(Effect.zipRight(Effect.suspend(() => (defect === undefined ? Effect.void : Effect.failCause(defect)))))
  })

/**
 * Waits until `arm`'s callback is called (every send ended, or one died), under one deadline; the sends
 * still running when the wait ends early or is interrupted are interrupted.
 */
const awaitAll = (
  waiting: ReadonlySet<Fiber.RuntimeFiber<void>>,
  arm: (resume: () => void) => void,
  sendTimeout: Duration.Duration
): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    arm(() => resume(Effect.void))
  }).pipe(
    Effect.timeoutOption(sendTimeout),
    Effect.onExit(() =>
      waiting.size === 0 ? Effect.void : Effect.forEach(Array.from(waiting), Fiber.interruptFork, { discard: true })
    ),
    Effect.asVoid
  )
