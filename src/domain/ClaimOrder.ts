/**
 * The claim rules of the contract in one place: age order (R-CLAIM-4), claimability (the version rule
 * and the optional wall-clock stale rule, R-CLAIM-4/6/7) and head-of-line selection of the oldest N
 * (R-CLAIM-5). Every backend's final selection and the property-test model go through {@link select} /
 * {@link selectFrom}, so they cannot drift apart.
 *
 * @since 0.1.0
 */
import * as DateTime from "effect/DateTime"
import * as Option from "effect/Option"
import type * as Order from "effect/Order"
import type { RecordStatus } from "./OutboxRecord.js"

/**
 * The facts of a record that claim selection looks at.
 *
 * @since 0.1.0
 */
export interface ClaimFacts {
  readonly createdAt: DateTime.Utc
  readonly seq: number
  readonly envelopeId: string
  readonly status: RecordStatus
  readonly orderingKey: Option.Option<string>
  readonly claimVersion: number
  readonly claimedAt: Option.Option<DateTime.Utc>
}

/**
 * Age order: ascending `(createdAt, seq)`, then `envelopeId` as a last tie-break (only reachable across
 * partitions, since seq is unique within one).
 *
 * @since 0.1.0
 */
export const compareAge = (
  a: Pick<ClaimFacts, "createdAt" | "seq" | "envelopeId">,
  b: Pick<ClaimFacts, "createdAt" | "seq" | "envelopeId">
): -1 | 0 | 1 => {
  const ta = DateTime.toEpochMillis(a.createdAt)
  const tb = DateTime.toEpochMillis(b.createdAt)
  if (ta !== tb) return ta < tb ? -1 : 1
  if (a.seq !== b.seq) return a.seq < b.seq ? -1 : 1
  if (a.envelopeId !== b.envelopeId) return a.envelopeId < b.envelopeId ? -1 : 1
  return 0
}

/**
 * {@link compareAge} as an `Order`.
 *
 * @since 0.1.0
 */
export const AgeOrder: Order.Order<Pick<ClaimFacts, "createdAt" | "seq" | "envelopeId">> = compareAge

/**
 * The parameters of one claim that decide claimability.
 *
 * @since 0.1.0
 */
export interface ClaimRule {
  /** The version of the presented token. */
  readonly version: number
  /** Now, in epoch milliseconds (from `Clock`). */
  readonly nowMillis: number
  /** Wall-clock stale reclaim threshold in milliseconds, when configured (R-CLAIM-6). */
  readonly staleClaimAfterMillis: number | undefined
}

/**
 * True for `pending` and `claimed` (the non-terminal states).
 *
 * @since 0.1.0
 */
export const isNonTerminal = (record: Pick<ClaimFacts, "status">): boolean =>
  record.status === "pending" || record.status === "claimed"

/**
 * R-CLAIM-6: a claimed record whose `claimedAt` is strictly older than `now - staleClaimAfter`.
 *
 * @since 0.1.0
 */
export const isStale = (record: Pick<ClaimFacts, "status" | "claimedAt">, rule: ClaimRule): boolean => {
  if (record.status !== "claimed" || rule.staleClaimAfterMillis === undefined) return false
  if (Option.isNone(record.claimedAt)) return true
  return DateTime.toEpochMillis(record.claimedAt.value) < rule.nowMillis - rule.staleClaimAfterMillis
}

/**
 * R-CLAIM-4/6/7: `pending`; or `claimed` at a lower version than the token (the previous owner was
 * pre-empted); or `claimed` and stale. Replay count never matters.
 *
 * @since 0.1.0
 */
export const isClaimable = (
  record: Pick<ClaimFacts, "status" | "claimVersion" | "claimedAt">,
  rule: ClaimRule
): boolean => {
  switch (record.status) {
    case "pending":
      return true
    case "claimed":
      return record.claimVersion < rule.version || isStale(record, rule)
    default:
      return false
  }
}

/**
 * An age-ordered view of one partition's non-terminal records, as head-of-line selection needs it.
 * Backends with indexes provide it cheaply; {@link viewOf} builds one from any collection.
 *
 * - `keyless`: non-terminal records without an ordering key, in age order.
 * - `keyHeads`: for every ordering key, its oldest non-terminal record, in age order.
 * - `nextInKey`: the next younger non-terminal record of the same key, if any.
 *
 * @since 0.1.0
 */
export interface PartitionView<R> {
  readonly keyless: () => Iterator<R>
  readonly keyHeads: () => Iterator<R>
  readonly nextInKey: (record: R) => R | undefined
}

/**
 * A min-heap keyed by age, for the per-key successors discovered during one selection.
 */
class AgeHeap<R extends ClaimFacts> {
  private readonly items: Array<R> = []
  get size(): number {
    return this.items.length
  }
  peek(): R | undefined {
    return this.items[0]
  }
  push(item: R): void {
    const items = this.items
    items.push(item)
    let i = items.length - 1
    while (i > 0) {
      const parent = (i - 1) >> 1
      const p = items[parent]
      if (p === undefined || compareAge(p, item) <= 0) break
      items[i] = p
      i = parent
    }
    items[i] = item
  }
  pop(): R | undefined {
    const items = this.items
    const top = items[0]
    const last = items.pop()
    if (items.length === 0 || last === undefined) return top
    let i = 0
    const n = items.length
    for (;;) {
      const l = 2 * i + 1
      const r = l + 1
      let smallest = i
      let smallestItem = last
      const li = items[l]
      if (l < n && li !== undefined && compareAge(li, smallestItem) < 0) {
        smallest = l
        smallestItem = li
      }
      const ri = items[r]
      if (r < n && ri !== undefined && compareAge(ri, smallestItem) < 0) {
        smallest = r
        smallestItem = ri
      }
      if (smallest === i) break
      items[i] = smallestItem
      i = smallest
    }
    items[i] = last
    return top
  }
}

