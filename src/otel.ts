/**
 * effect-outbox/otel: OpenTelemetry export of the library's traces, metrics and logs (SPEC §8, §9). Needs
 * `@effect/opentelemetry` installed.
 *
 * @since 0.1.0
 */

/** Optional OpenTelemetry (OTLP/HTTP) export of traces, metrics and logs. @since 0.1.0 */
export * as Observability from "./programs/Observability.js"
