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
import * as LeaseWrites from "../../services/LeaseWrites.js"
import type { Instance, LeaseHorizon } from "./Instance.js"

/**
 * What a lease check found.
 *
 * @since 0.1.0
 */
export type LeaseCheck = "held" | "lost" | "unknown"

/**
 * The live lease's token when it is this owner's, valid and unexpired; `none` when it is not;
 * `"unknown"` when the lease store could not be read. A lease found held becomes the instance's
 * `leaseHorizon`: until this process writes the partition's lease again or its expiry (less
 * `LeaseWrites.marginMillis`) comes near, {@link check} takes it as still held without a read.
 *
 * @since 0.1.0
 */
export const read = (instance: Instance): Effect.Effect<Option.Option<LeaseToken.LeaseToken> | "unknown"> =>
  Effect.clockWith((clock) => {
    const partitionKey = instance.config.partitionKey
    const writes = LeaseWrites.count(instance.leases, partitionKey)
    instance.leaseHorizon = undefined
    return Effect.map(Effect.either(instance.leases.current(partitionKey)), (lease) => {
      if (Either.isLeft(lease)) return lease.left._tag === "LeaseNotFound" ? Option.none() : "unknown"
      const { expiresAt, token } = lease.right
      if (token.owner !== instance.config.owner || !LeaseToken.isValid(token)) return Option.none()
      const expiresAtMillis = DateTime.toEpochMillis(expiresAt)
      if (expiresAtMillis <= clock.unsafeCurrentTimeMillis()) return Option.none()
      if (writes !== undefined) {
        instance.leaseHorizon = {
          token,
          writes,
          untilMillis: expiresAtMillis - LeaseWrites.marginMillis
        }
      }
      return Option.some(token)
    })
  })

/**
 * What this process knows of the lease at `nowMillis` without a read: the last read that found it held
 * while that read stands, or else a renew of this owner's written since (`LeaseWrites.lastRenewal`: it found
 * the lease held at its version and moved the expiry), which becomes the instance's horizon.
 */
const standing = (instance: Instance, nowMillis: number): LeaseHorizon | undefined => {
  const partitionKey = instance.config.partitionKey
  const horizon = instance.leaseHorizon
  if (horizon !== undefined && LeaseWrites.count(instance.leases, partitionKey) === horizon.writes) {
    return nowMillis < horizon.untilMillis ? horizon : undefined
  }
  const renewal = LeaseWrites.lastRenewal(instance.leases, partitionKey)
  if (renewal === undefined || renewal.token.owner !== instance.config.owner) return undefined
  const renewed: LeaseHorizon = {
    token: renewal.token,
    writes: renewal.writes,
    untilMillis: renewal.expiresAtMillis - LeaseWrites.marginMillis
  }
  instance.leaseHorizon = renewed
  return nowMillis < renewed.untilMillis ? renewed : undefined
}

/**
 * Whether what this process knows of the lease (the last read that found it held, or a renew of this
 * owner's since: `LeaseWrites`) still stands at `nowMillis` for the token's version: {@link check} finds
 * it held without a read (a wave asks this first, without an effect).
 *
 * @since 0.1.0
 */
export const stands = (instance: Instance, token: LeaseToken.LeaseTokenLike, nowMillis: number): boolean =>
  standing(instance, nowMillis)?.token.version === token.version

/**
 * The live lease's token when this owner holds it (an unreadable lease counts as not held): the token of
 * the last read while that read still stands (see {@link read}) or of a renew of this owner's written since,
 * else a new read. The claim that follows is
 * fenced by the token's version either way (R-CLAIM-2).
 *
 * @since 0.1.0
 */
export const live = (instance: Instance): Effect.Effect<Option.Option<LeaseToken.LeaseToken>> =>
  Effect.clockWith((clock) => {
    const known = standing(instance, clock.unsafeCurrentTimeMillis())
    if (known !== undefined) return Effect.succeed(Option.some(known.token))
    return Effect.map(read(instance), (found) => (found === "unknown" ? Option.none() : found))
  })

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
 * Whether the live lease still carries the token's version: one lease read — or none, while the last read
 * that found it held at that version still stands (nothing in this process wrote the lease since, and its
 * expiry is not near: no other process can have taken it over, SPEC §4).
 *
 * @since 0.1.0
 */
export const check = (instance: Instance, token: LeaseToken.LeaseTokenLike): Effect.Effect<LeaseCheck> =>
  Effect.clockWith((clock) =>
    stands(instance, token, clock.unsafeCurrentTimeMillis())
      ? Effect.succeed("held" as const)
      : Effect.map(read(instance), (found) =>
          found === "unknown"
            ? ("unknown" as const)
            : Option.isSome(found) && found.value.version === token.version
              ? ("held" as const)
              : ("lost" as const)
        )
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

/**
 * {@link checkAgain} without an effect: true when it would find the lease held without a read (the check
 * after the last wave's sends stands, or the last read does at `nowMillis`).
 *
 * @since 0.1.0
 */
export const standsAgain = (
  instance: Instance,
  token: LeaseToken.LeaseTokenLike,
  state: BatchState,
  nowMillis: number
): boolean => state.leaseHeldAt === instance.storeCalls || stands(instance, token, nowMillis)
