/**
 * An in-memory recording sink for tests and demos: it records every delivery in order and can be
 * scripted to fail (transiently, permanently, or by hanging) for given record ids or for the next
 * calls.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import type { OutboxRecord } from "../../domain/OutboxRecord.js"
import { SendError, Sink, type SinkService } from "../../services/Sink.js"

/**
 * A scripted failure: `transient` and `permanent` fail the send with a retryable or permanent
 * `SendError`; `hang` never completes (until interrupted).
 *
 * @since 0.1.0
 */
export type Failure = "transient" | "permanent" | "hang"

/**
 * A scripted failure with its details.
 *
 * @since 0.1.0
 */
export interface FailureScript {
  readonly failure: Failure
  /** How many matching calls fail (default 1; `Infinity` for every one). */
  readonly times?: number | undefined
  /** `SendError.code` (default `scripted-<failure>`). */
  readonly code?: string | undefined
  /** `SendError.retryAfterMillis`, for transient failures. */
  readonly retryAfterMillis?: number | undefined
}

/**
 * One successful delivery: the record and when (epoch ms, from `Clock`).
 *
 * @since 0.1.0
 */
export interface Delivery {
  readonly record: OutboxRecord
  readonly deliveredAtMillis: number
}

/**
 * The recording side of the sink.
 *
 * @since 0.1.0
 */
export interface MemorySinkService {
  /** The `Sink` this recorder stands behind. */
  readonly sink: SinkService
  /** Successful deliveries, in order. */
  readonly deliveries: Effect.Effect<ReadonlyArray<Delivery>>
  /** Ids of delivered records, in order (duplicates included). */
  readonly deliveredIds: Effect.Effect<ReadonlyArray<string>>
  /** Ids of every `send` call, in call order (failed and hanging calls included). */
  readonly attempts: Effect.Effect<ReadonlyArray<string>>
  /** Makes sends of the record with this id fail as scripted. */
  readonly failRecord: (recordId: string, script: FailureScript) => Effect.Effect<void>
  /** Makes the next calls (whatever the record) fail as scripted. Record scripts take precedence. */
  readonly failCalls: (script: FailureScript) => Effect.Effect<void>
  /** Waits until at least `n` send calls have been made. */
  readonly awaitAttempts: (n: number) => Effect.Effect<void>
  /** Forgets deliveries, attempts and scripts. */
  readonly clear: Effect.Effect<void>
}

/**
 * The `MemorySink` recorder tag.
 *
 * @since 0.1.0
 */
export class MemorySink extends Context.Tag("effect-outbox/MemorySink")<MemorySink, MemorySinkService>() {}

/**
 * Options of the memory sink.
 *
 * @since 0.1.0
 */
export interface MemorySinkOptions {
  /** Runs inside every send before it succeeds (after scripted failures are applied). */
  readonly onSend?: ((record: OutboxRecord) => Effect.Effect<void>) | undefined
}

interface Armed {
  readonly script: FailureScript
  remaining: number
}

const failWith = (armed: Armed, record: OutboxRecord): Effect.Effect<never, SendError> => {
  armed.remaining -= 1
  const script = armed.script
  switch (script.failure) {
    case "hang":
      return Effect.never
    case "transient":
      return Effect.fail(
        new SendError({
          retryable: true,
          code: script.code ?? "scripted-transient",
          message: `scripted transient failure for ${record.id}`,
          ...(script.retryAfterMillis !== undefined ? { retryAfterMillis: script.retryAfterMillis } : {})
        })
      )
    case "permanent":
      return Effect.fail(
        new SendError({
          retryable: false,
          code: script.code ?? "scripted-permanent",
          message: `scripted permanent failure for ${record.id}`
        })
      )
  }
}

/**
 * Builds a recorder and its sink.
 *
 * @since 0.1.0
 */
export const make = (options: MemorySinkOptions = {}): Effect.Effect<MemorySinkService> =>
  Effect.sync(() => {
    let deliveries: Array<Delivery> = []
    let attempts: Array<string> = []
    let byRecord = new Map<string, Armed>()
    let byCall: Array<Armed> = []
    let waiters: Array<{ readonly n: number; readonly deferred: Deferred.Deferred<void> }> = []
    // the smallest attempt count a waiter waits for (a send checks one number, not every waiter)
    let nextWake = Number.POSITIVE_INFINITY

    /** Resolves the waiters whose attempt count is reached (synchronously, inside a send). */
    const wake = (): void => {
      if (attempts.length < nextWake) return
      const ready = waiters.filter((w) => attempts.length >= w.n)
      waiters = waiters.filter((w) => attempts.length < w.n)
      nextWake = waiters.reduce((least, w) => Math.min(least, w.n), Number.POSITIVE_INFINITY)
      for (const w of ready) Deferred.unsafeDone(w.deferred, Exit.void)
    }

    const scripted = (record: OutboxRecord): Armed | undefined => {
      const own = byRecord.size === 0 ? undefined : byRecord.get(record.id)
      if (own !== undefined && own.remaining > 0) return own
      while (byCall.length > 0) {
        const next = byCall[0]
        if (next !== undefined && next.remaining > 0) return next
        byCall.shift()
      }
      return undefined
    }

    // one step per send when nothing is scripted: this sink stands in for a fast sink in benchmarks
    const send = (record: OutboxRecord): Effect.Effect<void, SendError> =>
      Effect.clockWith((clock) => {
        attempts.push(record.id)
        const armed = scripted(record)
        wake()
        if (armed !== undefined) return failWith(armed, record)
        if (options.onSend === undefined) {
          deliveries.push({ record, deliveredAtMillis: clock.unsafeCurrentTimeMillis() })
          return Effect.void
        }
        return Effect.zipRight(
          options.onSend(record),
          Effect.sync(() => {
            deliveries.push({ record, deliveredAtMillis: clock.unsafeCurrentTimeMillis() })
          })
        )
      })

    return {
      sink: Sink.of({ send }),
      deliveries: Effect.sync(() => deliveries.slice()),
      deliveredIds: Effect.sync(() => deliveries.map((d) => d.record.id)),
      attempts: Effect.sync(() => attempts.slice()),
      failRecord: (recordId, script) =>
        Effect.sync(() => {
          byRecord.set(recordId, { script, remaining: script.times ?? 1 })
        }),
      failCalls: (script) =>
        Effect.sync(() => {
          byCall.push({ script, remaining: script.times ?? 1 })
        }),
      awaitAttempts: (n) =>
        Effect.suspend(() => {
          if (attempts.length >= n) return Effect.void
          return Deferred.make<void>().pipe(
            Effect.tap((deferred) =>
              Effect.sync(() => {
                waiters.push({ n, deferred })
                nextWake = Math.min(nextWake, n)
              })
            ),
            Effect.flatMap(Deferred.await)
          )
        }),
      clear: Effect.sync(() => {
        deliveries = []
        attempts = []
        byRecord = new Map()
        byCall = []
      })
    }
  })

/**
 * Provides both the `Sink` and its `MemorySink` recorder, with options.
 *
 * @since 0.1.0
 */
export const layerWith = (options: MemorySinkOptions): Layer.Layer<Sink | MemorySink> =>
  Layer.effectContext(
    Effect.map(make(options), (recorder) => Context.make(MemorySink, recorder).pipe(Context.add(Sink, recorder.sink)))
  )

/**
 * Provides both the `Sink` and its `MemorySink` recorder.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<Sink | MemorySink> = layerWith({})
