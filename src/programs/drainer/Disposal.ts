/**
 * Records that will not be delivered (SPEC §6 steps 5-6): expired, poison, or permanently rejected by the
 * sink. Each is written to the dead-letter queue (SPEC §5) or dropped by policy, then completed; a failed
 * dead-letter write leaves it claimed. Every dead-lettered or dropped record logs one WARN with its id,
 * partition, category and reason — never its payload or header values.
 *
 * @since 0.1.0
 */
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import { type DeadLetterCategory, DeadLetterEntry } from "../../domain/DeadLetterEntry.js"
import type { InvalidRecord, StoreUnavailable } from "../../domain/OutboxError.js"
import type { OutboxRecord } from "../../domain/OutboxRecord.js"
import type { Slot } from "./BatchState.js"
import { type Instance, routeMetrics } from "./Instance.js"
import type { Disposal } from "./Settings.js"

/**
 * Why a record is disposed of.
 *
 * @since 0.1.0
 */
export interface Failure {
  readonly category: DeadLetterCategory
  readonly reason: string
  readonly errorCode: string
  readonly lastError: string
  /** More facts for the log line (never payload or header values). */
  readonly details?: Record<string, unknown> | undefined
}

/**
 * The dead-letter entry of a record. Its id is the record id, so a retry after a failed complete finds
 * it already written.
 *
 * @since 0.1.0
 */
export const entryFor = (record: OutboxRecord, failure: Failure, failedAt: DateTime.Utc): DeadLetterEntry =>
  new DeadLetterEntry({
    id: record.id,
    recordId: record.id,
    partitionKey: record.partitionKey,
    envelopeId: record.envelopeId,
    bindingId: record.bindingId,
    payload: record.payload,
    headers: record.headers,
    ...(Option.isSome(record.orderingKey) ? { orderingKey: record.orderingKey.value } : {}),
    routeId: record.routeId,
    address: record.address,
    category: failure.category,
    reason: failure.reason,
    errorCode: failure.errorCode,
    lastError: failure.lastError,
    attempts: record.replayCount,
    failedAt
  })

const logDisposal = (record: OutboxRecord, failure: Failure, how: Disposal): Effect.Effect<void> =>
  Effect.logWarning(
    how === "dlq" ? `record dead-lettered (${failure.category})` : `record dropped by policy (${failure.category})`
  ).pipe(
    Effect.annotateLogs({
      recordId: record.id,
      partition: record.partitionKey,
      category: failure.category,
      reason: failure.reason,
      errorCode: failure.errorCode,
      ...failure.details
    })
  )

/**
 * Writes the record to the dead-letter queue or drops it; fails when the write fails.
 *
 * @since 0.1.0
 */
export const dispose = (
  instance: Instance,
  record: OutboxRecord,
  policy: Disposal,
  failure: Failure
): Effect.Effect<Disposal, InvalidRecord | StoreUnavailable> =>
  Effect.gen(function* () {
    const dlq = instance.dlq
    if (policy === "drop" || dlq === undefined) {
      yield* Metric.increment(instance.metrics.dropped[failure.category])
      yield* logDisposal(record, failure, "drop")
      return "drop" as const
    }
    const entry = entryFor(record, failure, yield* DateTime.now)
    instance.storeCalls += 1
    yield* dlq.write(entry).pipe(Effect.catchTag("DuplicateRecord", () => Effect.void))
    yield* Metric.increment(routeMetrics(instance, record).dlq[failure.category])
    yield* logDisposal(record, failure, "dlq")
    return "dlq" as const
  })

/**
 * Dead-letters or drops a record of a wave. On success the record joins the wave's completions
 * (`slot.how`); a failed dead-letter write leaves it claimed (`slot.outcome`).
 *
 * @since 0.1.0
 */
export const disposeSlot = (instance: Instance, slot: Slot, policy: Disposal, failure: Failure): Effect.Effect<void> =>
  dispose(instance, slot.record, policy, failure).pipe(
    Effect.matchEffect({
      onFailure: (error) =>
        Effect.logError("dead-letter write failed; record stays claimed").pipe(
          Effect.annotateLogs({ recordId: slot.record.id, category: failure.category, error: error.message }),
          Effect.zipRight(
            Effect.sync(() => {
              slot.outcome = { _tag: "LeftClaimed", delivered: false }
            })
          )
        ),
      onSuccess: (how) =>
        Effect.sync(() => {
          slot.how = how
        })
    })
  )

const isoOrEmpty = (instant: Option.Option<DateTime.Utc>): string =>
  Option.match(instant, { onNone: () => "", onSome: DateTime.formatIso })

/**
 * Disposes an expired or poison record (`category`) without sending it.
 *
 * @since 0.1.0
 */
export const disposeUnsendable = (
  instance: Instance,
  slot: Slot,
  category: "expired" | "poison"
): Effect.Effect<void> => {
  const record = slot.record
  const config = instance.config
  if (category === "expired") {
    return Effect.zipRight(
      Metric.increment(instance.metrics.expired),
      disposeSlot(instance, slot, config.onExpired, {
        category: "expired",
        reason: "expiresAt passed before delivery",
        errorCode: "expired",
        lastError: `expired at ${isoOrEmpty(record.expiresAt)}`
      })
    )
  }
  const firstAttemptedAt = isoOrEmpty(record.firstAttemptedAt)
  const budget = Duration.format(config.replayBudget)
  return disposeSlot(instance, slot, config.onPoison, {
    category: "poison",
    reason: `claimed ${record.replayCount} times (max ${config.maxReplayAttempts}) since ${firstAttemptedAt}; budget ${budget} spent`,
    errorCode: "poison",
    lastError: "",
    details: {
      replayCount: record.replayCount,
      maxReplayAttempts: config.maxReplayAttempts,
      firstAttemptedAt,
      replayBudget: budget
    }
  })
}
