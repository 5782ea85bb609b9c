/**
 * DeadLetterStore contract, selections (SPEC §5): list order and filters, delete by ids, deleteWhere by
 * route, category, time window and limit, paging to the end, purge.
 */
import { expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import { randomInt, randomUUID } from "node:crypto"
import { DeadLetterStore } from "../../../src/services/DeadLetterStore.js"
import { byAge, byId, entry, idsOf, type Run, unique, uniqueWindowStart } from "./DeadLetterSupport.js"

/** The list, delete, deleteWhere and purge tests. */
export const selectionSuite = (run: Run): void => {
  it.effect("§5 list returns oldest first by (failedAt, id) whatever the write order", () =>
    run(
      Effect.gen(function* () {
        const dlq = yield* DeadLetterStore
        const routeId = unique("route")
        const t = uniqueWindowStart()
        const tag = randomUUID()
        const entries = [
          entry({ id: `${tag}-c`, routeId, failedAt: t + 5 }),
          entry({ id: `${tag}-b`, routeId, failedAt: t + 10 }),
          entry({ id: `${tag}-a`, routeId, failedAt: t + 10 }),
          entry({ id: `${tag}-z`, routeId, failedAt: t }),
          entry({ id: `${tag}-d`, routeId, failedAt: t + 10 }),
          entry({ id: `${tag}-y`, routeId, failedAt: t + 1 })
        ]
        for (const e of entries) yield* dlq.write(e)
        const listed = yield* dlq.list({ routeId })
        expect(idsOf(listed)).toEqual([`${tag}-z`, `${tag}-y`, `${tag}-c`, `${tag}-a`, `${tag}-b`, `${tag}-d`])
        const limited = yield* dlq.list({ routeId, limit: 4 })
        expect(idsOf(limited)).toEqual([`${tag}-z`, `${tag}-y`, `${tag}-c`, `${tag}-a`])
      })
    )
  )

  it.effect("§5 list filters by route, by category, since (inclusive), before (exclusive) and limit", () =>
    run(
      Effect.gen(function* () {
        const dlq = yield* DeadLetterStore
        const routeA = unique("route-a")
        const routeB = unique("route-b")
        const t = uniqueWindowStart()
        const a1 = entry({ routeId: routeA, category: "poison", failedAt: t + 1 })
        const a2 = entry({ routeId: routeA, category: "permanent", failedAt: t + 2 })
        const a3 = entry({ routeId: routeA, category: "expired", failedAt: t + 3 })
        const a4 = entry({ routeId: routeA, category: "poison", failedAt: t + 4 })
        const b1 = entry({ routeId: routeB, category: "poison", failedAt: t + 2 })
        const none = entry({ category: "poison", failedAt: t + 3 })
        for (const e of [a4, b1, a1, none, a3, a2]) yield* dlq.write(e)
        const at = (ms: number) => DateTime.unsafeMake(t + ms)

        expect(idsOf(yield* dlq.list({ routeId: routeA }))).toEqual(idsOf([a1, a2, a3, a4]))
        expect(idsOf(yield* dlq.list({ routeId: routeB }))).toEqual(idsOf([b1]))
        expect(idsOf(yield* dlq.list({ routeId: unique("route-none") }))).toEqual([])
        expect(idsOf(yield* dlq.list({ category: "poison", since: at(0), before: at(5) }))).toEqual(
          idsOf([a1, b1, none, a4])
        )
        expect(idsOf(yield* dlq.list({ routeId: routeA, category: "poison" }))).toEqual(idsOf([a1, a4]))
        expect(idsOf(yield* dlq.list({ routeId: routeA, since: at(2) }))).toEqual(idsOf([a2, a3, a4]))
        expect(idsOf(yield* dlq.list({ routeId: routeA, before: at(3) }))).toEqual(idsOf([a1, a2]))
        expect(idsOf(yield* dlq.list({ routeId: routeA, since: at(2), before: at(4) }))).toEqual(idsOf([a2, a3]))
        expect(idsOf(yield* dlq.list({ since: at(3), before: at(4) }))).toEqual(idsOf([a3, none].sort(byId)))
        expect(idsOf(yield* dlq.list({ routeId: routeA, limit: 2 }))).toEqual(idsOf([a1, a2]))
        expect(idsOf(yield* dlq.list({ routeId: routeA, since: at(2), limit: 1 }))).toEqual(idsOf([a2]))
        expect(yield* dlq.list({ routeId: routeA, since: at(2), before: at(2) })).toEqual([])
      })
    )
  )

  it.effect("§5 delete by ids returns the count of entries that existed and removes only those", () =>
    run(
      Effect.gen(function* () {
        const dlq = yield* DeadLetterStore
        const routeId = unique("route")
        const t = uniqueWindowStart()
        const [e1, e2, e3] = [1, 2, 3].map((i) => entry({ routeId, failedAt: t + i }))
        if (e1 === undefined || e2 === undefined || e3 === undefined) return
        for (const e of [e1, e2, e3]) yield* dlq.write(e)
        expect(yield* dlq.delete([e1.id, unique("missing"), e3.id])).toBe(2)
        expect(idsOf(yield* dlq.list({ routeId }))).toEqual([e2.id])
        expect(yield* dlq.delete([e1.id])).toBe(0)
        expect(yield* dlq.delete([])).toBe(0)
        expect((yield* Effect.flip(dlq.get(e1.id)))._tag).toBe("NotFound")
        expect((yield* dlq.get(e2.id)).id).toBe(e2.id)
      })
    )
  )

  it.effect("§5 deleteWhere by route removes exactly that route's entries", () =>
    run(
      Effect.gen(function* () {
        const dlq = yield* DeadLetterStore
        const routeA = unique("route-a")
        const routeB = unique("route-b")
        const t = uniqueWindowStart()
        for (let i = 0; i < 3; i++) yield* dlq.write(entry({ routeId: routeA, failedAt: t + i }))
        const b = entry({ routeId: routeB, failedAt: t })
        yield* dlq.write(b)
        expect(yield* dlq.deleteWhere({ routeId: routeA })).toBe(3)
        expect(yield* dlq.list({ routeId: routeA })).toEqual([])
        expect(idsOf(yield* dlq.list({ routeId: routeB }))).toEqual([b.id])
        expect(yield* dlq.deleteWhere({ routeId: routeA })).toBe(0)
      })
    )
  )

  it.effect("§5 deleteWhere by category removes only entries of that category", () =>
    run(
      Effect.gen(function* () {
        const dlq = yield* DeadLetterStore
        const routeId = unique("route")
        const t = uniqueWindowStart()
        const poison = [1, 3].map((i) => entry({ routeId, category: "poison", failedAt: t + i }))
        const permanent = [2, 4].map((i) => entry({ routeId, category: "permanent", failedAt: t + i }))
        for (const e of [...poison, ...permanent]) yield* dlq.write(e)
        const window = { since: DateTime.unsafeMake(t), before: DateTime.unsafeMake(t + 60_000) }
        expect(yield* dlq.deleteWhere({ category: "poison", ...window })).toBe(2)
        expect(idsOf(yield* dlq.list({ routeId }))).toEqual(idsOf(permanent))
      })
    )
  )

  it.effect("§5 deleteWhere by time range honours since (inclusive) and before (exclusive)", () =>
    run(
      Effect.gen(function* () {
        const dlq = yield* DeadLetterStore
        const routeId = unique("route")
        const t = uniqueWindowStart()
        const entries = [0, 1, 2, 3, 4].map((i) => entry({ routeId, failedAt: t + i * 1000 }))
        for (const e of entries) yield* dlq.write(e)
        const removed = yield* dlq.deleteWhere({
          routeId,
          since: DateTime.unsafeMake(t + 1000),
          before: DateTime.unsafeMake(t + 3000)
        })
        expect(removed).toBe(2)
        expect(idsOf(yield* dlq.list({ routeId }))).toEqual(idsOf(entries.filter((_, i) => i === 0 || i >= 3)))
      })
    )
  )

  it.effect("§5 deleteWhere with a limit removes the oldest entries first", () =>
    run(
      Effect.gen(function* () {
        const dlq = yield* DeadLetterStore
        const routeId = unique("route")
        const t = uniqueWindowStart()
        const entries = [5, 3, 1, 4, 2].map((i) => entry({ routeId, failedAt: t + i }))
        for (const e of entries) yield* dlq.write(e)
        const sorted = [...entries].sort(byAge)
        expect(yield* dlq.deleteWhere({ routeId, limit: 2 })).toBe(2)
        expect(idsOf(yield* dlq.list({ routeId }))).toEqual(idsOf(sorted.slice(2)))
        expect(yield* dlq.deleteWhere({ routeId, limit: 10 })).toBe(3)
        expect(yield* dlq.list({ routeId })).toEqual([])
      })
    )
  )

  it.effect("§5 deleteWhere over 260 entries of one route pages to the end and returns the exact total", () =>
    run(
      Effect.gen(function* () {
        const dlq = yield* DeadLetterStore
        const routeId = unique("route")
        const other = unique("route-other")
        const t = uniqueWindowStart()
        const entries = Array.from({ length: 260 }, (_, i) => entry({ routeId, failedAt: t + (i % 37) }))
        yield* Effect.forEach(entries, (e) => dlq.write(e), { concurrency: 8, discard: true })
        const kept = entry({ routeId: other, failedAt: t })
        yield* dlq.write(kept)
        expect(yield* dlq.deleteWhere({ routeId })).toBe(260)
        expect(yield* dlq.list({ routeId })).toEqual([])
        expect(idsOf(yield* dlq.list({ routeId: other }))).toEqual([kept.id])
      })
    )
  )

  it.effect("§5 purge(before) removes only entries strictly older than before, across routes", () =>
    run(
      Effect.gen(function* () {
        const dlq = yield* DeadLetterStore
        // Below every other test's window: purge spans all routes.
        const t = 1_000 + randomInt(0, 1000) * 100_000
        const routeA = unique("route-a")
        const routeB = unique("route-b")
        const oldA = entry({ routeId: routeA, failedAt: t })
        const oldB = entry({ routeId: routeB, failedAt: t + 1 })
        const oldNoRoute = entry({ failedAt: t + 2 })
        const boundary = entry({ routeId: routeA, failedAt: t + 10 })
        const young = entry({ routeId: routeB, failedAt: t + 11 })
        for (const e of [young, oldA, boundary, oldNoRoute, oldB]) yield* dlq.write(e)
        const purged = yield* dlq.purge(DateTime.unsafeMake(t + 10))
        expect(purged).toBe(3)
        for (const e of [oldA, oldB, oldNoRoute]) expect((yield* Effect.flip(dlq.get(e.id)))._tag).toBe("NotFound")
        expect(idsOf(yield* dlq.list({ routeId: routeA }))).toEqual([boundary.id])
        expect(idsOf(yield* dlq.list({ routeId: routeB }))).toEqual([young.id])
        expect(yield* dlq.purge(DateTime.unsafeMake(t + 10))).toBe(0)
      })
    )
  )
}
