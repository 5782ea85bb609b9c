/**
 * OTLP export for the command line: on when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (see
 * `Observability.layer`). The exporter is imported only then; when `@effect/opentelemetry` cannot be
 * loaded (not installed beside the package), the command runs without telemetry and says so in one WARN
 * line naming the package, rather than failing a relay that a cluster-wide variable happens to reach.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/**
 * The configured OTLP endpoint, if any (blank counts as unset).
 *
 * @since 0.1.0
 */
export const endpoint = (env: Record<string, string | undefined> = process.env): string | undefined => {
  const value = env["OTEL_EXPORTER_OTLP_ENDPOINT"]?.trim()
  return value === undefined || value.length === 0 ? undefined : value
}

/**
 * The export layer: nothing without an endpoint; the `Observability` layer with one; nothing and a WARN
 * line when the exporter package cannot be loaded.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<never> = Layer.unwrapEffect(
  Effect.suspend(() => {
    if (endpoint() === undefined) return Effect.succeed(Layer.empty)
    return Effect.tryPromise(() => import("../Observability.js")).pipe(
      Effect.map((module) => module.layer),
      Effect.catchAll(() =>
        Effect.as(
          Effect.logWarning(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but @effect/opentelemetry is not installed: running without " +
              "telemetry (npm install @effect/opentelemetry@^0.64 to export)"
          ),
          Layer.empty
        )
      )
    )
  })
)
