/**
 * A RabbitMQ sink (AMQP 0-9-1) on npm `amqplib` (SPEC §10): each record's payload is published on a
 * confirm channel, persistent, `mandatory`, with `message_id` = record id (receivers deduplicate on it:
 * delivery is at least once); a send succeeds only on the broker's confirm.
 *
 * - Exchange and routing key: the record's `address` as `exchange/routingKey` or a bare routing key on
 *   the configured `exchange` (default: the default exchange `""`); without an address the configured
 *   `routingKey`. Routing keys may hold `{partitionKey}` and `{routeId}`.
 * - Records choose exchanges only inside what was configured: an address naming an exchange
 *   (`exchange/routingKey`) must name the configured `exchange` or one of `allowedExchanges`; anything
 *   else, the default exchange (`/queue`) and `amq.*` included, is permanent `exchange-not-allowed` and
 *   nothing is published.
 * - Headers: the record's headers plus the wire metadata of SPEC §11 (`Outbox-Record-Id`, `Outbox-Topic`,
 *   `Outbox-Partition`, `Outbox-Ordering-Key`, `Outbox-Seq`, `Outbox-Created-At`; `Topic.wireHeaders`) and
 *   `Outbox-Envelope-Id`. `RabbitMqMessage.decode` reads a message of a typed topic back.
 * - Permanent: a returned (unroutable) message, a missing exchange (404), access refused (403).
 *   Transient: a nack, a closed channel or connection, no confirm within `timeout` (found by a sweep every
 *   quarter of it, so the wait may run up to a quarter over), a failed connect.
 * - One connection per layer, opened on first use and re-opened after a loss with exponential back-off
 *   (100 ms doubling up to 5 s; sends during the back-off fail at once as transient). Credentials in the
 *   URL are passed to the client as options and appear in logs only redacted.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { type ChannelModel, type ConfirmChannel, connect, type Message } from "amqplib"
import { InvalidConfiguration } from "../../domain/OutboxError.js"
import type { OutboxRecord } from "../../domain/OutboxRecord.js"
import * as Topic from "../../domain/Topic.js"
import { fromRegister, type Register, SendError, Sink } from "../../services/Sink.js"
import * as AwaitingSends from "./AwaitingSends.js"
import * as BrokerUrl from "./BrokerUrl.js"

/**
 * Options of the RabbitMQ sink.
 *
 * @since 0.1.0
 */
export interface RabbitMqSinkOptions {
  /** The broker URL, `amqp[s]://[user:pass@]host[:port][/vhost]`. */
  readonly url: string
  /** The exchange for addresses without one (default `""`, the default exchange). */
  readonly exchange?: string | undefined
  /** The routing key when a record has no `address`; may hold `{partitionKey}` and `{routeId}`. */
  readonly routingKey?: string | undefined
  /** Time to wait for the broker's confirm (default 5 seconds); a timeout is transient. */
  readonly timeout?: Duration.DurationInput | undefined
  /**
   * Exchanges a record's address may name as `exchange/routingKey`, besides the configured `exchange`
   * (default none). The default exchange is `""`; `amq.*` exchanges are allowed only when listed.
   */
  readonly allowedExchanges?: ReadonlyArray<string> | undefined
}

/**
 * Where a record goes: `exchange/routingKey`, or a bare routing key on `exchange`; `undefined` when
 * there is no routing key.
 *
 * @since 0.1.0
 */
export const targetFor = (
  record: OutboxRecord,
  exchange: string,
  routingKey: string | undefined
): { readonly exchange: string; readonly routingKey: string } | undefined => {
  const expand = (template: string) =>
    template.replaceAll("{partitionKey}", record.partitionKey).replaceAll("{routeId}", record.routeId)
  if (record.address.length === 0) {
    return routingKey === undefined ? undefined : { exchange, routingKey: expand(routingKey) }
  }
  const slash = record.address.indexOf("/")
  return slash < 0
    ? { exchange, routingKey: expand(record.address) }
    : { exchange: record.address.slice(0, slash), routingKey: expand(record.address.slice(slash + 1)) }
}

interface Live {
  readonly model: ChannelModel
  readonly channel: ConfirmChannel
  /** Set when the broker closed the channel with an error (e.g. 404 no exchange). */
  closeError: { readonly code: number | undefined; readonly message: string } | undefined
  closed: boolean
}

