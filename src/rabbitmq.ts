/**
 * effect-outbox/rabbitmq: the RabbitMQ (AMQP 0-9-1) sink (needs npm `amqplib` installed).
 *
 * @since 0.1.0
 */

/** RabbitMQ sink: confirm channel, `message_id` = record id, returned messages permanent. @since 0.1.0 */
export * as RabbitMqSink from "./layers/sinks/RabbitMqSink.js"

/** Decoding RabbitMQ messages of typed topics into the value and its metadata (SPEC §11). @since 0.2.0 */
export * as RabbitMqMessage from "./layers/sinks/RabbitMqMessage.js"

/** A queue consumer feeding the inbox: ack after commit, requeue after a delay, reject (SPEC §12). @since 0.2.0 */
export * as RabbitMqConsumer from "./layers/sinks/RabbitMqConsumer.js"
