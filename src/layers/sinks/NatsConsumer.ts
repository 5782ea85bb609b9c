/**
 * A NATS JetStream durable consumer feeding the inbox (SPEC §12), on npm `nats`: it pulls messages of a
 * stream through a durable pull consumer, decodes each with `NatsMessage.decode`, processes it with
 * `Inbox.process` and settles it only after the inbox committed.
 *
 * - `Processed`, `Duplicate`, `Stale` → `ack` (after the commit; a crash before it leaves the message
 *   unacknowledged, so JetStream redelivers it after `ackWait` and the inbox answers `Duplicate` when the
 *   commit had happened).
 * - A retryable failure (a retryable `HandlerFailed`, a conflict, the store unavailable) → `nak` with
 *   `retryDelay` (default 5 s).
 * - A permanent failure (`DecodeError`, a permanent `HandlerFailed`) → `onReject` (record or dead-letter it),
 *   then `term`: JetStream never redelivers it.
 * - In flight is bounded by `prefetch` (default 1): the durable consumer is created (or updated) with
 *   `max_ack_pending = prefetch` and each pull asks for at most `prefetch` messages, processed one after the
 *   other in stream order. With `prefetch` 1 a key's messages are applied strictly in order even across
 *   retries and crashes (nothing is delivered while a message waits for its redelivery); a larger prefetch
 *   trades that for throughput (a later message of the key may pass a redelivered one, which is then `Stale`).
 * - The connection reconnects by itself; a failed connect, pull or consumer lookup is retried with
 *   exponential back-off (100 ms doubling up to 5 s). {@link run} runs until interrupted; {@link layer} runs
 *   it for the lifetime of a scope. Credentials in the URL are passed as client options, logged redacted.
 *
 * @since 0.2.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import { AckPolicy, connect, DeliverPolicy, type JsMsg, type NatsConnection } from "nats"
import { InvalidConfiguration } from "../../domain/OutboxError.js"
import type { InboxStore } from "../../services/InboxStore.js"
import * as BrokerUrl from "./BrokerUrl.js"
import * as NatsMessage from "./NatsMessage.js"
import * as Receiver from "./Receiver.js"

/**
 * Options of the NATS consumer.
 *
 * @since 0.2.0
 */
export interface NatsConsumerOptions<A, I, B, E, R> extends Receiver.ReceiverOptions<A, I, B, E, R> {
  /** The server URL(s), `nats://[user:pass@]host:port` (a lone username is a token). */
  readonly servers: string | ReadonlyArray<string>
  /** The JetStream stream to consume. */
  readonly stream: string
  /** The durable consumer's name (created when missing, its limits updated when present). */
  readonly durable: string
  /** Only messages of this subject (wildcards allowed) when the consumer is created. */
  readonly filterSubject?: string | undefined
  /** Most messages in flight (unacknowledged) at once (default 1). */
  readonly prefetch?: number | undefined
  /** How long JetStream waits for an ack before redelivering (default 30 seconds). */
  readonly ackWait?: Duration.DurationInput | undefined
  /** The delay of a `nak` for a retryable failure (default 5 seconds). */
  readonly retryDelay?: Duration.DurationInput | undefined
  /** How long one pull waits for messages (default 2 seconds). */
  readonly pullWait?: Duration.DurationInput | undefined
  /** The connection name shown by the server (default `effect-outbox-consumer`). */
  readonly name?: string | undefined
}

const reconnectSchedule = Schedule.exponential("100 millis").pipe(
  Schedule.union(Schedule.spaced("5 seconds")),
  Schedule.resetAfter("30 seconds")
)

const nanos = (duration: Duration.Duration): number => Math.round(Duration.toMillis(duration) * 1_000_000)

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/**
 * Checks the options and answers the consumer loop (which runs until interrupted; every failure in it is
 * logged and retried with back-off). Fails with `InvalidConfiguration` naming each problem.
 *
 * @since 0.2.0
 */
