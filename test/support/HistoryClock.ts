/**
 * A clock driven by a generated history: time moves only when the history says so, and sleeps return at
 * once (retry back-off costs nothing and stays deterministic), so the store and the model read the same
 * instants. Provide it with `Effect.withClock(time.clock)`.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"

export const makeHistoryClock = (start: number) => {
  let now = start
  const clock: Clock.Clock = {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: () => now,
    currentTimeMillis: Effect.sync(() => now),
    unsafeCurrentTimeNanos: () => BigInt(now) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(now) * 1_000_000n),
    sleep: () => Effect.void
  }
  return { clock, advance: (millis: number) => void (now += millis), now: () => now }
}
