/**
 * The `LeaseStore` port (SPEC §4) and the shared core every backend goes through.
 *
 * Backends implement {@link LeaseBackend} (storage only: conditional writes and a read returning plain
 * facts). {@link make} wraps one with what must not drift between backends: argument validation
 * (`InvalidArgument`: empty or non-string partition key or owner, a ttl that is not a finite duration of
 * at least 1 ms), token validity (`StaleFencingToken` before anything is read), expiry judged by
 * `Clock`, the typed outcome of a refused write (`LeaseHeld`, `LeaseNotFound`, `StaleFencingToken`), a
 * bounded retry when a refusal races a concurrent change, and one span per mutating operation.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import { invalidReason, LeaseToken, type LeaseTokenLike } from "../domain/LeaseToken.js"
import {
  InvalidArgument,
  LeaseHeld,
  LeaseNotFound,
  StaleFencingToken,
  StoreUnavailable
} from "../domain/OutboxError.js"
import * as LeaseWrites from "./LeaseWrites.js"
import * as Traced from "./Traced.js"

/**
 * A lease on a partition: the token that fences its store operations and when it expires.
 *
 * @since 0.1.0
 */
export interface Lease {
  readonly partitionKey: string
  readonly token: LeaseToken
  readonly expiresAt: DateTime.Utc
}

/**
 * The lease store. Versions of a partition strictly increase across every acquire (also after release
 * and after an expiry takeover); renew keeps the version. Time comes from `Clock`.
 *
 * @since 0.1.0
 */
export interface LeaseStoreService {
  /**
   * Starts a new epoch for `owner` with a version above every earlier one. Fails with `LeaseHeld` while
   * an unexpired lease exists — the same owner's included (renew instead).
   */
  readonly acquire: (
    partitionKey: string,
    owner: string,
    ttl: Duration.DurationInput
  ) => Effect.Effect<Lease, LeaseHeld | InvalidArgument | StoreUnavailable>
  /**
   * Extends the lease, keeping its version. Wrong owner or version → `StaleFencingToken`; no lease →
   * `LeaseNotFound`. An expired lease nobody took over may still be renewed by its owner.
   */
  readonly renew: (
    partitionKey: string,
    token: LeaseTokenLike,
    ttl: Duration.DurationInput
  ) => Effect.Effect<Lease, StaleFencingToken | LeaseNotFound | InvalidArgument | StoreUnavailable>
  /**
   * Ends the lease (the version high-water mark survives). Wrong owner or version →
   * `StaleFencingToken`; none → `LeaseNotFound`.
   */
  readonly release: (
    partitionKey: string,
    token: LeaseTokenLike
  ) => Effect.Effect<void, StaleFencingToken | LeaseNotFound | InvalidArgument | StoreUnavailable>
  /** The latest lease, also when expired and not taken over; `LeaseNotFound` if none or released. */
  readonly current: (partitionKey: string) => Effect.Effect<Lease, LeaseNotFound | InvalidArgument | StoreUnavailable>
}

/**
 * The `LeaseStore` service tag.
 *
 * @since 0.1.0
 */
export class LeaseStore extends Context.Tag("effect-outbox/LeaseStore")<LeaseStore, LeaseStoreService>() {}

/**
 * A partition's lease as a backend stores it: plain facts, expiry in epoch milliseconds. `version` is the
 * partition's high-water mark and survives release.
 *
 * @since 0.1.0
 */
export interface StoredLease {
  readonly owner: string
  readonly version: number
  readonly expiresAtMillis: number
  readonly released: boolean
}

/**
 * What a conditional lease write did: `Written` with the lease as stored after the write, or `Refused`
 * with the lease as read after the refusal (`undefined` when the partition has none).
 *
 * @since 0.1.0
 */
export type WriteOutcome =
  | { readonly _tag: "Written"; readonly lease: StoredLease }
  | { readonly _tag: "Refused"; readonly stored: StoredLease | undefined }

/**
 * The storage primitives of a lease backend. Each write is atomic per partition; none validates its
 * arguments, checks tokens or writes spans (the core does). Failures of the storage are
 * `StoreUnavailable`.
 *
 * @since 0.1.0
 */
export interface LeaseBackend {
  /**
   * When the partition has no live lease at `nowMillis` (none, released, or `expiresAtMillis <=
   * nowMillis`), stores `{ owner, version: previous + 1 (1 when none), expiresAtMillis, released: false }`;
   * otherwise refuses.
   */
  readonly tryAcquire: (
    partitionKey: string,
    owner: string,
    nowMillis: number,
    expiresAtMillis: number
  ) => Effect.Effect<WriteOutcome, StoreUnavailable>
  /** When the stored lease is exactly the token's and not released, sets its expiry; otherwise refuses. */
  readonly extend: (
    partitionKey: string,
    token: LeaseTokenLike,
    expiresAtMillis: number
  ) => Effect.Effect<WriteOutcome, StoreUnavailable>
  /** When the stored lease is exactly the token's and not released, marks it released; otherwise refuses. */
  readonly end: (partitionKey: string, token: LeaseTokenLike) => Effect.Effect<WriteOutcome, StoreUnavailable>
  /** The stored lease (also expired or released), `undefined` when the partition never had one. */
  readonly read: (partitionKey: string) => Effect.Effect<StoredLease | undefined, StoreUnavailable>
  /**
   * Why the backend can never store a lease for this (non-empty) partition key, e.g. it is over a key size
   * limit; `undefined` when it can. The core fails with `InvalidArgument` before any request.
   */
  readonly keyProblem?: ((partitionKey: string) => string | undefined) | undefined
}

