/**
 * A turn of the event loop as an effect, shared by the drainer (so an in-memory cycle does not starve
 * timers) and the stores' grouping of concurrent calls ({@link groupPerTurn}: the SQLite group commit, the
 * SQL lease stores' grouped reads).
 *
 * @since 0.1.0
 */
import type * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"

/** Runs `run` on the next turn of the event loop (`setImmediate`, else a 0 ms timer); returns its cancel. */
const onNextTurn = (run: () => void): (() => void) => {
  if (typeof setImmediate === "function") {
    const handle = setImmediate(run)
    return () => clearImmediate(handle)
  }
  const handle = setTimeout(run, 0)
  return () => clearTimeout(handle)
}

/**
 * Resolves on the next turn of the event loop (a macrotask), whatever the `Clock`; interruptible.
 *
 * @since 0.1.0
 */
export const yieldToEventLoop: Effect.Effect<void> = Effect.async<void>((resume) => {
  const cancel = onNextTurn(() => resume(Effect.void))
  return Effect.sync(cancel)
})

/**
 * The answer to one call of a group: given once by the group's runner ({@link Answer.succeed},
 * {@link Answer.failCause}; a later answer is ignored) and awaited by the caller ({@link Answer.wait}). It does
 * what a `Deferred` would for one waiter, for a fraction of the cost: a group makes one per call, and
 * Effect's `Deferred` copies its prototype into every instance.
 *
 * @since 0.2.0
 */
export class Answer<A, E> {
  private exit: Exit.Exit<A, E> | undefined = undefined
  private resume: ((exit: Exit.Exit<A, E>) => void) | undefined = undefined

  /** Answers with `value` (ignored when already answered). */
  succeed(value: A): void {
    this.complete(Exit.succeed(value))
  }

  /** Answers with `cause` (ignored when already answered). */
  failCause(cause: Cause.Cause<E>): void {
    this.complete(Exit.failCause(cause))
  }

  /**
   * The answer: at once when given, else when it comes. Interruptible; an interrupted wait leaves the answer
   * to no one.
   */
  wait(): Effect.Effect<A, E> {
    if (this.exit !== undefined) return this.exit
    return Effect.async<A, E>((resume) => {
      if (this.exit !== undefined) return resume(this.exit)
      this.resume = resume
      return Effect.sync(() => {
        this.resume = undefined
      })
    })
  }

  private complete(exit: Exit.Exit<A, E>): void {
    if (this.exit !== undefined) return
    this.exit = exit
    const resume = this.resume
    this.resume = undefined
    if (resume !== undefined) resume(exit)
  }
}

/**
 * A call of a group as its runner sees it: the request, and the {@link Answer} through which the runner answers it.
 *
 * @since 0.1.0
 */
export type GroupMember<R, A, E> = R & { readonly done: Answer<A, E> }

/**
 * Groups the calls made in the same turn of the event loop, for a store that serves many callers with one
 * statement or one transaction (the SQLite store's group commit, the SQL lease stores' grouped reads through {@link groupLookupsPerTurn}).
 *
 * The returned function adds a call and waits for its answer. The first call of a group waits one turn of
 * the event loop (the other fibers then run until they wait too, adding their calls) and then runs
 * `runGroup` with every call added; calls that arrive while a group runs form the next group, run by the
 * same fiber. The runner is uninterruptible, so no call is left waiting: `runGroup` must answer every
 * member (be total); should it fail all the same, the unanswered calls of its group and the calls waiting
 * for the next one fail with its cause, and the next call starts a new runner.
 *
 * A lone caller does not wait for the turn: after {@link aloneBeforeImmediate} groups in a row of one call
 * each, a call runs at once (the wait would have found no one to group with, and costs a lone caller a tenth
 * of a millisecond or more per call). A call of another fiber in the same turn ends that: it waits for the
 * turn again, and so do the calls after it until groups of one are again the rule.
 *
 * @since 0.1.0
 */
