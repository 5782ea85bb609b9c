/**
 * A turn of the event loop as an effect, shared by the drainer (so an in-memory cycle does not starve
 * timers) and the SQLite store's group commit (so concurrent callers can join a group).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"

/**
 * Resolves on the next turn of the event loop (a macrotask), whatever the `Clock`; interruptible.
 *
 * @since 0.1.0
 */
export const yieldToEventLoop: Effect.Effect<void> = Effect.async<void>((resume) => {
  const done = () => resume(Effect.void)
  if (typeof setImmediate === "function") {
    const handle = setImmediate(done)
    return Effect.sync(() => clearImmediate(handle))
  }
  const handle = setTimeout(done, 0)
  return Effect.sync(() => clearTimeout(handle))
})
