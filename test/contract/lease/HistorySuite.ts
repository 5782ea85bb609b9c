/**
 * LeaseStore contract, reading and whole histories (SPEC §4): `current`, partition independence, a full
 * lifecycle, and generated histories checked against a model of the lease rules.
 */
import { expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as TestClock from "effect/TestClock"
import type { LeaseTokenLike } from "../../../src/domain/LeaseToken.js"
import { type Lease, LeaseStore } from "../../../src/services/LeaseStore.js"
import { type Run, ttl, uniquePartition } from "./LeaseSupport.js"

/** One step of a generated lease history (two partitions, three owners; a ttl of 0 is refused). */
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
          if (command.ttl === 0) {
            expect(Either.isLeft(outcome) ? outcome.left._tag : "acquired", context()).toBe("InvalidArgument")
          } else if (live) {
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
            command.op === "renew" && command.ttl === 0
              ? "InvalidArgument"
              : lease === undefined || lease.released
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

/** The current, lifecycle and generated-history tests. */
export const historySuite = (run: Run): void => {
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
}
