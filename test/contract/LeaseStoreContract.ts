/**
 * The LeaseStore contract (SPEC §4), written once and run against every backend.
 *
 * Every test builds a fresh layer from the factory and uses partition keys of its own, so a backend may
 * share one table between tests. Tests run on `TestClock`: expiry happens only through `TestClock.adjust`.
 */
import { describe, expect, it } from "@effect/vitest"
import { randomUUID } from "node:crypto"
import * as Cause from "effect/Cause"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import type * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import { LeaseToken } from "../../src/domain/LeaseToken.js"
import type { LeaseTokenLike } from "../../src/domain/LeaseToken.js"
import { type Lease, LeaseStore } from "../../src/services/LeaseStore.js"

/** A partition key no other test (or earlier run against a shared table) uses. */
const uniquePartition = (label: string): string => `lease-${label}-${randomUUID()}`

const ttl = Duration.seconds(30)

/** One step of a generated lease history (two partitions, three owners). */
type Command =
  | { readonly op: "acquire"; readonly pk: number; readonly owner: number; readonly ttl: number }
  | { readonly op: "renew"; readonly pk: number; readonly token: number; readonly ttl: number }
  | { readonly op: "release"; readonly pk: number; readonly token: number }
  | { readonly op: "current"; readonly pk: number }
  | { readonly op: "advance"; readonly millis: number }

const pkArb = FastCheck.integer({ min: 0, max: 1 })
const ttlArb = FastCheck.integer({ min: 0, max: 4 }).map((n) => n * 1000)
const tokenArb = FastCheck.integer({ min: 0, max: 50 })
const commandArb: FastCheck.Arbitrary<Command> = FastCheck.oneof(
  FastCheck.record({
    op: FastCheck.constant("acquire" as const),
    pk: pkArb,
    owner: FastCheck.integer({ min: 0, max: 2 }),
    ttl: ttlArb
  }),
  FastCheck.record({ op: FastCheck.constant("renew" as const), pk: pkArb, token: tokenArb, ttl: ttlArb }),
  FastCheck.record({ op: FastCheck.constant("release" as const), pk: pkArb, token: tokenArb }),
  FastCheck.record({ op: FastCheck.constant("current" as const), pk: pkArb }),
  FastCheck.record({
    op: FastCheck.constant("advance" as const),
    millis: FastCheck.integer({ min: 0, max: 8 }).map((n) => n * 500)
  })
)

/** What the model knows of one partition: the latest lease and every token issued or made up so far. */
interface ModelPartition {
  lease: { owner: string; version: number; expiresAt: number; released: boolean } | undefined
  readonly tokens: Array<LeaseTokenLike>
}

/**
 * The token a renew/release step presents: one issued earlier, or (for indexes past the issued ones) a
 * made-up token of a known owner with a version near the latest one.
 */
const tokenFor = (partition: ModelPartition, index: number): LeaseTokenLike => {
  const issued = partition.tokens[index]
  if (issued !== undefined) return issued
  const latest = partition.lease?.version ?? 1
  return { owner: `node-${index % 3}`, version: Math.max(1, latest + (index % 3) - 1) }
}

const describeOutcome = (outcome: Either.Either<Lease | void, { readonly _tag: string }>): string =>
  Either.match(outcome, {
    onLeft: (error) => error._tag,
    onRight: (lease) => (lease === undefined ? "ok" : `${lease.token.owner}@${lease.token.version}`)
  })

