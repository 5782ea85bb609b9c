/**
 * The in-memory `LeaseStore` (SPEC §4): one `Ref` holding every partition's stored lease, updated
 * atomically, so concurrent acquirers in one process have exactly one winner. Implements the storage
 * primitives of `LeaseStore.make`; stored leases are immutable (an update stores a new one).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
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

const isHeldBy = (lease: LeaseStore.StoredLease | undefined, token: LeaseTokenLike): boolean =>
  lease !== undefined && !lease.released && lease.owner === token.owner && lease.version === token.version

/**
 * Builds a memory lease store with its own empty state.
 *
 * @since 0.1.0
 */
export const make = (_options: MemoryLeaseStoreOptions = {}): Effect.Effect<LeaseStore.LeaseStoreService> =>
  Effect.map(Ref.make<Leases>(HashMap.empty()), (state) => {
    /** Replaces the token's lease with `change(lease)` when the token holds it; else refuses. */
    const updateHeld = (
      partitionKey: string,
      token: LeaseTokenLike,
      change: (lease: LeaseStore.StoredLease) => LeaseStore.StoredLease
    ) =>
      Ref.modify(state, (leases): readonly [LeaseStore.WriteOutcome, Leases] => {
        const current = stored(leases, partitionKey)
        if (current === undefined || !isHeldBy(current, token)) return [{ _tag: "Refused", stored: current }, leases]
        const next = change(current)
        return [{ _tag: "Written", lease: next }, HashMap.set(leases, partitionKey, next)]
      })

    return LeaseStore.make({
      tryAcquire: (partitionKey, owner, nowMillis, expiresAtMillis) =>
        Ref.modify(state, (leases): readonly [LeaseStore.WriteOutcome, Leases] => {
          const current = stored(leases, partitionKey)
          if (current !== undefined && !current.released && nowMillis < current.expiresAtMillis) {
            return [{ _tag: "Refused", stored: current }, leases]
          }
          const next = { owner, version: (current?.version ?? 0) + 1, expiresAtMillis, released: false }
          return [{ _tag: "Written", lease: next }, HashMap.set(leases, partitionKey, next)]
        }),
      extend: (partitionKey, token, expiresAtMillis) =>
        updateHeld(partitionKey, token, (lease) => ({ ...lease, expiresAtMillis })),
      end: (partitionKey, token) => updateHeld(partitionKey, token, (lease) => ({ ...lease, released: true })),
      read: (partitionKey) => Effect.map(Ref.get(state), (leases) => stored(leases, partitionKey))
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
