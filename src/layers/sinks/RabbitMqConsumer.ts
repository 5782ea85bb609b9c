/**
 * A RabbitMQ (AMQP 0-9-1) consumer feeding the inbox (SPEC §12), on npm `amqplib`: it consumes a queue with
 * manual acknowledgements, decodes each message with `RabbitMqMessage.decode`, processes it with
 * `Inbox.process` and settles it only after the inbox committed.
 *
 * - `Processed`, `Duplicate`, `Stale` → `ack` (after the commit; a crash before it leaves the message
 *   unacknowledged, so the broker requeues it when the connection dies and the inbox answers `Duplicate`
 *   when the commit had happened).
 * - A retryable failure → the message is held for `retryDelay` (default 5 s), then `nack` with requeue: the
 *   broker puts it back at its place in the queue.
 * - A permanent failure (`DecodeError`, a permanent `HandlerFailed`) → `onReject` (record it), then `nack`
 *   without requeue (the queue's dead-letter exchange receives it when one is configured).
 * - In flight is bounded by `prefetch` (default 1, the channel's `basic.qos`); messages are processed one after
 *   the other in delivery order. With `prefetch` 1 a key's messages are applied strictly in order even
 *   across retries and crashes; a larger prefetch trades that for throughput (a later message of the key may
 *   pass a requeued one, which is then `Stale`).
 * - A lost connection or channel, a failed connect or a missing queue is retried with exponential back-off
 *   (100 ms doubling up to 5 s). {@link run} runs until interrupted; {@link layer} runs it for the lifetime of
 *   a scope. Credentials in the URL are passed as client options, logged redacted.
 *
 * @since 0.2.0
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import { connect, type ConsumeMessage } from "amqplib"
import { InvalidConfiguration } from "../../domain/OutboxError.js"
import type { InboxStore } from "../../services/InboxStore.js"
import * as BrokerUrl from "./BrokerUrl.js"
import * as RabbitMqMessage from "./RabbitMqMessage.js"
import * as Receiver from "./Receiver.js"

/**
 * Options of the RabbitMQ consumer.
 *
 * @since 0.2.0
 */
export interface RabbitMqConsumerOptions<A, I, B, E, R> extends Receiver.ReceiverOptions<A, I, B, E, R> {
  /** The broker URL, `amqp[s]://[user:pass@]host[:port][/vhost]`. */
  readonly url: string
  /** The queue to consume (it must exist: the topology is the application's). */
  readonly queue: string
  /** Most unacknowledged messages at once (default 1). */
  readonly prefetch?: number | undefined
  /** How long a message is held before it is requeued after a retryable failure (default 5 seconds). */
  readonly retryDelay?: Duration.DurationInput | undefined
}

const reconnectSchedule = Schedule.exponential("100 millis").pipe(
  Schedule.union(Schedule.spaced("5 seconds")),
  Schedule.resetAfter("30 seconds")
)

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/**
 * Checks the options and answers the consumer loop (which runs until interrupted; every failure in it is
 * logged and retried with back-off). Fails with `InvalidConfiguration` naming each problem.
 *
 * @since 0.2.0
 */
