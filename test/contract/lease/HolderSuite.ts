/**
 * LeaseStore contract, renew and release (SPEC §4): only the exact holder may renew or release; others get
 * `StaleFencingToken`, a partition without a lease `LeaseNotFound`.
 */
import { expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import { LeaseToken } from "../../../src/domain/LeaseToken.js"
import { LeaseStore } from "../../../src/services/LeaseStore.js"
import { type Run, ttl, uniquePartition } from "./LeaseSupport.js"

/** The renew and release tests. */
export const holderSuite = (run: Run): void => {
  it.effect("§4 renew keeps version and owner and extends expiry from now", () =>
    run(
      Effect.gen(function* () {
        const leases = yield* LeaseStore
        const pk = uniquePartition("renew")
        const lease = yield* leases.acquire(pk, "node-a", ttl)
        yield* TestClock.adjust(Duration.seconds(20))
        const renewed = yield* leases.renew(pk, lease.token, Duration.seconds(60))
        const now = yield* DateTime.now
        expect(renewed.partitionKey).toBe(pk)
        expect(renewed.token.owner).toBe("node-a")
        expect(renewed.token.version).toBe(lease.token.version)
        expect(DateTime.toEpochMillis(renewed.expiresAt)).toBe(DateTime.toEpochMillis(now) + 60_000)
        // Past the original expiry but inside the renewed one: still held.
        yield* TestClock.adjust(Duration.seconds(30))
        const error = yield* Effect.flip(leases.acquire(pk, "node-b", ttl))
        expect(error._tag).toBe("LeaseHeld")
        const current = yield* leases.current(pk)
        expect(DateTime.toEpochMillis(current.expiresAt)).toBe(DateTime.toEpochMillis(renewed.expiresAt))
      })
    )
  )

  it.effect("§4 renew accepts a plain { owner, version } object of the token's shape", () =>
    run(
      Effect.gen(function* () {
        const leases = yield* LeaseStore
        const pk = uniquePartition("plain-token")
        const lease = yield* leases.acquire(pk, "node-a", ttl)
        const renewed = yield* leases.renew(pk, { owner: "node-a", version: lease.token.version }, ttl)
        expect(renewed.token.version).toBe(lease.token.version)
        yield* leases.release(pk, { owner: "node-a", version: lease.token.version })
        const error = yield* Effect.flip(leases.current(pk))
        expect(error._tag).toBe("LeaseNotFound")
      })
    )
  )

  it.effect("§4 an expired lease nobody took over may be renewed by its owner", () =>
    run(
      Effect.gen(function* () {
        const leases = yield* LeaseStore
        const pk = uniquePartition("renew-expired")
        const lease = yield* leases.acquire(pk, "node-a", ttl)
        yield* TestClock.adjust(Duration.minutes(5))
        const renewed = yield* leases.renew(pk, lease.token, ttl)
        expect(renewed.token.version).toBe(lease.token.version)
        const now = yield* DateTime.now
        expect(DateTime.toEpochMillis(renewed.expiresAt)).toBe(DateTime.toEpochMillis(now) + 30_000)
        const error = yield* Effect.flip(leases.acquire(pk, "node-b", ttl))
        expect(error._tag).toBe("LeaseHeld")
      })
    )
  )

  it.effect("§4 renew with a wrong version or a wrong owner fails with StaleFencingToken", () =>
    run(
      Effect.gen(function* () {
        const leases = yield* LeaseStore
        const pk = uniquePartition("renew-stale")
        const lease = yield* leases.acquire(pk, "node-a", ttl)
        const v = lease.token.version
        const wrongVersion = yield* Effect.flip(
          leases.renew(pk, new LeaseToken({ owner: "node-a", version: v + 1 }), ttl)
        )
        expect(wrongVersion._tag).toBe("StaleFencingToken")
        if (wrongVersion._tag === "StaleFencingToken") {
          expect(wrongVersion.partitionKey).toBe(pk)
          expect(wrongVersion.version).toBe(v + 1)
        }
        const wrongOwner = yield* Effect.flip(leases.renew(pk, new LeaseToken({ owner: "node-b", version: v }), ttl))
        expect(wrongOwner._tag).toBe("StaleFencingToken")
        if (wrongOwner._tag === "StaleFencingToken") expect(wrongOwner.owner).toBe("node-b")
        // The lease is untouched by the rejected renewals.
        const current = yield* leases.current(pk)
        expect(current.token.owner).toBe("node-a")
        expect(current.token.version).toBe(v)
        expect(DateTime.toEpochMillis(current.expiresAt)).toBe(DateTime.toEpochMillis(lease.expiresAt))
      })
    )
  )

  it.effect("§4 release with a wrong version or a wrong owner fails with StaleFencingToken and keeps the lease", () =>
    run(
      Effect.gen(function* () {
        const leases = yield* LeaseStore
        const pk = uniquePartition("release-stale")
        const lease = yield* leases.acquire(pk, "node-a", ttl)
        const v = lease.token.version
        const wrongVersion = yield* Effect.flip(leases.release(pk, { owner: "node-a", version: v + 1 }))
        expect(wrongVersion._tag).toBe("StaleFencingToken")
        const wrongOwner = yield* Effect.flip(leases.release(pk, { owner: "node-b", version: v }))
        expect(wrongOwner._tag).toBe("StaleFencingToken")
        const current = yield* leases.current(pk)
        expect(current.token.owner).toBe("node-a")
        expect(current.token.version).toBe(v)
        const held = yield* Effect.flip(leases.acquire(pk, "node-b", ttl))
        expect(held._tag).toBe("LeaseHeld")
      })
    )
  )

  it.effect("§4 renew and release with an invalid token fail with StaleFencingToken", () =>
    run(
      Effect.gen(function* () {
        const leases = yield* LeaseStore
        const pk = uniquePartition("invalid-token")
        yield* leases.acquire(pk, "node-a", ttl)
        const invalid = [
          { owner: "", version: 1 },
          { owner: "node-a", version: 0 },
          { owner: "node-a", version: -1 },
          { owner: "node-a", version: 1.5 }
        ]
        for (const token of invalid) {
          const renewError = yield* Effect.flip(leases.renew(pk, token, ttl))
          expect(renewError._tag).toBe("StaleFencingToken")
          const releaseError = yield* Effect.flip(leases.release(pk, token))
          expect(releaseError._tag).toBe("StaleFencingToken")
        }
        const current = yield* leases.current(pk)
        expect(current.token.owner).toBe("node-a")
      })
    )
  )

  it.effect("§4 renew and release of a partition never leased fail with LeaseNotFound", () =>
    run(
      Effect.gen(function* () {
        const leases = yield* LeaseStore
        const pk = uniquePartition("missing")
        const token = new LeaseToken({ owner: "node-a", version: 1 })
        const renewError = yield* Effect.flip(leases.renew(pk, token, ttl))
        expect(renewError._tag).toBe("LeaseNotFound")
        if (renewError._tag === "LeaseNotFound") expect(renewError.partitionKey).toBe(pk)
        const releaseError = yield* Effect.flip(leases.release(pk, token))
        expect(releaseError._tag).toBe("LeaseNotFound")
        const currentError = yield* Effect.flip(leases.current(pk))
        expect(currentError._tag).toBe("LeaseNotFound")
      })
    )
  )

  it.effect("§4 after release, renew and release of that token fail with LeaseNotFound", () =>
    run(
      Effect.gen(function* () {
        const leases = yield* LeaseStore
        const pk = uniquePartition("released")
        const lease = yield* leases.acquire(pk, "node-a", ttl)
        yield* leases.release(pk, lease.token)
        const renewError = yield* Effect.flip(leases.renew(pk, lease.token, ttl))
        expect(renewError._tag).toBe("LeaseNotFound")
        const releaseError = yield* Effect.flip(leases.release(pk, lease.token))
        expect(releaseError._tag).toBe("LeaseNotFound")
        const currentError = yield* Effect.flip(leases.current(pk))
        expect(currentError._tag).toBe("LeaseNotFound")
      })
    )
  )
}
