/**
 * The `LeaseStore` port (SPEC §4): issues the fencing tokens that own partitions.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as DateTime from "effect/DateTime"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type { LeaseTokenLike } from "../domain/LeaseToken.js"
import type { LeaseToken } from "../domain/LeaseToken.js"
import type { LeaseHeld, LeaseNotFound, StaleFencingToken, StoreUnavailable } from "../domain/OutboxError.js"

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
