/**
 * The wire metadata every sink carries with a record (SPEC §11), so a consumer can deduplicate and order
 * without the store: `Outbox-Record-Id`, `Outbox-Topic` (when the record's headers name one),
 * `Outbox-Partition`, `Outbox-Ordering-Key` (when set), `Outbox-Seq` and `Outbox-Created-At` (ISO-8601).
 * {@link fromRecord} builds them (after the record's own headers, which they override); {@link parse}
 * reads them back from a delivered message's headers, case-insensitively, failing with a `DecodeError` that
 * names the missing or malformed header.
 *
 * @since 0.1.0
 */
import * as DateTime from "effect/DateTime"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { DecodeError } from "./OutboxError.js"
import type { OutboxRecord } from "./OutboxRecord.js"

/**
 * Header names.
 *
 * @since 0.1.0
 */
export const RecordId = "Outbox-Record-Id"
/** @since 0.1.0 */
export const Topic = "Outbox-Topic"
/** @since 0.1.0 */
export const Partition = "Outbox-Partition"
/** @since 0.1.0 */
export const OrderingKey = "Outbox-Ordering-Key"
/** @since 0.1.0 */
export const Seq = "Outbox-Seq"
/** @since 0.1.0 */
export const CreatedAt = "Outbox-Created-At"

/**
 * The wire metadata of a record alone (`Outbox-Topic` only when the record's headers carry it).
 *
 * @since 0.1.0
 */
export const metadata = (record: OutboxRecord): Record<string, string> => {
  const headers: Record<string, string> = {
    [RecordId]: record.id,
    [Partition]: record.partitionKey,
    [Seq]: String(record.seq),
    [CreatedAt]: DateTime.formatIso(record.createdAt)
  }
  const topic = lookup(record.headers, Topic)
  if (topic !== undefined && topic.length > 0) headers[Topic] = topic
  if (Option.isSome(record.orderingKey)) headers[OrderingKey] = record.orderingKey.value
  return headers
}

/**
 * The record's headers plus the wire metadata (which overrides record headers of the same names).
 *
 * @since 0.1.0
 */
export const fromRecord = (record: OutboxRecord): Record<string, string> => ({
  ...record.headers,
  ...metadata(record)
})

/**
 * What a consumer learns from a delivered message's metadata (the shape of a typed topic's
 * `MessageMetadata`, SPEC §11).
 *
 * @since 0.1.0
 */
export interface WireMetadata {
  readonly recordId: string
  readonly topic: Option.Option<string>
  readonly partitionKey: string
  readonly orderingKey: Option.Option<string>
  readonly seq: number
  readonly createdAt: DateTime.Utc
  /** Every header of the delivery, as received. */
  readonly headers: Readonly<Record<string, string>>
}

/**
 * A delivered message: its metadata and its payload bytes.
 *
 * @since 0.1.0
 */
export interface Delivery extends WireMetadata {
  readonly payload: Uint8Array
}

const lookup = (headers: Readonly<Record<string, string>>, name: string): string | undefined => {
  const lower = name.toLowerCase()
  for (const [key, value] of Object.entries(headers)) if (key.toLowerCase() === lower) return value
  return undefined
}

const missing = (name: string) => new DecodeError({ reason: `header ${name} is missing or empty` })

/**
 * Reads the wire metadata from a delivered message's headers (names matched case-insensitively).
 *
 * @since 0.1.0
 */
export const parse = (headers: Readonly<Record<string, string>>): Either.Either<WireMetadata, DecodeError> => {
  const recordId = lookup(headers, RecordId)
  if (recordId === undefined || recordId.length === 0) return Either.left(missing(RecordId))
  const partitionKey = lookup(headers, Partition)
  if (partitionKey === undefined || partitionKey.length === 0) return Either.left(missing(Partition))
  const seqText = lookup(headers, Seq)
  if (seqText === undefined || !/^[0-9]{1,16}$/.test(seqText) || !Number.isSafeInteger(Number(seqText))) {
    return Either.left(new DecodeError({ reason: `header ${Seq} must be a non-negative integer` }))
  }
  const createdText = lookup(headers, CreatedAt)
  const createdAt = createdText === undefined ? Option.none() : DateTime.make(createdText)
  if (Option.isNone(createdAt)) {
    return Either.left(new DecodeError({ reason: `header ${CreatedAt} must be an ISO-8601 instant` }))
  }
  const orderingKey = lookup(headers, OrderingKey)
  const topic = lookup(headers, Topic)
  return Either.right({
    recordId,
    topic: topic === undefined || topic.length === 0 ? Option.none() : Option.some(topic),
    partitionKey,
    orderingKey: orderingKey === undefined || orderingKey.length === 0 ? Option.none() : Option.some(orderingKey),
    seq: Number(seqText),
    createdAt: DateTime.toUtc(createdAt.value),
    headers
  })
}
