/**
 * Sends the records of one wave (SPEC §6 step 5), each send starting at once, in wave order, under one
 * deadline of `sendTimeout`. Sends run one after another on a sender fiber until one of them has to
 * wait; that one keeps running in the background while a new sender starts the next, so the waiting sends
 * of a wave are in flight together, and a send that finishes without waiting (in-memory, buffered sinks)
 * costs no fiber or timer of its own. Starting stops once `maxInFlight` sends wait (at most that many are
 * ever in flight); every send starts in that one stretch, right after the wave's lease check — a send that
 * ends later never starts another. The wave waits once for all of them: each sender reports its end to
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
 * What {@link sendAll} did: how many slots of `toSend` (from the first) it started — the others were not
 * tried — and whether every started send finished without waiting.
 *
 * @since 0.1.0
 */
export interface SendAllResult {
  readonly started: number
  readonly atOnce: boolean
}

/**
 * Sends `toSend` (at most `maxInFlight` at a time waiting), setting each slot's `result` as its send
 * returns; `state.inFlight` holds the ids of the sends under way.
 *
 * @since 0.1.0
 */
export const sendAll = (
  sink: SinkService,
  toSend: ReadonlyArray<Slot>,
  state: BatchState,
  batch: BatchRuntime,
  sendTimeout: Duration.Duration,
  maxInFlight: number = Number.POSITIVE_INFINITY
): Effect.Effect<SendAllResult> =>
  Effect.suspend(() => {
    let started = 0
    const waiting = new Set<Fiber.RuntimeFiber<void>>()
    let defect: Cause.Cause<never> | undefined
    let wake: (() => void) | undefined
    // sends start only in the starting stretch below, never when a waiting send ends later
    let starting = true
    // a sender runs sends one after another until one of them has to wait (none after a defect)
    const sender: Effect.Effect<void> = Effect.suspend(function next(): Effect.Effect<void> {
      const slot = toSend[started]
      if (slot === undefined || defect !== undefined || !starting) return Effect.void
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
    while (started < toSend.length && defect === undefined && waiting.size < maxInFlight) {
      const fiber = batch.fork(sender)
      const exit = fiber.unsafePoll()
      if (exit !== null) {
        ended(fiber, exit)
        continue
      }
      waiting.add(fiber)
      fiber.addObserver((exit) => ended(fiber, exit))
    }
    starting = false
    const result: SendAllResult = { started, atOnce: waiting.size === 0 }
    if (waiting.size === 0) return defect === undefined ? Effect.succeed(result) : Effect.failCause(defect)
    return awaitAll(
      waiting,
      (resume) => {
        wake = resume
        wakeIfDone()
      },
      sendTimeout
    ).pipe(
      Effect.zipRight(Effect.suspend(() => (defect === undefined ? Effect.succeed(result) : Effect.failCause(defect))))
    )
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