export const groupPerTurn = <R extends object, A, E>(
  runGroup: (group: ReadonlyArray<GroupMember<R, A, E>>) => Effect.Effect<void>
): ((request: R) => Effect.Effect<A, E>) => {
  let waiting: Array<GroupMember<R, A, E>> = []
  let running: ReadonlyArray<GroupMember<R, A, E>> = []
  let scheduled = false
  /** Groups of one call in a row (reset by a larger group, or by calls of two fibers in one turn). */
  let alone = 0
  const turn = turnMarker()
  const runQueued: Effect.Effect<void> = Effect.suspend(function next(): Effect.Effect<void> {
    running = waiting
    if (running.length === 0) {
      scheduled = false
      return Effect.void
    }
    waiting = []
    alone = running.length === 1 ? alone + 1 : 0
    return Effect.zipRight(runGroup(running), Effect.suspend(next))
  })
  const runner = (wait: boolean): Effect.Effect<void> =>
    (wait ? Effect.zipRight(yieldToEventLoop, runQueued) : runQueued).pipe(
      Effect.onExit((exit) => {
        if (Exit.isSuccess(exit)) return Effect.void
        // not with a total runGroup; never leave a call waiting on a group that failed or will not run (a
        // member already answered keeps its answer)
        const left = [...running, ...waiting]
        running = []
        waiting = []
        scheduled = false
        return Effect.sync(() => {
          for (const member of left) member.done.failCause(exit.cause)
        })
      }),
      Effect.uninterruptible
    )
  const waitingRunner = runner(true)
  const immediateRunner = runner(false)
  return (request) =>
    Effect.withFiberRuntime((fiber) => {
      const done = new Answer<A, E>()
      // `Object.assign` onto the new object, not a spread: adding `done` to a spread copy is slow in V8
      waiting.push(Object.assign({ done }, request))
      // calls of two fibers in one turn: callers run side by side, so group them again
      if (turn.mark(fiber)) alone = 0
      if (scheduled) return done.wait()
      scheduled = true
      return Effect.flatMap(alone >= aloneBeforeImmediate ? immediateRunner : waitingRunner, () => done.wait())
    })
}

/**
 * Groups of one call in a row after which {@link groupPerTurn} runs a call at once instead of waiting for the
 * turn (as long as no other fiber called in the same turn).
 *
 * @since 0.2.0
 */
export const aloneBeforeImmediate = 3

/**
 * Tells whether another fiber already made a call in the current turn of the event loop: `mark` records the
 * calling fiber and returns whether a different one called before it in the same turn (one fiber's calls one
 * after another are not callers side by side). The record is cleared when the turn's immediates run.
 */
const turnMarker = (): { readonly mark: (fiber: object) => boolean } => {
  let caller: object | undefined
  let several = false
  const clear = () => {
    caller = undefined
    several = false
  }
  return {
    mark: (fiber) => {
      if (caller === undefined) {
        caller = fiber
        onNextTurn(clear)
        return false
      }
      if (fiber !== caller) several = true
      return several
    }
  }
}

/**
 * Groups keyed lookups made in the same turn of the event loop into one `lookup` of their distinct keys
 * (see {@link groupPerTurn}): each call gets the value found for its key (`undefined` when there is none),
 * and a failed lookup fails every call of its group with its cause. Each lookup runs after every call of
 * its group was made, so no call sees a state older than itself (the SQL lease stores' grouped reads).
 *
 * @since 0.1.0
 */
export const groupLookupsPerTurn = <K, V, E>(
  lookup: (keys: ReadonlyArray<K>) => Effect.Effect<ReadonlyMap<K, V>, E>
): ((key: K) => Effect.Effect<V | undefined, E>) => {
  const grouped = groupPerTurn<{ readonly key: K }, V | undefined, E>((group) =>
    Effect.matchCause(lookup(Array.from(new Set(group.map((member) => member.key)))), {
      onFailure: (cause) => {
        for (const member of group) member.done.failCause(cause)
      },
      onSuccess: (found) => {
        for (const member of group) member.done.succeed(found.get(member.key))
      }
    })
  )
  return (key) => grouped({ key })
}
