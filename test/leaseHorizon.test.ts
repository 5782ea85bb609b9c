import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as MemorySink from "../src/layers/sinks/MemorySink.js"
import * as Drainer from "../src/programs/Drainer.js"
import * as LeaseStore from "../src/services/LeaseStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { Sink } from "../src/services/Sink.js"

/**
 * The drainer's lease checks between waves (SPEC §6 step 5, §13, `LeaseWrites`): a read that found the lease
 * held stands until this process writes that lease again or its expiry comes near, so a batch reads its lease
 * once; a release, re-acquire or renew in this process, or an expiry takeover by another process, is still
 * seen before the next wave is sent.
 */

const OWNER = "relay-a"
const TTL_MILLIS = 60_000

/**
 * A lease backend built through the shared core (so the drainer trusts its reads between writes) that counts
 * its reads, and can be written behind the core's back — as another process would write the same table.
 */
const countingLeases = Effect.sync(() => {
  const leases = new Map<string, LeaseStore.StoredLease>()
  let reads = 0
  const write = (partitionKey: string, lease: LeaseStore.StoredLease): LeaseStore.WriteOutcome => {
    leases.set(partitionKey, lease)
    return { _tag: "Written", lease }
  }
  const backend: LeaseStore.LeaseBackend = {
    tryAcquire: (partitionKey, owner, nowMillis, expiresAtMillis) =>
      Effect.sync(() => {
        const current = leases.get(partitionKey)
        if (current !== undefined && !current.released && nowMillis < current.expiresAtMillis) {
          return { _tag: "Refused", stored: current }
        }
        return write(partitionKey, { owner, version: (current?.version ?? 0) + 1, expiresAtMillis, released: false })
      }),
    extend: (partitionKey, token, expiresAtMillis) =>
      Effect.sync(() => {
        const current = leases.get(partitionKey)
        return current !== undefined && !current.released && current.version === token.version
          ? write(partitionKey, { ...current, expiresAtMillis })
          : { _tag: "Refused", stored: current }
      }),
    end: (partitionKey, token) =>
      Effect.sync(() => {
        const current = leases.get(partitionKey)
        return current !== undefined && !current.released && current.version === token.version
          ? write(partitionKey, { ...current, released: true })
          : { _tag: "Refused", stored: current }
      }),
    read: (partitionKey) =>
      Effect.sync(() => {
        reads += 1
        return leases.get(partitionKey)
      })
  }
  return {
    store: LeaseStore.make(backend),
    backend,
    reads: () => reads
  }
})

const rec = (partitionKey: string, id: string) =>
  new NewOutboxRecord({ id, partitionKey, envelopeId: id, bindingId: "b", payload: new Uint8Array([1]) })

type CountingLeases = Effect.Effect.Success<typeof countingLeases>

/**
 * A partition with 30 keyless records, its lease held by `OWNER`; a drainer sending 5 at a time (6 waves: the
 * sink's sends wait, so no wave is wide).
 * `duringFirstSend` runs once, inside the send of the first record.
 */
const setup = (
  partitionKey: string,
  duringFirstSend: (leases: CountingLeases, lease: LeaseStore.Lease) => Effect.Effect<void, unknown> = () => Effect.void
) =>
  Effect.gen(function* () {
    const leases = yield* countingLeases
    const store = yield* OutboxStore
    const lease = yield* leases.store.acquire(partitionKey, OWNER, `${TTL_MILLIS} millis`)
    yield* store.persist(Array.from({ length: 30 }, (_, i) => rec(partitionKey, `r${String(i).padStart(2, "0")}`)))
    let acted = false
    const sink = yield* MemorySink.make({
      // every send waits a turn of the scheduler, so the waves stay at five (a sink whose sends finish at
      // once would get wide waves after the first: see drainer/Waves)
      onSend: () =>
        Effect.zipRight(
          Effect.suspend(() => {
            if (acted) return Effect.void
            acted = true
            return Effect.orDie(duringFirstSend(leases, lease))
          }),
          Effect.yieldNow()
        )
    })
    const drainer = yield* Drainer.make({
      partitionKey,
      owner: OWNER,
      gaugeInterval: 0,
      maxConcurrency: 5,
      sendTimeout: "10 minutes",
      onExpired: "drop",
      onPermanentFailure: "drop",
      onPoison: "drop"
    }).pipe(Effect.provideService(Sink, sink.sink), Effect.provideService(LeaseStore.LeaseStore, leases.store))
    return { leases, lease, sink, drainer }
  })

const layer = Layer.mergeAll(MemoryOutboxStore.layer)

/**
 * Lets the lease expire, then has another process (`relay-b`) take it over, written straight to the
 * storage as that process would: this process counts no write.
 */
const takenOverElsewhere = (leases: CountingLeases, partitionKey: string) =>
  Effect.gen(function* () {
    yield* TestClock.adjust(`${TTL_MILLIS} millis`)
    const now = yield* TestClock.currentTimeMillis
    const taken = yield* leases.backend.tryAcquire(partitionKey, "relay-b", now, now + TTL_MILLIS)
    expect(taken._tag).toBe("Written")
  })

