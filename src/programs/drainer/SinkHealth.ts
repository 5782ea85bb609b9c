/**
 * Makes a failing sink visible at the default log level (SPEC §8): the transient send failures of a
 * partition in a row form a streak; the first failure of a streak and then one per `interval` log a WARN
 * with the count, the start and the last error, and the first success after a logged streak logs INFO.
 * Record payloads and header values never appear (only the sink's error code and message).
 *
 * @since 0.1.0
 */
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"

/**
 * Minimum time between two "sink failing" warnings of one partition.
 *
 * @since 0.1.0
 */
export const interval: Duration.Duration = Duration.minutes(1)

/**
 * The failure streak of one partition's sends.
 *
 * @since 0.1.0
 */
export interface SinkHealth {
  readonly partitionKey: string
  /** Failures of the current streak (0 when the sink is healthy). */
  failures: number
  /** When the current streak began. */
  since: number
  lastError: string
  /** When the last warning was logged (any streak). */
  lastWarnAt: number
  /** Whether the current streak was logged (recovery is logged only then). */
  warned: boolean
}

/**
 * A healthy sink's state.
 *
 * @since 0.1.0
 */
export const make = (partitionKey: string): SinkHealth => ({
  partitionKey,
  failures: 0,
  since: 0,
  lastError: "",
  lastWarnAt: Number.NEGATIVE_INFINITY,
  warned: false
})

const iso = (millis: number): string => DateTime.formatIso(DateTime.unsafeMake(millis))

/**
 * Counts `count` transient failures at `nowMillis`; returns the warning to log, if one is due.
 *
 * @since 0.1.0
 */
export const recordFailures = (
  health: SinkHealth,
  nowMillis: number,
  count: number,
  lastError: string
): string | undefined => {
  if (health.failures === 0) {
    health.since = nowMillis
    health.warned = false
  }
  health.failures += count
  health.lastError = lastError
  if (nowMillis - health.lastWarnAt < Duration.toMillis(interval)) return undefined
  health.lastWarnAt = nowMillis
  health.warned = true
  return `sink failing for partition ${health.partitionKey}: ${health.failures} failures since ${iso(health.since)}, last error ${lastError}`
}

/**
 * Ends a streak at `nowMillis`; returns the recovery message to log when the streak was logged.
 *
 * @since 0.1.0
 */
export const recordSuccess = (health: SinkHealth, nowMillis: number): string | undefined => {
  if (health.failures === 0) return undefined
  const failures = health.failures
  const warned = health.warned
  health.failures = 0
  health.warned = false
  if (!warned) return undefined
  const over = Duration.format(Duration.millis(Math.max(0, nowMillis - health.since)))
  return `sink recovered for partition ${health.partitionKey} after ${failures} failures over ${over}`
}

/**
 * {@link recordFailures}, logging the warning when one is due.
 *
 * @since 0.1.0
 */
export const failed = (
  health: SinkHealth,
  nowMillis: number,
  count: number,
  lastError: string
): Effect.Effect<void> => {
  const message = recordFailures(health, nowMillis, count, lastError)
  return message === undefined
    ? Effect.void
    : Effect.logWarning(message).pipe(
        Effect.annotateLogs({ failures: health.failures, since: iso(health.since), lastError })
      )
}

/**
 * {@link recordSuccess}, logging the recovery when due. Costs nothing while the sink is healthy.
 *
 * @since 0.1.0
 */
export const succeeded = (health: SinkHealth, nowMillis: number): Effect.Effect<void> => {
  if (health.failures === 0) return Effect.void
  const message = recordSuccess(health, nowMillis)
  return message === undefined ? Effect.void : Effect.logInfo(message)
}
