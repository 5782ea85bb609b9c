/**
 * The PostgreSQL lease fence (SPEC §6 step 5, §13): one statement completes claimed records only while the
 * partition's lease carries the claim's token, and the drainer's end-of-batch complete uses it as the lease
 * check after the last wave's sends (one lease read fewer per batch).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import { inject } from "vitest"
import { LeaseToken } from "../src/domain/LeaseToken.js"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as PostgresLeaseFence from "../src/layers/postgres/PostgresLeaseFence.js"
import * as PostgresLeaseStore from "../src/layers/postgres/PostgresLeaseStore.js"
import * as PostgresOutboxStore from "../src/layers/postgres/PostgresOutboxStore.js"
import * as Drainer from "../src/programs/Drainer.js"
import { LeaseFence } from "../src/services/LeaseFence.js"
import { LeaseStore } from "../src/services/LeaseStore.js"
import * as OutboxMetrics from "../src/services/OutboxMetrics.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { Sink } from "../src/services/Sink.js"
import { clientLayer, createDatabase } from "./support/PostgresServer.js"

const url = await createDatabase(inject("postgresUrl"), "lease_fence")

/** Counts lease reads (`LeaseStore.current`). */
class LeaseReads extends Context.Tag("test/LeaseFenceReads")<LeaseReads, { readonly count: () => number }>() {}

const countingLeases = Layer.effectContext(
  Effect.gen(function* () {
    const inner = yield* LeaseStore
    let reads = 0
    const store = LeaseStore.of({
      ...inner,
      current: (partitionKey) =>
        Effect.suspend(() => {
          reads += 1
          return inner.current(partitionKey)
        })
    })
    return Context.make(LeaseStore, store).pipe(Context.add(LeaseReads, { count: () => reads }))
  })
)

let schemas = 0
/** Stores in a fresh schema, the lease store's reads counted. */
const storesIn = (schema: string) =>
  Layer.mergeAll(
    PostgresOutboxStore.layerWith({ schema }),
    countingLeases.pipe(Layer.provide(PostgresLeaseStore.layerWith({ schema })))
  )
/** The stores and the fence over them. */
const withFence = () => {
  const schema = `fence_${++schemas}`
  return Layer.merge(storesIn(schema), PostgresLeaseFence.layerWith({ schema })).pipe(
    Layer.provide(clientLayer(url)),
    Layer.orDie
  )
}
/** The stores alone. */
const withoutFence = () => storesIn(`fence_${++schemas}`).pipe(Layer.provide(clientLayer(url)), Layer.orDie)

const rec = (partitionKey: string, id: string) =>
  new NewOutboxRecord({ id, partitionKey, envelopeId: id, bindingId: "b", payload: new Uint8Array([1]) })

const OWNER = "relay-a"

/** A drainer whose policies all drop (no dead-letter store needed). */
const drainer = (partitionKey: string, owner: string) =>
  Drainer.make({
    partitionKey,
    owner,
    gaugeInterval: 0,
    onExpired: "drop",
    onPermanentFailure: "drop",
    onPoison: "drop"
  })

/** A sink that records its sends and may act (once) before the first send of a record. */
const sinkActing = (actions: ReadonlyMap<string, Effect.Effect<void>>) => {
  const sent: Array<string> = []
  const pending = new Map(actions)
  return {
    sent,
    sink: Sink.of({
      send: (record) =>
        Effect.suspend(() => {
          const action = pending.get(record.id)
          pending.delete(record.id)
          return Effect.zipRight(
            action ?? Effect.void,
            Effect.sync(() => {
              sent.push(record.id)
            })
          )
        })
    })
  }
}