/**
 * Selects the records one claim returns (R-CLAIM-4 and R-CLAIM-5), in age order:
 * the oldest `limit` claimable records such that no returned record with ordering key K has an older
 * non-terminal record with key K that is not also returned.
 *
 * It walks the partition in age order, merging keyless records, key heads and (once a head is taken)
 * that key's successors. A key whose next record is not claimable, or does not fit in `limit`, is
 * blocked for the rest of the claim. Cost: O((limit + skipped) · log k) where `skipped` counts
 * non-claimable records met before the batch fills and k the number of keys in play.
 *
 * @since 0.1.0
 */
export const select = <R extends ClaimFacts>(view: PartitionView<R>, limit: number, rule: ClaimRule): Array<R> => {
  const selected: Array<R> = []
  if (limit <= 0) return selected
  const keyless = view.keyless()
  const heads = view.keyHeads()
  const successors = new AgeHeap<R>()
  let nextKeyless = advance(keyless)
  let nextHead = advance(heads)
  while (selected.length < limit) {
    // pick the oldest of the three sources
    let source: 0 | 1 | 2 = 0
    let candidate: R | undefined = nextKeyless
    if (nextHead !== undefined && (candidate === undefined || compareAge(nextHead, candidate) < 0)) {
      source = 1
      candidate = nextHead
    }
    const successor = successors.peek()
    if (successor !== undefined && (candidate === undefined || compareAge(successor, candidate) < 0)) {
      source = 2
      candidate = successor
    }
    if (candidate === undefined) break
    if (source === 0) nextKeyless = advance(keyless)
    else if (source === 1) nextHead = advance(heads)
    else successors.pop()
    if (!isNonTerminal(candidate)) continue
    if (isClaimable(candidate, rule)) {
      selected.push(candidate)
      if (Option.isSome(candidate.orderingKey)) {
        const next = view.nextInKey(candidate)
        if (next !== undefined) successors.push(next)
      }
    }
    // a keyed record that is not claimable blocks its key: its successors are never pushed
  }
  return selected
}

const advance = <R>(iterator: Iterator<R>): R | undefined => {
  const next = iterator.next()
  return next.done === true ? undefined : next.value
}

/**
 * Builds a {@link PartitionView} from any collection of one partition's records (terminal ones are
 * ignored). Sorts: O(n log n). The reference path for the model and for backends that have already
 * narrowed the candidates.
 *
 * @since 0.1.0
 */
export const viewOf = <R extends ClaimFacts>(records: Iterable<R>): PartitionView<R> => {
  const sorted = Array.from(records).filter(isNonTerminal).sort(compareAge)
  const keyless: Array<R> = []
  const heads: Array<R> = []
  const next = new Map<R, R>()
  const last = new Map<string, R>()
  for (const record of sorted) {
    if (Option.isNone(record.orderingKey)) {
      keyless.push(record)
      continue
    }
    const key = record.orderingKey.value
    const previous = last.get(key)
    if (previous === undefined) heads.push(record)
    else next.set(previous, record)
    last.set(key, record)
  }
  return {
    keyless: () => keyless[Symbol.iterator](),
    keyHeads: () => heads[Symbol.iterator](),
    nextInKey: (record) => next.get(record)
  }
}

/**
 * {@link select} over any collection of one partition's records.
 *
 * @since 0.1.0
 */
export const selectFrom = <R extends ClaimFacts>(records: Iterable<R>, limit: number, rule: ClaimRule): Array<R> =>
  select(viewOf(records), limit, rule)

/**
 * Checks R-CLAIM-5 for a claim result against the partition as it was before the claim: returns the
 * first returned record that has an older non-terminal same-key record which was not returned, or
 * `undefined` when head-of-line holds. Used by tests as an invariant.
 *
 * @since 0.1.0
 */
export const headOfLineViolation = <R extends ClaimFacts & { readonly id: string }>(
  partitionBefore: Iterable<R>,
  returned: ReadonlyArray<{ readonly id: string }>
): { readonly recordId: string; readonly blockedBy: string } | undefined => {
  const returnedIds = new Set(returned.map((r) => r.id))
  const byKey = new Map<string, Array<R>>()
  for (const record of partitionBefore) {
    if (!isNonTerminal(record) || Option.isNone(record.orderingKey)) continue
    const list = byKey.get(record.orderingKey.value) ?? []
    list.push(record)
    byKey.set(record.orderingKey.value, list)
  }
  for (const list of byKey.values()) {
    list.sort(compareAge)
    let blocker: R | undefined
    for (const record of list) {
      if (returnedIds.has(record.id)) {
        if (blocker !== undefined) return { recordId: record.id, blockedBy: blocker.id }
      } else if (blocker === undefined) {
        blocker = record
      }
    }
  }
  return undefined
}