/** Times a write is tried when its refusal turns out to be a race that the next attempt settles. */
const MaxAttempts = 5

const isNonEmptyString = (u: unknown): u is string => typeof u === "string" && u.length > 0

const invalidKey = (operation: string) =>
  new InvalidArgument({ operation, argument: "partitionKey", reason: "must be a non-empty string" })

/** The ttl as whole milliseconds, at least 1: anything else would issue a lease that is already expired. */
const ttlMillis = (operation: string, ttl: unknown): Either.Either<number, InvalidArgument> => {
  const invalid = (reason: string) => Either.left(new InvalidArgument({ operation, argument: "ttl", reason }))
  if (typeof ttl === "number" && !(Number.isFinite(ttl) && ttl > 0)) {
    return invalid("must be a positive finite number of milliseconds")
  }
  const duration = Duration.decodeUnknown(ttl)
  if (Option.isNone(duration)) return invalid("is not a duration")
  if (!Duration.isFinite(duration.value)) return invalid("must be finite")
  const millis = Math.floor(Duration.toMillis(duration.value))
  return millis >= 1 ? Either.right(millis) : invalid("must be at least 1 millisecond")
}

/** The `StaleFencingToken` for an invalid token (empty owner, non-positive or unsafe version), if it is. */
const invalidToken = (operation: string, partitionKey: string, token: unknown): StaleFencingToken | undefined => {
  const reason = invalidReason(token)
  if (reason === undefined) return undefined
  const owner: unknown = typeof token === "object" && token !== null ? Reflect.get(token, "owner") : undefined
  const version: unknown = typeof token === "object" && token !== null ? Reflect.get(token, "version") : undefined
  return new StaleFencingToken({
    operation,
    partitionKey,
    reason: `invalid token: ${reason}`,
    owner: typeof owner === "string" ? owner : undefined,
    version: typeof version === "number" ? version : undefined
  })
}

/** The `StaleFencingToken` for a valid token that is not the current holder's. */
const notCurrentHolder = (
  operation: string,
  partitionKey: string,
  token: LeaseTokenLike,
  holder: StoredLease
): StaleFencingToken =>
  new StaleFencingToken({
    operation,
    partitionKey,
    owner: token.owner,
    version: token.version,
    highWaterMark: holder.version,
    reason: `the lease is held by ${holder.owner} at version ${holder.version}, not by ${token.owner} at version ${token.version}`
  })

/** Leases already built for a stored lease (a backend that keeps its facts immutable gets them reused). */
const built = new WeakMap<StoredLease, Lease>()

const leaseOf = (partitionKey: string, stored: StoredLease): Lease => {
  const cached = built.get(stored)
  if (cached !== undefined && cached.partitionKey === partitionKey) return cached
  const lease: Lease = {
    partitionKey,
    token: new LeaseToken({ owner: stored.owner, version: stored.version }, { disableValidation: true }),
    expiresAt: DateTime.unsafeMake(stored.expiresAtMillis)
  }
  built.set(stored, lease)
  return lease
}

const keptChanging = (operation: string, partitionKey: string) =>
  new StoreUnavailable({
    operation,
    partitionKey,
    cause: new Error(`the lease of partition ${partitionKey} kept changing during ${MaxAttempts} ${operation} attempts`)
  })

/** The span of one operation (made when a tracer is installed, see `Traced`). */
const span = (name: string, partitionKey: unknown) =>
  Traced.span(name, { "outbox.partition": typeof partitionKey === "string" ? partitionKey : "" })

/**
 * Wraps a lease backend with the shared core.
 *
 * @since 0.1.0
 */
