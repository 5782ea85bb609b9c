/**
 * `effect-outbox relay`: runs a relay over the configured store until SIGINT/SIGTERM, delivering to a
 * webhook or to stdout (JSON lines). On a signal the relay stops discovery, lets each drainer finish or
 * release its in-flight batch, and releases every lease before the process exits.
 *
 * The webhook sink and its HTTP client are imported only when a relay delivers to a webhook.
 *
 * @since 0.1.0
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as StdoutSink from "../../layers/sinks/StdoutSink.js"
import type { Sink } from "../../services/Sink.js"
import * as Relay from "../Relay.js"
import { httpFlagEntries, httpOptions, opsApp, serve } from "./HttpOptions.js"
import { httpConfig, load, type RelaySettings, relayConfig, type SinkSettings } from "./Settings.js"
import { flagEntries, resolve, storeOptions, withStores } from "./StoreOptions.js"

/**
 * The sink layer for the settings (a webhook sink loads its HTTP client when the layer is built).
 *
 * @since 0.1.0
 */
export const sinkLayer = (sink: SinkSettings): Layer.Layer<Sink> =>
  sink._tag === "stdout"
    ? StdoutSink.layer
    : Layer.unwrapEffect(
        Effect.map(
          Effect.promise(() =>
            Promise.all([import("../../layers/sinks/WebhookSink.js"), import("@effect/platform-node/NodeHttpClient")])
          ),
          ([WebhookSink, NodeHttpClient]) =>
            WebhookSink.layerWith({ url: sink.url, timeout: sink.timeout }).pipe(
              Layer.provide(NodeHttpClient.layerUndici)
            )
        )
      )

/**
 * The relay options for the settings.
 *
 * @since 0.1.0
 */
export const relayOptions = (settings: RelaySettings): Relay.RelayOptions => ({
  owner: settings.owner,
  maxPartitions: settings.maxPartitions,
  leaseTtl: settings.leaseTtl,
  discoveryInterval: settings.discoveryInterval,
  drainer: { batchSize: settings.batchSize, maxConcurrency: settings.concurrency }
})

const describeSink = (sink: SinkSettings): string => (sink._tag === "stdout" ? "stdout" : `webhook ${sink.url}`)

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
      ["stdout", "stdout"]
    ]).pipe(Args.withDescription("Where to deliver: webhook <url> | stdout (env OUTBOX_SINK_TYPE)"), Args.optional),
    urlArg: Args.text({ name: "url" }).pipe(Args.withDescription("Webhook URL"), Args.optional),
    webhookUrl: Options.text("webhook-url").pipe(
      Options.withDescription("Webhook URL (env OUTBOX_SINK_URL)"),
      Options.optional
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
            ["relay.owner", flags.owner],
            ["relay.maxPartitions", flags.maxPartitions],
            ["relay.leaseTtl", flags.leaseTtl],
            ["relay.discoveryInterval", flags.discoveryInterval],
            ["relay.batchSize", flags.batchSize],
            ["relay.concurrency", flags.concurrency]
          ])
        ])
      )
      const settings = yield* load(relayConfig, provider)
      const http = yield* load(httpConfig, provider)
      const running = yield* Ref.make(false)
      const run = Effect.gen(function* () {
        yield* Relay.start(relayOptions(settings))
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
            sink: describeSink(settings.sink),
            maxPartitions: settings.maxPartitions,
            leaseTtl: Duration.format(settings.leaseTtl)
          })
        )
        return yield* Effect.never
      })
      return yield* withStores(store, Effect.scoped(run).pipe(Effect.provide(sinkLayer(settings.sink))))
    })
).pipe(Command.withDescription("Run a relay: lease partitions, deliver their records, until SIGINT/SIGTERM"))
