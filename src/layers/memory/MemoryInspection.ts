/**
 * Inspection of a memory outbox (see `OutboxInspection`), answered through the memory stores' ports: depths
 * are the store's counters, the oldest pending record is the head of the store's age-ordered `queryPending`,
 * dead-letter counts list each category. Fence versions, claim ages and partitions that emptied are not
 * exposed by the memory store: those facts are `DepthUnsupported`.
 *
 * @since 0.1.0
 */
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { StoreUnavailable } from "../../domain/OutboxError.js"
import { DeadLetterStore, type DeadLetterStoreService } from "../../services/DeadLetterStore.js"
import { LeaseStore } from "../../services/LeaseStore.js"
import * as OutboxInspection from "../../services/OutboxInspection.js"
import { OutboxStore } from "../../services/OutboxStore.js"

/**
 * Dead-letter counts through the `DeadLetterStore` port (one `list` per category): for backends without a
 * cheaper count.
 *
 * @since 0.1.0
 */
export const countThroughPort = (
  dlq: DeadLetterStoreService
): Effect.Effect<OutboxInspection.DeadLetterCounts, StoreUnavailable> =>
  Effect.gen(function* () {
    const counts = OutboxInspection.noDeadLetters()
    for (const category of OutboxInspection.categories) {
      counts[category] = (yield* dlq.list({ category }).pipe(Effect.catchTag("InvalidArgument", Effect.die))).length
    }
    return counts
  })

/**
 * Builds the inspection over the memory stores in context (the lease store is used when present).
 *
 * @since 0.1.0
 */
export const make: Effect.Effect<OutboxInspection.OutboxInspectionService, never, OutboxStore | DeadLetterStore> =
  Effect.gen(function* () {
    const store = yield* OutboxStore
    const dlq = yield* DeadLetterStore
    const leases = yield* Effect.serviceOption(LeaseStore)
    const name = "memory"
    return OutboxInspection.make(
      {
        name,
        notes: [
          "the memory backend lives only as long as its process; fence versions, claim ages and emptied partitions are not exposed"
        ],
        partitions: Effect.map(Stream.runCollect(store.listPartitions), Chunk.toReadonlyArray),
        facts: (partitionKey) =>
          Effect.gen(function* () {
            const pending = yield* OutboxInspection.fact(store.countPending(partitionKey))
            const claimed = yield* OutboxInspection.fact(store.countClaimed(partitionKey))
            // the memory store's preview walks its age order: its first record is the oldest pending one
            const head = yield* store
              .queryPending(partitionKey, 1)
              .pipe(
                Effect.mapError(
                  (cause) => new StoreUnavailable({ operation: "inspect.oldestPending", partitionKey, cause })
                )
              )
            return {
              pending,
              claimed,
              oldestPendingAt: OutboxInspection.known(Option.map(Option.fromNullable(head[0]), (r) => r.createdAt)),
              oldestClaimedAt: OutboxInspection.unsupported(name, "oldestClaimedAt"),
              fence: OutboxInspection.unsupported(name, "fence")
            }
          }),
        deadLetters: countThroughPort(dlq)
      },
      leases
    )
  })

/**
 * The memory inspection layer, beside the memory stores.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<OutboxInspection.OutboxInspection, never, OutboxStore | DeadLetterStore> = Layer.effect(
  OutboxInspection.OutboxInspection,
  make
)
