/**
 * The fence rules every backend applies the same way: admission of a token against a partition's
 * fence high-water mark (R-CLAIM-2, R-EXP-1) and the fields a successful claim stamps on a record
 * (SPEC §1 transitions). Pure: backends express the outcome in their own storage.
 *
 * @since 0.1.0
 */
import type * as DateTime from "effect/DateTime"
import * as Option from "effect/Option"

/**
 * What a claim or expire does with the partition's fence: `keep` (the token is at the mark), `raise`
 * (the token is above it: the mark becomes its version) or `stale` (the token is below it: reject with
 * `StaleFencingToken`, touch nothing).
 *
 * @since 0.1.0
 */
export type Admission = "keep" | "raise" | "stale"

/**
 * Admits a (valid) token version against a high-water mark (0 when the partition has none).
 *
 * @since 0.1.0
 */
export const admit = (highWaterMark: number, version: number): Admission =>
  version < highWaterMark ? "stale" : version === highWaterMark ? "keep" : "raise"

/**
 * The claim-related fields of a record, before or after a claim.
 *
 * @since 0.1.0
 */
export interface ClaimFields<Instant> {
  readonly claimedBy: Option.Option<string>
  readonly claimVersion: number
  readonly claimedAt: Option.Option<Instant>
  readonly firstAttemptedAt: Option.Option<Instant>
  readonly replayCount: number
}

/**
 * The fields a successful claim stamps: `claimedBy = owner`, `claimVersion = version`,
 * `claimedAt = now`, `firstAttemptedAt = now` only when it was empty, `replayCount + 1`
 * (so `replayCount` counts claims, not failures).
 *
 * @since 0.1.0
 */
export const stampClaim = <Instant = DateTime.Utc>(
  previous: Pick<ClaimFields<Instant>, "firstAttemptedAt" | "replayCount">,
  token: { readonly owner: string; readonly version: number },
  now: Instant
): ClaimFields<Instant> => ({
  claimedBy: Option.some(token.owner),
  claimVersion: token.version,
  claimedAt: Option.some(now),
  firstAttemptedAt: Option.isSome(previous.firstAttemptedAt) ? previous.firstAttemptedAt : Option.some(now),
  replayCount: previous.replayCount + 1
})

/**
 * The claim fields every record of one claim shares: one value each, for {@link stampClaimInto}.
 *
 * @since 0.1.0
 */
export interface ClaimStamp<Instant> {
  readonly claimedBy: Option.Option<string>
  readonly claimVersion: number
  readonly claimedAt: Option.Option<Instant>
}

/**
 * The {@link ClaimStamp} of a claim by `token` at `now`.
 *
 * @since 0.1.0
 */
export const claimStamp = <Instant = DateTime.Utc>(
  token: { readonly owner: string; readonly version: number },
  now: Instant
): ClaimStamp<Instant> => ({
  claimedBy: Option.some(token.owner),
  claimVersion: token.version,
  claimedAt: Option.some(now)
})

/**
 * {@link stampClaim} in place, on a stored record a backend keeps mutable: the same fields, the stamp's
 * values shared by every record of the claim (nothing allocated per record).
 *
 * @since 0.1.0
 */
export const stampClaimInto = <Instant>(
  target: { -readonly [K in keyof ClaimFields<Instant>]: ClaimFields<Instant>[K] },
  stamp: ClaimStamp<Instant>
): void => {
  target.claimedBy = stamp.claimedBy
  target.claimVersion = stamp.claimVersion
  target.claimedAt = stamp.claimedAt
  target.firstAttemptedAt = firstAttemptAfter(target.firstAttemptedAt, stamp)
  target.replayCount += 1
}

/**
 * `firstAttemptedAt` after a claim with `stamp` (see {@link stampClaim}): the earlier first attempt when
 * there was one, else the stamp's own `claimedAt` (shared, not a new value per record).
 *
 * @since 0.2.0
 */
export const firstAttemptAfter = <Instant>(
  previous: Option.Option<Instant>,
  stamp: ClaimStamp<Instant>
): Option.Option<Instant> => (Option.isSome(previous) ? previous : stamp.claimedAt)
