/**
 * The relay's HTTP operations endpoint (SPEC §10): `GET /metrics` (Prometheus text format from Effect's
 * metric registry by the Prometheus conventions, plus the store's gauges when an `OutboxInspection` is in
 * context — see `Prometheus` and `StoreGauges`), `GET /healthz` (the process answers) and `GET /readyz` (store reachable, relay
 * running, no drainer stalled; 503 with a JSON reason otherwise).
 *
 * Every request first passes {@link RequestGuard}: a `Host` that is not `localhost`, an IP address or one
 * of `allowedHosts` is 421 (DNS rebinding), bodies over `maxBodyBytes` are 413, unexpected failures are a
 * logged 500.
 *
 * The app runs on any `HttpServer` the caller provides (the CLI uses Node's, bound to 127.0.0.1 by
 * default), so this module loads no platform-specific code.
 *
 * @since 0.1.0
 */
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import type * as Scope from "effect/Scope"
import type { DeadLetterStore } from "../../services/DeadLetterStore.js"
import { OutboxInspection } from "../../services/OutboxInspection.js"
import type { OutboxStore } from "../../services/OutboxStore.js"
import * as Dashboard from "./Dashboard.js"
import type * as History from "./History.js"
import * as Prometheus from "./Prometheus.js"
import * as Readiness from "./Readiness.js"
import * as StoreGauges from "./StoreGauges.js"
import * as RequestGuard from "./RequestGuard.js"

/**
 * Options of the operations endpoint.
 *
 * @since 0.1.0
 */
export interface OpsServerOptions {
  /** How readiness is decided (relay state, stall window, store probe timeout). */
  readonly readiness?: Readiness.ReadinessOptions | undefined
  /** Label caps of `/metrics` (default: the process-wide exposition, 200 partitions and 50 routes). */
  readonly exposition?: Prometheus.ExpositionOptions | undefined
  /**
   * Host names (`ops.internal`, or `ops.internal:9464` for one port) accepted in the `Host` header besides
   * `localhost` and IP address literals; any other Host is answered 421 before anything else.
   */
  readonly allowedHosts?: ReadonlyArray<string> | undefined
  /** Largest request body accepted (default 1 MiB); a larger one is 413. */
  readonly maxBodyBytes?: number | undefined
}

/**
 * Options of the endpoint with its dashboard.
 *
 * @since 0.1.0
 */
export interface OpsDashboardOptions extends OpsServerOptions {
  /** Allow redrive and purge from the dashboard (default false). */
  readonly allowMutations?: boolean | undefined
  /** Show dead-letter payloads on the dashboard (default false). */
  readonly showPayloads?: boolean | undefined
  /** How often the page polls (default 1 s). */
  readonly refreshMillis?: number | undefined
  /** The ring of snapshots the dashboard's charts are drawn from (default every 2 s, 15 minutes kept). */
  readonly history?: History.HistoryOptions | undefined
}

/**
 * A fresh random CSRF token (128 bits, hex) from the platform's cryptographic generator.
 *
 * @since 0.1.0
 */
export const csrfToken: Effect.Effect<string> = Effect.sync(() =>
  Array.from(globalThis.crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("")
)

const noStore = { "cache-control": "no-store" }

/**
 * The operations routes as a router (to mount or extend).
 *
 * @since 0.1.0
 */
export const router = (options: OpsServerOptions = {}): Effect.Effect<HttpRouter.HttpRouter, never, OutboxStore> =>
  Effect.gen(function* () {
    const readiness = yield* Readiness.make(options.readiness)
    const inspection = yield* Effect.serviceOption(OutboxInspection)
    const exposition = options.exposition === undefined ? undefined : Prometheus.make(options.exposition)
    const gauges = StoreGauges.make()
    const metrics = Effect.all([Metric.snapshot, gauges.read(inspection)]).pipe(
      Effect.map(([pairs, store]) =>
        exposition === undefined ? Prometheus.render(pairs, store) : exposition.render(pairs, store)
      )
    )
    return HttpRouter.empty.pipe(
      HttpRouter.get(
        "/metrics",
        Effect.map(metrics, (body) =>
          HttpServerResponse.text(body, { contentType: Prometheus.contentType, headers: noStore })
        )
      ),
      HttpRouter.get("/healthz", Effect.succeed(HttpServerResponse.unsafeJson({ status: "ok" }, { headers: noStore }))),
      HttpRouter.get(
        "/readyz",
        Effect.map(readiness, (verdict) =>
          HttpServerResponse.unsafeJson(
            { status: verdict.ready ? "ready" : "unready", reasons: verdict.reasons, checks: verdict.checks },
            { status: verdict.ready ? 200 : 503, headers: noStore }
          )
        )
      )
    )
  })

/**
 * The operations routes plus the dashboard (`GET /`, its JSON API and, when allowed, its mutations); the
 * dashboard's snapshot ring is sampled in the background for the life of the scope.
 *
 * @since 0.1.0
 */
export const routerWithDashboard = (
  options: OpsDashboardOptions = {}
): Effect.Effect<HttpRouter.HttpRouter, never, OutboxStore | OutboxInspection | DeadLetterStore | Scope.Scope> =>
  Effect.gen(function* () {
    const ops = yield* router(options)
    const dashboard = yield* Dashboard.router({
      csrfToken: yield* csrfToken,
      allowMutations: options.allowMutations,
      showPayloads: options.showPayloads,
      refreshMillis: options.refreshMillis,
      history: options.history,
      maxBodyBytes: options.maxBodyBytes
    })
    return HttpRouter.concat(ops, dashboard)
  })

/**
 * Serves the operations endpoint with its dashboard on the provided `HttpServer`.
 *
 * @since 0.1.0
 */
export const layerWithDashboard = (
  options: OpsDashboardOptions = {}
): Layer.Layer<never, never, HttpServer.HttpServer | OutboxStore | OutboxInspection | DeadLetterStore> =>
  Layer.unwrapScoped(
    Effect.map(routerWithDashboard(options), (routes) =>
      HttpServer.serve(RequestGuard.guard(options.allowedHosts)(routes))
    )
  )

/**
 * Serves the operations endpoint on the provided `HttpServer` for the lifetime of the layer.
 *
 * @since 0.1.0
 */
export const layer = (options: OpsServerOptions = {}): Layer.Layer<never, never, HttpServer.HttpServer | OutboxStore> =>
  Layer.unwrapEffect(
    Effect.map(router(options), (routes) => HttpServer.serve(RequestGuard.guard(options.allowedHosts)(routes)))
  )
