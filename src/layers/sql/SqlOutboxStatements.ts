/**
 * The outbox statements the SQL backends issue the same way (SPEC §3.2, §3.4, §3.5), each written once over a
 * `SqlDialect`, with the order their values are bound in: identity lookups, the claim selection
 * (R-CLAIM-4/5/6) and its guarded update, complete/release guarded by owner and version (R-DONE-1..3),
 * expiry (R-EXP-1), reads (R-READ-1), the partition listing and the retention sweep. Seq allocation,
 * inserts and the fence stay with each backend (they differ in kind, not in spelling). Every value is a
 * parameter; only validated, quoted names are interpolated.
 *
 * @since 0.1.0
 */
import * as DateTime from "effect/DateTime"
import * as Option from "effect/Option"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import type * as OutboxRecord from "../../domain/OutboxRecord.js"
import type { SqlDialect } from "./SqlDialect.js"

/**
 * The names the shared statements use (validated and quoted by the backend).
 *
 * @since 0.1.0
 */
export interface Names {
  readonly outbox: string
  /** The table with one row per partition that ever stored a record (its seq counter). */
  readonly partitions: string
  /** The partial index of live records by `(partition_key, created_at, seq)`. */
  readonly claimIndex: string
  /** The partial index of claimed records with an ordering key (the head-of-line check, R-CLAIM-5). */
  readonly keyIndex: string
  /** The partial index of terminal records by `terminal_at`. */
  readonly terminalIndex: string
}

/**
 * The stored columns, in the order the stores select them.
 *
 * @since 0.1.0
 */
export const columns: ReadonlyArray<string> = [
  "id",
  "partition_key",
  "envelope_id",
  "binding_id",
  "route_id",
  "address",
  "payload",
  "headers",
  "ordering_key",
  "created_at",
  "expires_at",
  "seq",
  "status",
  "claimed_by",
  "claim_version",
  "claimed_at",
  "first_attempted_at",
  "replay_count",
  "completed_at"
]

/**
 * The columns a persist writes besides `status` (always `pending`), in bind order
 * ({@link pushRecordValues}).
 *
 * @since 0.1.0
 */
export const recordColumns: ReadonlyArray<string> = columns.slice(0, columns.indexOf("status"))

/** The stored text of headers (`{}` without serialising when there are none). */
const headersText = (headers: OutboxRecord.Headers): string => {
  for (const _ in headers) return JSON.stringify(headers)
  return "{}"
}

/**
 * Appends the values of {@link recordColumns} for a record with its seq to `values`.
 *
 * @since 0.1.0
 */
export const pushRecordValues = (values: Array<unknown>, record: OutboxRecord.PreparedRecord, seq: number): void => {
  values.push(
    record.id,
    record.partitionKey,
    record.envelopeId,
    record.bindingId,
    record.routeId,
    record.address,
    record.payload,
    headersText(record.headers),
    Option.getOrNull(record.orderingKey),
    DateTime.toEpochMillis(record.createdAt),
    Option.isSome(record.expiresAt) ? DateTime.toEpochMillis(record.expiresAt.value) : null,
    seq
  )
}

/**
 * The shared statements. Statements over an id list take its length (PostgreSQL binds the list as one
 * array and ignores it). "Returns" names what a write returns where the dialect has `RETURNING`; without it
 * (MySQL) a write returns its affected-row count only.
 *
 * @since 0.1.0
 */
export interface Statements {
  /** Params: partitionKey, envelopeId, bindingId. Returns `id`. */
  readonly findIdentity: string
  /** Params: id. Returns the identity columns of the record holding the id. */
  readonly findById: string
  /** Params: partitionKey, envelopeId, bindingId. Deletes a terminal holder of the identity. */
  readonly deleteTerminalIdentity: string
  /**
   * The claim selection: live candidates in age order that are claimable at the version and that no
   * claimed older record of their ordering key blocks. Params: {@link Binds.selectClaimable}.
   */
  readonly selectClaimable: string
  /** The guarded claim update of `n` ids. Params: {@link Binds.claimUpdate}. Returns the claimed ids. */
  readonly claimUpdate: (n: number) => string
  /** Completes `n` ids claimed by a token. Params: {@link Binds.complete}. Returns the completed ids. */
  readonly complete: (n: number) => string
  /** Releases `n` ids claimed by a token. Params: {@link Binds.release}. Returns the released ids. */
  readonly release: (n: number) => string
  /** Params: now, partitionKey, before. Returns the expired ids. */
  readonly expire: string
  /** Params: partitionKey, limit. */
  readonly queryPending: string
  /** Params: partitionKey. Returns `n`. */
  readonly countPending: string
  /** Params: partitionKey. Returns `n`. */
  readonly countClaimed: string
  /**
   * The partitions with live records, in key order. Params: after (exclusive), limit. Returns
   * `partition_key`.
   */
  readonly listPartitions: string
  /** Params: cutoff, chunk. Deletes terminal rows older than the cutoff; returns the deleted ids. */
  readonly sweep: string
}