describe("PostgreSQL lease fence", () => {
  it.live("completes only while the lease carries the token: held, another version, released", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const leases = yield* LeaseStore
      const fence = yield* LeaseFence
      const p = "f-direct"
      const lease = yield* leases.acquire(p, OWNER, "1 minute")
      yield* store.persist([rec(p, "a"), rec(p, "b"), rec(p, "c"), rec(p, "d")])
      const claimed = yield* store.claim(p, lease.token, 10)
      expect(claimed.records.map((r) => r.id)).toEqual(["a", "b", "c", "d"])
      // held: the matching ids are completed; an id not claimed by the token is left out
      const held = yield* fence.complete(p, ["a", "unknown"], lease.token)
      expect(held).toEqual({ _tag: "Held", completed: new Set(["a"]) })
      // a token of another version (the claim's owner, the lease's owner): nothing matches
      const other = new LeaseToken({ owner: OWNER, version: lease.token.version + 1 })
      expect(yield* fence.complete(p, ["b"], other)).toEqual({ _tag: "Unconfirmed" })
      // the lease released (and taken by another relay): the records stay claimed
      yield* leases.release(p, lease.token)
      expect(yield* fence.complete(p, ["b"], lease.token)).toEqual({ _tag: "Unconfirmed" })
      yield* leases.acquire(p, "relay-b", "1 minute")
      expect(yield* fence.complete(p, ["b", "c"], lease.token)).toEqual({ _tag: "Unconfirmed" })
      expect(yield* store.countClaimed(p)).toBe(3)
      // a plain complete still matches the record claims (the fence is what refuses)
      yield* store.complete(["b"], lease.token)
      expect(yield* store.countClaimed(p)).toBe(2)
    }).pipe(Effect.provide(withFence()))
  )

  it.live("the drainer's end-of-batch complete is its lease check: one lease read fewer than without the fence", () =>
    Effect.gen(function* () {
      const readsWith = yield* Effect.gen(function* () {
        const p = "f-drain"
        const leases = yield* LeaseStore
        const store = yield* OutboxStore
        yield* leases.acquire(p, OWNER, "1 minute")
        yield* store.persist(["x1", "x2", "x3", "x4", "x5"].map((id) => rec(p, id)))
        const { sent, sink } = sinkActing(new Map())
        const d = yield* drainer(p, OWNER).pipe(Effect.provideService(Sink, sink))
        const before = (yield* LeaseReads).count()
        expect(yield* d.drainOnce()).toMatchObject({ claimed: 5, delivered: 5, leftClaimed: 0 })
        expect(sent).toEqual(["x1", "x2", "x3", "x4", "x5"])
        expect(yield* store.countClaimed(p)).toBe(0)
        expect(yield* store.countPending(p)).toBe(0)
        return (yield* LeaseReads).count() - before
      }).pipe(Effect.provide(withFence()))
      const readsWithout = yield* Effect.gen(function* () {
        const p = "f-drain"
        const leases = yield* LeaseStore
        const store = yield* OutboxStore
        yield* leases.acquire(p, OWNER, "1 minute")
        yield* store.persist(["x1", "x2", "x3", "x4", "x5"].map((id) => rec(p, id)))
        const { sink } = sinkActing(new Map())
        const d = yield* drainer(p, OWNER).pipe(Effect.provideService(Sink, sink))
        const before = (yield* LeaseReads).count()
        expect(yield* d.drainOnce()).toMatchObject({ claimed: 5, delivered: 5 })
        expect(yield* store.countClaimed(p)).toBe(0)
        return (yield* LeaseReads).count() - before
      }).pipe(Effect.provide(withoutFence()))
      // the cycle's read and the check before the sends; without the fence also the check after them
      expect(readsWith).toBe(2)
      expect(readsWithout).toBe(3)
    })
  )

  it.live(
    "lease taken over during the last wave's sends: nothing is completed, duplicate risk counted, the cycle fails stale",
    () =>
      Effect.gen(function* () {
        const p = "f-lost"
        const leases = yield* LeaseStore
        const store = yield* OutboxStore
        const lease = yield* leases.acquire(p, OWNER, "1 minute")
        yield* store.persist(["x1", "x2", "x3"].map((id) => rec(p, id)))
        const takeover = leases
          .release(p, lease.token)
          .pipe(Effect.zipRight(leases.acquire(p, "relay-b", "1 minute")), Effect.asVoid, Effect.orDie)
        const { sent, sink } = sinkActing(new Map([["x3", takeover]]))
        const d = yield* drainer(p, OWNER).pipe(Effect.provideService(Sink, sink))
        const risk = Metric.value(OutboxMetrics.tagged(OutboxMetrics.OutboxDuplicateRisk, p))
        const riskBefore = (yield* risk).count
        const error = yield* Effect.flip(d.drainOnce())
        expect(error._tag).toBe("StaleFencingToken")
        expect(sent).toEqual(["x1", "x2", "x3"])
        // sent under a lease that moved: left claimed for the next owner, none completed
        expect(yield* store.countClaimed(p)).toBe(3)
        expect((yield* risk).count - riskBefore).toBe(3)
        // the next owner reclaims all three (claimed under the old version)
        const next = yield* drainer(p, "relay-b").pipe(Effect.provideService(Sink, sink))
        expect(yield* next.drainOnce()).toMatchObject({ claimed: 3, delivered: 3 })
        expect(yield* store.countClaimed(p)).toBe(0)
      }).pipe(Effect.provide(withFence()))
  )
})
