/**
 * The dead-letter table row shared by the SQL backends (SQLite, PostgreSQL, MySQL): its columns, its Schema
 * (each driver supplies how `failed_at` arrives) and its mapping to a `DeadLetterEntry` (SPEC §5).
 *
 * @since 0.1.0
 */
import * as DateTime from "effect/DateTime"
import * as Schema from "effect/Schema"
import { DeadLetterCategory, DeadLetterEntry } from "../../domain/DeadLetterEntry.js"
import { Headers } from "../../domain/OutboxRecord.js"

/**
 * The selected columns, in row order.
 *
 * @since 0.1.0
 */
export const columns = `id, record_id, partition_key, envelope_id, binding_id, payload, headers, ordering_key, route_id,
  address, category, reason, error_code, last_error, attempts, failed_at`

/**
 * The row Schema, given how the driver returns `failed_at` (epoch milliseconds).
 *
 * @since 0.1.0
 */
export const row = <I, R>(failedAt: Schema.Schema<number, I, R>) =>
  Schema.Struct({
    id: Schema.String,
    record_id: Schema.String,
    partition_key: Schema.String,
    envelope_id: Schema.String,
    binding_id: Schema.String,
    payload: Schema.Uint8ArrayFromSelf,
    headers: Schema.parseJson(Headers),
    ordering_key: Schema.NullOr(Schema.String),
    route_id: Schema.NullOr(Schema.String),
    address: Schema.NullOr(Schema.String),
    category: DeadLetterCategory,
    reason: Schema.String,
    error_code: Schema.String,
    last_error: Schema.String,
    attempts: Schema.NonNegativeInt,
    failed_at: failedAt
  })

/**
 * A decoded row.
 *
 * @since 0.1.0
 */
export type Row = Schema.Schema.Type<ReturnType<typeof row<number, never>>>

/**
 * A row as an entry; the payload is copied out of the driver's buffer into a plain `Uint8Array`.
 *
 * @since 0.1.0
 */
export const toEntry = (r: Row): DeadLetterEntry =>
  new DeadLetterEntry(
    {
      id: r.id,
      recordId: r.record_id,
      partitionKey: r.partition_key,
      envelopeId: r.envelope_id,
      bindingId: r.binding_id,
      payload: Uint8Array.from(r.payload),
      headers: r.headers,
      ...(r.ordering_key === null ? {} : { orderingKey: r.ordering_key }),
      ...(r.route_id === null ? {} : { routeId: r.route_id }),
      ...(r.address === null ? {} : { address: r.address }),
      category: r.category,
      reason: r.reason,
      errorCode: r.error_code,
      lastError: r.last_error,
      attempts: r.attempts,
      failedAt: DateTime.unsafeMake(r.failed_at)
    },
    { disableValidation: true }
  )
