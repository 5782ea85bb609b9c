/**
 * The in-process wake-up (SPEC §13): every persist through an `OutboxStore` of this process (and so every
 * enqueue and dead-letter redrive) signals its partition here, and the drainers and relays of the process
 * wait here while idle, so a record persisted in the process is delivered at once instead of after the
 * drainer's idle back-off. A `SqliteWakeSignal` signals here too when another process commits.
 *
 * Waits are keyed by a generation mark taken before the claim that may come back empty: a signal given
 * after the mark ends the wait even when it came before the wait started, so a persist committed while
 * that claim runs is never missed. A signal is a hint: a spurious one costs one claim, a missing one (a
 * persist in another process with no wake signal) only delays work until the next poll.
 *
 * The hub is a `Context.Reference`: one per process unless a program provides its own.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"

/**
 * The process-wide wake-up hub.
 *
 * @since 0.1.0
 */
export interface WakeHubService {
  /** Signals that the partition may have new work (called after a persist in this process). */
  readonly signal: (partitionKey: string) => void
  /** Signals that any partition may have new work (a commit noticed in another process). */
  readonly signalAll: () => void
  /** The current generation: take it before a claim, wait with it after the claim came back empty. */
  readonly mark: () => number
  /** Completes once the partition (or every partition) was signalled after `mark`; interruptible. */
  readonly awaitWork: (partitionKey: string, mark: number) => Effect.Effect<void>
  /**
   * The callback form of `awaitWork`: calls `wake` once the partition (or every partition) was signalled
   * after `mark`, at once (before returning) when it already was. Returns a cancel that drops the wait
   * (a no-op once `wake` ran). For a wait that shares one asynchronous step with a timer.
   *
   * @since 0.2.0
   */
  readonly onWork: (partitionKey: string, mark: number, wake: () => void) => () => void
  /**
   * Completes once a partition `accepts` was signalled (or every partition was) after `mark`;
   * interruptible.
   */
  readonly awaitAnyWork: (mark: number, accepts?: (partitionKey: string) => boolean) => Effect.Effect<void>
}

/** Partitions remembered with their last signal; beyond this the memory is dropped as one signal to all. */
const rememberedMax = 10_000

interface Waiter {
  readonly accepts: (partitionKey: string) => boolean
  readonly resume: () => void
}

/**
 * A fresh hub (a program or test that wants its own instead of the process-wide one).
 *
 * @since 0.1.0
 */
export const makeHub = (): WakeHubService => {
  let generation = 0
  let lastAll = 0
  const lastByPartition = new Map<string, number>()
  const byPartition = new Map<string, Set<Waiter>>()
  const anyWaiters = new Set<Waiter>()

  const resumeAll = (waiters: Iterable<Waiter>): void => {
    for (const waiter of Array.from(waiters)) waiter.resume()
  }
  const signal = (partitionKey: string): void => {
    generation += 1
    if (lastByPartition.size >= rememberedMax && !lastByPartition.has(partitionKey)) {
      lastByPartition.clear()
      lastAll = generation
    }
    lastByPartition.set(partitionKey, generation)
    const waiters = byPartition.get(partitionKey)
    if (waiters !== undefined) resumeAll(waiters)
    for (const waiter of Array.from(anyWaiters)) if (waiter.accepts(partitionKey)) waiter.resume()
  }
  const signalAll = (): void => {
    generation += 1
    lastAll = generation
    for (const waiters of Array.from(byPartition.values())) resumeAll(waiters)
    resumeAll(anyWaiters)
  }
  const signalledSince = (partitionKey: string, mark: number): boolean =>
    lastAll > mark || (lastByPartition.get(partitionKey) ?? 0) > mark
  const anySignalledSince = (mark: number, accepts: (partitionKey: string) => boolean): boolean => {
    if (lastAll > mark) return true
    if (generation <= mark) return false
    for (const [partitionKey, at] of lastByPartition) if (at > mark && accepts(partitionKey)) return true
    return false
  }
  /** Calls `wake` once `already` holds or the waiter registered by `register` is resumed; returns a cancel. */
  const listen = (
    already: () => boolean,
    accepts: (partitionKey: string) => boolean,
    register: (waiter: Waiter) => () => void,
    wake: () => void
  ): (() => void) => {
    if (already()) {
      wake()
      return () => undefined
    }
    let unregister: () => void = () => undefined
    const waiter: Waiter = {
      accepts,
      resume: () => {
        unregister()
        wake()
      }
    }
    unregister = register(waiter)
    return () => unregister()
  }
  const wait = (listening: (wake: () => void) => () => void): Effect.Effect<void> =>
    Effect.async<void>((resume) => {
      const cancel = listening(() => resume(Effect.void))
      return Effect.sync(cancel)
    })
  const registerFor =
    (partitionKey: string) =>
    (waiter: Waiter): (() => void) => {
      let waiters = byPartition.get(partitionKey)
      if (waiters === undefined) {
        waiters = new Set()
        byPartition.set(partitionKey, waiters)
      }
      const set = waiters
      set.add(waiter)
      return () => {
        set.delete(waiter)
        if (set.size === 0 && byPartition.get(partitionKey) === set) byPartition.delete(partitionKey)
      }
    }
  const onWork = (partitionKey: string, mark: number, wake: () => void): (() => void) =>
    listen(
      () => signalledSince(partitionKey, mark),
      () => true,
      registerFor(partitionKey),
      wake
    )

  return {
    signal,
    signalAll,
    mark: () => generation,
    awaitWork: (partitionKey, mark) => wait((wake) => onWork(partitionKey, mark, wake)),
    onWork,
    awaitAnyWork: (mark, accepts = () => true) =>
      wait((wake) =>
        listen(
          () => anySignalledSince(mark, accepts),
          accepts,
          (waiter) => {
            anyWaiters.add(waiter)
            return () => {
              anyWaiters.delete(waiter)
            }
          },
          wake
        )
      )
  }
}

/**
 * The wake-up hub of the process (a `Context.Reference`: provided by default, replaceable per program).
 *
 * @since 0.1.0
 */
export class WakeHub extends Context.Reference<WakeHub>()("effect-outbox/WakeHub", { defaultValue: makeHub }) {}
