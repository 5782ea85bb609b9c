/**
 * The in-memory `LeaseStore` (SPEC §4): one immutable map holding every partition's stored lease, read
 * and replaced only inside single synchronous steps (`Effect.sync`), so every write is atomic and of
 * concurrent acquirers in one process exactly one wins. Implements the storage primitives of
 * `LeaseStore.make`; stored leases are immutable (an update stores a new one).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { LeaseTokenLike } from "../../domain/LeaseToken.js"
import * as LeaseStore from "../../services/LeaseStore.js"

/**
 * Options of the memory lease store. It has none today; the type exists so that every backend module
 * offers the same `layerWith(options)` shape.
 *
 * @since 0.1.0
 */
export interface MemoryLeaseStoreOptions {}

type Leases = HashMap.HashMap<string, LeaseStore.StoredLease>

const stored = (leases: Leases, partitionKey: string): LeaseStore.StoredLease | undefined =>
  Option.getOrUndefined(HashMap.get(leases, partitionKey))

const isHeldBy = (lease: LeaseStore.StoredLease, token: LeaseTokenLike): boolean =>
  !lease.released && lease.owner === token.owner && lease.version === token.version

/**
 * Builds a memory lease store with its own empty state.
 *
 * @since 0.1.0
 */
export const make = (_options: MemoryLeaseStoreOptions = {}): Effect.Effect<LeaseStore.LeaseStoreService> =>
  Effect.sync(() => {
    let leases: Leases = HashMap.empty()

    /** Stores `next` for the partition (one synchronous step, so no other fiber sees a half-done write). */
    const written = (partitionKey: string, next: LeaseStore.StoredLease): LeaseStore.WriteOutcome => {
      leases = HashMap.set(leases, partitionKey, next)
      return { _tag: "Written", lease: next }
    }

    /** Replaces the token's lease with `change(lease)` when the token holds it; else refuses. */
    const updateHeld = (
      partitionKey: string,
      token: LeaseTokenLike,
      change: (lease: LeaseStore.StoredLease) => LeaseStore.StoredLease
    ) =>
      Effect.sync((): LeaseStore.WriteOutcome => {
        const current = stored(leases, partitionKey)
        return current !== undefined && isHeldBy(current, token)
          ? written(partitionKey, change(current))
          : { _tag: "Refused", stored: current }
      })

    return LeaseStore.make({
      tryAcquire: (partitionKey, owner, nowMillis, expiresAtMillis) =>
        Effect.sync((): LeaseStore.WriteOutcome => {
          const current = stored(leases, partitionKey)
          if (current !== undefined && !current.released && nowMillis < current.expiresAtMillis) {
            return { _tag: "Refused", stored: current }
          }
          return written(partitionKey, {
            owner,
            version: (current?.version ?? 0) + 1,
            expiresAtMillis,
            released: false
          })
        }),
      extend: (partitionKey, token, expiresAtMillis) =>
        updateHeld(partitionKey, token, (lease) => ({ ...lease, expiresAtMillis })),
      end: (partitionKey, token) => updateHeld(partitionKey, token, (lease) => ({ ...lease, released: true })),
      read: (partitionKey) => Effect.sync(() => stored(leases, partitionKey))
    })
  })

/**
 * A memory lease store layer with the given options.
 *
 * @since 0.1.0
 */
export const layerWith = (options: MemoryLeaseStoreOptions): Layer.Layer<LeaseStore.LeaseStore> =>
  Layer.effect(LeaseStore.LeaseStore, make(options))

/**
 * The memory lease store layer (fresh, empty state per build).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<LeaseStore.LeaseStore> = layerWith({})
