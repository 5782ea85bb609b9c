/**
 * The in-memory `LeaseStore` (SPEC §4): one `Ref` holding every partition's lease, updated atomically,
 * so concurrent acquirers in one process have exactly one winner. Time comes from `Clock`.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as LeaseTokenModule from "../../domain/LeaseToken.js"
import { LeaseHeld, LeaseNotFound, StaleFencingToken } from "../../domain/OutboxError.js"
import {
  checkAcquire,
  invalidToken,
  type Lease,
  LeaseStore,
  type LeaseStoreService,
  notCurrentHolder,
  ttlMillis
} from "../../services/LeaseStore.js"

/**
 * Options of the memory lease store. It has none today; the type exists so that every backend module
 * offers the same `layerWith(options)` shape.
 *
 * @since 0.1.0
 */
export interface MemoryLeaseStoreOptions {}

/**
 * What the store keeps per partition. `version` is the partition's high-water mark: it survives
 * release, so the next acquire always issues a higher version.
 */
interface Entry {
  readonly owner: string
  readonly version: number
  readonly expiresAtMillis: number
  readonly released: boolean
  /** The entry as a `Lease`, built on first read (entries never change: an update makes a new one). */
  lease?: Lease | undefined
}

type Leases = HashMap.HashMap<string, Entry>

const toLease = (partitionKey: string, entry: Entry): Lease => ({
  partitionKey,
  token: new LeaseTokenModule.LeaseToken({ owner: entry.owner, version: entry.version }, { disableValidation: true }),
  expiresAt: DateTime.unsafeMake(entry.expiresAtMillis)
})

/** A lease is live while `now` is strictly before its expiry. */
const isLive = (entry: Entry, now: number): boolean => !entry.released && now < entry.expiresAtMillis

/**
 * Builds a memory lease store with its own empty state.
 *
 * @since 0.1.0
 */
export const make = (_options: MemoryLeaseStoreOptions = {}): Effect.Effect<LeaseStoreService> =>
  Effect.gen(function* () {
    const state = yield* Ref.make(HashMap.empty<string, Entry>())

    /**
     * Renew and release share their checks: a valid token, a lease that exists and is not released,
     * and the token being exactly the current holder's.
     */
    const modifyHeld = <A>(
      operation: string,
      partitionKey: string,
      token: LeaseTokenModule.LeaseTokenLike,
      change: (entry: Entry) => readonly [A, Entry]
    ): Effect.Effect<A, StaleFencingToken | LeaseNotFound> =>
      Option.match(invalidToken(operation, partitionKey, token), {
        onSome: (error) => Effect.fail(error),
        onNone: () =>
          Ref.modify(state, (leases): readonly [Either.Either<A, StaleFencingToken | LeaseNotFound>, Leases] => {
            const found = HashMap.get(leases, partitionKey)
            if (Option.isNone(found) || found.value.released) {
              return [Either.left(new LeaseNotFound({ partitionKey })), leases]
            }
            const entry = found.value
            if (entry.owner !== token.owner || entry.version !== token.version) {
              return [Either.left(notCurrentHolder(operation, partitionKey, token, entry)), leases]
            }
            const [result, next] = change(entry)
            return [Either.right(result), HashMap.set(leases, partitionKey, next)]
          }).pipe(Effect.flatten)
      })

    const acquire = (partitionKey: string, owner: string, ttl: Duration.DurationInput) =>
      Effect.gen(function* () {
        yield* checkAcquire(partitionKey, owner)
        const millis = yield* ttlMillis(ttl)
        const now = yield* Clock.currentTimeMillis
        return yield* Ref.modify(state, (leases): readonly [Either.Either<Lease, LeaseHeld>, Leases] => {
          const found = HashMap.get(leases, partitionKey)
          if (Option.isSome(found) && isLive(found.value, now)) {
            const held = found.value
            return [
              Either.left(
                new LeaseHeld({
                  partitionKey,
                  heldBy: held.owner,
                  version: held.version,
                  expiresAt: DateTime.unsafeMake(held.expiresAtMillis)
                })
              ),
              leases
            ]
          }
          const previous = Option.match(found, { onNone: () => 0, onSome: (entry) => entry.version })
          const entry: Entry = { owner, version: previous + 1, expiresAtMillis: now + millis, released: false }
          return [Either.right(toLease(partitionKey, entry)), HashMap.set(leases, partitionKey, entry)]
        }).pipe(Effect.flatten)
      }).pipe(Effect.withSpan("LeaseStore.acquire", { attributes: { "outbox.partition": partitionKey } }))

    const renew = (partitionKey: string, token: LeaseTokenModule.LeaseTokenLike, ttl: Duration.DurationInput) =>
      Effect.gen(function* () {
        const millis = yield* ttlMillis(ttl)
        const now = yield* Clock.currentTimeMillis
        return yield* modifyHeld("renew", partitionKey, token, (entry) => {
          const next: Entry = { ...entry, expiresAtMillis: now + millis, lease: undefined }
          return [toLease(partitionKey, next), next]
        })
      }).pipe(Effect.withSpan("LeaseStore.renew", { attributes: { "outbox.partition": partitionKey } }))

    const release = (partitionKey: string, token: LeaseTokenModule.LeaseTokenLike) =>
      modifyHeld("release", partitionKey, token, (entry): readonly [void, Entry] => [
        undefined,
        { ...entry, released: true, lease: undefined }
      ]).pipe(Effect.withSpan("LeaseStore.release", { attributes: { "outbox.partition": partitionKey } }))

    const current = (partitionKey: string) =>
      Ref.get(state).pipe(
        Effect.flatMap((leases) => {
          const found = HashMap.get(leases, partitionKey)
          return Option.isNone(found) || found.value.released
            ? Effect.fail(new LeaseNotFound({ partitionKey }))
            : Effect.succeed((found.value.lease ??= toLease(partitionKey, found.value)))
        })
      )

    return LeaseStore.of({ acquire, renew, release, current })
  })

/**
 * A memory lease store layer with the given options.
 *
 * @since 0.1.0
 */
export const layerWith = (options: MemoryLeaseStoreOptions): Layer.Layer<LeaseStore> =>
  Layer.effect(LeaseStore, make(options))

/**
 * The memory lease store layer (fresh, empty state per build).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<LeaseStore> = layerWith({})
