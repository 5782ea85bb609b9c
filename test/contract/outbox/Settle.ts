/**
 * R-DONE: complete and release act only on records claimed by the presented token (SPEC §2).
 */
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import { type ContractCapabilities, type Harness, idsOf, invalidTokens, token } from "./Harness.js"

/**
 * Registers the complete and release tests for one backend.
 */
export const settleContract = (harness: Harness, capabilities: ContractCapabilities): void => {
  const { freshPartition, record, seed, pendingIds, snapshot, findPending, withStore } = harness
  describe("complete and release", () => {
    for (const operation of ["complete", "release"] as const) {
      it.effect(`R-DONE-1 ${operation} rejects every invalid token before any state change`, () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition(`${operation}badtoken`)
            const [a, b] = yield* seed(store, pk, ["a", "b"])
            const t = token("o", 1)
            yield* store.claim(pk, t, 1)
            const before = yield* snapshot(store, pk)
            for (const bad of invalidTokens) {
              const error = yield* Effect.flip(store[operation]([a ?? ""], bad))
              expect(error._tag).toBe("StaleFencingToken")
              // the never-claimed row has empty owner and version 0: an empty token must not match it
              const pendingError = yield* Effect.flip(store[operation]([b ?? ""], bad))
              expect(pendingError._tag).toBe("StaleFencingToken")
            }
            expect(yield* snapshot(store, pk)).toEqual(before)
            yield* store[operation]([a ?? ""], t)
          })
        )
      )
    }

    it.effect("R-DONE-2 complete by the holder marks the record completed", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("complete")
          const [a, b] = yield* seed(store, pk, ["a", "b"])
          const t = token("o", 1)
          yield* store.claim(pk, t, 10)
          yield* store.complete([a ?? ""], t)
          expect(yield* store.countClaimed(pk)).toBe(1)
          expect(yield* store.countPending(pk)).toBe(0)
          expect(idsOf(yield* store.claim(pk, token("o", 2), 10))).toEqual([b])
        })
      )
    )

    it.effect("a clock standing between two milliseconds (a test clock mid-step): claim, complete, release work", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("fractional")
          const [a, b] = yield* seed(store, pk, ["a", "b"])
          // instants are stored as whole milliseconds; a clock between two must not fail the statement
          yield* TestClock.setTime((yield* TestClock.currentTimeMillis) + 1192.170963)
          const t = token("o", 1)
          expect(idsOf(yield* store.claim(pk, t, 10))).toEqual([a, b])
          yield* store.complete([a ?? ""], t)
          yield* store.release([b ?? ""], t)
          expect(yield* store.countClaimed(pk)).toBe(0)
          expect(yield* store.countPending(pk)).toBe(1)
        })
      )
    )

    it.effect("R-DONE-2 release returns the record to pending, keeping claimVersion and replayCount", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("release")
          const [a] = yield* seed(store, pk, ["a"])
          const t = token("o", 3)
          yield* store.claim(pk, t, 10)
          yield* store.release([a ?? ""], t)
          const released = yield* findPending(store, pk, a ?? "")
          expect(released?.status).toBe("pending")
          expect(released?.claimVersion).toBe(3)
          expect(released?.replayCount).toBe(1)
          expect(Option.isNone(released?.claimedBy ?? Option.some("missing"))).toBe(true)
          expect(Option.isNone(released?.claimedAt ?? Option.some(DateTime.unsafeMake(0)))).toBe(true)
          expect(yield* store.countClaimed(pk)).toBe(0)
          expect(yield* store.countPending(pk)).toBe(1)
        })
      )
    )

    for (const operation of ["complete", "release"] as const) {
      it.effect(`R-DONE-2 ${operation} with the same version but another owner is rejected`, () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition(`${operation}otherowner`)
            const [a] = yield* seed(store, pk, ["a"])
            yield* store.claim(pk, token("holder", 2), 10)
            const error = yield* Effect.flip(store[operation]([a ?? ""], token("intruder", 2)))
            expect(error._tag).toBe("StaleFencingToken")
            expect(yield* store.countClaimed(pk)).toBe(1)
          })
        )
      )

      it.effect(`R-DONE-2 ${operation} with the same owner but another version is rejected`, () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition(`${operation}otherversion`)
            const [a] = yield* seed(store, pk, ["a"])
            yield* store.claim(pk, token("holder", 2), 10)
            expect((yield* Effect.flip(store[operation]([a ?? ""], token("holder", 1))))._tag).toBe("StaleFencingToken")
            expect((yield* Effect.flip(store[operation]([a ?? ""], token("holder", 3))))._tag).toBe("StaleFencingToken")
            expect(yield* store.countClaimed(pk)).toBe(1)
          })
        )
      )

      it.effect(`R-DONE-2 ${operation} of an unknown id fails naming it`, () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition(`${operation}unknown`)
            const unknown = `${pk}.does-not-exist`
            const error = yield* Effect.flip(store[operation]([unknown], token("o", 1)))
            expect(error._tag).toBe("StaleFencingToken")
            if (error._tag === "StaleFencingToken") expect(error.recordIds ?? []).toContain(unknown)
          })
        )
      )

      it.effect(`R-DONE-2 ${operation} of a pending record is a mismatch`, () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition(`${operation}pending`)
            const [a] = yield* seed(store, pk, ["a"])
            const t = token("o", 1)
            yield* store.claim(pk, t, 0)
            const error = yield* Effect.flip(store[operation]([a ?? ""], t))
            expect(error._tag).toBe("StaleFencingToken")
            expect(yield* pendingIds(store, pk)).toEqual([a])
          })
        )
      )
    }

    it.effect("R-DONE-2 completing twice is a mismatch (complete is not idempotent)", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("doublecomplete")
          const [a] = yield* seed(store, pk, ["a"])
          const t = token("o", 1)
          yield* store.claim(pk, t, 10)
          yield* store.complete([a ?? ""], t)
          expect((yield* Effect.flip(store.complete([a ?? ""], t)))._tag).toBe("StaleFencingToken")
          expect((yield* Effect.flip(store.release([a ?? ""], t)))._tag).toBe("StaleFencingToken")
          expect(yield* store.countPending(pk)).toBe(0)
          expect(yield* store.countClaimed(pk)).toBe(0)
        })
      )
    )

    it.effect("R-DONE-2 releasing twice is a mismatch; a released record cannot be completed", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("doublerelease")
          const [a] = yield* seed(store, pk, ["a"])
          const t = token("o", 1)
          yield* store.claim(pk, t, 10)
          yield* store.release([a ?? ""], t)
          expect((yield* Effect.flip(store.release([a ?? ""], t)))._tag).toBe("StaleFencingToken")
          expect((yield* Effect.flip(store.complete([a ?? ""], t)))._tag).toBe("StaleFencingToken")
          expect(yield* store.countPending(pk)).toBe(1)
        })
      )
    )

    it.effect("R-DONE-3 several ids that all match are completed together", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("multi")
          const ids = yield* seed(store, pk, ["a", "b", "c"])
          const t = token("o", 1)
          yield* store.claim(pk, t, 10)
          yield* store.complete(ids.slice(0, 2), t)
          expect(yield* store.countClaimed(pk)).toBe(1)
          yield* store.release(ids.slice(2), t)
          expect(yield* pendingIds(store, pk)).toEqual(ids.slice(2))
        })
      )
    )

    it.effect("R-DONE-3 several ids with a mismatch fail naming the mismatched id", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("multimismatch")
          const [a, b] = yield* seed(store, pk, ["a", "b"])
          const t = token("o", 1)
          yield* store.claim(pk, t, 1)
          const error = yield* Effect.flip(store.complete([a ?? "", b ?? ""], t))
          expect(error._tag).toBe("StaleFencingToken")
          if (error._tag === "StaleFencingToken") expect(error.recordIds ?? []).toContain(b)
          expect(yield* pendingIds(store, pk)).toEqual([b])
          if (capabilities.multiIdAtomic) {
            // all-or-nothing: the matching record stays claimed
            expect(yield* store.countClaimed(pk)).toBe(1)
            const releaseError = yield* Effect.flip(store.release([a ?? "", b ?? ""], t))
            expect(releaseError._tag).toBe("StaleFencingToken")
            expect(yield* store.countClaimed(pk)).toBe(1)
          }
        })
      )
    )
  })
}
