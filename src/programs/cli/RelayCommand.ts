/**
 * `effect-outbox relay`: runs a relay over the configured store until SIGINT/SIGTERM, delivering to a
 * webhook, NATS JetStream, RabbitMQ or stdout (JSON lines). On a signal the relay stops discovery, lets
 * each drainer finish or release its in-flight batch, and releases every lease before the process exits.
 * A stdout relay whose reader goes away (`relay stdout | head -n 3`) stops the same way and exits 0.
 * Records other processes commit wake the idle relay (SPEC §13): on SQLite through `SqliteWakeSignal`,
 * on PostgreSQL through `PostgresWakeSignal`; DynamoDB and MySQL relays poll, the idle back-off bounded at
 * 1 second.
 *
 * Each sink (with its client: HTTP, `nats`, `amqplib`) is imported only when a relay delivers to it.
 *
 * @since 0.1.0
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Ref from "effect/Ref"
import * as Logger from "effect/Logger"
import * as Redact from "../../layers/sinks/Redact.js"
import * as SinkRouter from "../../layers/sinks/SinkRouter.js"
import * as StdoutSink from "../../layers/sinks/StdoutSink.js"
import type { InvalidConfiguration } from "../../domain/OutboxError.js"
import type { Sink } from "../../services/Sink.js"
import * as Relay from "../Relay.js"
import * as Backends from "./Backends.js"
import { httpFlagEntries, httpOptions, opsApp, serve } from "./HttpOptions.js"
import { stderrLogger } from "./Logging.js"
import * as StdoutWatch from "./StdoutWatch.js"
import {
  type BackendName,
  CliFailure,
  httpConfig,
  load,
  type RelaySettings,
  relayConfig,
  type SinkSettings
} from "./Settings.js"
import { flagEntries, resolve, storeOptions, withStores } from "./StoreOptions.js"

/** The CLI's logger without the drainers' "sink failing" warnings about a stdout whose reader has gone away. */
const quietWhenStdoutClosed = Logger.make<unknown, void>((options) => {
  const text = Array.isArray(options.message) ? options.message.map(String).join(" ") : String(options.message)
  if (text.startsWith("sink failing") && text.includes("stdout-closed")) return
  stderrLogger.log(options)
})

/**
 * The sink layer for the settings (a webhook sink loads its HTTP client when the layer is built). An
 * invalid sink configuration (e.g. a header with CR/LF) is a {@link CliFailure} with exit code 2.
 * `onStdoutClosed` runs when the reader of a stdout sink has gone away.
 *
 * @since 0.1.0
 */
export const sinkLayer = (
  sink: SinkSettings,
  onStdoutClosed: Effect.Effect<void> = Effect.void
): Layer.Layer<Sink, CliFailure> => {
  const configured = (layer: Effect.Effect<Layer.Layer<Sink, InvalidConfiguration>>): Layer.Layer<Sink, CliFailure> =>
    Layer.unwrapEffect(layer).pipe(Layer.mapError((error) => new CliFailure({ message: error.message, exitCode: 2 })))
  switch (sink._tag) {
    case "stdout":
      return StdoutSink.layerWith({ onClosed: onStdoutClosed })
    case "nats":
      return configured(
        Effect.map(
          Effect.promise(() => import("../../layers/sinks/NatsSink.js")),
          (NatsSink) =>
            NatsSink.layer({
              servers: sink.url,
              subject: Option.getOrUndefined(sink.subject),
              timeout: sink.timeout,
              allowedSubjectPrefixes: Option.getOrUndefined(sink.allowedSubjectPrefixes)
            })
        )
      )
    case "rabbitmq":
      return configured(
        Effect.map(
          Effect.promise(() => import("../../layers/sinks/RabbitMqSink.js")),
          (RabbitMqSink) =>
            RabbitMqSink.layer({
              url: sink.url,
              exchange: sink.exchange,
              routingKey: Option.getOrUndefined(sink.routingKey),
              timeout: sink.timeout,
              allowedExchanges: Option.getOrUndefined(sink.allowedExchanges)
            })
        )
      )
    case "webhook":
      return configured(
        Effect.map(
          Effect.promise(() =>
            Promise.all([import("../../layers/sinks/WebhookSink.js"), import("@effect/platform-node/NodeHttpClient")])
          ),
          ([WebhookSink, NodeHttpClient]) =>
            WebhookSink.layerWith({
              url: Option.getOrUndefined(sink.url),
              timeout: sink.timeout,
              headers: sink.headers,
              maxRetryAfter: sink.maxRetryAfter,
              signingSecret: Option.getOrUndefined(sink.signingSecret),
              allowedOrigins: Option.getOrUndefined(sink.allowedOrigins)
            }).pipe(Layer.provide(NodeHttpClient.layerUndici))
        )
      )
  }
}

