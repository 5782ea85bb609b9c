/**
 * A drainer's options and their SPEC §6 defaults, and the pure rules a cycle applies to a claimed batch:
 * the poison gate and expiry (§6 step 5), grouping by ordering key (§6 step 4) and the adaptive claim
 * size (§6 step 7).
 *
 * @since 0.1.0
 */
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Option from "effect/Option"
import type { OutboxRecord } from "../../domain/OutboxRecord.js"

/**
 * What to do with a record that will not be delivered: write it to the dead-letter queue, or drop it
 * (counted in `MessagesDropped`). Either way the record is then completed.
 *
 * @since 0.1.0
 */
export type Disposal = "dlq" | "drop"

/**
 * Options of a drainer. Only `partitionKey` and `owner` are required; the rest default to SPEC §6.
 *
 * @since 0.1.0
 */
export interface DrainerOptions {
  /** The partition to drain. */
  readonly partitionKey: string
  /** The lease owner this drainer works for: only a live lease of this owner lets it drain. */
  readonly owner: string
  /** Route tag for metrics, when the partition serves one route. */
  readonly routeId?: string | undefined
  /** Initial claim size (default 100). */
  readonly batchSize?: number | undefined
  /** Lower bound of the adaptive claim size (default 10, at most `batchSize`). */
  readonly minBatchSize?: number | undefined
  /** Upper bound of the adaptive claim size (default 500). */
  readonly maxBatchSize?: number | undefined
  /** Groups in flight at once (default 10). */
  readonly maxConcurrency?: number | undefined
  /** Timeout of one send; a timeout is a transient failure (default 30 s). */
  readonly sendTimeout?: Duration.DurationInput | undefined
  /** Claims a record may take before the poison gate can close (default 5). */
  readonly maxReplayAttempts?: number | undefined
  /** Time since the first attempt before the poison gate can close (default 15 min). */
  readonly replayBudget?: Duration.DurationInput | undefined
  /** Expired records: dead-letter (default) or drop. */
  readonly onExpired?: Disposal | undefined
  /** Permanent send failures: dead-letter (default) or drop. */
  readonly onPermanentFailure?: Disposal | undefined
  /** Poison records: dead-letter (default) or drop. */
  readonly onPoison?: Disposal | undefined
  /** Minimum time between expiry sweeps when expired records are dropped (default 1 min). */
  readonly expireInterval?: Duration.DurationInput | undefined
  /** First idle pause (default 100 ms). */
  readonly idleBackoffMin?: Duration.DurationInput | undefined
  /** Longest idle pause (default 30 s). */
  readonly idleBackoffMax?: Duration.DurationInput | undefined
  /** Expected upper bound of one batch (default 5 min). */
  readonly batchTimeout?: Duration.DurationInput | undefined
  /** Added to `batchTimeout` before the watchdog fires (default 30 s). */
  readonly watchdogGrace?: Duration.DurationInput | undefined
  /** How long an interrupted cycle may take to finish in-flight sends and release the rest (default 10 s). */
  readonly finalDrainBudget?: Duration.DurationInput | undefined
  /** Minimum time between depth-gauge refreshes (default 1 s; 0 refreshes every cycle). */
  readonly gaugeInterval?: Duration.DurationInput | undefined
}

/**
 * The resolved settings of a drainer (every default filled in).
 *
 * @since 0.1.0
 */
export interface DrainerSettings {
  readonly partitionKey: string
  readonly owner: string
  readonly routeId: string | undefined
  readonly batchSize: number
  readonly minBatchSize: number
  readonly maxBatchSize: number
  readonly maxConcurrency: number
  readonly sendTimeout: Duration.Duration
  readonly maxReplayAttempts: number
  readonly replayBudget: Duration.Duration
  readonly onExpired: Disposal
  readonly onPermanentFailure: Disposal
  readonly onPoison: Disposal
  readonly expireInterval: Duration.Duration
  readonly idleBackoffMin: Duration.Duration
  readonly idleBackoffMax: Duration.Duration
  readonly batchTimeout: Duration.Duration
  readonly watchdogGrace: Duration.Duration
  readonly finalDrainBudget: Duration.Duration
  readonly gaugeInterval: Duration.Duration
}

