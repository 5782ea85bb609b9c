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
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import type * as Duration from "effect/Duration"
import type { SendError, SinkService } from "../../services/Sink.js"
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

/** The result of a send that succeeded (shared: a success carries nothing). */
const succeeded: Either.Either<void, SendError> = Either.right(undefined)

/**
 * One wave's sends: the state the senders share. Its methods are made once per class, so a wave builds
 * no closures of its own; a send that finishes without waiting costs no allocation but its result.
 */
class WaveSends {
  started = 0
  /** The senders that wait, each with the slot whose send it waits in. */
  readonly waiting = new Map<Fiber.RuntimeFiber<unknown, unknown>, Slot | undefined>()
  defect: Cause.Cause<never> | undefined = undefined
  wake: (() => void) | undefined = undefined
  /** Sends start only in the starting stretch of {@link sendAll}, never when a waiting send ends later. */
  starting = true
  /** The slot whose send the running sender fiber is in. */
  current: Slot | undefined = undefined
  /** Runs sends one after another until one of them has to wait (none after a defect). */
  readonly sender: Effect.Effect<void>
  private readonly handlers: {
    readonly onFailure: (error: SendError) => Effect.Effect<void>
    readonly onSuccess: () => Effect.Effect<void>
  }

  constructor(
    readonly sink: SinkService,
    readonly toSend: ReadonlyArray<Slot>,
    readonly state: BatchState
  ) {
    // the continuations of every send of the wave: bound once per wave
    this.handlers = { onFailure: this.failed.bind(this), onSuccess: this.succeeded.bind(this) }
    this.sender = Effect.suspend(() => this.next())
  }

  failed(error: SendError): Effect.Effect<void> {
    return this.done(Either.left(error))
  }

  succeeded(): Effect.Effect<void> {
    return this.done(succeeded)
  }

  next(): Effect.Effect<void> {
    const slot = this.toSend[this.started]
    if (slot === undefined || this.defect !== undefined || !this.starting) return Effect.void
    this.started += 1
    this.current = slot
    return Effect.matchEffect(this.sink.send(slot.record), this.handlers)
  }

  /**
   * A send returned: its result is kept, and the sender goes on to the next one. In the starting stretch
   * the sender that returns is the one that started last; a send that had to wait returns later, in the
   * fiber it waited in.
   */
  done(result: Either.Either<void, SendError>): Effect.Effect<void> {
    const slot = this.starting ? this.current : this.waitedIn()
    if (slot !== undefined) {
      slot.result = result
      this.state.inFlight.delete(slot.record.id)
    }
    return this.next()
  }

  /** The slot whose send the running fiber waited in. */
  waitedIn(): Slot | undefined {
    const fiber = Fiber.getCurrentFiber()
    return Option.isSome(fiber) ? this.waiting.get(fiber.value) : undefined
  }

  wakeIfDone(): void {
    if (this.wake === undefined || (this.waiting.size > 0 && this.defect === undefined)) return
    const resume = this.wake
    this.wake = undefined
    resume()
  }

  ended(fiber: Fiber.RuntimeFiber<void>, exit: Exit.Exit<void>): void {
    this.waiting.delete(fiber)
    if (Exit.isFailure(exit) && !Cause.isInterruptedOnly(exit.cause)) this.defect ??= exit.cause
    this.wakeIfDone()
  }

  arm(resume: () => void): void {
    this.wake = resume
    this.wakeIfDone()
  }

  outcome(result: SendAllResult): Effect.Effect<SendAllResult> {
    return this.defect === undefined ? Effect.succeed(result) : Effect.failCause(this.defect)
  }
}

/**
 * Sends `toSend` (at most `maxInFlight` at a time waiting), setting each slot's `result` as its send
 * returns; `state.inFlight` holds the ids of the sends under way that had to wait.
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
    const sends = new WaveSends(sink, toSend, state)
    const waiting = sends.waiting
    while (sends.started < toSend.length && sends.defect === undefined && waiting.size < maxInFlight) {
      const fiber = batch.fork(sends.sender)
      const exit = fiber.unsafePoll()
      if (exit !== null) {
        sends.ended(fiber, exit)
        continue
      }
      // the sender waits in the send of the slot it started last: that record is in flight
      const current = sends.current
      if (current !== undefined) state.inFlight.add(current.record.id)
      waiting.set(fiber, current)
      fiber.addObserver((exit) => sends.ended(fiber, exit))
    }
    sends.starting = false
    const result: SendAllResult = { started: sends.started, atOnce: waiting.size === 0 }
    if (waiting.size === 0) return sends.outcome(result)
    return awaitAll(waiting, (resume) => sends.arm(resume), sendTimeout).pipe(
      Effect.zipRight(Effect.suspend(() => sends.outcome(result)))
    )
  })
/**
 * Waits until `arm`'s callback is called (every send ended, or one died), under one deadline; the sends
 * still running when the wait ends early or is interrupted are interrupted.
 */
const awaitAll = (
  waiting: ReadonlyMap<Fiber.RuntimeFiber<unknown, unknown>, unknown>,
  arm: (resume: () => void) => void,
  sendTimeout: Duration.Duration
): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    arm(() => resume(Effect.void))
  }).pipe(
    Effect.timeoutOption(sendTimeout),
    Effect.onExit(() =>
      waiting.size === 0
        ? Effect.void
        : Effect.forEach(Array.from(waiting.keys()), Fiber.interruptFork, { discard: true })
    ),
    Effect.asVoid
  )