/**
 * The relay options for the settings.
 *
 * @since 0.1.0
 */
export const relayOptions = (settings: RelaySettings, backend?: BackendName): Relay.RelayOptions => ({
  owner: settings.owner,
  maxPartitions: settings.maxPartitions,
  leaseTtl: settings.leaseTtl,
  discoveryInterval: settings.discoveryInterval,
  drainer: {
    batchSize: settings.batchSize,
    maxConcurrency: settings.concurrency,
    ...idleBackoff(settings, backend)
  }
})

const listFlag = (values: ReadonlyArray<string>): Option.Option<string> =>
  values.length === 0 ? Option.none() : Option.some(values.join("\n"))

/**
 * The idle back-off bound of the relay's drainers: the setting, else 1 second on a backend whose relay
 * other processes' commits do not wake (`Backends.wakesRelay`: DynamoDB, MySQL; the bound is then the
 * latency of an idle relay, see docs/operations.md), else the drainer's default (SPEC §13).
 */
const idleBackoff = (settings: RelaySettings, backend: BackendName | undefined) => {
  const max =
    Option.getOrUndefined(settings.idleBackoffMax) ??
    (backend !== undefined && !Backends.wakesRelay[backend] ? pollingIdleMax : undefined)
  if (max === undefined) return {}
  return { idleBackoffMax: max, idleBackoffMin: Duration.min(max, Duration.millis(100)) }
}

/**
 * The idle poll bound of a CLI relay on the backends without a change signal (DynamoDB, MySQL).
 *
 * @since 0.1.0
 */
export const pollingIdleMax: Duration.Duration = Duration.seconds(1)

const describeSink = (sink: SinkSettings): string =>
  sink._tag === "stdout"
    ? "stdout"
    : sink._tag === "webhook"
      ? Option.match(sink.url, {
          onNone: () => "webhook (record addresses)",
          onSome: (url) => `webhook ${Redact.url(url)}`
        })
      : `${sink._tag} ${Redact.url(sink.url)}`

/** Whether the relay writes to stdout (its one sink, the default route or a route). */
const writesStdout = (settings: RelaySettings): boolean =>
  Option.exists(settings.sink, (sink) => sink._tag === "stdout") ||
  settings.routes.some(([, sink]) => sink._tag === "stdout")

/** The relay's sinks: one, or a routes table with the single sink (when given) as the default route. */
const describeSinks = (settings: RelaySettings): string =>
  [
    ...settings.routes.map(([route, sink]) => `${route}: ${describeSink(sink)}`),
    ...Option.match(settings.sink, {
      onNone: () => [],
      onSome: (sink) => [settings.routes.length > 0 ? `*: ${describeSink(sink)}` : describeSink(sink)]
    })
  ].join(", ")

/**
 * The relay's `Sink`: the one sink, or with a routes table a `SinkRouter` over each route's sink (SPEC §11),
 * the single sink (when configured) taking every other route.
 *
 * @since 0.2.0
 */
