/**
 * The sends a broker sink has made and not yet had answered (a JetStream publish ack, a publisher confirm),
 * each under its key with its deadline. Each is taken out once — by its answer, a failure, or the sweep that
 * fails the overdue ones every quarter of the timeout (so a timeout fires between `timeout` and 1.25× it); a
 * later answer finds nothing and is ignored. When the sink's scope closes, the sends still awaiting fail
 * transient: nothing would answer them any more. Deadlines are read from the `Clock` the sink was built with.
 *
 * @since 0.2.0
 */
import type * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import type { SendError } from "../../services/Sink.js"

/**
 * One send awaiting its answer: when it times out, and whom to hand its result.
 *
 * @since 0.2.0
 */
export interface Awaiting {
  readonly deadline: number
  readonly resume: (result: Effect.Effect<void, SendError>) => void
}

/**
 * The sends awaiting their answers, oldest first.
 *
 * @since 0.2.0
 */
export interface AwaitingSends<K, A extends Awaiting> {
  /** The deadline of a send made now. */
  readonly deadline: () => number
  readonly add: (key: K, entry: A) => void
  /** Takes the send under `key` out, if it still awaits. */
  readonly take: (key: K) => A | undefined
  /** Takes out the oldest send that `matches`, if any. */
  readonly takeFirst: (matches: (entry: A) => boolean) => A | undefined
  /** Takes every send out (the connection failed, or the sink closes). */
  readonly takeAll: () => Array<A>
}

/**
 * Why a send failed without an answer: its deadline passed, or the sink closed.
 *
 * @since 0.2.0
 */
export type Unanswered = "timeout" | "closed"

/**
 * Builds the sends awaiting answers of one sink, with the sweep that fails each overdue send with
 * `unanswered(entry, "timeout")`; when the scope closes, the sweep stops and every send still awaiting fails
 * with `unanswered(entry, "closed")`.
 *
 * @since 0.2.0
 */
export const make = <K, A extends Awaiting>(
  clock: Clock.Clock,
  timeout: Duration.Duration,
  unanswered: (entry: A, reason: Unanswered) => SendError
): Effect.Effect<AwaitingSends<K, A>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const timeoutMillis = Duration.toMillis(timeout)
    const entries = new Map<K, A>()
    const take = (key: K): A | undefined => {
      const entry = entries.get(key)
      if (entry !== undefined) entries.delete(key)
      return entry
    }
    const sweep = Effect.sync(() => {
      const now = clock.unsafeCurrentTimeMillis()
      for (const [key, entry] of entries) {
        if (entry.deadline > now) continue
        entries.delete(key)
        entry.resume(Effect.fail(unanswered(entry, "timeout")))
      }
    })
    yield* Effect.forkScoped(
      Effect.repeat(sweep, Schedule.spaced(Duration.millis(Math.max(10, Math.floor(timeoutMillis / 4)))))
    )
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        const left = [...entries.values()]
        entries.clear()
        for (const entry of left) entry.resume(Effect.fail(unanswered(entry, "closed")))
      })
    )
    return {
      deadline: () => clock.unsafeCurrentTimeMillis() + timeoutMillis,
      add: (key, entry) => {
        entries.set(key, entry)
      },
      take,
      takeFirst: (matches) => {
        for (const [key, entry] of entries) if (matches(entry)) return take(key)
        return undefined
      },
      takeAll: () => {
        const all = [...entries.values()]
        entries.clear()
        return all
      }
    }
  })
