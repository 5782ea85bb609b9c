/**
 * The producer side (SPEC §7): persist records after a per-partition backpressure check.
 *
 * Provided as a service (`Enqueue`, built with {@link make} / {@link layerWith}) so that the depth cache
 * is shared by every producer of the process. `enqueue` persists through the `OutboxStore`, so on
 * SQLite it joins an enclosing `sql.withTransaction` exactly as `persist` does (R-PERSIST-6).
 *
 * Backpressure: when `maxOutboxDepth > 0` and a partition of the batch has reached that many pending
 * records, the call fails with `OutboxFull` and nothing of the batch is persisted. Depths come from
 * `countPending` and are cached per partition for `depthCacheTtl` (1 s, read from `Clock`) in a cache
 * bounded to `depthCacheSize` partitions (least recently used evicted); each successful enqueue adds
 * its batch to the cached depth so a hot producer sees its own growth between counts. The limit is
 * soft: producers racing within one TTL may overshoot it by their batches. A failing count fails
 * closed: the call fails with the count's error and nothing is persisted.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import {
  type DepthUnsupported,
  type DuplicateRecord,
  type InvalidRecord,
  OutboxFull,
  type StoreUnavailable
} from "../domain/OutboxError.js"
import type { NewOutboxRecord } from "../domain/OutboxRecord.js"
import { OutboxStore, type PersistOptions, type PersistReport } from "../services/OutboxStore.js"
import * as Traced from "../services/Traced.js"

/**
 * Options of the producer side.
 *
 * @since 0.1.0
 */
export interface EnqueueOptions {
  /** Pending depth at which a partition refuses new records; 0 disables the check (default 10 000). */
  readonly maxOutboxDepth?: number | undefined
  /** How long a depth answer is reused (default 1 second). */
  readonly depthCacheTtl?: Duration.DurationInput | undefined
  /** How many partitions the depth cache remembers (default 1024). */
  readonly depthCacheSize?: number | undefined
  /** The retry-after hint carried by `OutboxFull` (default 1 second). */
  readonly retryAfter?: Duration.DurationInput | undefined
}

/**
 * The errors of `enqueue`.
 *
 * @since 0.1.0
 */
export type EnqueueError = OutboxFull | DuplicateRecord | InvalidRecord | StoreUnavailable | DepthUnsupported

/**
 * The producer-side service.
 *
 * @since 0.1.0
 */
export interface EnqueueService {
  /**
   * Checks backpressure for every partition of the batch, then persists it. Fails with `OutboxFull`
   * (nothing persisted) when a partition is full, and with the count's error when a depth cannot be
   * read (fail closed).
   */
  readonly enqueue: (
    records: ReadonlyArray<NewOutboxRecord>,
    options?: PersistOptions
  ) => Effect.Effect<PersistReport, EnqueueError>
  /** Forgets every cached depth. */
  readonly invalidate: Effect.Effect<void>
}

/**
 * The `Enqueue` service tag.
 *
 * @since 0.1.0
 */
export class Enqueue extends Context.Tag("effect-outbox/Enqueue")<Enqueue, EnqueueService>() {}

interface CachedDepth {
  depth: number
  readonly atMillis: number
}

/**
 * Builds the service over the `OutboxStore` in context.
 *
 * @since 0.1.0
 */
export const make = (options: EnqueueOptions = {}): Effect.Effect<EnqueueService, never, OutboxStore> =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    const limit = Math.max(0, Math.floor(options.maxOutboxDepth ?? 10_000))
    const ttlMillis = Duration.toMillis(options.depthCacheTtl ?? "1 second")
    const cacheSize = Math.max(1, Math.floor(options.depthCacheSize ?? 1024))
    const retryAfterMillis = Duration.toMillis(options.retryAfter ?? "1 second")
    const cache = new Map<string, CachedDepth>()

    const remember = (partitionKey: string, entry: CachedDepth): void => {
      cache.delete(partitionKey)
      cache.set(partitionKey, entry)
      while (cache.size > cacheSize) {
        const oldest = cache.keys().next()
        if (oldest.done === true) break
        cache.delete(oldest.value)
      }
    }

    const depthOf = (
      partitionKey: string,
      nowMillis: number
    ): Effect.Effect<number, StoreUnavailable | DepthUnsupported> => {
      const cached = cache.get(partitionKey)
      if (cached !== undefined && nowMillis - cached.atMillis < ttlMillis) {
        remember(partitionKey, cached)
        return Effect.succeed(cached.depth)
      }
      return store.countPending(partitionKey).pipe(
        // an invalid partition key holds nothing; persist then rejects its record with InvalidRecord
        Effect.catchTag("InvalidArgument", () => Effect.succeed(0)),
        Effect.tap((depth) =>
          Effect.sync(() => {
            remember(partitionKey, { depth, atMillis: nowMillis })
          })
        )
      )
    }

    const checkPartitions = (perPartition: Map<string, number>): Effect.Effect<void, EnqueueError> =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        for (const partitionKey of perPartition.keys()) {
          const depth = yield* depthOf(partitionKey, now)
          if (depth >= limit) {
            return yield* new OutboxFull({ partitionKey, depth, limit, retryAfterMillis })
          }
        }
      })

    const enqueue = (
      records: ReadonlyArray<NewOutboxRecord>,
      persistOptions?: PersistOptions
    ): Effect.Effect<PersistReport, EnqueueError> =>
      Effect.gen(function* () {
        const perPartition = new Map<string, number>()
        for (const record of records) {
          perPartition.set(record.partitionKey, (perPartition.get(record.partitionKey) ?? 0) + 1)
        }
        if (limit > 0) yield* checkPartitions(perPartition)
        const report = yield* store.persist(records, persistOptions)
        if (limit > 0) {
          // conservative: counts skipped duplicates of the batch too, until the next count
          for (const [partitionKey, added] of perPartition) {
            const cached = cache.get(partitionKey)
            if (cached !== undefined) cached.depth += added
          }
        }
        return report
      }).pipe(Traced.span("Enqueue.enqueue", { "outbox.records": records.length }))

    return Enqueue.of({ enqueue, invalidate: Effect.sync(() => cache.clear()) })
  })

/**
 * The producer-side service with options.
 *
 * @since 0.1.0
 */
export const layerWith = (options: EnqueueOptions): Layer.Layer<Enqueue, never, OutboxStore> =>
  Layer.effect(Enqueue, make(options))

/**
 * The producer-side service with the SPEC defaults (`maxOutboxDepth` 10 000, 1 s depth cache).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<Enqueue, never, OutboxStore> = layerWith({})

/**
 * Enqueues through the `Enqueue` service in context.
 *
 * @since 0.1.0
 */
export const enqueue = (
  records: ReadonlyArray<NewOutboxRecord>,
  options?: PersistOptions
): Effect.Effect<PersistReport, EnqueueError, Enqueue> =>
  Effect.flatMap(Enqueue, (service) => service.enqueue(records, options))
