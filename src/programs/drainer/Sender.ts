/**
 * Sends the records of one wave (SPEC §6 step 5), each send starting at once, in wave order, under one
 * deadline of `sendTimeout` (armed with the loop's send timer, see `Watchdog`, or a race outside the loop).
 * Starting stops once `maxInFlight` sends wait (at most that many are ever in flight); every send starts in
 * that one stretch, right after the wave's lease check — a send that ends later never starts another. The
 * wave waits once for all of them: the last one to end wakes it. A send still running at the deadline is
 * cancelled and left without a result (a transient `timeout`). A sink defect stops the wave, cancelling
 * the sends still running.
 *
 * Two ways to run a send, by what the sink offers:
 *
 * - A sink built with `Sink.fromRegister` (the NATS and RabbitMQ sinks, `SinkRouter`): each send is started
 *   by calling its register (`Sink.registerOf`), with a resume of the wave's own — no fiber per send. A send
 *   resumed with its result (an `Exit`) is done there; one resumed with another effect (a reconnect first)
 *   runs it on a fiber of its own. Broker sends all wait for an acknowledgement, and a fiber per send cost the relay about 10 µs of
 *   CPU per record.
 * - Otherwise sends run one after another on a sender fiber until one of them has to wait; that one keeps
 *   running in the background while a new sender starts the next, so the waiting sends of a wave are in
 *   flight together, and a send that finishes without waiting (in-memory, buffered sinks) costs no fiber or
 *   timer of its own.
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
import { type Register, registerOf, type SendError, type SinkService } from "../../services/Sink.js"
import type { BatchRuntime, BatchState, Slot } from "./BatchState.js"
import * as Watchdog from "./Watchdog.js"

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
 * What a wave's waits share: a sink defect that stops the wave, and the wake-up of the wave once none of
 * its sends is open (or a defect came).
 */
abstract class Wave {
  defect: Cause.Cause<never> | undefined = undefined
  wake: (() => void) | undefined = undefined
  /** How many sends are still open. */
  abstract get open(): number

  wakeIfDone(): void {
    if (this.wake === undefined || (this.open > 0 && this.defect === undefined)) return
    const resume = this.wake
    this.wake = undefined
    resume()
  }

  arm(resume: () => void): void {
    this.wake = resume
    this.wakeIfDone()
  }

  outcome(result: SendAllResult): Effect.Effect<SendAllResult> {
    return this.defect === undefined ? Effect.succeed(result) : Effect.failCause(this.defect)
  }

  /** Starts the wave's sends while fewer than `maxInFlight` are open; returns how many it started. */
  abstract startAll(maxInFlight: number): number

  /** Gives up on the sends still open (at the deadline, or when the wait is interrupted): no result. */
  abstract abandon(): Effect.Effect<void>

  /**
   * The wave's end once `started` sends were started: at once when none is open, else when the last one
   * ends, a defect comes or the deadline passes (the open sends are then abandoned).
   */
  finish(started: number, deadline: Watchdog.Timer | Duration.Duration): Effect.Effect<SendAllResult> {
    const result: SendAllResult = { started, atOnce: this.open === 0 }
    if (this.open === 0) return this.outcome(result)
    return Watchdog.awaitSignal(deadline, (signal) => this.arm(signal)).pipe(
      Effect.onExit(() => this.abandon()),
      Effect.zipRight(Effect.suspend(() => this.outcome(result)))
    )
  }
}

/**
 * One wave's sends: the state the senders share. Its methods are made once per class, so a wave builds
 * no closures of its own; a send that finishes without waiting costs no allocation but its result.
 */
class WaveSends extends Wave {
  started = 0
  /** The senders that wait, each with the slot whose send it waits in. */
  readonly waiting = new Map<Fiber.RuntimeFiber<unknown, unknown>, Slot | undefined>()
  /** Sends start only in the starting stretch of {@link sendAll}, never when a waiting send ends later. */
  starting = true
  /** The slot whose send the running sender fiber is in. */
  current: Slot | undefined = undefined
  /**
   * Runs sends one after another until one of them has to wait (none after a defect): a loop whose step
   * keeps each success, so a send that finishes at once costs the run loop one step. A failed send leaves
   * the loop; its failure is kept and the loop starts again at the next send.
   */
  readonly sender: Effect.Effect<void>

  constructor(
    readonly sink: SinkService,
    readonly toSend: ReadonlyArray<Slot>,
    readonly state: BatchState,
    readonly batch: BatchRuntime
  ) {
    super()
    // the loop and its continuations: made once per wave
    const sends = Effect.whileLoop({
      while: this.more.bind(this),
      body: this.sendNext.bind(this),
      step: this.keepSuccess.bind(this)
    })
    const sender: Effect.Effect<void> = Effect.matchEffect(sends, {
      onFailure: (error: SendError) => {
        this.done(Either.left(error))
        return sender
      },
      onSuccess: () => Effect.void
    })
    this.sender = sender
  }

  /** Whether the sender goes on: a send is left, no defect came, and this is the starting stretch. */
  more(): boolean {
    return this.started < this.toSend.length && this.defect === undefined && this.starting
  }

  /** Starts the next slot's send. */
  sendNext(): Effect.Effect<void, SendError> {
    const slot = this.toSend[this.started]
    this.started += 1
    this.current = slot
    return slot === undefined ? Effect.void : this.sink.send(slot.record)
  }

  /** The loop's step: the send just made succeeded. */
  keepSuccess(): void {
    this.done(succeeded)
  }