describe("Drainer lease checks between waves", () => {
  it.effect("a batch of 30 records sent in 6 waves reads its lease once", () =>
    Effect.gen(function* () {
      const { drainer, leases, sink } = yield* setup("h-once")
      const before = leases.reads()
      const result = yield* drainer.drainOnce()
      expect(result).toMatchObject({ claimed: 30, delivered: 30 })
      expect(yield* sink.deliveredIds).toHaveLength(30)
      expect(leases.reads() - before).toBe(1)
    }).pipe(Effect.provide(layer))
  )

  it.effect("the next batches take the lease as read while it stands: three batches, one read", () =>
    Effect.gen(function* () {
      const { drainer, leases, sink } = yield* setup("h-batches")
      const before = leases.reads()
      for (let i = 0; i < 3; i++) yield* drainer.drainOnce(10)
      expect(yield* sink.deliveredIds).toHaveLength(30)
      expect(leases.reads() - before).toBe(1)
      // once the read no longer stands (its expiry within the margin), the next cycle reads again
      yield* TestClock.adjust(`${TTL_MILLIS - 500} millis`)
      expect((yield* drainer.drainOnce()).leased).toBe(true)
      expect(leases.reads() - before).toBe(2)
    }).pipe(Effect.provide(layer))
  )

  it.effect("the lease released and acquired again in this process during a wave: the next wave is not sent", () =>
    Effect.gen(function* () {
      const { drainer, sink } = yield* setup("h-moved", (leases, lease) =>
        Effect.zipRight(
          leases.store.release("h-moved", lease.token),
          leases.store.acquire("h-moved", OWNER, `${TTL_MILLIS} millis`)
        )
      )
      const error = yield* Effect.flip(drainer.drainOnce())
      expect(error._tag).toBe("StaleFencingToken")
      // the first wave's five went out; nothing after the move
      expect(yield* sink.attempts).toEqual(["r00", "r01", "r02", "r03", "r04"])
    }).pipe(Effect.provide(layer))
  )

  it.effect("another process takes the lease over after its expiry during a wave: the next wave is not sent", () =>
    Effect.gen(function* () {
      const { drainer, sink } = yield* setup("h-expired", (leases) => takenOverElsewhere(leases, "h-expired"))
      const error = yield* Effect.flip(drainer.drainOnce())
      expect(error._tag).toBe("StaleFencingToken")
      expect(yield* sink.attempts).toEqual(["r00", "r01", "r02", "r03", "r04"])
    }).pipe(Effect.provide(layer))
  )

  it.effect("a renew written in this process stands in for a read: the waves after it read nothing", () =>
    Effect.gen(function* () {
      const { drainer, leases } = yield* setup("h-renewed", (leases, lease) =>
        // half a lease later: the renewed expiry lies 30 s past the one the cycle's read found
        Effect.zipRight(
          TestClock.adjust("30 seconds"),
          leases.store.renew("h-renewed", lease.token, `${TTL_MILLIS} millis`)
        )
      )
      const before = leases.reads()
      const result = yield* drainer.drainOnce()
      expect(result).toMatchObject({ claimed: 30, delivered: 30 })
      // the cycle's read only: the renew found the lease held at the token's version and moved its expiry
      expect(leases.reads() - before).toBe(1)
      // the renewed expiry is what stands now: 50 s on, the read's expiry has passed, the renewed one has not
      yield* TestClock.adjust(`${TTL_MILLIS - 10_000} millis`)
      expect((yield* drainer.drainOnce()).leased).toBe(true)
      expect(leases.reads() - before).toBe(1)
    }).pipe(Effect.provide(layer))
  )

  it.effect("a renew refused in this process voids the read: the next wave reads the lease and is not sent", () =>
    Effect.gen(function* () {
      const { drainer, sink } = yield* setup("h-renew-refused", (leases, lease) =>
        Effect.gen(function* () {
          yield* takenOverElsewhere(leases, "h-renew-refused")
          const renewed = yield* Effect.flip(leases.store.renew("h-renew-refused", lease.token, `${TTL_MILLIS} millis`))
          expect(renewed._tag).toBe("StaleFencingToken")
        })
      )
      const error = yield* Effect.flip(drainer.drainOnce())
      expect(error._tag).toBe("StaleFencingToken")
      expect(yield* sink.attempts).toEqual(["r00", "r01", "r02", "r03", "r04"])
    }).pipe(Effect.provide(layer))
  )

  it.effect("a renew of another owner's lease in this process stands in for nothing of this drainer's", () =>
    Effect.gen(function* () {
      const { drainer, leases } = yield* setup("h-renew-other", (leases) =>
        Effect.gen(function* () {
          yield* TestClock.adjust(`${TTL_MILLIS} millis`)
          // this process's other relay takes the expired lease over and renews it
          const taken = yield* leases.store.acquire("h-renew-other", "relay-b", `${TTL_MILLIS} millis`)
          yield* leases.store.renew("h-renew-other", taken.token, `${TTL_MILLIS} millis`)
        })
      )
      const before = leases.reads()
      const error = yield* Effect.flip(drainer.drainOnce())
      expect(error._tag).toBe("StaleFencingToken")
      expect(leases.reads() - before).toBe(2)
    }).pipe(Effect.provide(layer))
  )

  it.effect("a lease within a second of its expiry is read before every wave", () =>
    Effect.gen(function* () {
      const { drainer, leases } = yield* setup("h-near")
      yield* TestClock.adjust(`${TTL_MILLIS - 500} millis`)
      const before = leases.reads()
      const result = yield* drainer.drainOnce()
      expect(result).toMatchObject({ claimed: 30, delivered: 30 })
      // the cycle's read, one before the first wave's sends, and one after each of the six waves' sends
      expect(leases.reads() - before).toBe(8)
    }).pipe(Effect.provide(layer))
  )
})
