/**
 * The instant the SQL stores bind: the `Clock`'s time in whole milliseconds. Their time columns are
 * integers (PostgreSQL `bigint` refuses a fraction), and a clock may stand between two milliseconds (a
 * `TestClock` in the middle of a step, which jittered sleeps produce).
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"

/**
 * The current time in whole milliseconds.
 *
 * @since 0.1.0
 */
export const nowMillis: Effect.Effect<number> = Effect.map(Clock.currentTimeMillis, Math.floor)
