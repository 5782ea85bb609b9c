/**
 * The lease fence tests (SPEC §6 step 5, §13), written once and run against every SQL backend that has a
 * `LeaseFence`: one statement completes claimed records only while the partition's lease carries the
 * claim's token, and the drainer's end-of-batch complete uses it as the lease check after the last wave's
 * sends (one lease read fewer per batch).
 *
 * Every test gets a fresh namespace (a PostgreSQL schema, a MySQL database) and its own client.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as TestClock from "effect/TestClock"
import { LeaseToken } from "../../src/domain/LeaseToken.js"
import { NewOutboxRecord } from "../../src/domain/OutboxRecord.js"
import * as Drainer from "../../src/programs/Drainer.js"
import * as Relay from "../../src/programs/Relay.js"
import { LeaseFence } from "../../src/services/LeaseFence.js"
import { LeaseStore } from "../../src/services/LeaseStore.js"
import * as OutboxMetrics from "../../src/services/OutboxMetrics.js"
import { OutboxStore } from "../../src/services/OutboxStore.js"
import { Sink } from "../../src/services/Sink.js"

/**
 * The layers of one backend, each in the namespace `ns` (a schema or database name, fresh per test).
 */
export interface LeaseFenceSuiteOptions {
  /** The backend's name, as test titles show it. */
  readonly name: string
  readonly outbox: (ns: string) => Layer.Layer<OutboxStore, unknown, SqlClient.SqlClient>
  readonly leases: (ns: string) => Layer.Layer<LeaseStore, unknown, SqlClient.SqlClient>
  readonly fence: (ns: string) => Layer.Layer<LeaseFence, unknown, SqlClient.SqlClient>
  /** A client on the test server (one per test). */
  readonly client: () => Layer.Layer<SqlClient.SqlClient, unknown>
}

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

/** Counts the fenced completes and the ids they completed. */
class FencedCalls extends Context.Tag("test/LeaseFenceCalls")<
  FencedCalls,
  { readonly calls: () => number; readonly completed: () => number }
>() {}

const countingFence = Layer.effectContext(
  Effect.gen(function* () {
    const inner = yield* LeaseFence
    let calls = 0
    let completed = 0
    const fence = LeaseFence.of({
      complete: (partitionKey, ids, token) =>
        Effect.suspend(() => {
          calls += 1
          return Effect.tap(inner.complete(partitionKey, ids, token), (result) => {
            if (result._tag === "Held") completed += result.completed.size
          })
        })
    })
    return Context.make(LeaseFence, fence).pipe(
      Context.add(FencedCalls, { calls: () => calls, completed: () => completed })
    )
  })
)

/**
 * Runs the lease fence tests against one backend.
 */
