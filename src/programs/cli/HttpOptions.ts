/**
 * The operations endpoint options of the CLI (`--http-port`, `--http-host`, `--http-allow-mutations`,
 * `--http-show-payloads`, `--http-allowed-host`; config paths under `http.`, env `OUTBOX_HTTP_*`) and the layer that serves it
 * on Node's HTTP server. Loopback by default: another host must be given explicitly and logs a WARN.
 *
 * @since 0.1.0
 */
import * as Options from "@effect/cli/Options"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as http from "node:http"
import type { DeadLetterStore } from "../../services/DeadLetterStore.js"
import type { OutboxInspection } from "../../services/OutboxInspection.js"
import type { OutboxStore } from "../../services/OutboxStore.js"
import * as OpsServer from "../ops/OpsServer.js"
import { CliFailure, type HttpSettings } from "./Settings.js"
import { flagEntries } from "./StoreOptions.js"

/**
 * The options.
 *
 * @since 0.1.0
 */
export const httpOptions = {
  httpPort: Options.integer("http-port").pipe(
    Options.withDescription("Serve /metrics, /healthz, /readyz and the dashboard on this port (env OUTBOX_HTTP_PORT)"),
    Options.optional
  ),
  httpHost: Options.text("http-host").pipe(
    Options.withDescription("Address the operations endpoint binds (default 127.0.0.1; env OUTBOX_HTTP_HOST)"),
    Options.optional
  ),
  httpAllowMutations: Options.boolean("http-allow-mutations").pipe(
    Options.withDescription("Allow redrive and purge from the dashboard (env OUTBOX_HTTP_ALLOW_MUTATIONS)")
  ),
  httpShowPayloads: Options.boolean("http-show-payloads").pipe(
    Options.withDescription("Show record payloads on the dashboard (env OUTBOX_HTTP_SHOW_PAYLOADS)")
  ),
  httpAllowedHost: Options.text("http-allowed-host").pipe(
    Options.withDescription(
      "Host name accepted in requests besides loopback names and --http-host, repeatable (env OUTBOX_HTTP_ALLOWED_HOSTS)"
    ),
    Options.repeated
  )
}

/**
 * The parsed options.
 *
 * @since 0.1.0
 */
export interface HttpFlags {
  readonly httpPort: Option.Option<number>
  readonly httpHost: Option.Option<string>
  readonly httpAllowMutations: boolean
  readonly httpShowPayloads: boolean
  readonly httpAllowedHost: ReadonlyArray<string>
}

/**
 * The config paths of the flags.
 *
 * @since 0.1.0
 */
export const httpFlagEntries = (flags: HttpFlags): Map<string, string> =>
  flagEntries([
    ["http.port", flags.httpPort],
    ["http.host", flags.httpHost],
    ["http.allowMutations", flags.httpAllowMutations ? Option.some("true") : Option.none()],
    ["http.showPayloads", flags.httpShowPayloads ? Option.some("true") : Option.none()],
    [
      "http.allowedHosts",
      flags.httpAllowedHost.length === 0 ? Option.none() : Option.some(flags.httpAllowedHost.join("\n"))
    ]
  ])

const loopback = (host: string): boolean =>
  host === "localhost" || host === "::1" || host === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(host)

/**
 * Serves the operations endpoint in the current scope when a port is configured, logging its URL (a
 * non-loopback host logs a WARN), and returns the URL (none without a port). A port that cannot be bound
 * is a {@link CliFailure} with exit code 2.
 *
 * @since 0.1.0
 */
export const serveScoped = <R>(
  settings: HttpSettings,
  app: Layer.Layer<never, never, HttpServer.HttpServer | R>
): Effect.Effect<Option.Option<string>, CliFailure, R | Scope.Scope> =>
  Option.match(settings.port, {
    onNone: () => Effect.succeed(Option.none()),
    onSome: (port) =>
      Effect.gen(function* () {
        const server = NodeHttpServer.layer(() => http.createServer(), { port, host: settings.host }).pipe(
          Layer.mapError(
            (error) =>
              new CliFailure({
                message: `cannot serve the operations endpoint on ${settings.host}:${port}: ${error.message}`,
                exitCode: 2
              })
          )
        )
        const context = yield* Layer.build(Layer.provideMerge(app, server))
        const url = yield* HttpServer.addressWith((address) =>
          Effect.succeed(address._tag === "TcpAddress" ? `http://${hostText(settings.host)}:${address.port}/` : "")
        ).pipe(Effect.provide(context))
        if (!loopback(settings.host)) {
          yield* Effect.logWarning("the operations endpoint listens beyond loopback").pipe(
            Effect.annotateLogs({ host: settings.host })
          )
        }
        yield* Effect.logInfo("operations endpoint listening").pipe(Effect.annotateLogs({ url }))
        return Option.some(url)
      })
  })

/**
 * {@link serveScoped} as a layer, for the lifetime of the layer.
 *
 * @since 0.1.0
 */
export const serve = <R>(
  settings: HttpSettings,
  app: Layer.Layer<never, never, HttpServer.HttpServer | R>
): Layer.Layer<never, CliFailure, R> => Layer.scopedDiscard(serveScoped(settings, app))

const hostText = (host: string): string => (host.includes(":") && !host.startsWith("[") ? `[${host}]` : host)

/**
 * The operations app (metrics, probes and the dashboard) for {@link serve}, with the settings' mutation
 * and payload switches.
 *
 * @since 0.1.0
 */
export const opsApp = (
  settings: HttpSettings,
  options: OpsServer.OpsServerOptions
): Layer.Layer<never, never, HttpServer.HttpServer | OutboxStore | OutboxInspection | DeadLetterStore> =>
  OpsServer.layerWithDashboard({
    ...options,
    allowMutations: settings.allowMutations,
    showPayloads: settings.showPayloads,
    allowedHosts: [...settings.allowedHosts, ...(wildcard(settings.host) ? [] : [settings.host])]
  })

const wildcard = (host: string): boolean => host === "0.0.0.0" || host === "::" || host === "[::]"
