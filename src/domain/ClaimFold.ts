/**
 * Bounded folds that turn an age-ordered or unordered stream of a partition's records into the input of
 * {@link ClaimOrder.selectFrom} (R-CLAIM-4/5): the selection over what a fold keeps equals the selection
 * over the whole partition. Pure: backends feed pages and claim what `select` returns.
 *
 * @since 0.1.0
 */
import * as Option from "effect/Option"
import * as ClaimOrder from "./ClaimOrder.js"

/**
 * How many candidates a {@link ScanFold} retains per requested record.
 *
 * @since 0.1.0
 */
export const RetentionFactor = 3

/**
 * The fold over pages in any order: the oldest `retain = RetentionFactor × limit` claimable candidates
 * (trimmed back to `retain` whenever the set reaches `2 × retain`) and the oldest non-claimable
 * non-terminal record of each ordering key (its blocking head). Candidates behind a known head are
 * dropped; a page's heads are recorded before its candidates. Memory stays below `2 × retain`
 * candidates plus one head per key.
 *
 * @since 0.1.0
 */
export class ScanFold<R extends ClaimOrder.ClaimFacts> {
  /** `RetentionFactor × limit`. */
  readonly retain: number
  /** The retained claimable candidates (unordered between trims). */
  candidates: Array<R> = []
  /** The blocking head of each ordering key seen. */
  readonly heads = new Map<string, R>()
  /** Pages added. */
  pages = 0
  /** Items the pages scanned (as reported by the source). */
  scanned = 0
  /** The high-water mark of `candidates.length`. */
  maxCandidates = 0
  /** Whether any non-terminal record carried an ordering key. */
  sawKey = false
  /** Non-terminal records seen. */
  nonTerminal = 0

  constructor(
    limit: number,
    private readonly rule: ClaimOrder.ClaimRule
  ) {
    this.retain = RetentionFactor * limit
  }

  private blocked(record: R): boolean {
    if (Option.isNone(record.orderingKey)) return false
    const head = this.heads.get(record.orderingKey.value)
    return head !== undefined && ClaimOrder.compareAge(head, record) < 0
  }

  private trim(): void {
    this.candidates = this.candidates
      .filter((record) => !this.blocked(record))
      .sort(ClaimOrder.compareAge)
      .slice(0, this.retain)
  }

  /** Folds one page in; `scanned` is what the source read for it (filtered-out items included). */
  addPage(records: ReadonlyArray<R>, scanned: number): this {
    this.pages++
    this.scanned += scanned
    const claimable: Array<R> = []
    for (const record of records) {
      if (!ClaimOrder.isNonTerminal(record)) continue
      this.nonTerminal++
      if (Option.isSome(record.orderingKey)) this.sawKey = true
      if (ClaimOrder.isClaimable(record, this.rule)) {
        claimable.push(record)
      } else if (Option.isSome(record.orderingKey)) {
        const key = record.orderingKey.value
        const head = this.heads.get(key)
        if (head === undefined || ClaimOrder.compareAge(record, head) < 0) this.heads.set(key, record)
      }
    }
    for (const record of claimable) {
      if (this.blocked(record)) continue
      if (this.candidates.length >= 2 * this.retain) this.trim()
      this.candidates.push(record)
      if (this.candidates.length > this.maxCandidates) this.maxCandidates = this.candidates.length
    }
    return this
  }

  /** The records to claim, in age order (at most `limit`). */
  select(limit: number): Array<R> {
    return ClaimOrder.selectFrom([...this.candidates, ...this.heads.values()], limit, this.rule)
  }
}

/**
 * The fold over pages that arrive in age order: claimable records not held back by a blocking head,
 * and the oldest non-claimable non-terminal record of each ordering key (younger records of that key
 * are dropped). Done once `limit` records are selected: nothing younger can change the choice.
 *
 * @since 0.1.0
 */
export class LocalWalk<R extends ClaimOrder.ClaimFacts> {
  /** Claimable records kept so far, in age order. */
  readonly selected: Array<R> = []
  /** The blocking head of each ordering key met. */
  readonly heads = new Map<string, R>()
  /** Pages added. */
  pages = 0
  /** Items the pages scanned (as reported by the source). */
  scanned = 0
  /** Non-terminal records seen. */
  nonTerminal = 0
  /** Whether the last page of the source was added. */
  exhausted = false

  constructor(
    readonly limit: number,
    private readonly rule: ClaimOrder.ClaimRule
  ) {}

  /** True once `limit` records are selected. */
  get done(): boolean {
    return this.selected.length >= this.limit
  }

  /** Folds one page in (records in age order, following the previous page); `last` marks the final page. */
  addPage(records: ReadonlyArray<R>, scanned: number, last: boolean): this {
    this.pages++
    this.scanned += scanned
    if (last) this.exhausted = true
    for (const record of records) {
      if (this.done) break
      if (!ClaimOrder.isNonTerminal(record)) continue
      this.nonTerminal++
      const key = Option.getOrUndefined(record.orderingKey)
      if (key !== undefined && this.heads.has(key)) continue
      if (ClaimOrder.isClaimable(record, this.rule)) this.selected.push(record)
      else if (key !== undefined) this.heads.set(key, record)
    }
    return this
  }

  /** The records to claim, in age order (at most `limit`). */
  select(): Array<R> {
    return ClaimOrder.selectFrom([...this.selected, ...this.heads.values()], this.limit, this.rule)
  }
}
