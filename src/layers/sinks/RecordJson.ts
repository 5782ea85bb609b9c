/**
 * The JSON form of a delivered record, shared by every sink that serialises records (stdout lines,
 * webhook bodies). The payload is base64; instants are ISO-8601 strings. The form is documented as a JSON
 * Schema shipped with the package (`schemas/webhook-body.schema.json`); fields are only ever added.
 *
 * @since 0.1.0
 */
import * as DateTime from "effect/DateTime"
import * as Option from "effect/Option"
import type { OutboxRecord } from "../../domain/OutboxRecord.js"
import { TopicHeader } from "../../domain/Topic.js"

/**
 * The JSON form of a record.
 *
 * @since 0.1.0
 */
export interface RecordJson {
  readonly id: string
  readonly partitionKey: string
  readonly envelopeId: string
  readonly bindingId: string
  readonly routeId: string
  readonly address: string
  readonly orderingKey: string | null
  readonly headers: Readonly<Record<string, string>>
  readonly payload: string
  readonly createdAt: string
  readonly expiresAt: string | null
  readonly seq: number
  /** How many times the record was claimed, this delivery included (1 on a first delivery). */
  readonly replayCount: number
  /** The topic of a record published through a typed topic (its `Outbox-Topic` header), else null. */
  readonly topic: string | null
}

/**
 * Converts a record to its {@link RecordJson} form.
 *
 * @since 0.1.0
 */
export const toJson = (record: OutboxRecord): RecordJson => ({
  id: record.id,
  partitionKey: record.partitionKey,
  envelopeId: record.envelopeId,
  bindingId: record.bindingId,
  routeId: record.routeId,
  address: record.address,
  orderingKey: Option.getOrNull(record.orderingKey),
  headers: record.headers,
  payload: Buffer.from(record.payload).toString("base64"),
  createdAt: DateTime.formatIso(record.createdAt),
  expiresAt: Option.getOrNull(Option.map(record.expiresAt, DateTime.formatIso)),
  seq: record.seq,
  replayCount: record.replayCount,
  topic: record.headers[TopicHeader] ?? null
})

/**
 * The record's JSON text (one line, no trailing newline).
 *
 * @since 0.1.0
 */
export const encode = (record: OutboxRecord): string => JSON.stringify(toJson(record))
