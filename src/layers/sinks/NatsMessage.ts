/**
 * Decoding a NATS (JetStream) message of a typed topic (SPEC §11): its headers — the record's headers plus
 * the wire metadata the NATS sink sets — and its bytes become the typed value and its `MessageMetadata`
 * through `Topic.decodeWire`. A foreign or malformed message is a `DecodeError`, never a defect. Takes any
 * message shape with `headers` (`MsgHdrs`) and `data`, so a `Msg` and a `JsMsg` both fit.
 *
 * @since 0.2.0
 */
import type * as Either from "effect/Either"
import type { MsgHdrs } from "nats"
import type { DecodeError } from "../../domain/OutboxError.js"
import * as Topic from "../../domain/Topic.js"

/**
 * A NATS message: its headers (absent when it has none) and its payload.
 *
 * @since 0.2.0
 */
export interface NatsMessageLike {
  readonly headers?: MsgHdrs | undefined
  readonly data: Uint8Array
}

/**
 * The headers of a NATS message as a plain map (the last value of each name).
 *
 * @since 0.2.0
 */
export const headersOf = (message: NatsMessageLike): Record<string, string> => {
  const headers: Record<string, string> = {}
  const h = message.headers
  if (h === undefined) return headers
  for (const [name, values] of h) {
    const last = values[values.length - 1]
    if (last !== undefined) headers[name] = last
  }
  return headers
}

/**
 * Decodes a NATS message of `topic` into the typed value and its metadata.
 *
 * @since 0.2.0
 */
export const decode = <A, I>(
  topic: Topic.Topic<A, I>,
  message: NatsMessageLike
): Either.Either<Topic.Decoded<A>, DecodeError> =>
  Topic.decodeWire(topic, { headers: headersOf(message), data: message.data })
