import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import { DeadLetterStore } from "../src/services/DeadLetterStore.js"
import { StoreUnavailable } from "../src/domain/OutboxError.js"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as MemoryDeadLetterStore from "../src/layers/memory/MemoryDeadLetterStore.js"
import * as MemoryLeaseStore from "../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as MemorySink from "../src/layers/sinks/MemorySink.js"
import * as Drainer from "../src/programs/Drainer.js"
import * as Build from "../src/programs/drainer/Build.js"
import { type Lease, LeaseStore } from "../src/services/LeaseStore.js"
import * as OutboxMetrics from "../src/services/OutboxMetrics.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { Sink } from "../src/services/Sink.js"
import * as Faulty from "./support/FaultyOutboxStore.js"

const OWNER = "relay-a"

/** Test-local control of dead-letter writes (fail the next N). */
class DlqFaults extends Context.Tag("test/DlqFaults")<
  DlqFaults,
  { failWrites: (n: number) => Effect.Effect<void> }
>() {}

const faultyDlq: Layer.Layer<DeadLetterStore | DlqFaults, never, DeadLetterStore> = Layer.effectContext(
  Effect.gen(function* () {
    const inner = yield* DeadLetterStore
    let failing = 0
    const store = DeadLetterStore.of({
      ...inner,
      write: (entry) =>
        Effect.suspend(() => {
          if (failing > 0) {
            failing -= 1
            return Effect.fail(new StoreUnavailable({ operation: "dlq.write", cause: new Error("injected") }))
          }
          return inner.write(entry)
        })
    })
    return Context.make(DeadLetterStore, store).pipe(
      Context.add(DlqFaults, {
        failWrites: (n) =>
          Effect.sync(() => {
            failing = n
          })
      })
    )
  })
)

const storeLayer = Faulty.layer.pipe(Layer.provide(MemoryOutboxStore.layer))

/** Test-local view of lease reads (`LeaseStore.current`): counts them, and acts before a chosen one. */
class LeaseReads extends Context.Tag("test/LeaseReads")<
  LeaseReads,
  {
    /** Lease reads so far. */
    readonly count: Effect.Effect<number>
    /** Before read number `read` (1-based): run `action`, or fail that read (`"fail"`, a transient error). */
    readonly at: (read: number, action: Effect.Effect<void> | "fail") => Effect.Effect<void>
  }
>() {}

const leaseReads: Layer.Layer<LeaseStore | LeaseReads, never, LeaseStore> = Layer.effectContext(
  Effect.gen(function* () {
    const inner = yield* LeaseStore
    let reads = 0
    const actions = new Map<number, Effect.Effect<void> | "fail">()
    const store = LeaseStore.of({
      ...inner,
      current: (partitionKey) =>
        Effect.suspend(() => {
          reads += 1
          const action = actions.get(reads)
          actions.delete(reads)
          if (action === "fail") {
            return Effect.fail(new StoreUnavailable({ operation: "lease.current", cause: new Error("injected") }))
          }
          return Effect.zipRight(action ?? Effect.void, inner.current(partitionKey))
        })
    })
    return Context.make(LeaseStore, store).pipe(
      Context.add(LeaseReads, {
        count: Effect.sync(() => reads),
        at: (read, action) =>
          Effect.sync(() => {
            actions.set(read, action)
          })
      })
    )
  })
)

/** Store (faulty decorator), DLQ (faulty decorator), leases; no sink. */
const baseLayer = Layer.mergeAll(
  Layer.provideMerge(faultyDlq.pipe(Layer.provide(MemoryDeadLetterStore.layer)), storeLayer),
  MemoryLeaseStore.layer
)

const withSink = Layer.merge(baseLayer, MemorySink.layer)

/** Store (faulty decorator), DLQ, leases behind the read-watching decorator; no sink. */
const watchedLayer = Layer.mergeAll(
  Layer.provideMerge(faultyDlq.pipe(Layer.provide(MemoryDeadLetterStore.layer)), storeLayer),
  leaseReads.pipe(Layer.provide(MemoryLeaseStore.layer))
)

const rec = (
  partitionKey: string,
  envelopeId: string,
  extra: { orderingKey?: string; expiresAt?: DateTime.Utc } = {}
) =>
  new NewOutboxRecord({
    id: envelopeId,
    partitionKey,
    envelopeId,
    bindingId: "b",
    payload: new Uint8Array([1]),
    ...extra
  })

const setup = (partitionKey: string, records: ReadonlyArray<NewOutboxRecord>) =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    const leases = yield* LeaseStore
    const lease = yield* leases.acquire(partitionKey, OWNER, "1 hour")
    if (records.length > 0) yield* store.persist(records)
    return { store, leases, lease }
  })

const pendingIds = (partitionKey: string) =>
  Effect.flatMap(OutboxStore, (store) => store.queryPending(partitionKey, 1000)).pipe(
    Effect.map((records) => records.map((r) => r.id))
  )

const claimedCount = (partitionKey: string) => Effect.flatMap(OutboxStore, (store) => store.countClaimed(partitionKey))

const counter = (metric: Metric.Metric.Counter<number>, partitionKey: string, tag?: readonly [string, string]) => {
  const base = OutboxMetrics.tagged(metric, partitionKey)
  return Metric.value(tag === undefined ? base : Metric.tagged(base, tag[0], tag[1])).pipe(Effect.map((s) => s.count))
}

const gauge = (metric: Metric.Metric.Gauge<number>, partitionKey: string) =>
  Metric.value(OutboxMetrics.tagged(metric, partitionKey)).pipe(Effect.map((s) => s.value))

/** A drainer of `OWNER`; its options' literal types decide whether it needs a `DeadLetterStore`. */
const drainer = <const Options extends Partial<Drainer.DrainerOptions>>(partitionKey: string, options?: Options) =>
  Drainer.make(Object.assign({ partitionKey, owner: OWNER, gaugeInterval: 0 }, options))

const recorder = MemorySink.MemorySink

