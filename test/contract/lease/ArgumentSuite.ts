/**
 * LeaseStore contract, arguments (issue 18 item 10): every operation refuses a bad argument with one
 * `InvalidArgument` naming the operation and the argument (never echoing the value), before anything is
 * read or written, on every backend.
 */
import { expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { LeaseStore } from "../../../src/services/LeaseStore.js"
import { untyped } from "../Untyped.js"
import { type Run, ttl, uniquePartition } from "./LeaseSupport.js"

/** ttls that would issue a lease already expired, or one that never expires. */
const badTtls: ReadonlyArray<readonly [string, Duration.DurationInput]> = [
  ["NaN", Number.NaN],
  ["negative", -5],
  ["zero", 0],
  ["Infinity", Number.POSITIVE_INFINITY],
  ["infinite Duration", Duration.infinity],
  ["below 1 ms", 0.5],
  ["negative string", "-5 seconds"],
  ["not a duration", untyped<Duration.DurationInput>("five seconds")],
  ["not a duration at all", untyped<Duration.DurationInput>({ seconds: 5 })]
]

/** Partition keys and owners that are not non-empty strings. */
const badKeys: ReadonlyArray<readonly [string, string]> = [
  ["empty", ""],
  ["a number", untyped<string>(42)],
  ["undefined", untyped<string>(undefined)],
  ["null", untyped<string>(null)]
]

const expectInvalid = (error: { readonly _tag: string }, operation: string, argument: string): void => {
  expect(error).toMatchObject({ _tag: "InvalidArgument", operation, argument })
}

/** The argument tests. */
export const argumentSuite = (run: Run): void => {
  it.effect(
    "§4 acquire with a ttl that is NaN, negative, zero, infinite or not a duration fails with InvalidArgument",
    () =>
      run(
        Effect.gen(function* () {
          const leases = yield* LeaseStore
          const pk = uniquePartition("bad-ttl")
          for (const [label, bad] of badTtls) {
            const error = yield* Effect.flip(leases.acquire(pk, "node-a", bad))
            expect(error._tag, label).toBe("InvalidArgument")
            expectInvalid(error, "acquire", "ttl")
          }
          expect((yield* Effect.flip(leases.current(pk)))._tag).toBe("LeaseNotFound")
          expect((yield* leases.acquire(pk, "node-a", ttl)).token.version).toBe(1)
        })
      )
  )

  it.effect("§4 acquire with an empty or non-string owner or partition key fails with InvalidArgument", () =>
    run(
      Effect.gen(function* () {
        const leases = yield* LeaseStore
        const pk = uniquePartition("bad-owner")
        for (const [label, bad] of badKeys) {
          const noOwner = yield* Effect.flip(leases.acquire(pk, bad, ttl))
          expect(noOwner._tag, label).toBe("InvalidArgument")
          expectInvalid(noOwner, "acquire", "owner")
          expectInvalid(yield* Effect.flip(leases.acquire(bad, "node-a", ttl)), "acquire", "partitionKey")
        }
        expect((yield* Effect.flip(leases.current(pk)))._tag).toBe("LeaseNotFound")
        expect((yield* leases.acquire(pk, "node-a", ttl)).token.owner).toBe("node-a")
      })
    )
  )

  it.effect("§4 renew with a bad ttl or partition key fails with InvalidArgument and leaves the lease as it was", () =>
    run(
      Effect.gen(function* () {
        const leases = yield* LeaseStore
        const pk = uniquePartition("bad-renew")
        const lease = yield* leases.acquire(pk, "node-a", ttl)
        for (const [label, bad] of badTtls) {
          const error = yield* Effect.flip(leases.renew(pk, lease.token, bad))
          expect(error._tag, label).toBe("InvalidArgument")
          expectInvalid(error, "renew", "ttl")
        }
        for (const [, bad] of badKeys) {
          expectInvalid(yield* Effect.flip(leases.renew(bad, lease.token, ttl)), "renew", "partitionKey")
        }
        const current = yield* leases.current(pk)
        expect(current.token.version).toBe(lease.token.version)
        expect(DateTime.toEpochMillis(current.expiresAt)).toBe(DateTime.toEpochMillis(lease.expiresAt))
      })
    )
  )

  it.effect("§4 release and current with an empty or non-string partition key fail with InvalidArgument", () =>
    run(
      Effect.gen(function* () {
        const leases = yield* LeaseStore
        const pk = uniquePartition("bad-release")
        const lease = yield* leases.acquire(pk, "node-a", ttl)
        for (const [, bad] of badKeys) {
          expectInvalid(yield* Effect.flip(leases.release(bad, lease.token)), "release", "partitionKey")
          expectInvalid(yield* Effect.flip(leases.current(bad)), "current", "partitionKey")
        }
        expect((yield* leases.current(pk)).token.version).toBe(lease.token.version)
        yield* leases.release(pk, lease.token)
      })
    )
  )

  it.effect("§4 InvalidArgument names the argument, never the value", () =>
    run(
      Effect.gen(function* () {
        const leases = yield* LeaseStore
        const error = yield* Effect.flip(leases.acquire(uniquePartition("secret"), "node-a", "-987654 seconds"))
        expect(error.message).toContain("ttl")
        expect(error.message).not.toContain("987654")
        const owner = yield* Effect.flip(leases.acquire("", "owner-secret-123", ttl))
        expect(owner.message).toContain("partitionKey")
        expect(owner.message).not.toContain("owner-secret-123")
      })
    )
  )
}