const positiveInt = (value: number | undefined, fallback: number): number =>
  value !== undefined && Number.isFinite(value) && value >= 1 ? Math.floor(value) : fallback

/**
 * Fills in the SPEC §6 defaults.
 *
 * @since 0.1.0
 */
export const settings = (options: DrainerOptions): DrainerSettings => {
  const batchSize = positiveInt(options.batchSize, 100)
  const maxBatchSize = Math.max(batchSize, positiveInt(options.maxBatchSize, 500))
  return {
    partitionKey: options.partitionKey,
    owner: options.owner,
    routeId: options.routeId,
    batchSize,
    minBatchSize: Math.min(batchSize, positiveInt(options.minBatchSize, 10)),
    maxBatchSize,
    maxConcurrency: positiveInt(options.maxConcurrency, 10),
    sendTimeout: Duration.decode(options.sendTimeout ?? "30 seconds"),
    maxReplayAttempts: Math.max(0, Math.floor(options.maxReplayAttempts ?? 5)),
    replayBudget: Duration.decode(options.replayBudget ?? "15 minutes"),
    onExpired: options.onExpired ?? "dlq",
    onPermanentFailure: options.onPermanentFailure ?? "dlq",
    onPoison: options.onPoison ?? "dlq",
    expireInterval: Duration.decode(options.expireInterval ?? "1 minute"),
    idleBackoffMin: Duration.decode(options.idleBackoffMin ?? "100 millis"),
    idleBackoffMax: Duration.decode(options.idleBackoffMax ?? "30 seconds"),
    batchTimeout: Duration.decode(options.batchTimeout ?? "5 minutes"),
    watchdogGrace: Duration.decode(options.watchdogGrace ?? "30 seconds"),
    finalDrainBudget: Duration.decode(options.finalDrainBudget ?? "10 seconds"),
    gaugeInterval: Duration.decode(options.gaugeInterval ?? "1 second")
  }
}

/**
 * The adaptive claim size: a full batch doubles it (up to `maxBatchSize`), an empty one halves it
 * (down to `minBatchSize`), anything else keeps it.
 *
 * @since 0.1.0
 */
export const nextBatchSize = (
  current: number,
  claimed: number,
  bounds: Pick<DrainerSettings, "minBatchSize" | "maxBatchSize">
): number => {
  if (claimed >= current) return Math.min(bounds.maxBatchSize, current * 2)
  if (claimed === 0) return Math.max(bounds.minBatchSize, Math.floor(current / 2))
  return current
}

/**
 * The poison gate: `replayCount > maxReplayAttempts` **and** `now - firstAttemptedAt >= replayBudget`.
 * A record with no `firstAttemptedAt` is never poison.
 *
 * @since 0.1.0
 */
export const isPoison = (
  record: Pick<OutboxRecord, "replayCount" | "firstAttemptedAt">,
  nowMillis: number,
  gate: Pick<DrainerSettings, "maxReplayAttempts" | "replayBudget">
): boolean =>
  record.replayCount > gate.maxReplayAttempts &&
  Option.isSome(record.firstAttemptedAt) &&
  nowMillis - DateTime.toEpochMillis(record.firstAttemptedAt.value) >= Duration.toMillis(gate.replayBudget)

/**
 * True when the record's `expiresAt` is strictly before now.
 *
 * @since 0.1.0
 */
export const isExpired = (record: Pick<OutboxRecord, "expiresAt">, nowMillis: number): boolean =>
  Option.isSome(record.expiresAt) && DateTime.toEpochMillis(record.expiresAt.value) < nowMillis

/**
 * Splits a claimed batch (in age order) into groups: one per ordering key in age order of its first
 * record, each keyless record a group of its own.
 *
 * @since 0.1.0
 */
export const groupByKey = (records: ReadonlyArray<OutboxRecord>): Array<Array<OutboxRecord>> => {
  const groups: Array<Array<OutboxRecord>> = []
  const byKey = new Map<string, Array<OutboxRecord>>()
  for (const record of records) {
    if (Option.isNone(record.orderingKey)) {
      groups.push([record])
      continue
    }
    const existing = byKey.get(record.orderingKey.value)
    if (existing !== undefined) existing.push(record)
    else {
      const group = [record]
      byKey.set(record.orderingKey.value, group)
      groups.push(group)
    }
  }
  return groups
}