/**
 * Memoises a statement builder by its size argument (a handful of sizes recur: full batches and the
 * last partial one), so the text of a large statement is not rebuilt on every call. Bounded.
 *
 * @since 0.1.0
 */
export const bySize = (build: (n: number) => string): ((n: number) => string) => {
  const built = new Map<number, string>()
  return (n) => {
    let text = built.get(n)
    if (text === undefined) {
      if (built.size >= 64) built.clear()
      text = build(n)
      built.set(n, text)
    }
    return text
  }
}

/**
 * Builds the {@link Statements} for a dialect, a set of names and the stale-reclaim setting (the claim
 * statements then take a stale cutoff).
 *
 * @since 0.1.0
 */
export const statements = (d: SqlDialect, t: Names, options: { readonly staleReclaim: boolean }): Statements => {
  const oCols = columns.map((c) => `o.${c}`).join(", ")
  const live = d.live("o")
  const claimIndex = d.indexedBy(t.claimIndex)
  const claimable = (p: () => string) =>
    options.staleReclaim
      ? `(o.status <> 'claimed' OR o.claim_version < ${p()} OR o.claimed_at IS NULL OR o.claimed_at < ${p()})`
      : `(o.status <> 'claimed' OR o.claim_version < ${p()})`
  const blocking = (p: () => string) =>
    options.staleReclaim
      ? `b.claim_version >= ${p()} AND b.claimed_at IS NOT NULL AND b.claimed_at >= ${p()}`
      : `b.claim_version >= ${p()}`
  const selectClaimable = () => {
    const p = d.placeholders().next
    return `SELECT ${oCols} FROM ${t.outbox} AS o${claimIndex}
WHERE o.partition_key = ${p()} AND ${live} AND ${claimable(p)}
  AND (o.ordering_key IS NULL OR NOT EXISTS (
    SELECT 1 FROM ${t.outbox} AS b${d.indexedBy(t.keyIndex)}
    WHERE b.partition_key = o.partition_key AND b.ordering_key IS NOT NULL AND b.ordering_key = o.ordering_key
      AND b.status = 'claimed' AND (b.created_at, b.seq) < (o.created_at, o.seq) AND ${blocking(p)}))
ORDER BY o.created_at, o.seq
LIMIT ${p()}`
  }
  const claimUpdate = (n: number) => {
    const { inIds, next: p } = d.placeholders()
    return `UPDATE ${t.outbox} AS o SET status = 'claimed', claimed_by = ${p()}, claim_version = ${p()},
  claimed_at = ${p()}, first_attempted_at = coalesce(first_attempted_at, ${p()}), replay_count = replay_count + 1
WHERE ${inIds("o.id", n)} AND ${d.unindexed("o.partition_key")} = ${p()}
  AND ${d.unindexed("o.status")} IN ('pending', 'claimed') AND ${claimable(p)}${d.returning}`
  }
  const settle = (set: (p: () => string) => string) => (n: number) => {
    const { inIds, next: p } = d.placeholders()
    return `UPDATE ${t.outbox} SET ${set(p)}
WHERE ${inIds("id", n)} AND status = 'claimed' AND claimed_by = ${p()} AND claim_version = ${p()}${d.returning}`
  }
  const plain = (build: (p: () => string) => string) => build(d.placeholders().next)
  const pending = (what: string, p: () => string) => `SELECT ${what} FROM ${t.outbox} AS o${claimIndex}
WHERE o.partition_key = ${p()} AND ${live} AND o.status = 'pending'`
  return {
    findIdentity: plain(
      (p) => `SELECT id FROM ${t.outbox} WHERE partition_key = ${p()} AND envelope_id = ${p()} AND binding_id = ${p()}`
    ),
    findById: plain((p) => `SELECT partition_key, envelope_id, binding_id FROM ${t.outbox} WHERE id = ${p()}`),
    deleteTerminalIdentity: plain(
      (p) => `DELETE FROM ${t.outbox}
WHERE partition_key = ${p()} AND envelope_id = ${p()} AND binding_id = ${p()} AND status IN ('completed', 'expired')`
    ),
    selectClaimable: selectClaimable(),
    claimUpdate: bySize(claimUpdate),
    complete: bySize(settle((p) => `status = 'completed', completed_at = ${p()}, terminal_at = ${p()}`)),
    release: bySize(settle(() => "status = 'pending', claimed_by = NULL, claimed_at = NULL")),
    expire: plain(
      (p) => `UPDATE ${t.outbox} SET status = 'expired', terminal_at = ${p()}
WHERE partition_key = ${p()} AND expires_at IS NOT NULL AND status = 'pending' AND expires_at < ${p()}${d.returning}`
    ),
    queryPending: plain(
      (p) => `${pending(oCols, p)}
ORDER BY o.created_at, o.seq
LIMIT ${p()}`
    ),
    countPending: plain((p) => pending("count(*) AS n", p)),
    countClaimed: plain(
      (p) => `SELECT count(*) AS n FROM ${t.outbox} AS o${claimIndex}
WHERE o.partition_key = ${p()} AND ${live} AND o.status = 'claimed'`
    ),
    // a skip scan of the live-record index: one index seek per partition with work, so a page costs
    // O(page) whatever the number of partitions ever written (R-READ-3)
    listPartitions: plain((p) => {
      const next = (after: string) =>
        `(SELECT min(o.partition_key) FROM ${t.outbox} AS o${claimIndex} WHERE o.partition_key > ${after} AND ${live})`
      return `WITH RECURSIVE k(partition_key, n) AS (
  SELECT ${next(p())}, 1
  UNION ALL
  SELECT ${next("k.partition_key")}, k.n + 1 FROM k WHERE k.partition_key IS NOT NULL AND k.n < ${p()}
)
SELECT partition_key FROM k WHERE partition_key IS NOT NULL`
    }),
    sweep: plain((p) =>
      d.limitedDelete
        ? `DELETE FROM ${t.outbox} WHERE terminal_at IS NOT NULL AND terminal_at < ${p()}
ORDER BY terminal_at LIMIT ${p()}`
        : `DELETE FROM ${t.outbox} WHERE ${d.rowKey} IN (
  SELECT ${d.rowKey} FROM ${t.outbox}${d.indexedBy(t.terminalIndex)} WHERE terminal_at IS NOT NULL AND terminal_at < ${p()} LIMIT ${p()})${d.returning}`
    )
  }
}

