/**
 * What the inbox needs to know about a delivered message (SPEC §12): its id (the outbox record id, or a
 * caller-given key for foreign messages), its partition, and — for ordered messages — its ordering key
 * and `seq`. {@link fromMetadata} takes the metadata a typed topic decodes from a delivery (SPEC §11)
 * structurally; {@link problem} is the validation every inbox backend applies through the shared core.
 *
 * @since 0.1.0
 */
import * as Option from "effect/Option"

/**
 * A delivered message as the inbox sees it.
 *
 * - `messageId`: deduplication key per consumer (R: a message id is processed at most once per consumer).
 * - `partitionKey`: the message's partition.
 * - `orderingKey` (optional, non-empty): messages sharing `(partitionKey, orderingKey)` are applied in
 *   `seq` order; one at or below the consumer's high-water mark of that key is `Stale`. An empty string
 *   means "no key", as on the producer side (SPEC §1).
 * - `seq` (required with an ordering key): the outbox's per-partition sequence number.
 *
 * @since 0.1.0
 */
export interface InboxMessage {
  readonly messageId: string
  readonly partitionKey: string
  readonly orderingKey?: string | undefined
  readonly seq?: number | undefined
}

/**
 * The delivery metadata shape of a typed topic (`Topic.decode`'s `MessageMetadata`, SPEC §11), as far as
 * the inbox reads it.
 *
 * @since 0.1.0
 */
export interface MetadataLike {
  readonly recordId: string
  readonly partitionKey: string
  readonly orderingKey: Option.Option<string>
  readonly seq: number
}

/**
 * Builds an {@link InboxMessage}, dropping an empty ordering key.
 *
 * @since 0.1.0
 */
export const make = (fields: InboxMessage): InboxMessage => ({
  messageId: fields.messageId,
  partitionKey: fields.partitionKey,
  ...(fields.orderingKey !== undefined && fields.orderingKey.length > 0 ? { orderingKey: fields.orderingKey } : {}),
  ...(fields.seq !== undefined ? { seq: fields.seq } : {})
})

/**
 * The inbox message of a delivery described by topic metadata: the record id is the message id.
 *
 * @since 0.1.0
 */
export const fromMetadata = (metadata: MetadataLike): InboxMessage =>
  make({
    messageId: metadata.recordId,
    partitionKey: metadata.partitionKey,
    orderingKey: Option.getOrUndefined(metadata.orderingKey),
    seq: metadata.seq
  })

/**
 * The ordering key of a message, `undefined` when it has none (absent or empty).
 *
 * @since 0.1.0
 */
export const orderingKeyOf = (message: InboxMessage): string | undefined =>
  message.orderingKey !== undefined && message.orderingKey.length > 0 ? message.orderingKey : undefined

/**
 * What is wrong with a message given as `unknown` (the argument name and the reason, never the value), or
 * `undefined` when it is a valid {@link InboxMessage}: non-empty string `messageId` and `partitionKey`, a
 * string `orderingKey` when present, a non-negative safe-integer `seq` when present, and a `seq` whenever
 * there is an ordering key.
 *
 * @since 0.1.0
 */
export const problem = (message: unknown): { readonly argument: string; readonly reason: string } | undefined => {
  if (typeof message !== "object" || message === null) return { argument: "message", reason: "must be an object" }
  const messageId: unknown = Reflect.get(message, "messageId")
  const partitionKey: unknown = Reflect.get(message, "partitionKey")
  const orderingKey: unknown = Reflect.get(message, "orderingKey")
  const seq: unknown = Reflect.get(message, "seq")
  if (typeof messageId !== "string" || messageId.length === 0) {
    return { argument: "messageId", reason: "must be a non-empty string" }
  }
  if (typeof partitionKey !== "string" || partitionKey.length === 0) {
    return { argument: "partitionKey", reason: "must be a non-empty string" }
  }
  if (orderingKey !== undefined && typeof orderingKey !== "string") {
    return { argument: "orderingKey", reason: "must be a string when present" }
  }
  if (seq !== undefined && (typeof seq !== "number" || !Number.isSafeInteger(seq) || seq < 0)) {
    return { argument: "seq", reason: "must be a non-negative safe integer when present" }
  }
  if (typeof orderingKey === "string" && orderingKey.length > 0 && seq === undefined) {
    return { argument: "seq", reason: "is required for a message with an ordering key" }
  }
  return undefined
}
