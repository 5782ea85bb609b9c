/**
 * effect-outbox/nats: the NATS JetStream sink (needs npm `nats` installed).
 *
 * @since 0.1.0
 */

/** NATS JetStream sink: `Nats-Msg-Id` = record id, success on the stream's ack. @since 0.1.0 */
export * as NatsSink from "./layers/sinks/NatsSink.js"
