/**
 * effect-outbox/nats: the NATS JetStream sink (needs npm `nats` installed).
 *
 * @since 0.1.0
 */

/** NATS JetStream sink: `Nats-Msg-Id` = record id, success on the stream's ack. @since 0.1.0 */
export * as NatsSink from "./layers/sinks/NatsSink.js"

/** Decoding NATS messages of typed topics into the value and its metadata (SPEC §11). @since 0.2.0 */
export * as NatsMessage from "./layers/sinks/NatsMessage.js"

/** A JetStream durable consumer feeding the inbox: ack after commit, nak with delay, term (SPEC §12). @since 0.2.0 */
export * as NatsConsumer from "./layers/sinks/NatsConsumer.js"