/**
 * The bound values of the shared statements that take more than a few plain values, in the order the
 * statements write them.
 *
 * @since 0.1.0
 */
export interface Binds {
  /** The stale cutoff only with stale reclaim on. */
  readonly selectClaimable: (
    partitionKey: string,
    version: number,
    staleCutoff: number | undefined,
    limit: number
  ) => Array<unknown>
  readonly claimUpdate: (
    ids: ReadonlyArray<string>,
    token: LeaseToken.LeaseTokenLike,
    now: number,
    partitionKey: string,
    staleCutoff: number | undefined
  ) => Array<unknown>
  readonly complete: (ids: ReadonlyArray<string>, token: LeaseToken.LeaseTokenLike, now: number) => Array<unknown>
  readonly release: (ids: ReadonlyArray<string>, token: LeaseToken.LeaseTokenLike) => Array<unknown>
}

/**
 * The ids of a complete or release without repeats, in their order (the array itself when it has none, the
 * common case: no copy).
 *
 * @since 0.2.0
 */
export const withoutRepeats = (ids: ReadonlyArray<string>): ReadonlyArray<string> => {
  const seen = new Set(ids)
  return seen.size === ids.length ? ids : Array.from(seen)
}

/**
 * The {@link Binds} of a dialect.
 *
 * @since 0.1.0
 */
export const binds = (d: SqlDialect): Binds => ({
  selectClaimable: (partitionKey, version, staleCutoff, limit) =>
    staleCutoff === undefined
      ? [partitionKey, version, version, limit]
      : [partitionKey, version, staleCutoff, version, staleCutoff, limit],
  claimUpdate: (ids, token, now, partitionKey, staleCutoff) => {
    const params: Array<unknown> = [token.owner, token.version, now, now]
    d.bindIds(params, ids)
    params.push(partitionKey, token.version)
    if (staleCutoff !== undefined) params.push(staleCutoff)
    return params
  },
  complete: (ids, token, now) => {
    const params: Array<unknown> = [now, now]
    d.bindIds(params, ids)
    params.push(token.owner, token.version)
    return params
  },
  release: (ids, token) => {
    const params: Array<unknown> = []
    d.bindIds(params, ids)
    params.push(token.owner, token.version)
    return params
  }
})