export const make = (backend: LeaseBackend): LeaseStoreService => {
  /**
   * Renew and release: the token's conditional write; a refusal is explained by the lease read after it
   * (none or released → `LeaseNotFound`, another holder → `StaleFencingToken`). A refusal whose read shows
   * the token's own live lease raced the write that issued it: tried again.
   */
  const holderWrite = (
    operation: "renew" | "release",
    partitionKey: string,
    token: LeaseTokenLike,
    write: () => Effect.Effect<WriteOutcome, StoreUnavailable>
  ): Effect.Effect<Lease, StaleFencingToken | LeaseNotFound | StoreUnavailable> =>
    Effect.gen(function* () {
      const invalid = invalidToken(operation, partitionKey, token)
      if (invalid !== undefined) return yield* invalid
      for (let attempt = 1; attempt <= MaxAttempts; attempt++) {
        const outcome = yield* write()
        if (outcome._tag === "Written") return leaseOf(partitionKey, outcome.lease)
        const stored = outcome.stored
        if (stored === undefined || stored.released) return yield* new LeaseNotFound({ partitionKey })
        if (stored.owner !== token.owner || stored.version !== token.version) {
          return yield* notCurrentHolder(operation, partitionKey, token, stored)
        }
      }
      return yield* keptChanging(operation, partitionKey)
    })

  /** `InvalidArgument` when the backend can never hold a lease for the key (e.g. over its size limit). */
  const keyRefused = (operation: string, partitionKey: string): InvalidArgument | undefined => {
    const problem = backend.keyProblem?.(partitionKey)
    return problem === undefined
      ? undefined
      : new InvalidArgument({ operation, argument: "partitionKey", reason: problem })
  }

  /**
   * Counts the write on the partition when it starts and when it ends (`LeaseWrites`); `written`, when
   * given, notes a write that succeeded in place of the end count (in the same step, so no other write of
   * the partition can fall between the two).
   */
  const counted = <A, E>(
    partitionKey: string,
    write: Effect.Effect<A, E>,
    written?: (value: A) => void
  ): Effect.Effect<A, E> =>
    Effect.suspend(() => {
      LeaseWrites.note(partitionKey)
      return Effect.onExit(write, (exit) =>
        Effect.sync(() =>
          written !== undefined && Exit.isSuccess(exit) ? written(exit.value) : LeaseWrites.note(partitionKey)
        )
      )
    })

  /** A renew that was written stands in for a read of the lease (`LeaseWrites.noteRenewed`). */
  const renewed =
    (partitionKey: string) =>
    (lease: Lease): void =>
      LeaseWrites.noteRenewed(service, partitionKey, lease.token, DateTime.toEpochMillis(lease.expiresAt))

  const service = LeaseStore.of({
    acquire: (partitionKey, owner, ttl) =>
      Effect.gen(function* () {
        if (!isNonEmptyString(partitionKey)) return yield* invalidKey("acquire")
        const refused = keyRefused("acquire", partitionKey)
        if (refused !== undefined) return yield* refused
        if (!isNonEmptyString(owner)) {
          return yield* new InvalidArgument({
            operation: "acquire",
            argument: "owner",
            reason: "must be a non-empty string"
          })
        }
        const millis = yield* ttlMillis("acquire", ttl)
        // stored instants are whole milliseconds (a test clock can stand between two)
        const now = Math.floor(yield* Clock.currentTimeMillis)
        for (let attempt = 1; attempt <= MaxAttempts; attempt++) {
          const outcome = yield* backend.tryAcquire(partitionKey, owner, now, now + millis)
          if (outcome._tag === "Written") return leaseOf(partitionKey, outcome.lease)
          const held = outcome.stored
          if (held !== undefined && !held.released && now < held.expiresAtMillis) {
            return yield* new LeaseHeld({
              partitionKey,
              heldBy: held.owner,
              version: held.version,
              expiresAt: DateTime.unsafeMake(held.expiresAtMillis)
            })
          }
        }
        return yield* keptChanging("acquire", partitionKey)
      }).pipe((write) => counted(partitionKey, write), span("LeaseStore.acquire", partitionKey)),
    renew: (partitionKey, token, ttl) =>
      Effect.gen(function* () {
        if (!isNonEmptyString(partitionKey)) return yield* invalidKey("renew")
        const refused = keyRefused("renew", partitionKey)
        if (refused !== undefined) return yield* refused
        const millis = yield* ttlMillis("renew", ttl)
        const now = Math.floor(yield* Clock.currentTimeMillis)
        return yield* holderWrite("renew", partitionKey, token, () => backend.extend(partitionKey, token, now + millis))
      }).pipe((write) => counted(partitionKey, write, renewed(partitionKey)), span("LeaseStore.renew", partitionKey)),
    release: (partitionKey, token) =>
      Effect.gen(function* () {
        if (!isNonEmptyString(partitionKey)) return yield* invalidKey("release")
        const refused = keyRefused("release", partitionKey)
        if (refused !== undefined) return yield* refused
        yield* holderWrite("release", partitionKey, token, () => backend.end(partitionKey, token))
      }).pipe((write) => counted(partitionKey, write), span("LeaseStore.release", partitionKey)),
    // on the drainer's hot path (checked around every wave of sends): no span
    current: (partitionKey) => {
      if (!isNonEmptyString(partitionKey)) return Effect.fail(invalidKey("current"))
      const refused = keyRefused("current", partitionKey)
      if (refused !== undefined) return Effect.fail(refused)
      return Effect.flatMap(backend.read(partitionKey), (stored) =>
        stored === undefined || stored.released
          ? Effect.fail(new LeaseNotFound({ partitionKey }))
          : Effect.succeed(leaseOf(partitionKey, stored))
      )
    }
  })
  return LeaseWrites.track(service)
}