/** Runs one generated history against the store and the model, failing on the first disagreement. */
const runHistory = (commands: ReadonlyArray<Command>) =>
  Effect.gen(function* () {
    const leases = yield* LeaseStore
    const keys = [uniquePartition("model-0"), uniquePartition("model-1")]
    const model: Array<ModelPartition> = [
      { lease: undefined, tokens: [] },
      { lease: undefined, tokens: [] }
    ]
    const trace: Array<string> = []
    for (const command of commands) {
      const now = DateTime.toEpochMillis(yield* DateTime.now)
      if (command.op === "advance") {
        yield* TestClock.adjust(Duration.millis(command.millis))
        trace.push(`advance ${command.millis}`)
        continue
      }
      const pk = keys[command.pk] ?? ""
      const m = model[command.pk] ?? { lease: undefined, tokens: [] }
      const lease = m.lease
      const live = lease !== undefined && !lease.released && now < lease.expiresAt
      const context = () => `history:\n  ${[...trace, JSON.stringify(command)].join("\n  ")}`
      switch (command.op) {
        case "acquire": {
          const owner = `node-${command.owner}`
          const outcome = yield* Effect.either(leases.acquire(pk, owner, Duration.millis(command.ttl)))
          trace.push(`${JSON.stringify(command)} -> ${describeOutcome(outcome)}`)
          if (live) {
            expect(Either.isLeft(outcome) ? outcome.left._tag : "acquired", context()).toBe("LeaseHeld")
            if (Either.isLeft(outcome) && outcome.left._tag === "LeaseHeld") {
              expect(outcome.left.heldBy, context()).toBe(lease.owner)
              expect(outcome.left.version, context()).toBe(lease.version)
              expect(DateTime.toEpochMillis(outcome.left.expiresAt), context()).toBe(lease.expiresAt)
            }
          } else {
            expect(Either.isRight(outcome) ? "acquired" : outcome.left._tag, context()).toBe("acquired")
            if (Either.isRight(outcome)) {
              const got = outcome.right
              expect(got.token.owner, context()).toBe(owner)
              if (lease !== undefined) expect(got.token.version, context()).toBeGreaterThan(lease.version)
              expect(DateTime.toEpochMillis(got.expiresAt), context()).toBe(now + command.ttl)
              m.lease = { owner, version: got.token.version, expiresAt: now + command.ttl, released: false }
              m.tokens.push({ owner, version: got.token.version })
            }
          }
          break
        }
        case "renew":
        case "release": {
          const token = tokenFor(m, command.token)
          const outcome: Either.Either<Lease | void, { readonly _tag: string }> =
            command.op === "renew"
              ? yield* Effect.either(leases.renew(pk, token, Duration.millis(command.ttl)))
              : yield* Effect.either(leases.release(pk, token))
          trace.push(`${JSON.stringify(command)} ${token.owner}@${token.version} -> ${describeOutcome(outcome)}`)
          const expected =
            lease === undefined || lease.released
              ? "LeaseNotFound"
              : lease.owner !== token.owner || lease.version !== token.version
                ? "StaleFencingToken"
                : "ok"
          expect(Either.isRight(outcome) ? "ok" : outcome.left._tag, context()).toBe(expected)
          if (expected === "ok" && lease !== undefined) {
            if (command.op === "renew") {
              lease.expiresAt = now + command.ttl
              if (Either.isRight(outcome) && outcome.right !== undefined) {
                expect(outcome.right.token.version, context()).toBe(lease.version)
                expect(DateTime.toEpochMillis(outcome.right.expiresAt), context()).toBe(lease.expiresAt)
              }
            } else {
              lease.released = true
            }
          }
          break
        }
        case "current": {
          const outcome = yield* Effect.either(leases.current(pk))
          trace.push(`${JSON.stringify(command)} -> ${describeOutcome(outcome)}`)
          if (lease === undefined || lease.released) {
            expect(Either.isLeft(outcome) ? outcome.left._tag : "found", context()).toBe("LeaseNotFound")
          } else {
            expect(Either.isRight(outcome) ? "found" : outcome.left._tag, context()).toBe("found")
            if (Either.isRight(outcome)) {
              expect(outcome.right.token.owner, context()).toBe(lease.owner)
              expect(outcome.right.token.version, context()).toBe(lease.version)
              expect(DateTime.toEpochMillis(outcome.right.expiresAt), context()).toBe(lease.expiresAt)
            }
          }
          break
        }
      }
    }
  })

/**
 * Runs the LeaseStore contract suite against the layer built by `makeLayer` (called once per test).
 */
