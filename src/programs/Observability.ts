/**
 * Optional OpenTelemetry export of traces, metrics and logs over OTLP/HTTP (JSON), through
 * `@effect/opentelemetry`'s `Otlp` module. Off unless `OTEL_EXPORTER_OTLP_ENDPOINT` is set (e.g.
 * `http://127.0.0.1:4318`, the collector's base URL; `/v1/traces`, `/v1/metrics` and `/v1/logs` are
 * appended). `OTEL_SERVICE_NAME` names the service (default `effect-outbox`). Every library span
 * (`OutboxStore.<op>`, `Drainer.batch`, `Enqueue.enqueue`) and every metric of `OutboxMetrics` is
 * exported; logs keep their `partition`/`owner` annotations as attributes.
 *
 * @since 0.1.0
 */
import * as Otlp from "@effect/opentelemetry/Otlp"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Layer from "effect/Layer"

/**
 * Export settings.
 *
 * @since 0.1.0
 */
export interface ObservabilityOptions {
  /** The OTLP/HTTP base URL; absent or empty → no export. */
  readonly endpoint?: string | undefined
  /** `service.name` of the exported resource (default `effect-outbox`). */
  readonly serviceName?: string | undefined
}

/**
 * Reads the options from the standard OpenTelemetry environment variables.
 *
 * @since 0.1.0
 */
export const optionsFromEnv = (env: Record<string, string | undefined> = process.env): ObservabilityOptions => ({
  endpoint: env["OTEL_EXPORTER_OTLP_ENDPOINT"],
  serviceName: env["OTEL_SERVICE_NAME"]
})

/**
 * The export layer: OTLP over HTTP when an endpoint is given, nothing otherwise.
 *
 * @since 0.1.0
 */
export const layerWith = (options: ObservabilityOptions): Layer.Layer<never> => {
  const endpoint = options.endpoint?.trim()
  if (endpoint === undefined || endpoint.length === 0) return Layer.empty
  return Otlp.layerJson({
    baseUrl: endpoint,
    resource: { serviceName: options.serviceName ?? "effect-outbox" },
    metricsExportInterval: "10 seconds",
    tracerExportInterval: "5 seconds",
    shutdownTimeout: "3 seconds"
  }).pipe(Layer.provide(FetchHttpClient.layer))
}

/**
 * The export layer configured from the environment (off by default).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<never> = layerWith(optionsFromEnv())
