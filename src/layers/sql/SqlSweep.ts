/**
 * The retention sweep of the SQL outbox stores: terminal records older than `retention` are deleted on
 * the claim path, at most once per `sweepInterval`, in bounded chunks; a failing sweep is logged and never
 * fails the claim it follows.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"

/**
 * The sweep options of the SQL stores' layers.
 *
 * @since 0.1.0
 */
export interface SweepOptions {
  /** Minimum time between two retention sweeps (default 1 minute). */
  readonly sweepInterval?: Duration.DurationInput | undefined
  /** Rows deleted per sweep statement (default 500); a sweep runs at most 20 of them. */
  readonly sweepChunk?: number | undefined
}

/** Statements per retention sweep. */
const sweepStatements = 20

/**
 * Builds the sweep: the returned effect sweeps when the interval has passed since the last sweep (or since
 * the store was built) and does nothing otherwise. `deleteOlderThan(cutoff, chunk)` deletes at most
 * `chunk` terminal records older than `cutoff` and returns how many it deleted.
 *
 * @since 0.1.0
 */
export const make = <E>(
  backend: string,
  retentionMillis: number,
  options: SweepOptions,
  deleteOlderThan: (cutoff: number, chunk: number) => Effect.Effect<number, E>
): Effect.Effect<Effect.Effect<void>> =>
  Effect.map(Clock.currentTimeMillis, (startedAt) => {
    const intervalMillis = Duration.toMillis(Duration.decode(options.sweepInterval ?? Duration.minutes(1)))
    const chunk = Math.max(1, Math.floor(options.sweepChunk ?? 500))
    /** When the last sweep ran (plain state: only read and set between effects). */
    let lastSweep = startedAt
    const sweep = (now: number) =>
      Effect.gen(function* () {
        for (let i = 0; i < sweepStatements; i++) {
          // whole milliseconds: the columns are integers (a test clock can stand between two)
          if ((yield* deleteOlderThan(Math.floor(now - retentionMillis), chunk)) < chunk) break
        }
      }).pipe(
        Effect.catchAll((error) => Effect.logWarning("outbox retention sweep failed", error)),
        Effect.annotateLogs("backend", backend)
      )
    return Effect.flatMap(Clock.currentTimeMillis, (now) => {
      if (now - lastSweep < intervalMillis) return Effect.void
      lastSweep = now
      return sweep(now)
    })
  })
