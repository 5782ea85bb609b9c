/**
 * The claim every SQL backend runs inside one transaction (R-CLAIM-2..6): admit the token at the partition's
 * fence, read the candidates (the SQL applies claimability and the head-of-line check), let
 * `ClaimOrder.selectFrom` make the final choice, claim the chosen ids with a guarded update, and return the
 * candidates the update changed with the claim applied, in age order. The candidates were read under the
 * partition's fence (or write) lock, so nothing but this claim changed them in between.
 *
 * @since 0.1.0
 */
import * as SqlClock from "./SqlClock.js"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as ClaimOrder from "../../domain/ClaimOrder.js"
import * as Fence from "../../domain/Fence.js"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import { StoreUnavailable } from "../../domain/OutboxError.js"
import type * as OutboxRecord from "../../domain/OutboxRecord.js"
import { ClaimBatch } from "../../services/OutboxStore.js"

/**
 * The `createdAt` of a candidate row: the previous candidate's own value when the row was created in the same
 * millisecond (the records of one persisted batch share it), so a claim builds one `DateTime` per batch it meets
 * rather than one per record.
 *
 * @since 0.2.0
 */
export const createdAtOf = (millis: number, previous: ClaimOrder.ClaimFacts | undefined): DateTime.Utc =>
  previous !== undefined && DateTime.toEpochMillis(previous.createdAt) === millis
    ? previous.createdAt
    : DateTime.unsafeMake(millis)

/**
 * A backend's claim steps on its connection `C`, over its candidate type `A`; `E` are its failures.
 *
 * @since 0.1.0
 */
export interface ClaimSteps<C, A extends ClaimOrder.ClaimFacts, E> {
  /** Admits the token at the partition's fence and raises the high-water mark (R-CLAIM-2). */
  readonly fence: (conn: C, partitionKey: string, token: LeaseToken.LeaseTokenLike) => Effect.Effect<void, E>
  /** Reads the claim candidates, oldest first (the stale cutoff only with stale reclaim on). */
  readonly candidates: (
    conn: C,
    partitionKey: string,
    version: number,
    staleCutoff: number | undefined,
    limit: number
  ) => Effect.Effect<ReadonlyArray<A>, E>
  /** The id of a candidate. */
  readonly idOf: (candidate: A) => string
  /** The guarded claim update of the chosen ids; returns the ids it claimed. */
  readonly update: (
    conn: C,
    ids: ReadonlyArray<string>,
    token: LeaseToken.LeaseTokenLike,
    now: number,
    partitionKey: string,
    staleCutoff: number | undefined
  ) => Effect.Effect<ReadonlySet<string>, E>
  /**
   * A claimed candidate as a record, with the claim applied (see `Fence.stampClaim`): `stamp` is the claim's,
   * one for every record it returns.
   */
  readonly claimed: (candidate: A, stamp: Fence.ClaimStamp<DateTime.Utc>) => OutboxRecord.OutboxRecord
}

/**
 * The claim of up to `limit` records of a partition over a backend's steps; `staleMillis` is the
 * stale-claim threshold when stale reclaim is on (R-CLAIM-6).
 *
 * @since 0.1.0
 */
export const claimWith =
  <C, A extends ClaimOrder.ClaimFacts, E>(steps: ClaimSteps<C, A, E>, staleMillis: number | undefined) =>
  (conn: C, partitionKey: string, token: LeaseToken.LeaseTokenLike, limit: number): Effect.Effect<ClaimBatch, E> =>
    // plain combinators, no generator: this runs once per claimed batch
    Effect.zipRight(
      steps.fence(conn, partitionKey, token),
      limit <= 0
        ? Effect.succeed(ClaimBatch([]))
        : Effect.flatMap(SqlClock.nowMillis, (now) => {
            const staleCutoff = staleMillis === undefined ? undefined : now - staleMillis
            return Effect.flatMap(
              steps.candidates(conn, partitionKey, token.version, staleCutoff, limit),
              (found): Effect.Effect<ClaimBatch, E> => {
                const chosen = ClaimOrder.selectFrom(found, limit, {
                  version: token.version,
                  nowMillis: now,
                  staleClaimAfterMillis: staleMillis
                })
                if (chosen.length === 0) return Effect.succeed(ClaimBatch([]))
                return Effect.map(
                  steps.update(conn, chosen.map(steps.idOf), token, now, partitionKey, staleCutoff),
                  (updated) => {
                    const stamp = Fence.claimStamp(token, DateTime.unsafeMake(now))
                    const claimed: Array<OutboxRecord.OutboxRecord> = []
                    for (const candidate of chosen) {
                      if (updated.has(steps.idOf(candidate))) claimed.push(steps.claimed(candidate, stamp))
                    }
                    // in age order already: the selection returns its records oldest first
                    return ClaimBatch(claimed)
                  }
                )
              }
            )
          })
    )

/**
 * The failure of a fence whose statement made the partition's fence row and still returned no mark: a store
 * fault (`StoreUnavailable`), never an admission of the token.
 *
 * @since 0.2.0
 */
export const noFenceRow = (operation: string, partitionKey: string): StoreUnavailable =>
  new StoreUnavailable({ operation, partitionKey, cause: new Error("the fence statement returned no row") })
