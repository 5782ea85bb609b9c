/**
 * LeaseStore contract, acquiring (SPEC §4): tokens issued, `LeaseHeld` while live, takeover at expiry,
 * versions that only grow, one winner among concurrent acquirers.
 */
import { expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import { LeaseStore } from "../../../src/services/LeaseStore.js"
import { type Run, ttl, uniquePartition } from "./LeaseSupport.js"

/** The acquire tests. */
export const acquireSuite = (run: Run): void => {
  it.effect("§4 acquire of a fresh partition issues a valid token for the owner, expiring after ttl", () =>
    run(
      Effect.gen(function* () {
        const leases = yield* LeaseStore
        const pk = uniquePartition("fresh")
        const start = yield* DateTime.now
        const lease = yield* leases.acquire(pk, "node-a", ttl)
        expect(lease.partitionKey).toBe(pk)
        expect(lease.token.owner).toBe("node-a")
        expect(Number.isSafeInteger(lease.token.version)).toBe(true)
        expect(lease.token.version).toBeGreaterThan(0)
        expect(DateTime.toEpochMillis(lease.expiresAt)).toBe(DateTime.toEpochMillis(start) + 30_000)
        const current = yield* leases.current(pk)
        expect(current.token.owner).toBe("node-a")
        expect(current.token.version).toBe(lease.token.version)
        expect(DateTime.toEpochMillis(current.expiresAt)).toBe(DateTime.toEpochMillis(lease.expiresAt))
      })
    )
  )

  it.effect("§4 acquire while held by another owner fails with LeaseHeld naming holder, version and expiry", () =>
    run(
      Effect.gen(function* () {
        const leases = yield* LeaseStore
        const pk = uniquePartition("held")
        const lease = yield* leases.acquire(pk, "node-a", ttl)
        yield* TestClock.adjust(Duration.seconds(10))
        const error = yield* Effect.flip(leases.acquire(pk, "node-b", ttl))
        expect(error._tag).toBe("LeaseHeld")
        if (error._tag !== "LeaseHeld") return
        expect(error.partitionKey).toBe(pk)
        expect(error.heldBy).toBe("node-a")
        expect(error.version).toBe(lease.token.version)
        expect(DateTime.toEpochMillis(error.expiresAt)).toBe(DateTime.toEpochMillis(lease.expiresAt))
        const current = yield* leases.current(pk)
        expect(current.token.owner).toBe("node-a")
        expect(current.token.version).toBe(lease.token.version)
      })
    )
  )

  it.effect("§4 acquire while held by the same owner also fails with LeaseHeld (renew instead)", () =>
    run(
      Effect.gen(function* () {
        const leases = yield* LeaseStore
        const pk = uniquePartition("same-owner")
        const lease = yield* leases.acquire(pk, "node-a", ttl)
        const error = yield* Effect.flip(leases.acquire(pk, "node-a", ttl))
        expect(error._tag).toBe("LeaseHeld")
        if (error._tag !== "LeaseHeld") return
        expect(error.heldBy).toBe("node-a")
        expect(error.version).toBe(lease.token.version)
      })
    )
  )

  it.effect("§4 a lease is held until its expiresAt instant and can be taken over from that instant", () =>
    run(
      Effect.gen(function* () {
        const leases = yield* LeaseStore
        const pk = uniquePartition("boundary")
        const first = yield* leases.acquire(pk, "node-a", ttl)
        yield* TestClock.adjust(Duration.millis(29_999))
        const error = yield* Effect.flip(leases.acquire(pk, "node-b", ttl))
        expect(error._tag).toBe("LeaseHeld")
        yield* TestClock.adjust(Duration.millis(1))
        const second = yield* leases.acquire(pk, "node-b", ttl)
        expect(second.token.owner).toBe("node-b")
        expect(second.token.version).toBeGreaterThan(first.token.version)
      })
    )
  )

  it.effect("§4 takeover after expiry issues a strictly higher version to the new owner", () =>
    run(
      Effect.gen(function* () {
        const leases = yield* LeaseStore
        const pk = uniquePartition("takeover")
        const first = yield* leases.acquire(pk, "node-a", ttl)
        yield* TestClock.adjust(Duration.seconds(31))
        const second = yield* leases.acquire(pk, "node-b", ttl)
        expect(second.token.owner).toBe("node-b")
        expect(second.token.version).toBeGreaterThan(first.token.version)
        const now = yield* DateTime.now
        expect(DateTime.toEpochMillis(second.expiresAt)).toBe(DateTime.toEpochMillis(now) + 30_000)
        const current = yield* leases.current(pk)
        expect(current.token.owner).toBe("node-b")
        expect(current.token.version).toBe(second.token.version)
      })
    )
  )

  it.effect("§4 the expired owner may itself acquire again, with a higher version", () =>
    run(
      Effect.gen(function* () {
        const leases = yield* LeaseStore
        const pk = uniquePartition("reacquire")
        const first = yield* leases.acquire(pk, "node-a", ttl)
        yield* TestClock.adjust(Duration.seconds(30))
        const second = yield* leases.acquire(pk, "node-a", ttl)
        expect(second.token.owner).toBe("node-a")
        expect(second.token.version).toBeGreaterThan(first.token.version)
        const stale = yield* Effect.flip(leases.renew(pk, first.token, ttl))
        expect(stale._tag).toBe("StaleFencingToken")
      })
    )
  )

  it.effect("§4 release frees the partition at once and the version high-water mark survives it", () =>
    run(
      Effect.gen(function* () {
        const leases = yield* LeaseStore
        const pk = uniquePartition("release-free")
        const first = yield* leases.acquire(pk, "node-a", ttl)
        yield* leases.release(pk, first.token)
        const second = yield* leases.acquire(pk, "node-b", ttl)
        expect(second.token.owner).toBe("node-b")
        expect(second.token.version).toBeGreaterThan(first.token.version)
      })
    )
  )

  it.effect("§4 five acquire/release cycles give strictly increasing versions", () =>
    run(
      Effect.gen(function* () {
        const leases = yield* LeaseStore
        const pk = uniquePartition("cycles")
        const versions: Array<number> = []
        for (let i = 0; i < 5; i++) {
          const lease = yield* leases.acquire(pk, i % 2 === 0 ? "node-a" : "node-b", ttl)
          versions.push(lease.token.version)
          yield* leases.release(pk, lease.token)
        }
        for (let i = 1; i < versions.length; i++) {
          expect(versions[i]).toBeGreaterThan(versions[i - 1] ?? Number.POSITIVE_INFINITY)
        }
      })
    )
  )

  it.effect("§4 20 concurrent acquirers: exactly one wins, 19 fail with LeaseHeld naming the winner", () =>
    run(
      Effect.gen(function* () {
        const leases = yield* LeaseStore
        const pk = uniquePartition("race")
        const outcomes = yield* Effect.all(
          Array.from({ length: 20 }, (_, i) => Effect.either(leases.acquire(pk, `node-${i}`, ttl))),
          { concurrency: "unbounded" }
        )
        const winners = outcomes.flatMap((outcome) => (outcome._tag === "Right" ? [outcome.right] : []))
        const losers = outcomes.flatMap((outcome) => (outcome._tag === "Left" ? [outcome.left] : []))
        expect(winners).toHaveLength(1)
        expect(losers).toHaveLength(19)
        const winner = winners[0]
        if (winner === undefined) return
        for (const loser of losers) {
          expect(loser._tag).toBe("LeaseHeld")
          if (loser._tag === "LeaseHeld") {
            expect(loser.heldBy).toBe(winner.token.owner)
            expect(loser.version).toBe(winner.token.version)
          }
        }
        const current = yield* leases.current(pk)
        expect(current.token.owner).toBe(winner.token.owner)
        expect(current.token.version).toBe(winner.token.version)
      })
    )
  )
}