describe("Drainer", () => {
  it.effect("delivers a batch: keyless in parallel groups, each key strictly in age order, all completed", () =>
    Effect.gen(function* () {
      const p = "d-basic"
      yield* setup(p, [
        rec(p, "a1", { orderingKey: "A" }),
        rec(p, "x1"),
        rec(p, "a2", { orderingKey: "A" }),
        rec(p, "b1", { orderingKey: "B" }),
        rec(p, "a3", { orderingKey: "A" })
      ])
      const d = yield* drainer(p)
      const result = yield* d.drainOnce()
      expect(result).toMatchObject({ leased: true, claimed: 5, delivered: 5, deferred: 0, leftClaimed: 0 })
      const ids = yield* (yield* recorder).deliveredIds
      expect(ids.filter((id) => id.startsWith("a"))).toEqual(["a1", "a2", "a3"])
      expect(new Set(ids)).toEqual(new Set(["a1", "a2", "a3", "x1", "b1"]))
      expect(yield* pendingIds(p)).toEqual([])
      expect(yield* claimedCount(p)).toBe(0)
      expect(yield* counter(OutboxMetrics.OutboxCompletions, p)).toBe(5)
    }).pipe(Effect.provide(withSink))
  )

  it.effect("no valid lease: the cycle is skipped and counted, nothing is claimed", () =>
    Effect.gen(function* () {
      const p = "d-nolease"
      const store = yield* OutboxStore
      yield* store.persist([rec(p, "r1")])
      const d = yield* drainer(p)
      const result = yield* d.drainOnce()
      expect(result.leased).toBe(false)
      expect(yield* counter(OutboxMetrics.DrainSkippedNoLease, p)).toBe(1)
      // another owner's lease is no lease for this drainer; an expired own lease neither
      const leases = yield* LeaseStore
      yield* leases.acquire(p, "relay-b", "1 minute")
      expect((yield* d.drainOnce()).leased).toBe(false)
      yield* TestClock.adjust("2 minutes")
      const mine = yield* Drainer.make({ partitionKey: p, owner: "relay-b", gaugeInterval: 0 })
      expect((yield* mine.drainOnce()).leased).toBe(false)
      expect(yield* pendingIds(p)).toEqual(["r1"])
      expect(yield* (yield* recorder).attempts).toEqual([])
    }).pipe(Effect.provide(withSink))
  )

  it.effect("cancel mid-group releases the untried tail (the in-flight record after the final-drain budget)", () =>
    Effect.gen(function* () {
      const p = "d-cancel"
      yield* setup(p, [
        rec(p, "k1", { orderingKey: "K" }),
        rec(p, "k2", { orderingKey: "K" }),
        rec(p, "k3", { orderingKey: "K" }),
        rec(p, "k4", { orderingKey: "K" })
      ])
      const sink = yield* recorder
      yield* sink.failRecord("k2", { failure: "hang" })
      const d = yield* drainer(p, { finalDrainBudget: "5 seconds" })
      const fiber = yield* Effect.fork(d.drainOnce())
      yield* sink.awaitAttempts(2)
      const interrupting = yield* Effect.fork(Fiber.interrupt(fiber))
      // step the clock so the final-drain timer (registered once the interrupt lands) fires
      for (let i = 0; i < 6; i++) yield* TestClock.adjust("1 second")
      const exit = yield* Fiber.join(interrupting)
      expect(Exit.isInterrupted(exit)).toBe(true)
      expect(yield* sink.deliveredIds).toEqual(["k1"])
      expect(yield* sink.attempts).toEqual(["k1", "k2"])
      expect(yield* pendingIds(p)).toEqual(["k2", "k3", "k4"])
      expect(yield* claimedCount(p)).toBe(0)
    }).pipe(Effect.provide(withSink))
  )

  it.effect("cancel mid-group: an in-flight send that finishes within the budget is completed, the tail released", () =>
    Effect.gen(function* () {
      const p = "d-cancel-finish"
      yield* setup(p, [rec(p, "k1", { orderingKey: "K" }), rec(p, "k2", { orderingKey: "K" })])
      // the first send takes one second
      const sink = yield* MemorySink.make({
        onSend: (record) => (record.id === "k1" ? Effect.sleep("1 second") : Effect.void)
      })
      const d = yield* drainer(p).pipe(Effect.provideService(Sink, sink.sink))
      const fiber = yield* Effect.fork(d.drainOnce())
      yield* sink.awaitAttempts(1)
      yield* Effect.fork(Fiber.interrupt(fiber))
      yield* TestClock.adjust("1 second")
      yield* Fiber.await(fiber)
      expect(yield* sink.attempts).toEqual(["k1"])
      expect(yield* sink.deliveredIds).toEqual(["k1"])
      expect(yield* pendingIds(p)).toEqual(["k2"])
      expect(yield* claimedCount(p)).toBe(0)
    }).pipe(Effect.provide(baseLayer))
  )

  it.effect(
    "completes of concurrent groups are coalesced; a failed coalesced call is completed by the next cycle",
    () =>
      Effect.gen(function* () {
        const p = "d-coalesce"
        yield* setup(
          p,
          Array.from({ length: 20 }, (_, i) => rec(p, `r${String(i).padStart(2, "0")}`))
        )
        const faults = yield* Faulty.FaultyOutboxStore
        const sink = yield* recorder
        const d = yield* drainer(p, { maxConcurrency: 10 })
        const first = yield* d.drainOnce(10)
        expect(first).toMatchObject({ claimed: 10, delivered: 10 })
        const completes = (yield* faults.calls).filter((c) => c.operation === "complete")
        expect(completes.length).toBeLessThan(10)
        expect(completes.flatMap((c) => c.ids ?? []).sort()).toEqual((yield* sink.deliveredIds).slice().sort())
        // the next coalesced call fails as a whole: its records stay claimed (sent), nothing is re-sent
        yield* faults.inject({ operation: "complete" })
        const second = yield* d.drainOnce(10)
        expect(second.leftClaimed).toBeGreaterThan(0)
        expect(yield* claimedCount(p)).toBe(second.leftClaimed)
        yield* d.drainOnce(10)
        expect(yield* claimedCount(p)).toBe(0)
        expect(yield* pendingIds(p)).toEqual([])
        const ids = yield* sink.deliveredIds
        expect(new Set(ids).size).toBe(20)
        expect(ids).toHaveLength(20)
      }).pipe(Effect.provide(withSink))
  )

  it.effect("a transient failure never lets a younger same-key record overtake", () =>
    Effect.gen(function* () {
      const p = "d-transient"
      yield* setup(p, [
        rec(p, "k1", { orderingKey: "K" }),
        rec(p, "k2", { orderingKey: "K" }),
        rec(p, "k3", { orderingKey: "K" }),
        rec(p, "x1")
      ])
      const sink = yield* recorder
      yield* sink.failRecord("k1", { failure: "transient" })
      const d = yield* drainer(p)
      const first = yield* d.drainOnce()
      expect(first).toMatchObject({ claimed: 4, delivered: 1, deferred: 3 })
      expect(yield* sink.attempts).toContain("k1")
      expect(yield* sink.attempts).not.toContain("k2")
      expect(yield* pendingIds(p)).toEqual(["k1", "k2", "k3"])
      expect(yield* counter(OutboxMetrics.OutboxDeferred, p)).toBe(3)
      expect(yield* counter(OutboxMetrics.OutboxRecordFailures, p)).toBe(1)
      yield* d.drainOnce()
      expect((yield* sink.deliveredIds).filter((id) => id.startsWith("k"))).toEqual(["k1", "k2", "k3"])
    }).pipe(Effect.provide(withSink))
  )

  it.effect("a release failure stops the group without sending the next record; the next cycle releases it", () =>
    Effect.gen(function* () {
      const p = "d-release-fail"
      yield* setup(p, [rec(p, "k1", { orderingKey: "K" }), rec(p, "k2", { orderingKey: "K" })])
      const sink = yield* recorder
      const faults = yield* Faulty.FaultyOutboxStore
      yield* sink.failRecord("k1", { failure: "transient" })
      yield* faults.inject({ operation: "release", ids: ["k1"] })
      const d = yield* drainer(p)
      const result = yield* d.drainOnce()
      expect(result).toMatchObject({ delivered: 0, deferred: 0, leftClaimed: 2 })
      expect(yield* sink.attempts).toEqual(["k1"])
      expect(yield* claimedCount(p)).toBe(2)
      // the stranded records are released by the next cycle (same lease version), then delivered in order
      yield* d.drainOnce()
      expect(yield* sink.deliveredIds).toEqual(["k1", "k2"])
      expect(yield* claimedCount(p)).toBe(0)
    }).pipe(Effect.provide(withSink))
  )

  it.effect("a complete failure leaves the head claimed and releases only the tail", () =>
    Effect.gen(function* () {
      const p = "d-complete-fail"
      yield* setup(p, [
        rec(p, "k1", { orderingKey: "K" }),
        rec(p, "k2", { orderingKey: "K" }),
        rec(p, "k3", { orderingKey: "K" })
      ])
      const sink = yield* recorder
      const faults = yield* Faulty.FaultyOutboxStore
      yield* faults.inject({ operation: "complete", ids: ["k1"] })
      const d = yield* drainer(p)
      const result = yield* d.drainOnce()
      expect(result).toMatchObject({ delivered: 0, leftClaimed: 1, deferred: 2 })
      expect(yield* sink.attempts).toEqual(["k1"])
      expect(yield* claimedCount(p)).toBe(1)
      expect(yield* pendingIds(p)).toEqual(["k2", "k3"])
      expect(yield* counter(OutboxMetrics.OutboxDuplicateRisk, p)).toBe(1)
      // the next cycle completes the delivered head (no second send), then the tail follows in order
      yield* d.drainOnce()
      expect(yield* sink.deliveredIds).toEqual(["k1", "k2", "k3"])
      expect(yield* claimedCount(p)).toBe(0)
    }).pipe(Effect.provide(withSink))
  )

  it.effect("a dead-letter write failure leaves the head claimed and releases only the tail", () =>
    Effect.gen(function* () {
      const p = "d-dlq-fail"
      yield* setup(p, [
        rec(p, "k1", { orderingKey: "K" }),
        rec(p, "k2", { orderingKey: "K" }),
        rec(p, "k3", { orderingKey: "K" })
      ])
      const sink = yield* recorder
      const dlqFaults = yield* DlqFaults
      yield* sink.failRecord("k1", { failure: "permanent", times: 2 })
      yield* dlqFaults.failWrites(1)
      const d = yield* drainer(p)
      const result = yield* d.drainOnce()
      expect(result).toMatchObject({ deadLettered: 0, leftClaimed: 1, deferred: 2 })
      expect(yield* sink.attempts).toEqual(["k1"])
      expect(yield* claimedCount(p)).toBe(1)
      expect(yield* pendingIds(p)).toEqual(["k2", "k3"])
      expect(yield* (yield* DeadLetterStore).list({})).toEqual([])
      // next cycle: the head is released, reclaimed, dead-lettered; then its siblings are delivered
      const second = yield* d.drainOnce()
      expect(second).toMatchObject({ deadLettered: 1, delivered: 2 })
      const entries = yield* (yield* DeadLetterStore).list({})
      expect(entries.map((e) => [e.recordId, e.category])).toEqual([["k1", "permanent"]])
      expect(yield* sink.deliveredIds).toEqual(["k2", "k3"])
    }).pipe(Effect.provide(withSink))
  )

  const failTransiently = (d: Drainer.Drainer, times: number) =>
    Effect.gen(function* () {
      for (let i = 0; i < times; i++) {
        const result = yield* d.drainOnce()
        expect(result.deferred).toBe(1)
      }
    })

  it.effect("a transient outage within the replay budget never poisons (replayCount 6, first attempt 14 min ago)", () =>
    Effect.gen(function* () {
      const p = "d-budget-ok"
      yield* setup(p, [rec(p, "r1")])
      const sink = yield* recorder
      yield* sink.failRecord("r1", { failure: "transient", times: 5 })
      const d = yield* drainer(p)
      yield* failTransiently(d, 5)
      yield* TestClock.adjust("14 minutes")
      const result = yield* d.drainOnce()
      expect(result.delivered).toBe(1)
      const delivered = yield* sink.deliveries
      expect(delivered.map((x) => x.record.replayCount)).toEqual([6])
      expect(yield* (yield* DeadLetterStore).list({})).toEqual([])
    }).pipe(Effect.provide(withSink))
  )

  it.effect(
    "budget spent: poison goes to the DLQ without sending, with a WARN carrying first attempt and budget",
    () => {
      const logs: Array<{ level: string; message: unknown; annotations: Record<string, unknown> }> = []
      const capture = Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ annotations, logLevel, message }) => {
          logs.push({ level: logLevel.label, message, annotations: Object.fromEntries(HashMap.toEntries(annotations)) })
        })
      )
      return Effect.gen(function* () {
        const p = "d-poison"
        yield* setup(p, [rec(p, "r1")])
        const sink = yield* recorder
        yield* sink.failRecord("r1", { failure: "transient", times: 5 })
        const d = yield* drainer(p)
        yield* failTransiently(d, 5)
        yield* TestClock.adjust("15 minutes")
        const result = yield* d.drainOnce()
        expect(result).toMatchObject({ claimed: 1, deadLettered: 1, delivered: 0 })
        expect(yield* sink.attempts).toHaveLength(5)
        const entries = yield* (yield* DeadLetterStore).list({})
        expect(entries).toHaveLength(1)
        expect(entries[0]).toMatchObject({ recordId: "r1", category: "poison", attempts: 6, errorCode: "poison" })
        expect(yield* claimedCount(p)).toBe(0)
        expect(yield* pendingIds(p)).toEqual([])
        expect(yield* counter(OutboxMetrics.DLQEntries, p, ["category", "poison"])).toBe(1)
        const warn = logs.find((l) => l.level === "WARN" && String(l.message).includes("dead-lettered (poison)"))
        expect(warn?.annotations).toMatchObject({
          recordId: "r1",
          replayCount: 6,
          firstAttemptedAt: "1970-01-01T00:00:00.000Z",
          replayBudget: "15m",
          partition: p
        })
      }).pipe(Effect.provide(withSink), Effect.provide(capture))
    }
  )

  it.effect("under the attempt cap but old: delivered", () =>
    Effect.gen(function* () {
      const p = "d-old"
      yield* setup(p, [rec(p, "r1")])
      const sink = yield* recorder
      yield* sink.failRecord("r1", { failure: "transient", times: 3 })
      const d = yield* drainer(p)
      yield* failTransiently(d, 3)
      yield* TestClock.adjust("40 minutes")
      const result = yield* d.drainOnce()
      expect(result.delivered).toBe(1)
      expect((yield* sink.deliveries).map((x) => x.record.replayCount)).toEqual([4])
    }).pipe(Effect.provide(withSink))
  )

  it("an empty firstAttemptedAt never poisons, whatever the replay count", () => {
    const gate = Drainer.settings({ partitionKey: "p", owner: "o" })
    const day = 24 * 3600_000
    expect(Drainer.isPoison({ replayCount: 50, firstAttemptedAt: Option.none() }, day, gate)).toBe(false)
    const first = Option.some(DateTime.unsafeMake(0))
    expect(Drainer.isPoison({ replayCount: 50, firstAttemptedAt: first }, day, gate)).toBe(true)
    expect(Drainer.isPoison({ replayCount: 6, firstAttemptedAt: first }, 15 * 60_000, gate)).toBe(true)
    expect(Drainer.isPoison({ replayCount: 6, firstAttemptedAt: first }, 15 * 60_000 - 1, gate)).toBe(false)
    expect(Drainer.isPoison({ replayCount: 5, firstAttemptedAt: first }, day, gate)).toBe(false)
  })

  it.effect("a permanent failure goes to the DLQ at once and is completed", () =>
    Effect.gen(function* () {
      const p = "d-permanent"
      yield* setup(p, [rec(p, "k1", { orderingKey: "K" }), rec(p, "k2", { orderingKey: "K" })])
      const sink = yield* recorder
      yield* sink.failRecord("k1", { failure: "permanent", code: "http-422" })
      const d = yield* drainer(p)
      const result = yield* d.drainOnce()
      expect(result).toMatchObject({ deadLettered: 1, delivered: 1 })
      expect(yield* sink.attempts).toEqual(["k1", "k2"])
      const entries = yield* (yield* DeadLetterStore).list({})
      expect(entries).toHaveLength(1)
      expect(entries[0]).toMatchObject({
        recordId: "k1",
        category: "permanent",
        errorCode: "http-422",
        attempts: 1,
        orderingKey: "K"
      })
      expect(yield* claimedCount(p)).toBe(0)
      expect(yield* pendingIds(p)).toEqual([])
    }).pipe(Effect.provide(withSink))
  )

  it.effect("an expired record met on the claim path goes to the DLQ without a send", () =>
    Effect.gen(function* () {
      const p = "d-expired"
      const now = yield* DateTime.now
      yield* setup(p, [rec(p, "e1", { expiresAt: DateTime.add(now, { seconds: 10 }) }), rec(p, "r2")])
      yield* TestClock.adjust("11 seconds")
      const d = yield* drainer(p)
      const result = yield* d.drainOnce()
      expect(result).toMatchObject({ claimed: 2, deadLettered: 1, delivered: 1, swept: 0 })
      expect(yield* (yield* recorder).attempts).toEqual(["r2"])
      const entries = yield* (yield* DeadLetterStore).list({})
      expect(entries.map((e) => [e.recordId, e.category])).toEqual([["e1", "expired"]])
      expect(yield* counter(OutboxMetrics.MessagesExpired, p)).toBe(1)
      expect(yield* claimedCount(p)).toBe(0)
    }).pipe(Effect.provide(withSink))
  )

  it.effect("drop policy with no DLQ store: records are dropped (completed) and counted in MessagesDropped", () =>
    Effect.gen(function* () {
      const p = "d-drop"
      const now = yield* DateTime.now
      yield* setup(p, [rec(p, "bad"), rec(p, "late", { expiresAt: DateTime.add(now, { seconds: 1 }) }), rec(p, "ok")])
      yield* TestClock.adjust("2 seconds")
      const sink = yield* recorder
      yield* sink.failRecord("bad", { failure: "permanent" })
      const d = yield* drainer(p, { onExpired: "drop", onPermanentFailure: "drop", onPoison: "drop" })
      const result = yield* d.drainOnce()
      // the expired record is swept (drop policy) before the claim
      expect(result).toMatchObject({ swept: 1, claimed: 2, dropped: 1, delivered: 1 })
      expect(yield* counter(OutboxMetrics.MessagesDropped, p, ["reason", "permanent"])).toBe(1)
      expect(yield* counter(OutboxMetrics.MessagesDropped, p, ["reason", "expired"])).toBe(1)
      expect(yield* pendingIds(p)).toEqual([])
      expect(yield* claimedCount(p)).toBe(0)
      expect(yield* sink.deliveredIds).toEqual(["ok"])
    }).pipe(Effect.provide(Layer.mergeAll(storeLayer, MemoryLeaseStore.layer, MemorySink.layer)))
  )

  it.effect("a dead-letter policy without a DLQ store is a configuration error when types are bypassed", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(Build.build({ partitionKey: "d-config", owner: OWNER }))
      expect(error._tag).toBe("InvalidConfiguration")
      expect(error.problems).toHaveLength(3)
    }).pipe(Effect.provide(Layer.mergeAll(storeLayer, MemoryLeaseStore.layer, MemorySink.layer)))
  )

  it.effect("the expiry sweep runs at most once per expireInterval (drop policy only)", () =>
    Effect.gen(function* () {
      const p = "d-sweep"
      yield* setup(p, [])
      const faults = yield* Faulty.FaultyOutboxStore
      const d = yield* drainer(p, { onExpired: "drop", onPermanentFailure: "drop", onPoison: "drop" })
      yield* d.drainOnce()
      yield* d.drainOnce()
      yield* TestClock.adjust("59 seconds")
      yield* d.drainOnce()
      yield* TestClock.adjust("1 second")
      yield* d.drainOnce()
      const sweeps = (yield* faults.calls).filter((c) => c.operation === "expire")
      expect(sweeps).toHaveLength(2)
      const dlqDrainer = yield* drainer(p)
      yield* dlqDrainer.drainOnce()
      expect((yield* faults.calls).filter((c) => c.operation === "expire")).toHaveLength(2)
    }).pipe(Effect.provide(withSink))
  )

  it.effect("lease lost during send: no complete, duplicate risk counted, the cycle fails stale", () =>
    Effect.gen(function* () {
      const p = "d-lost"
      const { leases, lease } = yield* setup(p, [rec(p, "r1")])
      const sink = yield* MemorySink.make({
        onSend: () =>
          leases.release(p, lease.token).pipe(Effect.zipRight(leases.acquire(p, "relay-b", "1 hour")), Effect.orDie)
      })
      const d = yield* drainer(p).pipe(Effect.provideService(Sink, sink.sink))
      const error = yield* Effect.flip(d.drainOnce())
      expect(error._tag).toBe("StaleFencingToken")
      expect(yield* sink.deliveredIds).toEqual(["r1"])
      expect(yield* claimedCount(p)).toBe(1)
      expect(yield* counter(OutboxMetrics.OutboxDuplicateRisk, p)).toBe(1)
      expect(yield* counter(OutboxMetrics.OutboxCompletions, p)).toBe(0)
    }).pipe(Effect.provide(baseLayer))
  )

  it.effect("lease re-acquired at a higher version before a send: that record is not sent", () =>
    Effect.gen(function* () {
      const p = "d-reacquired"
      const { leases, lease } = yield* setup(p, [rec(p, "r1"), rec(p, "r2")])
      // while r1 is being sent, the lease is released and re-acquired by the same owner (version + 1)
      let moved = false
      const sink = yield* MemorySink.make({
        onSend: (record) =>
          record.id === "r1" && !moved
            ? Effect.sync(() => {
                moved = true
              }).pipe(
                Effect.zipRight(leases.release(p, lease.token)),
                Effect.zipRight(leases.acquire(p, OWNER, "1 hour")),
                Effect.orDie
              )
            : Effect.void
      })
      const d = yield* drainer(p, { maxConcurrency: 1 }).pipe(Effect.provideService(Sink, sink.sink))
      const error = yield* Effect.flip(d.drainOnce())
      expect(error._tag).toBe("StaleFencingToken")
      expect(yield* sink.attempts).toEqual(["r1"])
      expect(yield* pendingIds(p)).toEqual(["r2"])
      // the new epoch reclaims r1 (left claimed at the old version) and delivers both
      const again = yield* d.drainOnce()
      expect(again).toMatchObject({ claimed: 2, delivered: 2 })
    }).pipe(Effect.provide(baseLayer))
  )

  /** Keyed k1, k2 and keyless x1: wave 1 sends k1 and x1 (k1 completed in it), wave 2 sends k2. */
  const wavedBatch = (p: string) => [
    rec(p, "k1", { orderingKey: "K" }),
    rec(p, "x1"),
    rec(p, "k2", { orderingKey: "K" })
  ]

  const completeCalls = Effect.map(Faulty.FaultyOutboxStore, (faults) => faults.calls).pipe(
    Effect.flatten,
    Effect.map((calls) => calls.filter((c) => c.operation === "complete").map((c) => c.ids ?? []))
  )

  /**
   * Keyed k1, k2 and keyless x1, x2 at `maxConcurrency` 2: wave 1 sends k1 and x1 (both completed in it: k1 has a
   * sibling), wave 2 sends k2 and x2, and x2 fails (transient, released after the wave's lease check). The release
   * comes after that check, so the end-of-batch complete (k2) needs a lease read of its own.
   */
  const flushBatch = (p: string) => [
    rec(p, "k1", { orderingKey: "K" }),
    rec(p, "x1"),
    rec(p, "k2", { orderingKey: "K" }),
    rec(p, "x2")
  ]

  /**
   * A sink whose first send of `last` (a send of the batch's last wave) arranges `action` for the lease read after
   * the one that follows its wave's sends: the read before the end-of-batch completes. It fails x2 once.
   */
  const actAtFlush = (last: string, action: Effect.Effect<void> | "fail") =>
    Effect.gen(function* () {
      const reads = yield* LeaseReads
      let armed = false
      const sink = yield* MemorySink.make({
        onSend: (record) =>
          record.id === last && !armed
            ? Effect.flatMap(reads.count, (n) => {
                armed = true
                return reads.at(n + 2, action)
              })
            : Effect.void
      })
      yield* sink.failRecord("x2", { failure: "transient" })
      return sink
    })

  it.effect(
    "lease taken over before the end-of-batch complete: it is not made, duplicate risk counted, the cycle fails stale",
    () =>
      Effect.gen(function* () {
        const p = "d-flush-lost"
        const { leases, lease } = yield* setup(p, flushBatch(p))
        const takeover = leases
          .release(p, lease.token)
          .pipe(Effect.zipRight(leases.acquire(p, "relay-b", "1 hour")), Effect.orDie)
        const sink = yield* actAtFlush("k2", takeover)
        const d = yield* drainer(p, { maxConcurrency: 2 }).pipe(Effect.provideService(Sink, sink.sink))
        const error = yield* Effect.flip(d.drainOnce())
        expect(error._tag).toBe("StaleFencingToken")
        expect(yield* sink.attempts).toEqual(["k1", "x1", "k2", "x2"])
        // the head with a sibling was completed inside its wave, with x1; the deferred complete (k2) was never made
        expect(yield* completeCalls).toEqual([["k1", "x1"]])
        expect(yield* claimedCount(p)).toBe(1)
        expect(yield* pendingIds(p)).toEqual(["x2"])
        expect(yield* counter(OutboxMetrics.OutboxDuplicateRisk, p)).toBe(1)
        expect(yield* counter(OutboxMetrics.OutboxCompletions, p)).toBe(2)
        // the old owner sends nothing more; the new owner reclaims k2 (claimed under the old version) and x2
        expect((yield* d.drainOnce()).leased).toBe(false)
        expect(yield* sink.attempts).toEqual(["k1", "x1", "k2", "x2"])
        const next = yield* Drainer.make({ partitionKey: p, owner: "relay-b", gaugeInterval: 0 }).pipe(
          Effect.provideService(Sink, sink.sink)
        )
        expect(yield* next.drainOnce()).toMatchObject({ claimed: 2, delivered: 2 })
        expect((yield* sink.attempts).slice(4).sort()).toEqual(["k2", "x2"])
        expect(yield* claimedCount(p)).toBe(0)
        expect(yield* pendingIds(p)).toEqual([])
      }).pipe(Effect.provide(watchedLayer))
  )

  it.effect(
    "lease unreadable before the end-of-batch complete: the record stays claimed, a later cycle completes it unsent",
    () =>
      Effect.gen(function* () {
        const p = "d-flush-unknown"
        yield* setup(p, flushBatch(p))
        const sink = yield* actAtFlush("k2", "fail")
        const d = yield* drainer(p, { maxConcurrency: 2 }).pipe(Effect.provideService(Sink, sink.sink))
        const first = yield* d.drainOnce()
        expect(first).toMatchObject({ claimed: 4, delivered: 2, leftClaimed: 1, deferred: 1 })
        expect(yield* completeCalls).toEqual([["k1", "x1"]])
        expect(yield* claimedCount(p)).toBe(1)
        // unreadable is not lost: no duplicate risk
        expect(yield* counter(OutboxMetrics.OutboxDuplicateRisk, p)).toBe(0)
        // same lease epoch: the next cycle completes k2 without sending it again (and delivers x2)
        const second = yield* d.drainOnce()
        expect(second).toMatchObject({ leased: true, claimed: 1, delivered: 1 })
        expect((yield* completeCalls).slice(1).flat().sort()).toEqual(["k2", "x2"])
        expect(yield* claimedCount(p)).toBe(0)
        expect(yield* pendingIds(p)).toEqual([])
        expect(yield* counter(OutboxMetrics.OutboxCompletions, p)).toBe(4)
        yield* d.drainOnce()
        expect(yield* sink.attempts).toEqual(["k1", "x1", "k2", "x2", "x2"])
      }).pipe(Effect.provide(watchedLayer))
  )

  it.effect("the lease check after a wave's sends stands for the next check only when nothing came between them", () =>
    Effect.gen(function* () {
      const reads = yield* LeaseReads
      const sink = yield* MemorySink.make()
      // keyless, one at a time: each wave's records complete at the end of the batch, so no store call
      // follows a wave's second check: 1 read for the cycle, 1 before the first wave's sends, then 1 per
      // wave after its sends; the memory sink's sends finish at once, so after the first wave (x1) the
      // second offers every lane (x2 and x3): two waves
      const p = "d-reads-keyless"
      yield* setup(p, [rec(p, "x1"), rec(p, "x2"), rec(p, "x3")])
      const d = yield* drainer(p, { maxConcurrency: 1 }).pipe(Effect.provideService(Sink, sink.sink))
      const before = yield* reads.count
      expect(yield* d.drainOnce()).toMatchObject({ claimed: 3, delivered: 3 })
      expect((yield* reads.count) - before).toBe(1 + 1 + 2)
      // one key: every record but the last is completed inside its wave, so every wave reads before its
      // sends too; the end-of-batch complete (k3) follows the last wave's check with nothing between
      const q = "d-reads-keyed"
      yield* setup(q, [
        rec(q, "k1", { orderingKey: "K" }),
        rec(q, "k2", { orderingKey: "K" }),
        rec(q, "k3", { orderingKey: "K" })
      ])
      const e = yield* drainer(q, { maxConcurrency: 1 }).pipe(Effect.provideService(Sink, sink.sink))
      const start = yield* reads.count
      expect(yield* e.drainOnce()).toMatchObject({ claimed: 3, delivered: 3 })
      expect((yield* reads.count) - start).toBe(1 + 3 * 2)
      expect(yield* claimedCount(q)).toBe(0)
    }).pipe(Effect.provide(watchedLayer))
  )

  it.effect("groups of several records take turns, so every wave is full while records with a successor are left", () =>
    Effect.gen(function* () {
      const reads = yield* LeaseReads
      const p = "d-turns"
      // three keys of two records at maxConcurrency 2: A and B take the first wave, C and A the second, B and C
      // the third (without turns: A B, A B, C, C — four waves, the last two half empty)
      yield* setup(p, [
        rec(p, "a1", { orderingKey: "A" }),
        rec(p, "b1", { orderingKey: "B" }),
        rec(p, "c1", { orderingKey: "C" }),
        rec(p, "a2", { orderingKey: "A" }),
        rec(p, "b2", { orderingKey: "B" }),
        rec(p, "c2", { orderingKey: "C" })
      ])
      const sink = yield* MemorySink.make()
      const d = yield* drainer(p, { maxConcurrency: 2 }).pipe(Effect.provideService(Sink, sink.sink))
      const before = yield* reads.count
      expect(yield* d.drainOnce()).toMatchObject({ claimed: 6, delivered: 6 })
      expect(yield* sink.attempts).toEqual(["a1", "b1", "c1", "a2", "b2", "c2"])
      // a head is completed in its wave, before its successor is sent, with the wave's others (the second wave,
      // wide once the first finished at once, holds c1, a2 and b2); the last wave's record at the end of the batch
      expect(yield* completeCalls).toEqual([["a1", "b1"], ["c1", "a2", "b2"], ["c2"]])
      // the cycle's read, then two per wave (each wave follows a complete); the end-of-batch complete reuses
      // the last wave's check
      expect((yield* reads.count) - before).toBe(1 + 3 * 2)
      expect(yield* claimedCount(p)).toBe(0)
    }).pipe(Effect.provide(watchedLayer))
  )

  /** A sink whose sends of the `waiting` ids have to wait (a turn of the scheduler); counts sends in flight. */
  const pacedSink = (waiting: ReadonlySet<string>) => {
    const attempts: Array<string> = []
    let inFlight = 0
    let maxInFlight = 0
    const sink = Sink.of({
      send: (record) =>
        Effect.suspend(() => {
          attempts.push(record.id)
          if (!waiting.has(record.id)) return Effect.void
          inFlight += 1
          maxInFlight = Math.max(maxInFlight, inFlight)
          return Effect.yieldNow().pipe(
            Effect.ensuring(
              Effect.sync(() => {
                inFlight -= 1
              })
            )
          )
        })
    })
    return { sink, attempts, maxInFlight: () => maxInFlight }
  }

  it.effect("while sends finish at once, a wave offers every lane: fewer waves, fewer lease checks", () =>
    Effect.gen(function* () {
      const reads = yield* LeaseReads
      const p = "d-wide"
      const ids = ["x1", "x2", "x3", "x4", "x5", "x6"]
      yield* setup(
        p,
        ids.map((id) => rec(p, id))
      )
      const paced = pacedSink(new Set())
      const d = yield* drainer(p, { maxConcurrency: 2 }).pipe(Effect.provideService(Sink, paced.sink))
      const before = yield* reads.count
      expect(yield* d.drainOnce()).toMatchObject({ claimed: 6, delivered: 6 })
      expect(paced.attempts).toEqual(ids)
      // the first wave (x1 x2) finished at once, so the second took the other four: the cycle's read, the
      // first wave's check before its sends, one check after each wave's sends (three waves of two before)
      expect((yield* reads.count) - before).toBe(1 + 1 + 2)
      expect(yield* completeCalls).toEqual([ids])
      expect(yield* claimedCount(p)).toBe(0)
    }).pipe(Effect.provide(watchedLayer))
  )

  it.effect(
    "a wide wave stops starting sends when maxConcurrency of them wait; the rest keep their turn, in order",
    () =>
      Effect.gen(function* () {
        const p = "d-wide-capped"
        // x3, x4, x5 and k2 wait; the others finish at once
        yield* setup(p, [
          rec(p, "x1"),
          rec(p, "x2"),
          rec(p, "k1", { orderingKey: "K" }),
          rec(p, "x3"),
          rec(p, "x4"),
          rec(p, "k2", { orderingKey: "K" }),
          rec(p, "x5"),
          rec(p, "x6"),
          rec(p, "k3", { orderingKey: "K" })
        ])
        const paced = pacedSink(new Set(["x3", "x4", "x5", "k2"]))
        const d = yield* drainer(p, { maxConcurrency: 2 }).pipe(Effect.provideService(Sink, paced.sink))
        expect(yield* d.drainOnce()).toMatchObject({ claimed: 9, delivered: 9, deferred: 0, leftClaimed: 0 })
        expect(paced.maxInFlight()).toBeLessThanOrEqual(2)
        expect([...paced.attempts].sort()).toEqual(["k1", "k2", "k3", "x1", "x2", "x3", "x4", "x5", "x6"])
        expect(paced.attempts.filter((id) => id.startsWith("k"))).toEqual(["k1", "k2", "k3"])
        // the keyless records keep their age order across the waves: nothing untried is overtaken
        expect(paced.attempts.filter((id) => id.startsWith("x"))).toEqual(["x1", "x2", "x3", "x4", "x5", "x6"])
        // k1 and k2 were completed in their waves, before their successor was sent
        const calls = yield* completeCalls
        const k2Call = calls.findIndex((call) => call.includes("k2"))
        expect(calls.findIndex((call) => call.includes("k1"))).toBeLessThan(k2Call)
        expect(k2Call).toBeGreaterThanOrEqual(0)
        expect(paced.attempts.indexOf("k3")).toBeGreaterThan(paced.attempts.indexOf("k2"))
        expect(yield* claimedCount(p)).toBe(0)
        expect(yield* pendingIds(p)).toEqual([])
      }).pipe(Effect.provide(watchedLayer))
  )

  /** Before the `nth` lease read from now, another relay takes the lease over (release, then acquire). */
  const takeOverAtRead = (p: string, lease: Lease, nth: number) =>
    Effect.gen(function* () {
      const reads = yield* LeaseReads
      const leases = yield* LeaseStore
      const start = yield* reads.count
      yield* reads.at(
        start + nth,
        leases.release(p, lease.token).pipe(Effect.zipRight(leases.acquire(p, "relay-b", "1 hour")), Effect.orDie)
      )
    })

  it.effect("a lease taken over during the complete between two waves stops the second wave before its send", () =>
    Effect.gen(function* () {
      const p = "d-moved-at-complete"
      const { lease } = yield* setup(p, [rec(p, "k1", { orderingKey: "K" }), rec(p, "k2", { orderingKey: "K" })])
      // reads: the cycle's, wave 1 before and after its send, then (after k1's complete) wave 2 before its send
      yield* takeOverAtRead(p, lease, 4)
      const sink = yield* MemorySink.make()
      const d = yield* drainer(p, { maxConcurrency: 1 }).pipe(Effect.provideService(Sink, sink.sink))
      const error = yield* Effect.flip(d.drainOnce())
      expect(error._tag).toBe("StaleFencingToken")
      expect(yield* sink.attempts).toEqual(["k1"])
      expect(yield* completeCalls).toEqual([["k1"]])
      expect(yield* pendingIds(p)).toEqual(["k2"])
      expect(yield* counter(OutboxMetrics.OutboxDuplicateRisk, p)).toBe(0)
    }).pipe(Effect.provide(watchedLayer))
  )

  it.effect("a lease taken over during a release between two waves stops the second wave before its send", () =>
    Effect.gen(function* () {
      const p = "d-moved-at-release"
      const { lease } = yield* setup(p, [rec(p, "x1"), rec(p, "x2"), rec(p, "x3")])
      // wave 1 sends x1 (fails, released after the wave's second check) and x2; wave 2 must read before x3
      yield* takeOverAtRead(p, lease, 4)
      const sink = yield* MemorySink.make()
      yield* sink.failRecord("x1", { failure: "transient" })
      const d = yield* drainer(p, { maxConcurrency: 2 }).pipe(Effect.provideService(Sink, sink.sink))
      const error = yield* Effect.flip(d.drainOnce())
      expect(error._tag).toBe("StaleFencingToken")
      expect(yield* sink.attempts).toEqual(["x1", "x2"])
      expect(yield* pendingIds(p)).toEqual(["x1", "x3"])
    }).pipe(Effect.provide(watchedLayer))
  )

  it.effect("a lease taken over during a dead-letter write between two waves stops the next send", () =>
    Effect.gen(function* () {
      const p = "d-moved-at-dlq"
      const now = yield* DateTime.now
      const { lease } = yield* setup(p, [
        rec(p, "x1"),
        rec(p, "e1", { expiresAt: DateTime.add(now, { seconds: 10 }) }),
        rec(p, "x2")
      ])
      yield* TestClock.adjust("11 seconds")
      // wave 1 sends x1; wave 2 dead-letters e1 (no send); wave 3 must read before sending x2
      yield* takeOverAtRead(p, lease, 4)
      const sink = yield* MemorySink.make()
      const d = yield* drainer(p, { maxConcurrency: 1 }).pipe(Effect.provideService(Sink, sink.sink))
      const error = yield* Effect.flip(d.drainOnce())
      expect(error._tag).toBe("StaleFencingToken")
      expect(yield* sink.attempts).toEqual(["x1"])
      const entries = yield* (yield* DeadLetterStore).list({})
      expect(entries.map((e) => e.recordId)).toEqual(["e1"])
      expect(yield* pendingIds(p)).toEqual(["x2"])
    }).pipe(Effect.provide(watchedLayer))
  )

  it.effect(
    "the end-of-batch complete fails: the records stay claimed and are completed unsent while the lease is unchanged",
    () =>
      Effect.gen(function* () {
        const p = "d-flush-fail"
        // two keys of two records: wave 1 completes the heads (j1, k1), the end-of-batch call the last wave's
        yield* setup(p, [
          rec(p, "j1", { orderingKey: "J" }),
          rec(p, "k1", { orderingKey: "K" }),
          rec(p, "j2", { orderingKey: "J" }),
          rec(p, "k2", { orderingKey: "K" })
        ])
        const faults = yield* Faulty.FaultyOutboxStore
        // the end-of-batch call (j2, k2) fails, and so does the next cycle's first retry (j2)
        yield* faults.inject({ operation: "complete", ids: ["j2"], times: 2 })
        const sink = yield* MemorySink.make()
        const d = yield* drainer(p).pipe(Effect.provideService(Sink, sink.sink))
        const first = yield* d.drainOnce()
        expect(first).toMatchObject({ claimed: 4, delivered: 2, leftClaimed: 2, deferred: 0 })
        expect(yield* completeCalls).toEqual([
          ["j1", "k1"],
          ["j2", "k2"]
        ])
        expect(yield* claimedCount(p)).toBe(2)
        expect(yield* counter(OutboxMetrics.OutboxDuplicateRisk, p)).toBe(2)
        // the retry fails again: still claimed, nothing claimed or sent anew
        const second = yield* d.drainOnce()
        expect(second).toMatchObject({ leased: true, claimed: 0 })
        expect(yield* claimedCount(p)).toBe(2)
        const third = yield* d.drainOnce()
        expect(third).toMatchObject({ leased: true, claimed: 0 })
        expect(yield* claimedCount(p)).toBe(0)
        expect(yield* pendingIds(p)).toEqual([])
        expect(yield* counter(OutboxMetrics.OutboxCompletions, p)).toBe(4)
        expect(yield* sink.attempts).toEqual(["j1", "k1", "j2", "k2"])
      }).pipe(Effect.provide(watchedLayer))
  )

  it.effect(
    "a keyed head is completed inside its wave before its younger sibling is sent, the wave's others in the same call; the last wave's at the end",
    () =>
      Effect.gen(function* () {
        const p = "d-wave-order"
        yield* setup(p, [...wavedBatch(p), rec(p, "k3", { orderingKey: "K" })])
        const faults = yield* Faulty.FaultyOutboxStore
        // what had been completed when each record was sent
        const completedAtSend = new Map<string, ReadonlyArray<string>>()
        const sink = yield* MemorySink.make({
          onSend: (record) =>
            Effect.map(faults.calls, (calls) => {
              completedAtSend.set(
                record.id,
                calls.filter((c) => c.operation === "complete").flatMap((c) => c.ids ?? [])
              )
            })
        })
        const d = yield* drainer(p).pipe(Effect.provideService(Sink, sink.sink))
        expect(yield* d.drainOnce()).toMatchObject({ claimed: 4, delivered: 4 })
        expect(completedAtSend.get("k1")).toEqual([])
        expect(completedAtSend.get("x1")).toEqual([])
        expect(completedAtSend.get("k2")).toEqual(["k1", "x1"])
        expect(completedAtSend.get("k3")).toEqual(["k1", "x1", "k2"])
        // x1 joins k1's complete (no call of its own); k3, the last wave's, is completed at the end of the batch
        expect(yield* completeCalls).toEqual([["k1", "x1"], ["k2"], ["k3"]])
        expect(yield* claimedCount(p)).toBe(0)
      }).pipe(Effect.provide(watchedLayer))
  )

  /** Two records of one key whose head hangs in the sink; a drainer whose watchdog fires 70 s into a batch. */
  const wedged = (p: string, persistNow: boolean) =>
    Effect.gen(function* () {
      const records = [rec(p, "k1", { orderingKey: "K" }), rec(p, "k2", { orderingKey: "K" })]
      const { store } = yield* setup(p, persistNow ? records : [])
      const sink = yield* recorder
      yield* sink.failRecord("k1", { failure: "hang" })
      const d = yield* drainer(p, { batchTimeout: "1 minute", watchdogGrace: "10 seconds", sendTimeout: "1 hour" })
      return { d, sink, persist: store.persist(records) }
    })

  /** The drainer (or its cycle) failed with `DrainStalled`, counted once; the untried tail was released. */
  const expectStalled = (p: string, fiber: Fiber.RuntimeFiber<unknown, { readonly _tag: string }>) =>
    Effect.gen(function* () {
      const exit = yield* Fiber.await(fiber)
      expect(Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error._tag : undefined).toBe(
        "DrainStalled"
      )
      expect(yield* counter(OutboxMetrics.OutboxDrainStalled, p)).toBe(1)
      // the untried tail was released; the wedged head stays claimed for the next epoch
      expect(yield* pendingIds(p)).toEqual(["k2"])
    })

  it.effect("a wedged sink: the watchdog fires, the drainer fails and the stall is counted", () =>
    Effect.gen(function* () {
      const p = "d-wedged"
      const { d, sink } = yield* wedged(p, true)
      const fiber = yield* Effect.fork(d.run)
      yield* sink.awaitAttempts(1)
      yield* TestClock.adjust("70 seconds")
      yield* expectStalled(p, fiber)
    }).pipe(Effect.provide(withSink))
  )

  it.effect("the loop's watchdog timer fires a batch that started after an idle spell exactly at its deadline", () =>
    Effect.gen(function* () {
      const p = "d-wedged-later"
      const { d, sink, persist } = yield* wedged(p, false)
      const fiber = yield* Effect.fork(d.run)
      // 30 s idle: the loop's timer is part-way through a 70 s sleep with nothing armed
      yield* TestClock.adjust("30 seconds")
      yield* persist
      yield* sink.awaitAttempts(1)
      // the batch's deadline is 70 s after it started: the timer wakes at 70 s, finds it ahead, sleeps on
      yield* TestClock.adjust("69 seconds")
      expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
      expect(yield* counter(OutboxMetrics.OutboxDrainStalled, p)).toBe(0)
      yield* TestClock.adjust("1 second")
      yield* expectStalled(p, fiber)
    }).pipe(Effect.provide(withSink))
  )

  it.effect("drainOnce on its own keeps the watchdog: a wedged batch fails with DrainStalled at its deadline", () =>
    Effect.gen(function* () {
      const p = "d-wedged-once"
      const { d, sink } = yield* wedged(p, true)
      const fiber = yield* Effect.fork(d.drainOnce())
      yield* sink.awaitAttempts(1)
      yield* TestClock.adjust("69 seconds")
      expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
      yield* TestClock.adjust("1 second")
      yield* expectStalled(p, fiber)
    }).pipe(Effect.provide(withSink))
  )

  it.effect("the sends of a wave that have to wait are in flight together; the others finish on the spot", () =>
    Effect.gen(function* () {
      const p = "d-in-flight"
      yield* setup(p, [rec(p, "x1"), rec(p, "x2"), rec(p, "x3"), rec(p, "x4"), rec(p, "x5")])
      // x2 and x4 take a second each; x1, x3 and x5 finish without waiting
      const slow = new Set(["x2", "x4"])
      const sink = yield* MemorySink.make({
        onSend: (record) => (slow.has(record.id) ? Effect.sleep("1 second") : Effect.void)
      })
      const d = yield* drainer(p, { maxConcurrency: 4 }).pipe(Effect.provideService(Sink, sink.sink))
      const fiber = yield* Effect.fork(d.drainOnce())
      // the first wave (x1..x4) is sent without waiting for x2: x3 and x4 start while x2 is in flight
      yield* sink.awaitAttempts(4)
      expect(yield* sink.attempts).toEqual(["x1", "x2", "x3", "x4"])
      expect(yield* sink.deliveredIds).toEqual(["x1", "x3"])
      // one second later both slow sends are done; x5 goes in the next wave
      yield* TestClock.adjust("1 second")
      const result = yield* Fiber.join(fiber)
      expect(result).toMatchObject({ claimed: 5, delivered: 5, deferred: 0 })
      const delivered = yield* sink.deliveredIds
      expect(delivered.slice(0, 2)).toEqual(["x1", "x3"])
      expect(delivered.slice(2, 4).slice().sort()).toEqual(["x2", "x4"])
      expect(delivered[4]).toBe("x5")
      expect(yield* claimedCount(p)).toBe(0)
    }).pipe(Effect.provide(baseLayer))
  )

  it.effect("a send timeout is a transient failure: the record is released", () =>
    Effect.gen(function* () {
      const p = "d-timeout"
      yield* setup(p, [rec(p, "r1")])
      const sink = yield* recorder
      yield* sink.failRecord("r1", { failure: "hang" })
      const d = yield* drainer(p, { sendTimeout: "2 seconds" })
      const fiber = yield* Effect.fork(d.drainOnce())
      yield* sink.awaitAttempts(1)
      yield* TestClock.adjust("2 seconds")
      const result = yield* Fiber.join(fiber)
      expect(result).toMatchObject({ deferred: 1, delivered: 0 })
      expect(yield* pendingIds(p)).toEqual(["r1"])
    }).pipe(Effect.provide(withSink))
  )

  it("the adaptive batch size doubles on a full batch and halves on an empty one, within bounds", () => {
    const bounds = { minBatchSize: 10, maxBatchSize: 500 }
    expect(Drainer.nextBatchSize(100, 100, bounds)).toBe(200)
    expect(Drainer.nextBatchSize(400, 400, bounds)).toBe(500)
    expect(Drainer.nextBatchSize(100, 0, bounds)).toBe(50)
    expect(Drainer.nextBatchSize(15, 0, bounds)).toBe(10)
    expect(Drainer.nextBatchSize(100, 42, bounds)).toBe(100)
  })

  it.effect("the loop claims with the adaptive size: doubles on full batches, halves when idle", () =>
    Effect.gen(function* () {
      const p = "d-adaptive"
      yield* setup(
        p,
        Array.from({ length: 300 }, (_, i) => rec(p, `r${i}`))
      )
      const faults = yield* Faulty.FaultyOutboxStore
      const d = yield* drainer(p, { batchSize: 100, maxBatchSize: 400, minBatchSize: 25 })
      const fiber = yield* Effect.fork(d.run)
      for (let i = 0; i < 10; i++) yield* TestClock.adjust("1 second")
      yield* Fiber.interrupt(fiber)
      const limits = (yield* faults.calls).filter((c) => c.operation === "claim").map((c) => c.limit)
      expect(limits.slice(0, 6)).toEqual([100, 200, 400, 200, 100, 50])
      expect(limits.every((l) => l !== undefined && l >= 25)).toBe(true)
      expect((yield* (yield* recorder).deliveredIds).length).toBe(300)
    }).pipe(Effect.provide(withSink))
  )

  it.effect("gauges: batch size, depth and claimed depth; a failing count is counted and never stops the drain", () =>
    Effect.gen(function* () {
      const p = "d-gauges"
      yield* setup(
        p,
        Array.from({ length: 5 }, (_, i) => rec(p, `r${i}`))
      )
      const faults = yield* Faulty.FaultyOutboxStore
      const d = yield* drainer(p)
      const first = yield* d.drainOnce(2)
      expect(first.delivered).toBe(2)
      expect(yield* gauge(OutboxMetrics.OutboxClaimBatchSize, p)).toBe(2)
      expect(yield* gauge(OutboxMetrics.OutboxDepth, p)).toBe(3)
      // read at the end of the cycle: the batch's records are completed, none left claimed
      expect(yield* gauge(OutboxMetrics.OutboxClaimedDepth, p)).toBe(0)
      // the counts run after the batch's complete, never between its claim and its sends
      const operations = (yield* faults.calls).map((call) => call.operation)
      const claimAt = operations.indexOf("claim")
      expect(operations.slice(claimAt, claimAt + 4)).toEqual(["claim", "complete", "countPending", "countClaimed"])
      yield* faults.inject({ operation: "countPending" })
      yield* faults.inject({ operation: "countClaimed", unsupported: true })
      const second = yield* d.drainOnce(2)
      expect(second.delivered).toBe(2)
      expect(yield* counter(OutboxMetrics.OutboxDepthFailures, p)).toBe(2)
      expect(yield* gauge(OutboxMetrics.OutboxClaimBatchSize, p)).toBe(2)
      // the failed reads left the previous values
      expect(yield* gauge(OutboxMetrics.OutboxDepth, p)).toBe(3)
      const third = yield* d.drainOnce(2)
      expect(third.delivered).toBe(1)
      expect(yield* gauge(OutboxMetrics.OutboxDepth, p)).toBe(0)
      expect(yield* gauge(OutboxMetrics.OutboxClaimBatchSize, p)).toBe(1)
    }).pipe(Effect.provide(withSink))
  )
})
