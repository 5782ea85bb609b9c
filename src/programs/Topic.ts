/**
 * The `Topic` namespace of the root entry (SPEC §11): declaring topics, the wire metadata and decoding
 * (`domain/Topic.ts`), publishing (`programs/Publish.ts`) and routing records to sinks by route
 * (`SinkRouter`).
 *
 * @since 0.2.0
 */
export * from "../domain/Topic.js"
export {
  /**
   * Publishes one value through the `OutboxStore` in context (joining the caller's transaction).
   *
   * @since 0.2.0
   */
  publish,
  /**
   * Publishes a batch of values of one topic through the `OutboxStore` in context.
   *
   * @since 0.2.0
   */
  publishAll,
  /**
   * Publishes one value through the `Enqueue` service (backpressure).
   *
   * @since 0.2.0
   */
  enqueue,
  /**
   * Publishes a batch of values through the `Enqueue` service (backpressure).
   *
   * @since 0.2.0
   */
  enqueueAll,
  /**
   * The records of a batch of values, for a backend's transactional form (DynamoDB `transactItems`).
   *
   * @since 0.2.0
   */
  toRecords,
  /**
   * What one publish did.
   *
   * @since 0.2.0
   */
  type Published,
  /**
   * The errors of `enqueue` / `enqueueAll`.
   *
   * @since 0.2.0
   */
  type EnqueueTopicError
} from "./Publish.js"
