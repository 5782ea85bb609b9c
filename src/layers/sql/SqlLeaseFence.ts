/**
 * The fenced complete statement of the SQL backends (SPEC §13, `LeaseFence`): the guarded complete of
 * R-DONE-2 (status `claimed`, owner and version) with one more condition — the partition's lease row
 * still carries the token's owner and version, is not released and has not expired — so one statement is
 * both the drainer's lease check and its complete. Every value is a parameter; only validated, quoted names
 * are interpolated.
 *
 * @since 0.1.0
 */
import type * as LeaseToken from "../../domain/LeaseToken.js"
import type { SqlDialect } from "./SqlDialect.js"
import { bySize } from "./SqlOutboxStatements.js"

/**
 * The statement completing `n` ids under the lease fence, over the quoted outbox and lease tables.
 * Params: {@link fencedCompleteBinds}. Returns the completed ids.
 *
 * @since 0.1.0
 */
export const fencedComplete = (d: SqlDialect, outbox: string, lease: string): ((n: number) => string) =>
  bySize((n) => {
    const { inIds, next: p } = d.placeholders()
    return `UPDATE ${outbox} SET status = 'completed', completed_at = ${p()}, terminal_at = ${p()}
WHERE ${inIds("id", n)} AND status = 'claimed' AND claimed_by = ${p()} AND claim_version = ${p()}
  AND EXISTS (SELECT 1 FROM ${lease} AS l WHERE l.partition_key = ${p()} AND l.owner = ${p()}
    AND l.version = ${p()} AND NOT l.released AND l.expires_at > ${p()})${d.returning}`
  })

/**
 * The values of {@link fencedComplete}, in the order of its placeholders.
 *
 * @since 0.1.0
 */
export const fencedCompleteBinds = (
  d: SqlDialect,
  partitionKey: string,
  ids: ReadonlyArray<string>,
  token: LeaseToken.LeaseTokenLike,
  now: number
): Array<unknown> => {
  const params: Array<unknown> = [now, now]
  d.bindIds(params, ids)
  params.push(token.owner, token.version, partitionKey, token.owner, token.version, now)
  return params
}
