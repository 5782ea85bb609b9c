/**
 * The optional `LeaseFence` port (SPEC §6 step 5, §13): a complete that is also the drainer's lease check.
 * One statement completes claimed records only while the live lease of their partition still carries the
 * claim's token (owner and version, not released, not expired), so the check after a batch's last sends
 * is folded into the end-of-batch complete instead of being a separate read. A backend whose outbox and
 * lease tables share a database offers it (`PostgresLeaseFence`); without it the drainer reads the lease.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as LeaseToken from "../domain/LeaseToken.js"
import type { StoreUnavailable } from "../domain/OutboxError.js"

/**
 * What a fenced complete found: `Held` — the lease carried the token, and these ids were completed (the
 * others did not match their claim); `Unconfirmed` — nothing was completed, so whether the lease is held is
 * not known (the caller reads it).
 *
 * @since 0.1.0
 */
export type FencedComplete =
  { readonly _tag: "Held"; readonly completed: ReadonlySet<string> } | { readonly _tag: "Unconfirmed" }

/**
 * The fenced complete of one backend.
 *
 * @since 0.1.0
 */
export interface LeaseFenceService {
  /**
   * Completes `ids` (records of `partitionKey` claimed by `token`) in one statement that matches only while
   * the partition's live lease carries `token` and has not expired at the clock's now.
   */
  readonly complete: (
    partitionKey: string,
    ids: ReadonlyArray<string>,
    token: LeaseToken.LeaseTokenLike
  ) => Effect.Effect<FencedComplete, StoreUnavailable>
}

/**
 * The `LeaseFence` service tag. Optional: the drainer reads it with `Effect.serviceOption`.
 *
 * @since 0.1.0
 */
export class LeaseFence extends Context.Tag("effect-outbox/LeaseFence")<LeaseFence, LeaseFenceService>() {}