const codeOf = (error: unknown): number | undefined =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "number"
    ? error.code
    : undefined

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/** amqplib's connection options for a parsed URL (guest/guest and vhost `/` when the URL names none). */
const connectOptionsOf = (broker: BrokerUrl.BrokerUrl) => ({
  protocol: broker.url.protocol.slice(0, -1),
  hostname: broker.url.hostname,
  port: broker.url.port === "" ? (broker.url.protocol === "amqps:" ? 5671 : 5672) : Number(broker.url.port),
  username: Option.getOrElse(broker.username, () => "guest"),
  password: Option.getOrElse(broker.password, () => "guest"),
  vhost: broker.url.pathname.length > 1 ? decodeURIComponent(broker.url.pathname.slice(1)) : "/",
  heartbeat: 10
})

const transientError = (broker: BrokerUrl.BrokerUrl, code: string, message: string): SendError =>
  new SendError({ retryable: true, code, message: `RabbitMQ ${broker.redacted}: ${message}` })

/** The broker returned a mandatory message: no queue is bound for its routing key (permanent). */
const unroutable = (target: { readonly exchange: string; readonly routingKey: string }): SendError =>
  new SendError({
    retryable: false,
    code: "unroutable",
    message: `no queue is bound for routing key ${target.routingKey} on exchange ${JSON.stringify(target.exchange)}`
  })

/** A publish failed on a closed channel: 404 (no exchange) and 403 (access refused) are permanent. */
const closedError = (broker: BrokerUrl.BrokerUrl, live: Live, error: unknown): SendError => {
  const close = live.closeError
  if (close?.code === 404) {
    return new SendError({ retryable: false, code: "not-found", message: `RabbitMQ: ${close.message}` })
  }
  if (close?.code === 403) {
    return new SendError({ retryable: false, code: "access-refused", message: `RabbitMQ: ${close.message}` })
  }
  const nack = messageOf(error).toLowerCase().includes("nack")
  return transientError(broker, nack ? "nack" : "channel-closed", close?.message ?? messageOf(error))
}

/**
 * Builds the sink; the connection is closed with the scope. Fails with `InvalidConfiguration` for an
 * invalid URL.
 *
 * @since 0.1.0
 */
