/**
 * R-CLAIM: claims are fenced by the partition high-water mark, return the oldest claimable records in age order and honour head-of-line per ordering key (SPEC §2).
 */
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import { type Harness, idsOf, invalidTokens, millisOf, type RecordSpec, START, token } from "./Harness.js"

/**
 * Registers the claim tests for one backend.
 */
export const claimContract = (harness: Harness): void => {
  const { freshPartition, record, records, seed, pendingIds, snapshot, findPending, withStore, stale } = harness
  describe("claim", () => {
    for (const bad of invalidTokens) {
      it.effect(`R-CLAIM-1 invalid token ${JSON.stringify(bad)} fails with StaleFencingToken and changes nothing`, () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("claimbadtoken")
            yield* seed(store, pk, ["a", "b"])
            const before = yield* snapshot(store, pk)
            const error = yield* Effect.flip(store.claim(pk, bad, 10))
            expect(error._tag).toBe("StaleFencingToken")
            expect(yield* snapshot(store, pk)).toEqual(before)
            // the rejected token did not raise the high-water mark: version 1 is still accepted
            expect(idsOf(yield* store.claim(pk, token("good", 1), 10))).toHaveLength(2)
          })
        )
      )
    }

    it.effect("R-CLAIM-2 a token below the high-water mark fails and claims nothing", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("belowhwm")
          const [a] = yield* seed(store, pk, ["a"])
          yield* store.claim(pk, token("new", 3), 0)
          const error = yield* Effect.flip(store.claim(pk, token("old", 2), 10))
          expect(error._tag).toBe("StaleFencingToken")
          if (error._tag === "StaleFencingToken") expect(error.partitionKey).toBe(pk)
          expect(yield* pendingIds(store, pk)).toEqual([a])
          expect(yield* store.countClaimed(pk)).toBe(0)
        })
      )
    )

    it.effect("R-CLAIM-2 an empty claim raises the high-water mark", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("emptyclaimhwm")
          const batch = yield* store.claim(pk, token("a", 4), 10)
          expect(batch.records).toEqual([])
          const error = yield* Effect.flip(store.claim(pk, token("b", 3), 10))
          expect(error._tag).toBe("StaleFencingToken")
        })
      )
    )

    it.effect("R-CLAIM-2 a claim at the high-water mark itself is accepted", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("athwm")
          const [a, b] = yield* seed(store, pk, ["a", "b"])
          expect(idsOf(yield* store.claim(pk, token("o", 2), 1))).toEqual([a])
          expect(idsOf(yield* store.claim(pk, token("o", 2), 1))).toEqual([b])
        })
      )
    )

    it.effect("R-CLAIM-2 the high-water mark is per partition", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const p1 = freshPartition("hwm1")
          const p2 = freshPartition("hwm2")
          const [b] = yield* seed(store, p2, ["b"])
          yield* store.claim(p1, token("o", 9), 10)
          expect(idsOf(yield* store.claim(p2, token("o", 1), 10))).toEqual([b])
        })
      )
    )

    it.effect("R-CLAIM-2 two owners interleaving versions 5 and 6: the lower one is fenced out", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("interleave")
          const [a, b] = yield* seed(store, pk, ["a", "b"])
          const five = token("five", 5)
          const six = token("six", 6)
          expect(idsOf(yield* store.claim(pk, five, 1))).toEqual([a])
          expect(idsOf(yield* store.claim(pk, six, 10))).toEqual([a, b])
          expect((yield* Effect.flip(store.claim(pk, five, 10)))._tag).toBe("StaleFencingToken")
          expect((yield* Effect.flip(store.complete([a ?? ""], five)))._tag).toBe("StaleFencingToken")
          expect((yield* Effect.flip(store.expire(DateTime.unsafeMake(START + 1), pk, five)))._tag).toBe(
            "StaleFencingToken"
          )
          yield* store.complete([a ?? ""], six)
          yield* store.complete([b ?? ""], six)
          expect(yield* store.countClaimed(pk)).toBe(0)
          expect(yield* store.countPending(pk)).toBe(0)
        })
      )
    )

    for (const limit of [0, -1]) {
      it.effect(`R-CLAIM-3 limit ${limit} claims nothing and raises the high-water mark`, () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("limitnoop")
            const ids = yield* seed(store, pk, ["a", "b"])
            const batch = yield* store.claim(pk, token("o", 5), limit)
            expect(batch.records).toEqual([])
            expect(yield* pendingIds(store, pk)).toEqual(ids)
            expect(yield* store.countClaimed(pk)).toBe(0)
            expect((yield* Effect.flip(store.claim(pk, token("o", 4), 10)))._tag).toBe("StaleFencingToken")
            expect(idsOf(yield* store.claim(pk, token("o", 5), 10))).toEqual(ids)
          })
        )
      )
    }

    it.effect("R-CLAIM-4 returns the oldest N in age order, not key or id order", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("oldestn")
          // envelope ids and record ids sort inversely to age: a key-order store must fail
          const specs: Array<RecordSpec> = []
          for (let i = 0; i < 8; i++) {
            specs.push({ env: `env-${9 - i}`, id: `${pk}.id-${9 - i}`, createdAt: START - 10_000 + i * 100 })
          }
          for (const spec of specs) yield* store.persist([record(pk, spec)])
          const batch = yield* store.claim(pk, token("o", 1), 3)
          expect(idsOf(batch)).toEqual([`${pk}.id-9`, `${pk}.id-8`, `${pk}.id-7`])
          expect(idsOf(yield* store.claim(pk, token("o", 1), 100))).toEqual(specs.slice(3).map((s) => s.id))
        })
      )
    )

    it.effect("R-CLAIM-4 age is createdAt first: a record persisted later with an older createdAt comes first", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("createdfirst")
          yield* store.persist([record(pk, { env: "late", createdAt: START - 1_000 })])
          yield* store.persist([record(pk, { env: "early", createdAt: START - 9_000 })])
          yield* store.persist([record(pk, { env: "middle", createdAt: START - 5_000 })])
          const batch = yield* store.claim(pk, token("o", 1), 2)
          expect(batch.records.map((r) => r.envelopeId)).toEqual(["early", "middle"])
          // each claimed record carries its own createdAt (the claim shares a value only between equal ones)
          expect(batch.records.map((r) => DateTime.toEpochMillis(r.createdAt))).toEqual([START - 9_000, START - 5_000])
        })
      )
    )

    it.effect("R-CLAIM-4 equal createdAt is tie-broken by persist order (seq)", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("tie")
          // every record stamped at the same instant; envelope ids sort inversely to persist order
          const first = yield* seed(store, pk, ["zz", "yy", "xx"])
          const second = yield* seed(store, pk, ["ww", "vv"])
          expect(idsOf(yield* store.claim(pk, token("o", 1), 4))).toEqual([...first, ...second].slice(0, 4))
        })
      )
    )

    it.effect("R-CLAIM-4 equal createdAt across ordering keys and keyless records is still persist order", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("tiekeys")
          const ids = yield* seed(store, pk, [
            { env: "zz", key: "K" },
            { env: "yy" },
            { env: "xx", key: "J" },
            { env: "ww" },
            { env: "vv", key: "K" }
          ])
          expect(idsOf(yield* store.claim(pk, token("o", 1), 10))).toEqual(ids)
        })
      )
    )

    it.effect("R-CLAIM-4 a claim stamps owner, version, claimedAt = now and counts the claim", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("stamp")
          yield* seed(store, pk, ["a"])
          yield* TestClock.adjust("7 seconds")
          const [claimed] = (yield* store.claim(pk, token("owner-1", 3), 10)).records
          expect(claimed).toBeDefined()
          if (claimed === undefined) return
          expect(claimed.status).toBe("claimed")
          expect(Option.getOrUndefined(claimed.claimedBy)).toBe("owner-1")
          expect(claimed.claimVersion).toBe(3)
          expect(millisOf(claimed.claimedAt)).toBe(START + 7_000)
          expect(claimed.replayCount).toBe(1)
          expect(DateTime.toEpochMillis(claimed.createdAt)).toBe(START)
          expect(yield* store.countPending(pk)).toBe(0)
          expect(yield* store.countClaimed(pk)).toBe(1)
        })
      )
    )

    it.effect("R-CLAIM-4 a claim at the same version does not take records already claimed", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("sameversion")
          const [a, b] = yield* seed(store, pk, ["a", "b"])
          expect(idsOf(yield* store.claim(pk, token("one", 1), 1))).toEqual([a])
          expect(idsOf(yield* store.claim(pk, token("two", 1), 10))).toEqual([b])
          expect(idsOf(yield* store.claim(pk, token("one", 1), 10))).toEqual([])
        })
      )
    )

    it.effect("R-CLAIM-4 pre-emption: a higher version takes claimed records (replayCount 2)", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("preempt")
          const [a, b] = yield* seed(store, pk, ["a", "b"])
          const old = token("old", 1)
          expect(idsOf(yield* store.claim(pk, old, 1))).toEqual([a])
          yield* TestClock.adjust("1 second")
          const batch = yield* store.claim(pk, token("new", 2), 10)
          expect(idsOf(batch)).toEqual([a, b])
          const [first, second] = batch.records
          expect(first?.replayCount).toBe(2)
          expect(first?.claimVersion).toBe(2)
          expect(Option.getOrUndefined(first?.claimedBy ?? Option.none())).toBe("new")
          expect(millisOf(first?.claimedAt ?? Option.none())).toBe(START + 1_000)
          expect(second?.replayCount).toBe(1)
          // the pre-empted holder can no longer complete or release
          expect((yield* Effect.flip(store.complete([a ?? ""], old)))._tag).toBe("StaleFencingToken")
          expect((yield* Effect.flip(store.release([a ?? ""], old)))._tag).toBe("StaleFencingToken")
          expect(yield* store.countClaimed(pk)).toBe(2)
        })
      )
    )

    it.effect("R-CLAIM-4 terminal records are never claimed", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("terminal")
          const [a, b, c] = yield* seed(store, pk, ["a", { env: "b", expiresAt: START + 10 }, { env: "c" }])
          const t = token("o", 1)
          expect(idsOf(yield* store.claim(pk, t, 1))).toEqual([a])
          yield* store.complete([a ?? ""], t)
          expect(yield* store.expire(DateTime.unsafeMake(START + 11), pk, t)).toBe(1)
          expect(idsOf(yield* store.claim(pk, token("o", 2), 10))).toEqual([c])
          expect(b).toBeDefined()
        })
      )
    )

    it.effect("R-CLAIM-5 a stranded claimed head blocks its younger siblings", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("stranded")
          const [k1, k2, k3] = yield* seed(store, pk, [
            { env: "k1", key: "K" },
            { env: "k2", key: "K" },
            { env: "k3", key: "K" }
          ])
          const t = token("o", 1)
          expect(idsOf(yield* store.claim(pk, t, 1))).toEqual([k1])
          expect(idsOf(yield* store.claim(pk, t, 10))).toEqual([])
          expect(idsOf(yield* store.claim(pk, token("other", 1), 10))).toEqual([])
          expect(yield* pendingIds(store, pk)).toEqual([k2, k3])
        })
      )
    )

    it.effect("R-CLAIM-5 other keys and keyless records are unaffected by a stranded head", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("independent")
          const [k1, , x1, j1, x2, j2] = yield* seed(store, pk, [
            { env: "k1", key: "K" },
            { env: "k2", key: "K" },
            { env: "x1" },
            { env: "j1", key: "J" },
            { env: "x2" },
            { env: "j2", key: "J" }
          ])
          const t = token("o", 1)
          expect(idsOf(yield* store.claim(pk, t, 1))).toEqual([k1])
          expect(idsOf(yield* store.claim(pk, t, 10))).toEqual([x1, j1, x2, j2])
        })
      )
    )

    it.effect("R-CLAIM-5 a pending head beyond the limit: limit 1 returns the head only", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("limit1")
          const [k1, k2] = yield* seed(store, pk, [
            { env: "k1", key: "K" },
            { env: "k2", key: "K" }
          ])
          expect(idsOf(yield* store.claim(pk, token("o", 1), 1))).toEqual([k1])
          expect(yield* pendingIds(store, pk)).toEqual([k2])
        })
      )
    )

    it.effect("R-CLAIM-5 a head that fills the batch keeps its siblings out of it", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("headfills")
          const [x1, k1, , x2] = yield* seed(store, pk, [
            { env: "x1" },
            { env: "k1", key: "K" },
            { env: "k2", key: "K" },
            { env: "x2" }
          ])
          expect(idsOf(yield* store.claim(pk, token("o", 1), 2))).toEqual([x1, k1])
          // k2 is blocked by its claimed head; x2 is not
          expect(idsOf(yield* store.claim(pk, token("o", 1), 10))).toEqual([x2])
        })
      )
    )

    it.effect("R-CLAIM-5 the whole group comes back together, in age order, interleaved with others", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("group")
          const ids = yield* seed(store, pk, [
            { env: "k1", key: "K" },
            { env: "x1" },
            { env: "k2", key: "K" },
            { env: "j1", key: "J" },
            { env: "k3", key: "K" },
            { env: "x2" }
          ])
          expect(idsOf(yield* store.claim(pk, token("o", 1), 10))).toEqual(ids)
        })
      )
    )

    it.effect("R-CLAIM-5 a released head unblocks its siblings", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("released")
          const [k1, k2] = yield* seed(store, pk, [
            { env: "k1", key: "K" },
            { env: "k2", key: "K" }
          ])
          const t = token("o", 1)
          expect(idsOf(yield* store.claim(pk, t, 1))).toEqual([k1])
          yield* store.release([k1 ?? ""], t)
          expect(idsOf(yield* store.claim(pk, t, 10))).toEqual([k1, k2])
        })
      )
    )

    it.effect("R-CLAIM-5 a completed head unblocks the next sibling", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("completedhead")
          const [k1, k2, k3] = yield* seed(store, pk, [
            { env: "k1", key: "K" },
            { env: "k2", key: "K" },
            { env: "k3", key: "K" }
          ])
          const t = token("o", 1)
          expect(idsOf(yield* store.claim(pk, t, 1))).toEqual([k1])
          yield* store.complete([k1 ?? ""], t)
          expect(idsOf(yield* store.claim(pk, t, 1))).toEqual([k2])
          expect(idsOf(yield* store.claim(pk, t, 10))).toEqual([])
          yield* store.complete([k2 ?? ""], t)
          expect(idsOf(yield* store.claim(pk, t, 10))).toEqual([k3])
        })
      )
    )

    it.effect("R-CLAIM-5 an expired head unblocks its siblings", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("expiredhead")
          const [, k2] = yield* seed(store, pk, [
            { env: "k1", key: "K", expiresAt: START + 5 },
            { env: "k2", key: "K" }
          ])
          const t = token("o", 1)
          expect(yield* store.expire(DateTime.unsafeMake(START + 6), pk, t)).toBe(1)
          expect(idsOf(yield* store.claim(pk, t, 10))).toEqual([k2])
        })
      )
    )

    it.effect("R-CLAIM-5 a pre-empted head comes back with its group", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("preemptgroup")
          const [k1, k2, x] = yield* seed(store, pk, [{ env: "k1", key: "K" }, { env: "k2", key: "K" }, { env: "x" }])
          expect(idsOf(yield* store.claim(pk, token("a", 1), 1))).toEqual([k1])
          expect(idsOf(yield* store.claim(pk, token("b", 2), 1))).toEqual([k1])
          expect(idsOf(yield* store.claim(pk, token("c", 3), 10))).toEqual([k1, k2, x])
        })
      )
    )

    it.effect("R-CLAIM-5 an empty ordering key means no key", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("emptykey")
          const [a, b] = yield* seed(store, pk, [
            { env: "a", key: "" },
            { env: "b", key: "" }
          ])
          const t = token("o", 1)
          expect(idsOf(yield* store.claim(pk, t, 1))).toEqual([a])
          expect(idsOf(yield* store.claim(pk, t, 10))).toEqual([b])
        })
      )
    )

    it.effect("R-CLAIM-5 a younger sibling with an older createdAt is the head", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("keyage")
          yield* seed(store, pk, [{ env: "late", key: "K", createdAt: START - 1_000 }])
          yield* seed(store, pk, [{ env: "early", key: "K", createdAt: START - 2_000 }])
          const t = token("o", 1)
          const first = yield* store.claim(pk, t, 1)
          expect(first.records.map((r) => r.envelopeId)).toEqual(["early"])
          expect(idsOf(yield* store.claim(pk, t, 10))).toEqual([])
        })
      )
    )

    it.effect("R-CLAIM-6 a claim older than staleClaimAfter is reclaimable at the same version", () =>
      withStore(
        (store) =>
          Effect.gen(function* () {
            const pk = freshPartition("stale")
            const [a] = yield* seed(store, pk, ["a"])
            const first = token("first", 1)
            const second = token("second", 1)
            expect(idsOf(yield* store.claim(pk, first, 10))).toEqual([a])
            yield* TestClock.adjust("31 seconds")
            const batch = yield* store.claim(pk, second, 10)
            expect(idsOf(batch)).toEqual([a])
            expect(batch.records[0]?.replayCount).toBe(2)
            expect(Option.getOrUndefined(batch.records[0]?.claimedBy ?? Option.none())).toBe("second")
            expect(millisOf(batch.records[0]?.claimedAt ?? Option.none())).toBe(START + 31_000)
            // R-CLAIM-9: the earlier holder's complete must now fail
            expect((yield* Effect.flip(store.complete([a ?? ""], first)))._tag).toBe("StaleFencingToken")
            yield* store.complete([a ?? ""], second)
            expect(yield* store.countClaimed(pk)).toBe(0)
          }),
        stale
      )
    )

    it.effect("R-CLAIM-6 a fresh claim is not reclaimed at the same version", () =>
      withStore(
        (store) =>
          Effect.gen(function* () {
            const pk = freshPartition("fresh")
            const [a, b] = yield* seed(store, pk, ["a", "b"])
            const first = token("first", 1)
            expect(idsOf(yield* store.claim(pk, first, 1))).toEqual([a])
            yield* TestClock.adjust("29 seconds")
            expect(idsOf(yield* store.claim(pk, token("second", 1), 10))).toEqual([b])
            yield* store.complete([a ?? ""], first)
          }),
        stale
      )
    )

    it.effect("R-CLAIM-6 staleness is strict: a claim exactly staleClaimAfter old is not reclaimed", () =>
      withStore(
        (store) =>
          Effect.gen(function* () {
            const pk = freshPartition("staleedge")
            const [a] = yield* seed(store, pk, ["a"])
            expect(idsOf(yield* store.claim(pk, token("first", 1), 10))).toEqual([a])
            yield* TestClock.adjust("30 seconds")
            expect(idsOf(yield* store.claim(pk, token("second", 1), 10))).toEqual([])
            yield* TestClock.adjust("1 millis")
            expect(idsOf(yield* store.claim(pk, token("second", 1), 10))).toEqual([a])
          }),
        stale
      )
    )

    it.effect("R-CLAIM-6 a stale head comes back with its blocked siblings", () =>
      withStore(
        (store) =>
          Effect.gen(function* () {
            const pk = freshPartition("stalehead")
            const [k1, k2] = yield* seed(store, pk, [
              { env: "k1", key: "K" },
              { env: "k2", key: "K" }
            ])
            expect(idsOf(yield* store.claim(pk, token("dead", 1), 1))).toEqual([k1])
            yield* TestClock.adjust("10 seconds")
            expect(idsOf(yield* store.claim(pk, token("live", 1), 10))).toEqual([])
            yield* TestClock.adjust("25 seconds")
            expect(idsOf(yield* store.claim(pk, token("live", 1), 10))).toEqual([k1, k2])
          }),
        stale
      )
    )

    it.effect("R-CLAIM-7 a record claimed 8 times is still claimable", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("replay")
          const [a] = yield* seed(store, pk, ["a"])
          for (let version = 1; version <= 8; version++) {
            const batch = yield* store.claim(pk, token(`o${version}`, version), 10)
            expect(idsOf(batch)).toEqual([a])
            expect(batch.records[0]?.replayCount).toBe(version)
          }
          const t = token("o8", 8)
          yield* store.release([a ?? ""], t)
          const again = yield* store.claim(pk, t, 10)
          expect(idsOf(again)).toEqual([a])
          expect(again.records[0]?.replayCount).toBe(9)
        })
      )
    )

    it.effect("R-CLAIM-8 a claim that meets no failure is not truncated", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("nottruncated")
          yield* seed(store, pk, ["a", "b", "c"])
          const batch = yield* store.claim(pk, token("o", 1), 2)
          expect(batch.records).toHaveLength(2)
          expect(Option.isNone(batch.truncated)).toBe(true)
        })
      )
    )

    it.effect("R-CLAIM-9 two concurrent claimers receive disjoint sets covering every record", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("concurrent")
          const specs: Array<string> = []
          for (let i = 0; i < 20; i++) specs.push(`e${String(i).padStart(2, "0")}`)
          const ids = yield* seed(store, pk, specs)
          const [left, right] = yield* Effect.all(
            [store.claim(pk, token("left", 1), 20), store.claim(pk, token("right", 1), 20)],
            { concurrency: 2 }
          )
          const leftIds = idsOf(left)
          const rightIds = idsOf(right)
          expect(leftIds.filter((id) => rightIds.includes(id))).toEqual([])
          expect([...leftIds, ...rightIds].sort()).toEqual([...ids].sort())
          expect(yield* store.countClaimed(pk)).toBe(20)
        })
      )
    )

    it.effect("R-CLAIM-10 a fenced claim fails with a typed error, not a defect", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("typed")
          yield* store.claim(pk, token("o", 2), 1)
          const result = yield* Effect.either(store.claim(pk, token("o", 1), 1))
          expect(result._tag).toBe("Left")
          if (result._tag === "Left") expect(result.left._tag).toBe("StaleFencingToken")
        })
      )
    )

    it.effect("R-CLAIM-4 firstAttemptedAt is stamped once and kept across release and pre-emption", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("firstattempt")
          const [a] = yield* seed(store, pk, ["a"])
          yield* TestClock.adjust("1 second")
          const first = yield* store.claim(pk, token("o", 1), 10)
          expect(millisOf(first.records[0]?.firstAttemptedAt ?? Option.none())).toBe(START + 1_000)
          yield* store.release([a ?? ""], token("o", 1))
          const released = yield* findPending(store, pk, a ?? "")
          expect(millisOf(released?.firstAttemptedAt ?? Option.none())).toBe(START + 1_000)
          yield* TestClock.adjust("5 seconds")
          const second = yield* store.claim(pk, token("o", 1), 10)
          expect(millisOf(second.records[0]?.firstAttemptedAt ?? Option.none())).toBe(START + 1_000)
          expect(millisOf(second.records[0]?.claimedAt ?? Option.none())).toBe(START + 6_000)
          yield* TestClock.adjust("5 seconds")
          const third = yield* store.claim(pk, token("p", 2), 10)
          expect(millisOf(third.records[0]?.firstAttemptedAt ?? Option.none())).toBe(START + 1_000)
          expect(millisOf(third.records[0]?.claimedAt ?? Option.none())).toBe(START + 11_000)
          expect(third.records[0]?.replayCount).toBe(3)
        })
      )
    )
  })
}
