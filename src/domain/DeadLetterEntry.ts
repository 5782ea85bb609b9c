/**
 * Dead-letter entries (SPEC §5): the evidence kept for a record that was given up on.
 *
 * @since 0.1.0
 */
import * as DateTime from "effect/DateTime"
import * as Schema from "effect/Schema"
import { Headers } from "./OutboxRecord.js"

/**
 * Why a record was dead-lettered: `poison` (replay cap and budget spent), `permanent` (the sink said
 * it can never succeed), `expired` (its `expiresAt` passed before delivery).
 *
 * @since 0.1.0
 */
export const DeadLetterCategory = Schema.Literal("poison", "permanent", "expired")

/**
 * @since 0.1.0
 */
export type DeadLetterCategory = typeof DeadLetterCategory.Type

/**
 * One dead-letter entry, for writing and reading alike. Optional fields are plain optional properties.
 *
 * @since 0.1.0
 */
export class DeadLetterEntry extends Schema.Class<DeadLetterEntry>("effect-outbox/DeadLetterEntry")({
  id: Schema.NonEmptyString,
  recordId: Schema.NonEmptyString,
  partitionKey: Schema.NonEmptyString,
  envelopeId: Schema.NonEmptyString,
  bindingId: Schema.NonEmptyString,
  payload: Schema.Uint8ArrayFromSelf,
  headers: Headers,
  orderingKey: Schema.optional(Schema.String),
  routeId: Schema.optional(Schema.String),
  address: Schema.optional(Schema.String),
  category: DeadLetterCategory,
  reason: Schema.String,
  errorCode: Schema.String,
  lastError: Schema.String,
  attempts: Schema.NonNegativeInt,
  failedAt: Schema.DateTimeUtcFromSelf
}) {}

/**
 * Selects entries: by route, by category, `since` (inclusive) and `before` (exclusive) on `failedAt`,
 * and at most `limit` (oldest first by `(failedAt, id)`).
 *
 * @since 0.1.0
 */
export interface DeadLetterFilter {
  readonly routeId?: string | undefined
  readonly category?: DeadLetterCategory | undefined
  readonly since?: DateTime.Utc | undefined
  readonly before?: DateTime.Utc | undefined
  readonly limit?: number | undefined
}

/**
 * The JSON view of an entry's facts for operators (`dlq list --json`, the dashboard): every field but the
 * payload and the headers, absent optionals as `null`, `failedAt` as ISO-8601. Callers add the payload or
 * header names as their exposure rules allow.
 *
 * @since 0.1.0
 */
export const toJson = (entry: DeadLetterEntry) => ({
  id: entry.id,
  recordId: entry.recordId,
  partitionKey: entry.partitionKey,
  envelopeId: entry.envelopeId,
  bindingId: entry.bindingId,
  orderingKey: entry.orderingKey ?? null,
  routeId: entry.routeId ?? null,
  address: entry.address ?? null,
  category: entry.category,
  reason: entry.reason,
  errorCode: entry.errorCode,
  lastError: entry.lastError,
  attempts: entry.attempts,
  failedAt: DateTime.formatIso(entry.failedAt)
})