export const make = <A, I, B, E, R>(
  options: RabbitMqConsumerOptions<A, I, B, E, R>
): Effect.Effect<Effect.Effect<never, never, R | InboxStore>, InvalidConfiguration> =>
  Effect.gen(function* () {
    const parsed = BrokerUrl.parse(options.url, ["amqp:", "amqps:"])
    const problems = [...Receiver.optionProblems({ consumer: options.consumer, retryDelay: options.retryDelay })]
    if (Either.isLeft(parsed)) problems.push(parsed.left)
    if (typeof options.queue !== "string" || options.queue.length === 0) problems.push("the queue name is empty")
    const prefetch = options.prefetch ?? 1
    if (!Number.isSafeInteger(prefetch) || prefetch < 1 || prefetch > 65_535) {
      problems.push("prefetch must be an integer from 1 to 65535")
    }
    if (problems.length > 0 || Either.isLeft(parsed)) {
      return yield* new InvalidConfiguration({ component: "RabbitMqConsumer", problems })
    }
    const broker = parsed.right
    const retryDelay = Duration.decode(options.retryDelay ?? "5 seconds")
    const connectOptions = {
      protocol: broker.url.protocol.slice(0, -1),
      hostname: broker.url.hostname,
      port: broker.url.port === "" ? (broker.url.protocol === "amqps:" ? 5671 : 5672) : Number(broker.url.port),
      username: Option.getOrElse(broker.username, () => "guest"),
      password: Option.getOrElse(broker.password, () => "guest"),
      vhost: broker.url.pathname.length > 1 ? decodeURIComponent(broker.url.pathname.slice(1)) : "/",
      heartbeat: 10
    }

    const session = Effect.scoped(
      Effect.gen(function* () {
        const model = yield* Effect.acquireRelease(
          Effect.tryPromise({
            try: () => connect(connectOptions),
            catch: (error) => `cannot connect to RabbitMQ ${broker.redacted}: ${messageOf(error)}`
          }),
          (connection) => Effect.promise(() => connection.close().catch(() => undefined))
        )
        const lost = yield* Deferred.make<never, string>()
        const loseWith = (reason: string) => () => Deferred.unsafeDone(lost, Exit.fail(reason))
        model.on("error", () => undefined)
        model.on("close", loseWith(`RabbitMQ ${broker.redacted}: connection closed`))
        const channel = yield* Effect.tryPromise({
          try: () => model.createChannel(),
          catch: (error) => `cannot open a channel: ${messageOf(error)}`
        })
        channel.on("error", () => undefined)
        channel.on("close", loseWith(`RabbitMQ ${broker.redacted}: channel closed`))
        yield* Effect.tryPromise({
          try: async () => {
            await channel.checkQueue(options.queue)
            await channel.prefetch(prefetch)
          },
          catch: (error) => `queue ${options.queue} is not available: ${messageOf(error)}`
        })
        const inbound = yield* Queue.unbounded<ConsumeMessage>()
        yield* Effect.tryPromise({
          try: () =>
            channel.consume(
              options.queue,
              (message) => {
                if (message === null) loseWith(`the broker cancelled the consumer of ${options.queue}`)()
                else Queue.unsafeOffer(inbound, message)
              },
              { noAck: false }
            ),
          catch: (error) => `cannot consume ${options.queue}: ${messageOf(error)}`
        })
        yield* Effect.logInfo("RabbitMQ consumer running").pipe(
          Effect.annotateLogs({ url: broker.redacted, queue: options.queue })
        )
        const settle = (what: string, act: () => void) =>
          Effect.try({ try: act, catch: (error) => `cannot ${what} on ${options.queue}: ${messageOf(error)}` })

        /** Processes one message and settles it; acknowledgements go out only after the inbox committed. */
        const handle = (message: ConsumeMessage) =>
          Effect.gen(function* () {
            const disposition = yield* Receiver.receive(options, RabbitMqMessage.decode(options.topic, message))
            switch (disposition._tag) {
              case "Settle":
                return yield* settle("ack", () => channel.ack(message))
              case "Retry":
                yield* Effect.sleep(retryDelay)
                return yield* settle("nack", () => channel.nack(message, false, true))
              case "Reject":
                return yield* settle("reject", () => channel.nack(message, false, false))
            }
          })

        return yield* Effect.raceFirst(
          Deferred.await(lost),
          Effect.forever(Effect.flatMap(Queue.take(inbound), handle))
        )
      })
    )
    return session.pipe(
      Effect.catchAllDefect((defect) => Effect.fail(`RabbitMQ consumer: ${messageOf(defect)}`)),
      Effect.tapError((problem) => Effect.logWarning("RabbitMQ consumer failed; reconnecting after back-off", problem)),
      Effect.retry(reconnectSchedule),
      Effect.orDie
    )
  })

/**
 * Runs the consumer until interrupted; fails only with `InvalidConfiguration` (checked before connecting).
 *
 * @since 0.2.0
 */
export const run = <A, I, B, E, R>(
  options: RabbitMqConsumerOptions<A, I, B, E, R>
): Effect.Effect<never, InvalidConfiguration, R | InboxStore> => Effect.flatten(make(options))

/**
 * The consumer as a layer: runs in the background from the layer's start until its scope closes.
 *
 * @since 0.2.0
 */
export const layer = <A, I, B, E, R>(
  options: RabbitMqConsumerOptions<A, I, B, E, R>
): Layer.Layer<never, InvalidConfiguration, R | InboxStore> =>
  Layer.scopedDiscard(Effect.flatMap(make(options), Effect.forkScoped))