export const relaySinkLayer = (
  settings: RelaySettings,
  onStdoutClosed: Effect.Effect<unknown>
): Layer.Layer<Sink, CliFailure> => {
  if (settings.routes.length === 0 && Option.isSome(settings.sink))
    return sinkLayer(settings.sink.value, onStdoutClosed)
  const entries: Array<readonly [string, SinkSettings]> = [...settings.routes]
  if (Option.isSome(settings.sink)) entries.push([SinkRouter.DefaultRoute, settings.sink.value])
  return SinkRouter.layer(
    Effect.all(
      Object.fromEntries(entries.map(([route, sink]) => [route, SinkRouter.sinkOf(sinkLayer(sink, onStdoutClosed))]))
    )
  )
}

/**
 * The `relay` command.
 *
 * @since 0.1.0
 */
export const command = Command.make(
  "relay",
  {
    ...storeOptions,
    sinkArg: Args.choice([
      ["webhook", "webhook"],
      ["stdout", "stdout"],
      ["nats", "nats"],
      ["rabbitmq", "rabbitmq"]
    ]).pipe(
      Args.withDescription(
        "Where to deliver: webhook <url> | stdout | nats <url> | rabbitmq <url> (env OUTBOX_SINK_TYPE)"
      ),
      Args.optional
    ),
    urlArg: Args.text({ name: "url" }).pipe(
      Args.withDescription("Webhook, NATS or RabbitMQ URL (credentials in it are never logged)"),
      Args.optional
    ),
    webhookUrl: Options.text("webhook-url").pipe(
      Options.withDescription("Webhook URL (env OUTBOX_SINK_URL)"),
      Options.optional
    ),
    header: Options.text("header").pipe(
      Options.withDescription(
        'Webhook request header "Name: value", repeatable; never logged (env OUTBOX_SINK_HEADERS, lines)'
      ),
      Options.repeated
    ),
    signingSecret: Options.redacted("signing-secret").pipe(
      Options.withDescription("Sign webhook requests with HMAC-SHA256 (env OUTBOX_SINK_SIGNING_SECRET)"),
      Options.optional
    ),
    maxRetryAfter: Options.text("max-retry-after").pipe(
      Options.withDescription('Largest webhook Retry-After honoured (default "60 seconds")'),
      Options.optional
    ),
    subject: Options.text("subject").pipe(
      Options.withDescription(
        "NATS subject for records without an address; {partitionKey}, {routeId} (env OUTBOX_SINK_SUBJECT)"
      ),
      Options.optional
    ),
    exchange: Options.text("exchange").pipe(
      Options.withDescription('RabbitMQ exchange for addresses without one (default "", env OUTBOX_SINK_EXCHANGE)'),
      Options.optional
    ),
    routingKey: Options.text("routing-key").pipe(
      Options.withDescription("RabbitMQ routing key for records without an address (env OUTBOX_SINK_ROUTING_KEY)"),
      Options.optional
    ),
    allowOrigin: Options.text("allow-origin").pipe(
      Options.withDescription(
        "Webhook origin a record's address may name, repeatable (env OUTBOX_SINK_ALLOWED_ORIGINS, comma-separated)"
      ),
      Options.repeated
    ),
    allowSubjectPrefix: Options.text("allow-subject-prefix").pipe(
      Options.withDescription(
        "NATS subject prefix a record's address may use, repeatable (env OUTBOX_SINK_ALLOWED_SUBJECT_PREFIXES)"
      ),
      Options.repeated
    ),
    allowExchange: Options.text("allow-exchange").pipe(
      Options.withDescription(
        "RabbitMQ exchange a record's address may name, repeatable (env OUTBOX_SINK_ALLOWED_EXCHANGES)"
      ),
      Options.repeated
    ),
    owner: Options.text("owner").pipe(
      Options.withDescription("Lease owner id of this relay (default relay-<host>-<pid>)"),
      Options.optional
    ),
    maxPartitions: Options.integer("max-partitions").pipe(
      Options.withDescription("Most partitions drained at once (default 64)"),
      Options.optional
    ),
    leaseTtl: Options.text("lease-ttl").pipe(
      Options.withDescription('Lease time-to-live, e.g. "30 seconds" (default 30 seconds)'),
      Options.optional
    ),
    discoveryInterval: Options.text("discovery-interval").pipe(
      Options.withDescription('Time between partition discovery rounds (default "5 seconds")'),
      Options.optional
    ),
    idleBackoffMax: Options.text("idle-backoff-max").pipe(
      Options.withDescription(
        'Longest idle pause of a drainer (default "1 second" on DynamoDB and MySQL, which have no wake-up, else "30 seconds"; SQLite and PostgreSQL relays are woken by new records)'
      ),
      Options.optional
    ),
    batchSize: Options.integer("batch-size").pipe(
      Options.withDescription("Initial claim size per partition (default 100)"),
      Options.optional
    ),
    concurrency: Options.integer("concurrency").pipe(
      Options.withDescription("Ordering-key groups in flight per partition (default 10)"),
      Options.optional
    ),
    ...httpOptions
  },
  (flags) =>
    Effect.gen(function* () {
      const url = Option.orElse(flags.webhookUrl, () => flags.urlArg)
      const { provider, store } = yield* resolve(
        flags,
        new Map([
          ...httpFlagEntries(flags),
          ...flagEntries([
            ["sink.type", Option.orElse(flags.sinkArg, () => Option.as(url, "webhook"))],
            ["sink.url", url],
            ["sink.headers", flags.header.length === 0 ? Option.none() : Option.some(flags.header.join("\n"))],
            ["sink.signingSecret", Option.map(flags.signingSecret, Redacted.value)],
            ["sink.maxRetryAfter", flags.maxRetryAfter],
            ["sink.subject", flags.subject],
            ["sink.exchange", flags.exchange],
            ["sink.routingKey", flags.routingKey],
            ["sink.allowedOrigins", listFlag(flags.allowOrigin)],
            ["sink.allowedSubjectPrefixes", listFlag(flags.allowSubjectPrefix)],
            ["sink.allowedExchanges", listFlag(flags.allowExchange)],
            ["relay.owner", flags.owner],
            ["relay.maxPartitions", flags.maxPartitions],
            ["relay.leaseTtl", flags.leaseTtl],
            ["relay.discoveryInterval", flags.discoveryInterval],
            ["relay.idleBackoffMax", flags.idleBackoffMax],
            ["relay.batchSize", flags.batchSize],
            ["relay.concurrency", flags.concurrency]
          ])
        ])
      )
      const settings = yield* load(relayConfig, provider)
      const http = yield* load(httpConfig, provider)
      const running = yield* Ref.make(false)
      const stdoutClosed = yield* Deferred.make<void>()
      const run = Effect.gen(function* () {
        yield* Relay.start(relayOptions(settings, store.backend))
        yield* Ref.set(running, true)
        yield* Effect.addFinalizer(() => Ref.set(running, false))
        yield* Layer.buildWithScope(
          serve(http, opsApp(http, { readiness: { relayRunning: Ref.get(running) } })),
          yield* Effect.scope
        )
        yield* Effect.logInfo("relay started").pipe(
          Effect.annotateLogs({
            owner: settings.owner,
            backend: store.backend,
            sink: describeSinks(settings),
            maxPartitions: settings.maxPartitions,
            leaseTtl: Duration.format(settings.leaseTtl)
          })
        )
        if (writesStdout(settings)) yield* StdoutWatch.watch(Deferred.succeed(stdoutClosed, undefined))
        yield* Deferred.await(stdoutClosed)
        yield* Effect.logInfo("the reader of stdout has gone away; stopping the relay")
      })
      const relay = withStores(
        store,
        Effect.scoped(run).pipe(Effect.provide(relaySinkLayer(settings, Deferred.succeed(stdoutClosed, undefined)))),
        { readOnly: false, relay: true }
      )
      // a reader that goes away is how a stdout relay is meant to stop: not a failing sink worth a WARN
      return yield* writesStdout(settings)
        ? Effect.provide(relay, Logger.replace(stderrLogger, quietWhenStdoutClosed))
        : relay
    })
).pipe(Command.withDescription("Run a relay: lease partitions, deliver their records, until SIGINT/SIGTERM"))
