/**
 * The `Sink` port: where a relay delivers records (SPEC §6).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import type * as MetricLabel from "effect/MetricLabel"
import * as Schema from "effect/Schema"
import type { OutboxRecord } from "../domain/OutboxRecord.js"

/**
 * A failed send. `retryable` decides what the drainer does: release and retry later (transient) or
 * dead-letter / drop (permanent). `retryAfter`, when the destination asked for it, is a minimum backoff.
 *
 * @since 0.1.0
 */
export class SendError extends Schema.TaggedError<SendError>()("SendError", {
  retryable: Schema.Boolean,
  code: Schema.String,
  message: Schema.String,
  retryAfterMillis: Schema.optional(Schema.Number)
}) {}

/**
 * The `SendError.code` of a send refused at once because its route is paused (a `SinkRouter` keeps a route's
 * `Retry-After` and failure-streak pauses itself). The drainer treats a batch whose only failures carry it as
 * idle work: a new record wakes the partition at once, so other routes' records are not held back.
 *
 * @since 0.2.0
 */
export const RoutePausedCode = "route-paused"

/**
 * A delivery destination.
 *
 * @since 0.1.0
 */
export interface SinkService {
  /** Delivers one record. Must be idempotent on `record.id` where the destination allows. */
  readonly send: (record: OutboxRecord) => Effect.Effect<void, SendError>
}

/**
 * A send in the form `Effect.async` takes: starts delivering `record` and calls `resume` once with the
 * send's result — an `Exit` (`Effect.void`, `Effect.fail(error)`), or an effect to run for it — and may
 * return a canceler, run when the caller gives up on the send.
 *
 * `metricLabels` are the metric labels of the fiber the send is made for (`FiberRef.currentMetricLabels`,
 * e.g. a relay's `Effect.tagMetrics`): a register that counts its sends without running an effect
 * (`Metric.unsafeUpdate`) adds them, as `Metric.increment` on that fiber would. A register that wraps
 * another passes them on.
 *
 * @since 0.2.0
 */
export type Register = (
  record: OutboxRecord,
  resume: (result: Effect.Effect<void, SendError>) => void,
  metricLabels: ReadonlyArray<MetricLabel.MetricLabel>
) => void | Effect.Effect<void>

/** Each `send` built by {@link fromRegister}, with the register it was built from. */
const registers = new WeakMap<SinkService["send"], Register>()

/**
 * A sink from its send in `Effect.async` form: `send(record)` is
 * `Effect.async((resume) => register(record, resume, labels))`, with the sending fiber's metric labels. A
 * drainer finds the register again ({@link registerOf}) and waits for such sends without a fiber per send.
 *
 * @since 0.2.0
 */
export const fromRegister = (register: Register): SinkService => {
  const send = (record: OutboxRecord) =>
    FiberRef.getWith(FiberRef.currentMetricLabels, (labels) =>
      Effect.async<void, SendError>((resume) => register(record, resume, labels))
    )
  registers.set(send, register)
  return { send }
}

/**
 * The register a sink's `send` was built from with {@link fromRegister}, if it was. It is found by the
 * `send` function itself: a sink that wraps another with a `send` of its own (logging, counting) has none,
 * so its own `send` is what runs.
 *
 * @since 0.2.0
 */
export const registerOf = (sink: SinkService): Register | undefined => registers.get(sink.send)

/**
 * The `Sink` service tag.
 *
 * @since 0.1.0
 */
export class Sink extends Context.Tag("effect-outbox/Sink")<Sink, SinkService>() {}

/**
 * Helper type for sink options that take a timeout.
 *
 * @since 0.1.0
 */
export type Timeout = Duration.DurationInput