export const make = <A, I, B, E, R>(
  options: NatsConsumerOptions<A, I, B, E, R>
): Effect.Effect<Effect.Effect<never, never, R | InboxStore>, InvalidConfiguration> =>
  Effect.gen(function* () {
    const urls = typeof options.servers === "string" ? [options.servers] : options.servers
    const parsed = urls.map((url) => BrokerUrl.parse(url, ["nats:", "tls:"]))
    const problems = [
      ...Receiver.optionProblems({ consumer: options.consumer, retryDelay: options.retryDelay }),
      ...parsed.flatMap((each) => (Either.isLeft(each) ? [each.left] : []))
    ]
    if (urls.length === 0) problems.push("no NATS server URL given")
    if (options.stream.length === 0 || /[\s.*>]/.test(options.stream)) {
      problems.push("the stream name must be non-empty, without whitespace, '.', '*' or '>'")
    }
    if (options.durable.length === 0 || /[\s.*>]/.test(options.durable)) {
      problems.push("the durable name must be non-empty, without whitespace, '.', '*' or '>'")
    }
    const prefetch = options.prefetch ?? 1
    if (!Number.isSafeInteger(prefetch) || prefetch < 1) problems.push("prefetch must be a positive integer")
    if (problems.length > 0) return yield* new InvalidConfiguration({ component: "NatsConsumer", problems })

    const servers = parsed.flatMap((each) => (Either.isRight(each) ? [each.right] : []))
    const first = servers[0]
    const user = Option.flatMap(Option.fromNullable(first), (s) => s.username)
    const pass = Option.flatMap(Option.fromNullable(first), (s) => s.password)
    const redacted = servers.map((s) => s.redacted).join(",")
    const auth = Option.isSome(user)
      ? Option.isSome(pass)
        ? { user: user.value, pass: pass.value }
        : { token: user.value }
      : {}
    const ackWait = Duration.decode(options.ackWait ?? "30 seconds")
    const retryDelayMillis = Duration.toMillis(options.retryDelay ?? "5 seconds")
    const pullWaitMillis = Math.max(1_000, Duration.toMillis(options.pullWait ?? "2 seconds"))

    /** Processes one message and settles it; acknowledgements go out only after the inbox committed. */
    const handle = (message: JsMsg) =>
      Effect.gen(function* () {
        const disposition = yield* Receiver.receive(options, NatsMessage.decode(options.topic, message))
        // a settle on a closed connection fails the session, which reconnects: the message comes back
        return yield* Effect.try({
          try: () => {
            switch (disposition._tag) {
              case "Settle":
                return message.ack()
              case "Retry":
                return message.nak(retryDelayMillis)
              case "Reject":
                // no reason text: servers before 2.10 do not read `+TERM <reason>` (onReject has the reason)
                return message.term()
            }
          },
          catch: (error) => `cannot settle a message of ${options.durable}: ${messageOf(error)}`
        })
      })

    const session = Effect.scoped(
      Effect.gen(function* () {
        const nc: NatsConnection = yield* Effect.acquireRelease(
          Effect.tryPromise({
            try: () =>
              connect({
                servers: servers.map(
                  (s) => `${s.url.protocol}//${s.url.hostname}:${s.url.port === "" ? "4222" : s.url.port}`
                ),
                name: options.name ?? "effect-outbox-consumer",
                maxReconnectAttempts: -1,
                reconnectTimeWait: 250,
                noAsyncTraces: true,
                ...auth
              }),
            catch: (error) => `cannot connect to NATS ${redacted}: ${messageOf(error)}`
          }),
          (connection) => Effect.promise(() => connection.close().catch(() => undefined))
        )
        const jsm = yield* Effect.tryPromise({
          try: () => nc.jetstreamManager(),
          catch: (error) => `JetStream unavailable on ${redacted}: ${messageOf(error)}`
        })
        yield* Effect.tryPromise({
          try: async () => {
            const limits = { max_ack_pending: prefetch, ack_wait: nanos(ackWait) }
            const existing = await jsm.consumers.info(options.stream, options.durable).catch(() => undefined)
            if (existing === undefined) {
              await jsm.consumers.add(options.stream, {
                durable_name: options.durable,
                ack_policy: AckPolicy.Explicit,
                deliver_policy: DeliverPolicy.All,
                ...limits,
                ...(options.filterSubject !== undefined ? { filter_subject: options.filterSubject } : {})
              })
            } else if (
              existing.config.max_ack_pending !== limits.max_ack_pending ||
              existing.config.ack_wait !== limits.ack_wait
            ) {
              await jsm.consumers.update(options.stream, options.durable, limits)
            }
          },
          catch: (error) =>
            `cannot set up durable consumer ${options.durable} on ${options.stream}: ${messageOf(error)}`
        })
        const consumer = yield* Effect.tryPromise({
          try: () => nc.jetstream().consumers.get(options.stream, options.durable),
          catch: (error) => `cannot open durable consumer ${options.durable}: ${messageOf(error)}`
        })
        yield* Effect.logInfo("NATS consumer running").pipe(
          Effect.annotateLogs({ servers: redacted, stream: options.stream, durable: options.durable })
        )
        return yield* Effect.forever(
          Effect.gen(function* () {
            const batch = yield* Effect.tryPromise({
              try: () => consumer.fetch({ max_messages: prefetch, expires: pullWaitMillis }),
              catch: (error) => `pull from ${options.durable} failed: ${messageOf(error)}`
            })
            yield* Stream.fromAsyncIterable(
              batch,
              (error) => `pull from ${options.durable} failed: ${messageOf(error)}`
            ).pipe(
              Stream.runForEach((message) =>
                Effect.zipRight(
                  Effect.sync(() => message.working()),
                  handle(message)
                )
              ),
              Effect.ensuring(Effect.sync(() => void batch.stop()))
            )
          })
        )
      })
    )
    return session.pipe(
      Effect.catchAllDefect((defect) => Effect.fail(`NATS consumer: ${messageOf(defect)}`)),
      Effect.tapError((problem) => Effect.logWarning("NATS consumer failed; reconnecting after back-off", problem)),
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
  options: NatsConsumerOptions<A, I, B, E, R>
): Effect.Effect<never, InvalidConfiguration, R | InboxStore> => Effect.flatten(make(options))

/**
 * The consumer as a layer: runs in the background from the layer's start until its scope closes.
 *
 * @since 0.2.0
 */
export const layer = <A, I, B, E, R>(
  options: NatsConsumerOptions<A, I, B, E, R>
): Layer.Layer<never, InvalidConfiguration, R | InboxStore> =>
  Layer.scopedDiscard(Effect.flatMap(make(options), Effect.forkScoped))
