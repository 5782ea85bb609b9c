/**
 * R-EXP: expire is fenced like a claim and moves only pending records due strictly before `before` (SPEC §2).
 */
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import { type Harness, idsOf, invalidTokens, START, token } from "./Harness.js"

/**
 * Registers the expire tests for one backend.
 */
export const expireContract = (harness: Harness): void => {
  const { freshPartition, record, records, seed, pendingIds, snapshot, withStore } = harness
  describe("expire", () => {
    it.effect("R-EXP-1 expire rejects every invalid token before any state change", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("expirebadtoken")
          yield* seed(store, pk, [{ env: "a", expiresAt: START + 1 }])
          const before = yield* snapshot(store, pk)
          for (const bad of invalidTokens) {
            const error = yield* Effect.flip(store.expire(DateTime.unsafeMake(START + 100), pk, bad))
            expect(error._tag).toBe("StaleFencingToken")
          }
          expect(yield* snapshot(store, pk)).toEqual(before)
          expect(yield* store.expire(DateTime.unsafeMake(START + 100), pk, token("o", 1))).toBe(1)
        })
      )
    )

    it.effect("R-EXP-1 expire below the high-water mark fails and expires nothing", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("expirehwm")
          yield* seed(store, pk, [{ env: "a", expiresAt: START + 1 }])
          yield* store.claim(pk, token("o", 4), 0)
          const error = yield* Effect.flip(store.expire(DateTime.unsafeMake(START + 100), pk, token("o", 3)))
          expect(error._tag).toBe("StaleFencingToken")
          expect(yield* store.countPending(pk)).toBe(1)
        })
      )
    )

    it.effect("R-EXP-1 an accepted expire raises the high-water mark", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("expireraises")
          const [a] = yield* seed(store, pk, ["a"])
          expect(yield* store.expire(DateTime.unsafeMake(START), pk, token("sweeper", 4))).toBe(0)
          expect((yield* Effect.flip(store.claim(pk, token("o", 3), 10)))._tag).toBe("StaleFencingToken")
          expect(idsOf(yield* store.claim(pk, token("o", 4), 10))).toEqual([a])
        })
      )
    )

    it.effect("R-EXP-2 only pending records expire; claimed and terminal ones are untouched", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("expirepending")
          const [claimed, done, pending, later, never] = yield* seed(store, pk, [
            { env: "claimed", expiresAt: START + 1_000 },
            { env: "done", expiresAt: START + 1_000 },
            { env: "pending", expiresAt: START + 1_000 },
            { env: "later", expiresAt: START + 5_000 },
            { env: "never" }
          ])
          const t = token("o", 1)
          expect(idsOf(yield* store.claim(pk, t, 2))).toEqual([claimed, done])
          yield* store.complete([done ?? ""], t)
          expect(yield* store.expire(DateTime.unsafeMake(START + 2_000), pk, t)).toBe(1)
          expect(yield* pendingIds(store, pk)).toEqual([later, never])
          expect(yield* store.countClaimed(pk)).toBe(1)
          // the claimed one can still be completed; the expired one is gone for good
          yield* store.complete([claimed ?? ""], t)
          expect((yield* Effect.flip(store.complete([pending ?? ""], t)))._tag).toBe("StaleFencingToken")
          expect(idsOf(yield* store.claim(pk, t, 10))).toEqual([later, never])
        })
      )
    )

    it.effect("R-EXP-2 expiry is strictly before: expiresAt equal to `before` stays", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("strict")
          yield* seed(store, pk, [{ env: "a", expiresAt: START + 5_000 }])
          const t = token("o", 1)
          expect(yield* store.expire(DateTime.unsafeMake(START + 5_000), pk, t)).toBe(0)
          expect(yield* store.countPending(pk)).toBe(1)
          expect(yield* store.expire(DateTime.unsafeMake(START + 5_001), pk, t)).toBe(1)
          expect(yield* store.countPending(pk)).toBe(0)
        })
      )
    )

    it.effect("R-EXP-2 expire is scoped to its partition and returns the count", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const p1 = freshPartition("expire1")
          const p2 = freshPartition("expire2")
          yield* seed(store, p1, [
            { env: "a", expiresAt: START + 1 },
            { env: "b", expiresAt: START + 2 },
            { env: "c", expiresAt: START + 3 }
          ])
          yield* seed(store, p2, [{ env: "a", expiresAt: START + 1 }])
          expect(yield* store.expire(DateTime.unsafeMake(START + 10), p1, token("o", 1))).toBe(3)
          expect(yield* store.countPending(p1)).toBe(0)
          expect(yield* store.countPending(p2)).toBe(1)
          expect(yield* store.expire(DateTime.unsafeMake(START + 10), p1, token("o", 1))).toBe(0)
        })
      )
    )

    it.effect("R-EXP-3 a sweep that completes reports its count and expired records stay expired", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("sweep")
          yield* seed(store, pk, [
            { env: "a", expiresAt: START + 1 },
            { env: "b", expiresAt: START + 1 }
          ])
          const result = yield* Effect.either(store.expire(DateTime.unsafeMake(START + 2), pk, token("o", 1)))
          expect(result._tag).toBe("Right")
          if (result._tag === "Right") expect(result.right).toBe(2)
          expect(idsOf(yield* store.claim(pk, token("o", 1), 10))).toEqual([])
          // an expired identity is terminal: re-persisting it is a duplicate
          const error = yield* Effect.flip(store.persist([record(pk, { env: "a", id: `${pk}.again` })]))
          expect(error._tag).toBe("DuplicateRecord")
        })
      )
    )
  })
}