  /**
   * A send returned: its result is kept. In the starting stretch the sender that returns is the one that
   * started last; a send that had to wait returns later, in the fiber it waited in (whose loop then ends).
   */
  done(result: Either.Either<void, SendError>): void {
    const slot = this.starting ? this.current : this.waitedIn()
    if (slot !== undefined) {
      slot.result = result
      this.state.inFlight.delete(slot.record.id)
    }
  }

  /** The slot whose send the running fiber waited in. */
  waitedIn(): Slot | undefined {
    const fiber = Fiber.getCurrentFiber()
    return Option.isSome(fiber) ? this.waiting.get(fiber.value) : undefined
  }

  get open(): number {
    return this.waiting.size
  }

  startAll(maxInFlight: number): number {
    const waiting = this.waiting
    while (this.started < this.toSend.length && this.defect === undefined && waiting.size < maxInFlight) {
      const fiber = this.batch.fork(this.sender)
      const exit = fiber.unsafePoll()
      if (exit !== null) {
        this.ended(fiber, exit)
        continue
      }
      // the sender waits in the send of the slot it started last: that record is in flight
      const current = this.current
      if (current !== undefined) this.state.inFlight.add(current.record.id)
      waiting.set(fiber, current)
      fiber.addObserver((exit) => this.ended(fiber, exit))
    }
    this.starting = false
    return this.started
  }

  abandon(): Effect.Effect<void> {
    if (this.waiting.size === 0) return Effect.void
    return Effect.forEach(Array.from(this.waiting.keys()), Fiber.interruptFork, { discard: true })
  }

  ended(fiber: Fiber.RuntimeFiber<void>, exit: Exit.Exit<void>): void {
    this.waiting.delete(fiber)
    if (Exit.isFailure(exit) && !Cause.isInterruptedOnly(exit.cause)) this.defect ??= exit.cause
    this.wakeIfDone()
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
  deadline: Watchdog.Timer | Duration.Duration,
  maxInFlight: number = Number.POSITIVE_INFINITY
): Effect.Effect<SendAllResult> =>
  Effect.suspend(() => {
    const register = registerOf(sink)
    const wave: Wave =
      register !== undefined
        ? new RegisteredWave(register, toSend, state, batch)
        : new WaveSends(sink, toSend, state, batch)
    return wave.finish(wave.startAll(maxInFlight), deadline)
  })

/** Whether an effect is already its result (`Effect.void` and `Effect.fail(error)` are exits). */
const isExitOf = <A, E>(effect: Effect.Effect<A, E>): effect is Exit.Exit<A, E> => Exit.isExit(effect)

/** One registered send: open until its result is in. */
interface Pending {
  readonly slot: Slot
  open: boolean
  cancel: Effect.Effect<void> | undefined
  fiber: Fiber.RuntimeFiber<void, SendError> | undefined
}

/** One wave's sends through a sink's `register`: the open ones, each with its canceler or its fiber. */
class RegisteredWave extends Wave {
  readonly pending = new Set<Pending>()
  constructor(
    readonly register: Register,
    readonly toSend: ReadonlyArray<Slot>,
    readonly state: BatchState,
    readonly batch: BatchRuntime
  ) {
    super()
  }

  startAll(maxInFlight: number): number {
    let started = 0
    for (const slot of this.toSend) {
      if (this.defect !== undefined || this.pending.size >= maxInFlight) break
      started += 1
      this.start(slot)
    }
    return started
  }

  get open(): number {
    return this.pending.size
  }

  start(slot: Slot): void {
    const entry: Pending = { slot, open: true, cancel: undefined, fiber: undefined }
    let cancel: void | Effect.Effect<void>
    try {
      cancel = this.register(slot.record, (result) => this.resumed(entry, result), this.batch.labels)
    } catch (error) {
      this.defect ??= Cause.die(error)
      return
    }
    if (!entry.open) return
    if (cancel !== undefined) entry.cancel = cancel
    this.pending.add(entry)
    this.state.inFlight.add(slot.record.id)
  }

  resumed(entry: Pending, result: Effect.Effect<void, SendError>): void {
    if (!entry.open || entry.fiber !== undefined) return
    if (isExitOf(result)) return this.settle(entry, result)
    const fiber = this.batch.fork(result)
    const exit = fiber.unsafePoll()
    if (exit !== null) return this.settle(entry, exit)
    entry.fiber = fiber
    fiber.addObserver((exit) => this.settle(entry, exit))
  }

  settle(entry: Pending, exit: Exit.Exit<void, SendError>): void {
    if (!entry.open) return
    entry.open = false
    if (Exit.isSuccess(exit)) entry.slot.result = succeeded
    else {
      const failure = Cause.failureOption(exit.cause)
      if (Option.isSome(failure)) entry.slot.result = Either.left(failure.value)
      else if (!Cause.isInterruptedOnly(exit.cause)) this.defect ??= Cause.stripFailures(exit.cause)
    }
    if (this.pending.delete(entry)) {
      this.state.inFlight.delete(entry.slot.record.id)
      this.wakeIfDone()
    }
  }

  /** Gives up on the sends still pending: their results stay unset. */
  abandon(): Effect.Effect<void> {
    if (this.pending.size === 0) return Effect.void
    const left = Array.from(this.pending)
    this.pending.clear()
    return Effect.forEach(
      left,
      (entry) => {
        entry.open = false
        if (entry.fiber !== undefined) return Fiber.interruptFork(entry.fiber)
        return entry.cancel ?? Effect.void
      },
      { discard: true }
    )
  }
}
