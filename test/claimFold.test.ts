/**
 * The pure claim folds (domain/ClaimFold): fed a partition page by page, their selection equals
 * `ClaimOrder.selectFrom` over the whole partition (R-CLAIM-4/5), with bounded memory.
 */
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as FastCheck from "effect/FastCheck"
import * as Option from "effect/Option"
import { LocalWalk, RetentionFactor, ScanFold } from "../src/domain/ClaimFold.js"
import * as ClaimOrder from "../src/domain/ClaimOrder.js"
import type { RecordStatus } from "../src/domain/OutboxRecord.js"

interface Rec extends ClaimOrder.ClaimFacts {
  readonly id: string
}

const rule: ClaimOrder.ClaimRule = { version: 5, nowMillis: 100_000, staleClaimAfterMillis: 30_000 }

const rec = (
  seq: number,
  status: RecordStatus,
  key?: string,
  claim: { readonly version?: number; readonly at?: number } = {}
): Rec => ({
  id: `r${seq}`,
  createdAt: DateTime.unsafeMake(1000 + Math.floor(seq / 3)),
  seq,
  envelopeId: `e${seq}`,
  status,
  orderingKey: Option.fromNullable(key),
  claimVersion: claim.version ?? 0,
  claimedAt: claim.at === undefined ? Option.none() : Option.some(DateTime.unsafeMake(claim.at))
})

const ids = (records: ReadonlyArray<Rec>) => records.map((r) => r.id)

const pagesOf = <A>(items: ReadonlyArray<A>, size: number): Array<Array<A>> => {
  const pages: Array<Array<A>> = []
  for (let i = 0; i < items.length; i += size) pages.push(items.slice(i, i + size))
  return pages.length === 0 ? [[]] : pages
}

const arbPartition = FastCheck.array(
  FastCheck.record({
    status: FastCheck.constantFrom<RecordStatus>("pending", "pending", "claimed", "completed", "expired"),
    key: FastCheck.option(FastCheck.constantFrom("A", "B", "C"), { nil: undefined }),
    version: FastCheck.integer({ min: 1, max: 6 }),
    at: FastCheck.integer({ min: 50_000, max: 100_000 })
  }),
  { maxLength: 60 }
).map((specs) => specs.map((s, seq) => rec(seq + 1, s.status, s.key, { version: s.version, at: s.at })))

describe("ClaimFold.ScanFold", () => {
  it("selects exactly what selectFrom selects over the whole partition, pages in any order", () =>
    FastCheck.assert(
      FastCheck.property(
        arbPartition,
        FastCheck.integer({ min: 1, max: 8 }),
        FastCheck.integer({ min: 1, max: 10 }),
        FastCheck.integer(),
        (records, limit, pageSize, seed) => {
          const shuffled = [...records].sort((a, b) => ((a.seq * 7919 + seed) % 97) - ((b.seq * 7919 + seed) % 97))
          const fold = new ScanFold<Rec>(limit, rule)
          for (const page of pagesOf(shuffled, pageSize)) fold.addPage(page, page.length)
          expect(ids(fold.select(limit))).toEqual(ids(ClaimOrder.selectFrom(records, limit, rule)))
          expect(fold.maxCandidates).toBeLessThanOrEqual(2 * RetentionFactor * limit)
          expect(fold.scanned).toBe(records.length)
        }
      ),
      { numRuns: 300 }
    ))

  it("keeps one blocking head per key and drops candidates behind it", () => {
    const fold = new ScanFold<Rec>(2, rule)
    fold.addPage([rec(1, "claimed", "K", { version: 5, at: 99_000 }), rec(2, "pending", "K"), rec(3, "pending")], 3)
    expect(fold.heads.size).toBe(1)
    expect(ids(fold.candidates)).toEqual(["r3"])
    expect(fold.sawKey).toBe(true)
    expect(fold.nonTerminal).toBe(3)
    expect(ids(fold.select(2))).toEqual(["r3"])
  })

  it("trims the candidate set back to retain when it reaches twice retain", () => {
    const fold = new ScanFold<Rec>(1, rule)
    const records = Array.from({ length: 20 }, (_, i) => rec(20 - i, "pending"))
    fold.addPage(records, records.length)
    expect(fold.retain).toBe(RetentionFactor)
    expect(fold.candidates.length).toBeLessThanOrEqual(2 * fold.retain)
    expect(ids(fold.select(1))).toEqual(["r1"])
  })
})

describe("ClaimFold.LocalWalk", () => {
  it("selects exactly what selectFrom selects when fed the partition in age order", () =>
    FastCheck.assert(
      FastCheck.property(
        arbPartition,
        FastCheck.integer({ min: 1, max: 8 }),
        FastCheck.integer({ min: 1, max: 10 }),
        (records, limit, pageSize) => {
          const walk = new LocalWalk<Rec>(limit, rule)
          const pages = pagesOf([...records].sort(ClaimOrder.compareAge), pageSize)
          pages.forEach((page, i) => {
            if (!walk.done) walk.addPage(page, page.length, i === pages.length - 1)
          })
          expect(ids(walk.select())).toEqual(ids(ClaimOrder.selectFrom(records, limit, rule)))
        }
      ),
      { numRuns: 300 }
    ))

  it("is done once limit records are selected and ignores the rest of the page", () => {
    const walk = new LocalWalk<Rec>(2, rule)
    walk.addPage([rec(1, "pending"), rec(2, "pending"), rec(3, "pending")], 3, false)
    expect(walk.done).toBe(true)
    expect(walk.exhausted).toBe(false)
    expect(ids(walk.selected)).toEqual(["r1", "r2"])
    expect(walk.nonTerminal).toBe(2)
  })

  it("a non-claimable head holds back the younger records of its key only", () => {
    const walk = new LocalWalk<Rec>(3, rule)
    walk.addPage(
      [rec(1, "claimed", "K", { version: 5, at: 99_000 }), rec(2, "pending", "K"), rec(3, "pending", "J")],
      3,
      true
    )
    expect(walk.exhausted).toBe(true)
    expect(walk.heads.size).toBe(1)
    expect(ids(walk.select())).toEqual(["r3"])
  })
})
