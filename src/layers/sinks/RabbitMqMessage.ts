/**
 * Decoding a RabbitMQ (AMQP 0-9-1) message of a typed topic (SPEC §11): its header table — the record's
 * headers plus the wire metadata the RabbitMQ sink sets — and its content become the typed value and its
 * `MessageMetadata` through `Topic.decodeWire`. Header values that AMQP delivers as buffers are read as
 * UTF-8; other non-string values are ignored. A foreign or malformed message is a `DecodeError`, never a
 * defect. Takes any message shape with `content` and `properties.headers`, so amqplib's `ConsumeMessage`
 * and `GetMessage` both fit.
 *
 * @since 0.2.0
 */
import type * as Either from "effect/Either"
import type { DecodeError } from "../../domain/OutboxError.js"
import * as Topic from "../../domain/Topic.js"

/**
 * A RabbitMQ message: its content and its header table.
 *
 * @since 0.2.0
 */
export interface RabbitMqMessageLike {
  readonly content: Uint8Array
  readonly properties: { readonly headers?: Readonly<Record<string, unknown>> | undefined }
}

/**
 * The string headers of a RabbitMQ message.
 *
 * @since 0.2.0
 */
export const headersOf = (message: RabbitMqMessageLike): Record<string, string> => {
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(message.properties.headers ?? {})) {
    if (typeof value === "string") headers[name] = value
    else if (value instanceof Uint8Array) headers[name] = Buffer.from(value).toString("utf8")
  }
  return headers
}

/**
 * Decodes a RabbitMQ message of `topic` into the typed value and its metadata.
 *
 * @since 0.2.0
 */
export const decode = <A, I>(
  topic: Topic.Topic<A, I>,
  message: RabbitMqMessageLike
): Either.Either<Topic.Decoded<A>, DecodeError> =>
  Topic.decodeWire(topic, { headers: headersOf(message), data: message.content })
