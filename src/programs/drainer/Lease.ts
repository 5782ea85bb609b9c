/**
 * The drainer's lease checks (SPEC §6 step 5): a cycle drains only under a live, unexpired lease of its
 * owner, and a wave's sends and completes happen only while that lease still carries the claim's version.
 * An unreadable lease is never taken for a lost one.
 *
 * @since 0.1.0
 */
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as LeaseToken from "../../domain/LeaseToken.js"
import { StaleFencingToken } from "../../domain/OutboxError.js"
import type { BatchState } from "./BatchState.js"
import type { Instance } from "./Instance.js"

/**
 * What a lease check found.
 *
 * @since 0.1.0
 */
export type LeaseCheck = "held" | "lost" | "unknown"

/**
 * The live lease's token when it is this owner's, valid and unexpired; `none` when it is not;
 * `"unknown"` when the lease store could not be read.
 *
 * @since 0.1.0
 */
export const read = (instance: Instance): Effect.Effect<Option.Option<LeaseToken.LeaseToken> | "unknown"> =>
  Effect.clockWith((clock) =>
    Effect.map(Effect.either(instance.leases.current(instance.config.partitionKey)), (lease) => {
      if (Either.isLeft(lease)) return lease.left._tag === "LeaseNotFound" ? Option.none() : "unknown"
      const { expiresAt, token } = lease.right
      if (token.owner !== instance.config.owner || !LeaseToken.isValid(token)) return Option.none()
      if (DateTime.toEpochMillis(expiresAt) <= clock.unsafeCurrentTimeMillis()) return Option.none()
      return Option.some(token)
    })
  )

/**
 * The live lease's token when this owner holds it (an unreadable lease counts as not held).
 *
 * @since 0.1.0
 */
export const live = (instance: Instance): Effect.Effect<Option.Option<LeaseToken.LeaseToken>> =>
  Effect.map(read(instance), (found) => (found === "unknown" ? Option.none() : found))

/**
 * The error of a cycle that found the lease moved on.
 *
 * @since 0.1.0
 */
export const moved = (
  instance: Instance,
  operation: string,
  token: LeaseToken.LeaseTokenLike,
  recordId: string
): StaleFencingToken =>
  new StaleFencingToken({
    operation,
    partitionKey: instance.config.partitionKey,
    owner: token.owner,
    version: token.version,
    recordIds: [recordId],
    reason: `the live lease of ${instance.config.owner} no longer carries version ${token.version}`
  })

/**
 * Whether the live lease still carries the token's version: one lease read.
 *
 * @since 0.1.0
 */
export const check = (instance: Instance, token: LeaseToken.LeaseTokenLike): Effect.Effect<LeaseCheck> =>
  Effect.map(read(instance), (found) =>
    found === "unknown"
      ? ("unknown" as const)
      : Option.isSome(found) && found.value.version === token.version
        ? ("held" as const)
        : ("lost" as const)
  )

/**
 * {@link check}, unless the check after the last wave's sends still stands: nothing was sent, written
 * (no complete, release or dead-letter write) or awaited since it found the lease held.
 *
 * @since 0.1.0
 */
export const checkAgain = (
  instance: Instance,
  token: LeaseToken.LeaseTokenLike,
  state: BatchState
): Effect.Effect<LeaseCheck> =>
  state.leaseHeldAt === instance.storeCalls ? Effect.succeed("held") : check(instance, token)