export const leaseFenceSuite = (options: LeaseFenceSuiteOptions): void => {
  let namespaces = 0
  /** Stores in a fresh namespace, the lease store's reads counted. */
  const storesIn = (ns: string) =>
    Layer.mergeAll(options.outbox(ns), countingLeases.pipe(Layer.provide(options.leases(ns))))
  /** The stores and the fence over them. */
  const withFence = () => {
    const ns = `fence_${++namespaces}`
    return Layer.merge(storesIn(ns), options.fence(ns)).pipe(Layer.provide(options.client()), Layer.orDie)
  }
  /** The stores alone. */
  const withoutFence = () => storesIn(`fence_${++namespaces}`).pipe(Layer.provide(options.client()), Layer.orDie)

  /** The stores and the fence over them, the fence's calls counted. */
  const withCountedFence = () => {
    const ns = `fence_${++namespaces}`
    return Layer.merge(storesIn(ns), countingFence.pipe(Layer.provide(options.fence(ns)))).pipe(
      Layer.provide(options.client()),
      Layer.orDie
    )
  }

  describe(`${options.name} lease fence`, () => {
    it.live("completes every id of the batch while the lease carries the token", () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const leases = yield* LeaseStore
        const fence = yield* LeaseFence
        const p = "f-all"
        const lease = yield* leases.acquire(p, OWNER, "1 minute")
        const ids = ["a", "b", "c", "d", "e"]
        yield* store.persist(ids.map((id) => rec(p, id)))
        expect((yield* store.claim(p, lease.token, 10)).records.map((r) => r.id)).toEqual(ids)
        // a duplicate id counts once
        expect(yield* fence.complete(p, [...ids, "c"], lease.token)).toEqual({ _tag: "Held", completed: new Set(ids) })
        expect(yield* store.countClaimed(p)).toBe(0)
        expect(yield* store.countPending(p)).toBe(0)
        // nothing to complete: held, nothing completed
        expect(yield* fence.complete(p, [], lease.token)).toEqual({ _tag: "Held", completed: new Set() })
      }).pipe(Effect.provide(withFence()))
    )

    it.live("held: only the ids claimed by the token are completed; pending and unknown ids are left out", () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const leases = yield* LeaseStore
        const fence = yield* LeaseFence
        const p = "f-some"
        const lease = yield* leases.acquire(p, OWNER, "1 minute")
        yield* store.persist(["a", "b", "c", "d", "e"].map((id) => rec(p, id)))
        expect((yield* store.claim(p, lease.token, 3)).records.map((r) => r.id)).toEqual(["a", "b", "c"])
        // d is pending (not claimed), x does not exist, a record of another partition is not this claim's
        yield* store.persist([rec("f-other", "o1")])
        const held = yield* fence.complete(p, ["a", "d", "x", "b", "o1"], lease.token)
        expect(held).toEqual({ _tag: "Held", completed: new Set(["a", "b"]) })
        expect(yield* store.countClaimed(p)).toBe(1)
        expect(yield* store.countPending(p)).toBe(2)
        expect(yield* store.countPending("f-other")).toBe(1)
      }).pipe(Effect.provide(withFence()))
    )

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

    it.effect("lease expired, then taken over by another owner: Unconfirmed both times, nothing completed", () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const leases = yield* LeaseStore
        const fence = yield* LeaseFence
        const p = "f-expired"
        const lease = yield* leases.acquire(p, OWNER, "1 minute")
        yield* store.persist(["a", "b", "c"].map((id) => rec(p, id)))
        yield* store.claim(p, lease.token, 10)
        // one millisecond before expiry the lease still carries the token
        yield* TestClock.adjust(Duration.millis(59_999))
        expect(yield* fence.complete(p, ["a"], lease.token)).toEqual({ _tag: "Held", completed: new Set(["a"]) })
        // expired at the clock's now (nobody took it over yet): the fence refuses
        yield* TestClock.adjust(Duration.millis(1))
        expect(yield* fence.complete(p, ["b", "c"], lease.token)).toEqual({ _tag: "Unconfirmed" })
        yield* TestClock.adjust(Duration.minutes(1))
        const next = yield* leases.acquire(p, "relay-b", "1 minute")
        expect(next.token.version).toBeGreaterThan(lease.token.version)
        expect(yield* fence.complete(p, ["b", "c"], lease.token)).toEqual({ _tag: "Unconfirmed" })
        // the new owner's token does not match the old claims either
        expect(yield* fence.complete(p, ["b", "c"], next.token)).toEqual({ _tag: "Unconfirmed" })
        expect(yield* store.countClaimed(p)).toBe(2)
        // the new owner claims them again and completes them under its own lease
        const reclaimed = yield* store.claim(p, next.token, 10)
        expect(reclaimed.records.map((r) => r.id)).toEqual(["b", "c"])
        expect(yield* fence.complete(p, ["b", "c"], next.token)).toEqual({
          _tag: "Held",
          completed: new Set(["b", "c"])
        })
        expect(yield* store.countClaimed(p)).toBe(0)
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

    it.live("a relay with the fence delivers every record once, in order per key, and completes them all", () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const partitions = ["rf-0", "rf-1", "rf-2"]
        const keys = ["k0", "k1", "k2"]
        const perPartition = 30
        for (const p of partitions) {
          yield* store.persist(
            Array.from(
              { length: perPartition },
              (_, i) =>
                new NewOutboxRecord({
                  id: `${p}:${String(i).padStart(3, "0")}`,
                  partitionKey: p,
                  envelopeId: `${p}:${i}`,
                  bindingId: "b",
                  orderingKey: i % 4 === 3 ? undefined : keys[i % 3],
                  payload: new Uint8Array([i])
                })
            )
          )
        }
        const delivered: Array<{ readonly id: string; readonly key: string | undefined }> = []
        const sink = Sink.of({
          send: (record) =>
            Effect.sync(() => {
              delivered.push({
                id: record.id,
                key: record.orderingKey._tag === "Some" ? record.orderingKey.value : undefined
              })
            })
        })
        const relay = yield* Effect.fork(
          Relay.run({
            owner: OWNER,
            discoveryInterval: "50 millis",
            drainer: {
              batchSize: 8,
              maxBatchSize: 8,
              maxConcurrency: 3,
              onExpired: "drop",
              onPermanentFailure: "drop",
              onPoison: "drop"
            }
          }).pipe(Effect.provideService(Sink, sink))
        )
        const left = Effect.map(
          Effect.forEach(partitions, (p) =>
            Effect.zipWith(store.countPending(p), store.countClaimed(p), (pending, claimed) => pending + claimed)
          ),
          (counts) => counts.reduce((a, b) => a + b, 0)
        )
        while ((yield* left) > 0 || delivered.length < partitions.length * perPartition) {
          yield* Effect.sleep("20 millis")
        }
        yield* Fiber.interrupt(relay)
        // once each (the lease never moved), in id order per partition and key
        expect(new Set(delivered.map((d) => d.id)).size).toBe(partitions.length * perPartition)
        expect(delivered.length).toBe(partitions.length * perPartition)
        for (const p of partitions) {
          for (const key of keys) {
            const chain = delivered.filter((d) => d.id.startsWith(`${p}:`) && d.key === key).map((d) => d.id)
            expect(chain).toEqual([...chain].sort())
          }
        }
        // the end-of-batch completes went through the fence
        const fenced = yield* FencedCalls
        expect(fenced.calls()).toBeGreaterThan(0)
        expect(fenced.completed()).toBeGreaterThan(0)
      }).pipe(Effect.provide(withCountedFence()))
    )
  })
}
