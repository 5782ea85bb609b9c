/**
 * The spans of the library's operations (`OutboxStore.claim`, `Drainer.batch`, …), made only when the
 * program has a tracer of its own (OpenTelemetry's, or any `Layer.setTracer`): under Effect's default tracer
 * nothing reads a span, and making one costs several microseconds per operation (its clock readings, its
 * attributes, the parent-span context it provides). Spans carry no call site (it would point into the library).
 *
 * @since 0.2.0
 */
import * as Effect from "effect/Effect"
import type * as Tracer from "effect/Tracer"

/** Effect's default tracer, as every fiber sees it until a program installs its own. */
const defaultTracer: Tracer.Tracer = Effect.runSync(Effect.tracer)

/**
 * Runs `self` in a span named `name` with `attributes`, unless the fiber's tracer is Effect's default one.
 *
 * @since 0.2.0
 */
export const span =
  (name: string, attributes: Record<string, unknown> = {}) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.tracerWith((tracer) =>
      tracer === defaultTracer ? self : Effect.withSpan(self, name, { attributes, captureStackTrace: false })
    )
