/**
 * The shared core of the receivers (SPEC §12): a delivery of a typed topic (webhook request, NATS or
 * RabbitMQ message) is decoded with `Topic.decode`, processed through `Inbox.process` for one consumer, and
 * turned into an `Inbox.Disposition` — `Settle` (acknowledge), `Retry` (hand it back for a later redelivery)
 * or `Reject` (refuse it for good) — which each transport maps to its own answer (2xx / 503 / 4xx, `ack` /
 * `nak` / `term`, `ack` / `nack` requeue / `reject`). A decode failure is permanent and never reaches the
 * handler; a rejected delivery is passed to `onReject` (record it, dead-letter it) before the transport
 * refuses it. Nothing is acknowledged before the inbox commit.
 *
 * @since 0.2.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { DecodeError } from "../../domain/OutboxError.js"
import * as InboxMessage from "../../domain/InboxMessage.js"
import type * as Topic from "../../domain/Topic.js"
import * as Inbox from "../../programs/Inbox.js"
import type { InboxStore } from "../../services/InboxStore.js"
import * as Traced from "../../services/Traced.js"

/**
 * A delivery refused for good: the consumer, the reason (never the payload), and — when the message
 * decoded — its metadata.
 *
 * @since 0.2.0
 */
export interface Rejection {
  readonly consumer: string
  readonly topic: string
  readonly reason: string
  /** The message id when the message named one (absent when it could not be read at all). */
  readonly messageId: string | undefined
  /** The decode failure, when decoding was what failed. */
  readonly decodeError: DecodeError | undefined
}

/**
 * What every receiver is given: the consumer name (the inbox's dedupe scope), the topic its deliveries
 * belong to and the handler. The handler's `SqlClient` writes join the inbox's transaction (SPEC §12).
 *
 * @since 0.2.0
 */
export interface ReceiverOptions<A, I, B, E, R> {
  /** The consumer name: message ids are processed once per consumer. Non-empty. */
  readonly consumer: string
  /** The topic of the deliveries (`Outbox-Topic`); a message of another topic is a permanent `DecodeError`. */
  readonly topic: Topic.Topic<A, I>
  /** Applies one message; a failure is retryable unless marked permanent (`Inbox.permanent`). */
  readonly handler: (value: A, metadata: Topic.MessageMetadata) => Effect.Effect<B, E, R>
  /**
   * Called for a delivery refused for good, before the transport refuses it (default: a WARN log). Record it
   * or dead-letter it here; when it fails, the delivery is handed back for a retry instead.
   */
  readonly onReject?: ((rejection: Rejection) => Effect.Effect<void, unknown, R>) | undefined
}

/**
 * The default handling of a rejected delivery: a WARN log naming the consumer, the topic, the message id
 * and the reason.
 *
 * @since 0.2.0
 */
export const logRejection = (rejection: Rejection): Effect.Effect<void> =>
  Effect.logWarning("delivery rejected").pipe(
    Effect.annotateLogs({
      consumer: rejection.consumer,
      topic: rejection.topic,
      messageId: rejection.messageId ?? "(unknown)",
      reason: rejection.reason
    })
  )

/**
 * The problems of the common options (empty when valid).
 *
 * @since 0.2.0
 */
export const optionProblems = (options: {
  readonly consumer: string
  readonly retryDelay?: Duration.DurationInput | undefined
}): ReadonlyArray<string> => {
  const problems: Array<string> = []
  if (typeof options.consumer !== "string" || options.consumer.length === 0) {
    problems.push("the consumer name must be a non-empty string")
  }
  if (options.retryDelay !== undefined) {
    const delay = Duration.decodeUnknown(options.retryDelay)
    if (delay._tag === "None" || !Duration.isFinite(delay.value)) problems.push("retryDelay must be a finite duration")
  }
  return problems
}

/**
 * Processes one decoded (or undecodable) delivery and answers its disposition (one span per delivery,
 * `Receiver.receive`). Never fails: every failure of processing is a `Retry` or a `Reject`; a rejection has
 * gone through `onReject` already (a failing `onReject` turns it into a `Retry`).
 *
 * @since 0.2.0
 */
export const receive = <A, I, B, E, R>(
  options: ReceiverOptions<A, I, B, E, R>,
  decoded: Either.Either<Topic.Decoded<A>, DecodeError>
): Effect.Effect<Inbox.Disposition, never, R | InboxStore> =>
  Effect.gen(function* () {
    const onReject = options.onReject ?? logRejection
    const reject = (rejection: Rejection): Effect.Effect<Inbox.Disposition, never, R> =>
      onReject(rejection).pipe(
        Effect.as<Inbox.Disposition>({ _tag: "Reject", reason: rejection.reason }),
        Effect.catchAllCause((cause) =>
          Effect.logWarning("onReject failed; the delivery is handed back for a retry", cause).pipe(
            Effect.as<Inbox.Disposition>({ _tag: "Retry", reason: "onReject failed" })
          )
        )
      )
    if (Either.isLeft(decoded)) {
      const error = decoded.left
      return yield* reject({
        consumer: options.consumer,
        topic: options.topic.name,
        reason: error.reason,
        messageId: error.recordId,
        decodeError: error
      })
    }
    const { metadata, value } = decoded.right
    const exit = yield* Effect.exit(
      Inbox.process(options.consumer, InboxMessage.fromMetadata(metadata), options.handler(value, metadata))
    )
    const disposition = Inbox.disposition(exit)
    if (disposition._tag !== "Reject") return disposition
    return yield* reject({
      consumer: options.consumer,
      topic: options.topic.name,
      reason: disposition.reason,
      messageId: metadata.recordId,
      decodeError: undefined
    })
  }).pipe(Traced.span("Receiver.receive", { consumer: options.consumer, topic: options.topic.name }))
