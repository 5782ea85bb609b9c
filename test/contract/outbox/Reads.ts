/**
 * R-READ: queryPending, countPending, countClaimed and listPartitions (SPEC §2).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { type Harness, idsOf, START, token } from "./Harness.js"

/**
 * Registers the reads tests for one backend.
 */
export const readsContract = (harness: Harness): void => {
  const { freshPartition, record, records, seed, withStore } = harness
  describe("reads", () => {
    it.effect("R-READ-1 queryPending returns pending records only, sorted by age, at most limit", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("query")
          yield* seed(store, pk, [
            { env: "c", createdAt: START - 300 },
            { env: "a", createdAt: START - 900 },
            { env: "d", createdAt: START - 100 },
            { env: "b", createdAt: START - 600 },
            { env: "z", createdAt: START - 2_000 }
          ])
          yield* store.claim(pk, token("o", 1), 1) // claims z
          const all = yield* store.queryPending(pk, 100)
          expect(all.map((r) => r.envelopeId)).toEqual(["a", "b", "c", "d"])
          expect(all.every((r) => r.status === "pending")).toBe(true)
          const two = yield* store.queryPending(pk, 2)
          expect(two.length).toBeLessThanOrEqual(2)
          expect(two.length).toBeGreaterThan(0)
          expect(two.every((r) => r.status === "pending" && r.envelopeId !== "z")).toBe(true)
          const ages = two.map((r) => DateTime.toEpochMillis(r.createdAt))
          expect([...ages].sort((x, y) => x - y)).toEqual(ages)
          expect(yield* store.queryPending(pk, 0)).toEqual([])
        })
      )
    )

    it.effect("R-READ-1 queryPending is a preview: it changes nothing", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("preview")
          const ids = yield* seed(store, pk, ["a", "b"])
          yield* store.queryPending(pk, 10)
          expect(idsOf(yield* store.claim(pk, token("o", 1), 10))).toEqual(ids)
        })
      )
    )

    it.effect("R-READ-2 countPending and countClaimed are exact and per partition", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const p1 = freshPartition("count1")
          const p2 = freshPartition("count2")
          expect(yield* store.countPending(p1)).toBe(0)
          expect(yield* store.countClaimed(p1)).toBe(0)
          const ids = yield* seed(store, p1, ["a", "b", "c", { env: "d", expiresAt: START + 1 }])
          yield* seed(store, p2, ["a"])
          const t = token("o", 1)
          yield* store.claim(p1, t, 2)
          expect(yield* store.countPending(p1)).toBe(2)
          expect(yield* store.countClaimed(p1)).toBe(2)
          expect(yield* store.countPending(p2)).toBe(1)
          expect(yield* store.countClaimed(p2)).toBe(0)
          yield* store.complete([ids[0] ?? ""], t)
          yield* store.release([ids[1] ?? ""], t)
          expect(yield* store.countPending(p1)).toBe(3)
          expect(yield* store.countClaimed(p1)).toBe(0)
          yield* store.expire(DateTime.unsafeMake(START + 2), p1, t)
          expect(yield* store.countPending(p1)).toBe(2)
        })
      )
    )

    it.effect("R-READ-3 listPartitions includes every partition with pending work", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const p1 = freshPartition("list1")
          const p2 = freshPartition("list2")
          const p3 = freshPartition("list3")
          yield* seed(store, p1, ["a"])
          yield* seed(store, p2, ["a", "b"])
          yield* seed(store, p3, ["a"])
          yield* store.claim(p2, token("o", 1), 1)
          yield* store.claim(p3, token("o", 1), 1)
          const listed = Chunk.toReadonlyArray(yield* Stream.runCollect(store.listPartitions))
          expect(listed).toContain(p1)
          expect(listed).toContain(p2)
          // p3 only has a claimed record: it holds non-terminal records, so it is listed too
          expect(listed).toContain(p3)
        })
      )
    )
  })
}