export const make = (options: RabbitMqSinkOptions): Effect.Effect<Sink["Type"], InvalidConfiguration, Scope.Scope> =>
  Effect.gen(function* () {
    const parsed = BrokerUrl.parse(options.url, ["amqp:", "amqps:"])
    if (Either.isLeft(parsed)) {
      return yield* new InvalidConfiguration({ component: "RabbitMqSink", problems: [parsed.left] })
    }
    const broker = parsed.right
    const exchange = options.exchange ?? ""
    const timeout = Duration.decode(options.timeout ?? "5 seconds")
    const connectOptions = connectOptionsOf(broker)
    const returned = new Set<string>()
    const state: { live: Live | undefined; failures: number; retryAt: number } = {
      live: undefined,
      failures: 0,
      retryAt: 0
    }

    const drop = (live: Live): void => {
      live.closed = true
      if (state.live === live) state.live = undefined
      live.model.close().catch(() => undefined)
    }

    const open = async (): Promise<Live> => {
      const model = await connect(connectOptions)
      model.on("error", () => undefined)
      try {
        const channel = await model.createConfirmChannel()
        const live: Live = { model, channel, closeError: undefined, closed: false }
        model.on("close", () => drop(live))
        channel.on("error", (error: unknown) => {
          live.closeError = { code: codeOf(error), message: messageOf(error) }
        })
        channel.on("close", () => drop(live))
        channel.on("return", (message: Message) => {
          const id: unknown = message.properties.messageId
          if (typeof id === "string") returned.add(id)
        })
        return live
      } catch (error) {
        model.close().catch(() => undefined)
        throw error
      }
    }

    const transient = (code: string, message: string) => transientError(broker, code, message)

    const reconnect: Effect.Effect<Live, SendError> = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      if (now < state.retryAt) return yield* transient("reconnecting", "connection lost; reconnecting after back-off")
      return yield* Effect.tryPromise({ try: open, catch: (error) => error }).pipe(
        Effect.tap((live) =>
          Effect.sync(() => {
            state.live = live
            state.failures = 0
            state.retryAt = 0
          })
        ),
        Effect.tapError(() =>
          Effect.sync(() => {
            state.failures += 1
            state.retryAt = now + Math.min(5_000, 100 * 2 ** (state.failures - 1))
          })
        ),
        Effect.mapError((error) => transient("connection", messageOf(error)))
      )
    })

    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        const live = state.live
        state.live = undefined
        if (live !== undefined) await live.model.close().catch(() => undefined)
      })
    )

    /** Publishes awaiting their confirm, each under a key of its own. */
    const awaiting = yield* AwaitingSends.make<number, AwaitingSends.Awaiting>(
      yield* Effect.clock,
      timeout,
      (_, reason) =>
        reason === "timeout"
          ? transient("timeout", `no confirm within ${Duration.format(timeout)}`)
          : transient("closed", "the sink closed before the broker confirmed")
    )
    let next = 0

    /**
     * One publish awaiting its confirm (or its deadline, found by the sweep); returns its key in `awaiting`.
     * One callback per publish and no canceler: a send its caller gave up on is settled all the same (by its
     * confirm or the sweep), and its late result is ignored.
     */
    const publish = (
      live: Live,
      record: OutboxRecord,
      target: { readonly exchange: string; readonly routingKey: string },
      headers: Record<string, string>,
      resume: (result: Effect.Effect<void, SendError>) => void
    ): number => {
      returned.delete(record.id)
      const key = next++
      awaiting.add(key, { deadline: awaiting.deadline(), resume })
      // each outcome hands the publish its result, unless its deadline or another outcome came first
      try {
        live.channel.publish(
          target.exchange,
          target.routingKey,
          Buffer.from(record.payload),
          { persistent: true, mandatory: true, messageId: record.id, headers },
          (error: unknown) => {
            // a returned message is forgotten here even when its publish timed out first
            const result =
              error !== null && error !== undefined
                ? Effect.fail(closedError(broker, live, error))
                : returned.delete(record.id)
                  ? Effect.fail(unroutable(target))
                  : Effect.void
            awaiting.take(key)?.resume(result)
          }
        )
      } catch (error) {
        drop(live)
        awaiting.take(key)?.resume(Effect.fail(closedError(broker, live, error)))
      }
      return key
    }

    const allowed = new Set([exchange, ...(options.allowedExchanges ?? [])])
    /** One send: refused at once (resumed before it returns), or resumed on the broker's confirm. */
    const register: Register = (record, resume) => {
      const target = targetFor(record, exchange, options.routingKey)
      if (target === undefined) {
        return resume(
          Effect.fail(
            new SendError({ retryable: false, code: "no-address", message: `record ${record.id} has no routing key` })
          )
        )
      }
      if (!allowed.has(target.exchange)) {
        return resume(
          Effect.fail(
            new SendError({
              retryable: false,
              code: "exchange-not-allowed",
              message: `record ${record.id}: exchange ${JSON.stringify(target.exchange)} is not configured (sink exchange or allowed exchanges)`
            })
          )
        )
      }
      // the wire metadata (SPEC §11) overrides a record header of the same name; the copy is made with
      // `Object.assign`: adding the wire headers to a spread copy cost about 3 µs more a publish in V8
      const headers = Topic.writeWireHeaders(record, Object.assign({}, record.headers))
      headers[Topic.EnvelopeIdHeader] = Topic.encodeHeaderValue(record.envelopeId)
      const live = state.live
      if (live !== undefined && !live.closed) {
        publish(live, record, target, headers, resume)
        return
      }
      // no live connection: the send reconnects first (an effect the caller runs; interrupted, it stops waiting)
      resume(
        Effect.flatMap(reconnect, (fresh) =>
          Effect.async<void, SendError>((inner) => {
            const key = publish(fresh, record, target, headers, inner)
            return Effect.sync(() => {
              awaiting.take(key)
            })
          })
        )
      )
    }
    return Sink.of(fromRegister(register))
  })

/**
 * The RabbitMQ sink as a layer (one connection, closed when the layer is released).
 *
 * @since 0.1.0
 */
export const layer = (options: RabbitMqSinkOptions): Layer.Layer<Sink, InvalidConfiguration> =>
  Layer.scoped(Sink, make(options))
