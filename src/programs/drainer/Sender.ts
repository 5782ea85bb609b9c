/**
 * Sends the records of one wave (SPEC §6 step 5), each send starting at once, in wave order, under one
 * deadline of `sendTimeout`. A send that finishes without waiting (in-memory, buffered sinks) runs on the
 * spot with no fiber or timer of its own; a send that has to wait keeps running in the background while
 * the next one starts, so the waiting sends of a wave are in flight together. A send still running at the
 * deadline is interrupted and left without a result (a transient `timeout`). A sink defect stops the wave.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
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
    // one sender runs sends one after another until one of them has to wait
    const sender: Effect.Effect<void> = Effect.suspend(function next(): Effect.Effect<void> {
      const slot = toSend[started]
      if (slot === undefined) return Effect.void
      started += 1
      const id = slot.record.id
      state.inFlight.add(id)
      return Effect.flatMap(Effect.either(sink.send(slot.record)), (result) => {
        slot.result = result
        state.inFlight.delete(id)
        return next()
      })
    })
    const waiting: Array<Fiber.RuntimeFiber<unknown, unknown>> = []
    while (started < toSend.length) {
      const exit = batch.run(sender)
      if (Exit.isSuccess(exit)) continue
      const defect = Cause.dieOption(exit.cause)
      if (Option.isSome(defect) && Runtime.isAsyncFiberException(defect.value)) {
        waiting.push(defect.value.fiber)
        continue
      }
      // a defect of the sink: stop the wave, interrupting the sends still running
      return Effect.zipRight(
        Effect.forEach(waiting, Fiber.interruptFork, { discard: true }),
        Effect.failCause(exit.cause)
      )
    }
    return waiting.length === 0 ? Effect.void : awaitAll(waiting, sendTimeout)
  })

/** Awaits the sends that had to wait, under one deadline; the ones still running then are interrupted. */
const awaitAll = (
  waiting: ReadonlyArray<Fiber.RuntimeFiber<unknown, unknown>>,
  sendTimeout: Duration.Duration
): Effect.Effect<void> =>
  Effect.gen(function* () {
    const exits = yield* Effect.forEach(waiting, Fiber.await).pipe(
      Effect.timeoutOption(sendTimeout),
      Effect.onExit(() => Effect.forEach(waiting, Fiber.interruptFork, { discard: true }))
    )
    if (Option.isNone(exits)) return
    for (const exit of exits.value) {
      if (Exit.isFailure(exit) && !Cause.isInterruptedOnly(exit.cause)) {
        return yield* Effect.die(Cause.squash(exit.cause))
      }
    }
  })
