/**
 * The `LeaseStore` port (SPEC §4): issues the fencing tokens that own partitions.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { invalidReason, type LeaseTokenLike } from "../domain/LeaseToken.js"
import type { LeaseToken } from "../domain/LeaseToken.js"
import { type LeaseHeld, type LeaseNotFound, StaleFencingToken, type StoreUnavailable } from "../domain/OutboxError.js"

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
  ) => Effect.Effect<Lease, LeaseHeld | StoreUnavailable>
  /**
   * Extends the lease, keeping its version. Wrong owner or version → `StaleFencingToken`; no lease →
   * `LeaseNotFound`. An expired lease nobody took over may still be renewed by its owner.
   */
  readonly renew: (
    partitionKey: string,
    token: LeaseTokenLike,
    ttl: Duration.DurationInput
  ) => Effect.Effect<Lease, StaleFencingToken | LeaseNotFound | StoreUnavailable>
  /**
   * Ends the lease (the version high-water mark survives). Wrong owner or version →
   * `StaleFencingToken`; none → `LeaseNotFound`.
   */
  readonly release: (
    partitionKey: string,
    token: LeaseTokenLike
  ) => Effect.Effect<void, StaleFencingToken | LeaseNotFound | StoreUnavailable>
  /** The latest lease, also when expired and not taken over; `LeaseNotFound` if none or released. */
  readonly current: (partitionKey: string) => Effect.Effect<Lease, LeaseNotFound | StoreUnavailable>
}

/**
 * The `LeaseStore` service tag.
 *
 * @since 0.1.0
 */
export class LeaseStore extends Context.Tag("effect-outbox/LeaseStore")<LeaseStore, LeaseStoreService>() {}

/**
 * The ttl of an acquire or renew as whole milliseconds (negative treated as 0). A non-finite ttl is a
 * programming error: a lease that never expires would strand its partition forever if its owner died.
 * Shared by every lease backend.
 *
 * @since 0.1.0
 */
export const ttlMillis = (ttl: Duration.DurationInput): Effect.Effect<number> => {
  const duration = Duration.decode(ttl)
  if (!Duration.isFinite(duration)) {
    return Effect.dieMessage(`lease ttl must be finite, got ${Duration.format(duration)}`)
  }
  return Effect.succeed(Math.max(0, Math.floor(Duration.toMillis(duration))))
}

/**
 * Checks the arguments of `acquire`: an empty partition key or owner is a programming error (the token
 * would be invalid, or the lease would guard no partition), so it dies with a message naming the
 * argument rather than issuing an unusable lease. Shared by every lease backend.
 *
 * @since 0.1.0
 */
export const checkAcquire = (partitionKey: string, owner: string): Effect.Effect<void> => {
  if (typeof partitionKey !== "string" || partitionKey.length === 0) {
    return Effect.dieMessage("lease partition key must be a non-empty string")
  }
  if (typeof owner !== "string" || owner.length === 0)
    return Effect.dieMessage("lease owner must be a non-empty string")
  return Effect.void
}

/**
 * The `StaleFencingToken` for an invalid token (empty owner, non-positive or unsafe version), if it is.
 *
 * @since 0.1.0
 */
export const invalidToken = (
  operation: string,
  partitionKey: string,
  token: LeaseTokenLike
): Option.Option<StaleFencingToken> => {
  const reason = invalidReason(token)
  if (reason === undefined) return Option.none()
  return Option.some(
    new StaleFencingToken({
      operation,
      partitionKey,
      reason: `invalid token: ${reason}`,
      owner: typeof token.owner === "string" ? token.owner : undefined,
      version: typeof token.version === "number" ? token.version : undefined
    })
  )
}

/**
 * Fails with `StaleFencingToken` when the token is invalid; checked before anything is read.
 *
 * @since 0.1.0
 */
export const checkToken = (
  operation: string,
  partitionKey: string,
  token: LeaseTokenLike
): Effect.Effect<void, StaleFencingToken> =>
  Option.match(invalidToken(operation, partitionKey, token), { onNone: () => Effect.void, onSome: Effect.fail })

/**
 * The `StaleFencingToken` for a valid token that is not the current holder's.
 *
 * @since 0.1.0
 */
export const notCurrentHolder = (
  operation: string,
  partitionKey: string,
  token: LeaseTokenLike,
  holder: { readonly owner: string; readonly version: number }
): StaleFencingToken =>
  new StaleFencingToken({
    operation,
    partitionKey,
    owner: token.owner,
    version: token.version,
    highWaterMark: holder.version,
    reason: `the lease is held by ${holder.owner} at version ${holder.version}, not by ${token.owner} at version ${token.version}`
  })