export const leaseStoreContract = (name: string, makeLayer: () => Layer.Layer<LeaseStore, unknown>): void => {
  const run = <A, E>(self: Effect.Effect<A, E, LeaseStore>): Effect.Effect<A, unknown> =>
    Effect.provide(self, makeLayer())

  describe(`LeaseStore contract: ${name}`, () => {
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

    it.effect(
      "§4 acquire with an empty owner or partition key is refused, naming the argument, and issues nothing",
      () =>
        run(
          Effect.gen(function* () {
            const leases = yield* LeaseStore
            const pk = uniquePartition("empty")
            const noOwner = yield* Effect.exit(leases.acquire(pk, "", ttl))
            expect(Exit.isFailure(noOwner) && Cause.pretty(noOwner.cause)).toContain(
              "lease owner must be a non-empty string"
            )
            const noPartition = yield* Effect.exit(leases.acquire("", "node-a", ttl))
            expect(Exit.isFailure(noPartition) && Cause.pretty(noPartition.cause)).toContain(
              "lease partition key must be a non-empty string"
            )
            expect((yield* Effect.flip(leases.current(pk)))._tag).toBe("LeaseNotFound")
            expect((yield* leases.acquire(pk, "node-a", ttl)).token.owner).toBe("node-a")
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

    it.effect("§4 current returns an expired lease nobody took over, with its past expiresAt", () =>
      run(
        Effect.gen(function* () {
          const leases = yield* LeaseStore
          const pk = uniquePartition("current-expired")
          const lease = yield* leases.acquire(pk, "node-a", ttl)
          yield* TestClock.adjust(Duration.minutes(2))
          const current = yield* leases.current(pk)
          const now = yield* DateTime.now
          expect(current.token.owner).toBe("node-a")
          expect(current.token.version).toBe(lease.token.version)
          expect(DateTime.toEpochMillis(current.expiresAt)).toBe(DateTime.toEpochMillis(lease.expiresAt))
          expect(DateTime.toEpochMillis(current.expiresAt)).toBeLessThan(DateTime.toEpochMillis(now))
        })
      )
    )

    it.effect("§4 current after release fails with LeaseNotFound", () =>
      run(
        Effect.gen(function* () {
          const leases = yield* LeaseStore
          const pk = uniquePartition("current-released")
          const lease = yield* leases.acquire(pk, "node-a", ttl)
          yield* leases.release(pk, lease.token)
          const error = yield* Effect.flip(leases.current(pk))
          expect(error._tag).toBe("LeaseNotFound")
        })
      )
    )

    it.effect("§4 partitions are independent: a lease on one never blocks another", () =>
      run(
        Effect.gen(function* () {
          const leases = yield* LeaseStore
          const one = uniquePartition("independent-1")
          const two = uniquePartition("independent-2")
          const a = yield* leases.acquire(one, "node-a", ttl)
          const b = yield* leases.acquire(two, "node-b", ttl)
          expect(b.token.owner).toBe("node-b")
          yield* leases.release(one, a.token)
          const stillHeld = yield* leases.current(two)
          expect(stillHeld.token.owner).toBe("node-b")
        })
      )
    )

    it.effect("§4 full lifecycle: acquire, renew, expire, takeover fences the old owner, release, acquire", () =>
      run(
        Effect.gen(function* () {
          const leases = yield* LeaseStore
          const pk = uniquePartition("lifecycle")
          const a1 = yield* leases.acquire(pk, "node-a", ttl)
          yield* TestClock.adjust(Duration.seconds(20))
          const a2 = yield* leases.renew(pk, a1.token, ttl)
          expect(a2.token.version).toBe(a1.token.version)
          yield* TestClock.adjust(Duration.seconds(25))
          // Renewed at t=20s for 30s: still held at t=45s.
          expect((yield* Effect.flip(leases.acquire(pk, "node-b", ttl)))._tag).toBe("LeaseHeld")
          yield* TestClock.adjust(Duration.seconds(10))
          const b1 = yield* leases.acquire(pk, "node-b", ttl)
          expect(b1.token.version).toBeGreaterThan(a1.token.version)
          // The old owner is fenced out: its renew and release are stale, not "not found".
          expect((yield* Effect.flip(leases.renew(pk, a1.token, ttl)))._tag).toBe("StaleFencingToken")
          expect((yield* Effect.flip(leases.release(pk, a1.token)))._tag).toBe("StaleFencingToken")
          const b2 = yield* leases.renew(pk, b1.token, ttl)
          expect(b2.token.version).toBe(b1.token.version)
          yield* leases.release(pk, b2.token)
          expect((yield* Effect.flip(leases.current(pk)))._tag).toBe("LeaseNotFound")
          const a3 = yield* leases.acquire(pk, "node-a", ttl)
          expect(a3.token.version).toBeGreaterThan(b1.token.version)
          const current = yield* leases.current(pk)
          expect(current.token.owner).toBe("node-a")
          expect(current.token.version).toBe(a3.token.version)
        })
      )
    )

    it.effect("§4 generated histories agree with the lease model (one live holder, versions only grow)", () =>
      Effect.gen(function* () {
        const histories = FastCheck.sample(FastCheck.array(commandArb, { minLength: 1, maxLength: 30 }), {
          numRuns: 25,
          seed: 4242
        })
        for (const history of histories) yield* run(runHistory(history))
      })
    )
  })
}
