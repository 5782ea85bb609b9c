import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ClaimTruncated, StoreUnavailable } from "../src/domain/OutboxError.js"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as MemoryLeaseStore from "../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as MemorySink from "../src/layers/sinks/MemorySink.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteLeaseStore from "../src/layers/sqlite/SqliteLeaseStore.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import * as Relay from "../src/programs/Relay.js"
import { LeaseStore } from "../src/services/LeaseStore.js"
import * as OutboxMetrics from "../src/services/OutboxMetrics.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { Sink } from "../src/services/Sink.js"
import * as Faulty from "./support/FaultyOutboxStore.js"

const dropAll = { onExpired: "drop", onPermanentFailure: "drop", onPoison: "drop" } as const

const rec = (partitionKey: string, n: number, orderingKey?: string) =>
  new NewOutboxRecord({
    id: `${partitionKey}-${String(n).padStart(4, "0")}`,
    partitionKey,
    envelopeId: `env-${n}`,
    bindingId: "b",
    payload: new Uint8Array([n % 256]),
    ...(orderingKey !== undefined ? { orderingKey } : {})
  })

const memoryLayer = Layer.mergeAll(MemoryOutboxStore.layer, MemoryLeaseStore.layer, MemorySink.layer)

/** Starts a relay in a fiber of its own (its scope closes when the fiber is interrupted). */
const startRelay = <const Options extends Relay.RelayOptions>(options: Options) =>
  Effect.gen(function* () {
    const handle = yield* Deferred.make<Relay.RelayHandle>()
    const fiber = yield* Effect.fork(
      Effect.scoped(
        Relay.start(options).pipe(
          Effect.tap((h) => Deferred.succeed(handle, h)),
          Effect.zipRight(Effect.never)
        )
      )
    )
    return { fiber, handle: yield* Deferred.await(handle) }
  })

/** {@link startRelay} with its own stores (e.g. its own database connection). */
const startRelayWith = <const Options extends Relay.RelayOptions, E, R>(
  options: Options,
  layer: Layer.Layer<Relay.RelayRequirements<Options>, E, R>
) =>
  Effect.gen(function* () {
    const handle = yield* Deferred.make<Relay.RelayHandle>()
    const fiber = yield* Effect.fork(
      Effect.scoped(
        Relay.start(options).pipe(
          Effect.tap((h) => Deferred.succeed(handle, h)),
          Effect.zipRight(Effect.never)
        )
      ).pipe(Effect.provide(layer), Effect.orDie)
    )
    return { fiber, handle: yield* Deferred.await(handle) }
  })

/** Polls `check` every 20 ms (live clock) until it holds; gives up after `within`. */
const eventually = <E, R>(
  what: string,
  check: Effect.Effect<boolean, E, R>,
  within: Duration.DurationInput = "30 seconds"
) =>
  Effect.gen(function* () {
    const deadline = Date.now() + Duration.toMillis(within)
    for (;;) {
      if (yield* check) return
      if (Date.now() > deadline) return yield* Effect.dieMessage(`gave up waiting for: ${what}`)
      yield* Effect.sleep("20 millis")
    }
  })

/** The partitions of the claims the memory store below was asked for, in order. */
const claimLog: Array<string> = []

/**
 * The memory store, logging every claim's partition in {@link claimLog}; the claims of partition "t" that
 * return records report themselves truncated (`ClaimTruncated`).
 */
const countingStore = Layer.effect(
  OutboxStore,
  Effect.map(OutboxStore, (inner) =>
    OutboxStore.of({
      ...inner,
      claim: (partitionKey, token, limit) =>
        Effect.map(inner.claim(partitionKey, token, limit), (batch) => {
          claimLog.push(partitionKey)
          // as a DynamoDB claim: a transient stop after some records is a short batch, never an empty one
          if (partitionKey !== "t" || batch.records.length === 0) return batch
          const truncated = new ClaimTruncated({
            partitionKey,
            claimed: batch.records.length,
            requested: limit,
            cause: "test"
          })
          return { ...batch, truncated: Option.some(truncated) }
        })
    })
  )
).pipe(Layer.provide(MemoryOutboxStore.layer))

describe("Relay (memory, TestClock)", () => {
  it.effect(
    "leases at most its cap at once, drains every discovered partition, and releases every lease on shutdown",
    () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const leases = yield* LeaseStore
        const sink = yield* MemorySink.MemorySink
        const all = ["r1-a", "r1-b", "r1-c"]
        yield* store.persist(all.flatMap((p) => [rec(p, 1), rec(p, 2, "K"), rec(p, 3, "K")]))
        const { fiber, handle } = yield* startRelay({ owner: "relay-1", maxPartitions: 2, drainer: dropAll })
        yield* TestClock.adjust("1 second")
        const owned = yield* handle.partitions
        expect(owned).toHaveLength(2)
        const ids = yield* sink.deliveredIds
        expect(ids).toHaveLength(9)
        expect(new Set(ids.map((id) => id.slice(0, 4)))).toEqual(new Set(all))
        yield* Fiber.interrupt(fiber)
        for (const p of all) {
          const current = yield* Effect.either(leases.current(p))
          expect(Either.isLeft(current) && current.left._tag).toBe("LeaseNotFound")
        }
      }).pipe(Effect.provide(memoryLayer))
  )

  it.effect(
    "a drained partition gives its slot up at a claim short of its limit, without claiming again; a truncated short claim does not count as drained",
    () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const sink = yield* MemorySink.MemorySink
        // "a" and "b" hold one record each (a claim of 100 comes back short); "t" and "u" too, but the claim
        // that returns "t"'s record reports itself truncated (as a DynamoDB short batch does)
        yield* store.persist([rec("a", 1), rec("b", 1), rec("t", 1), rec("u", 1)])
        const { fiber } = yield* startRelay({
          owner: "relay-short",
          maxPartitions: 1,
          discoveryInterval: "100 millis",
          drainer: { ...dropAll, idleBackoffMax: "100 millis" }
        })
        for (let i = 0; i < 20; i++) yield* TestClock.adjust("100 millis")
        const delivered = yield* sink.deliveredIds
        expect(new Set(delivered)).toEqual(new Set(["a-0001", "b-0001", "t-0001", "u-0001"]))
        // one slot: the claims run turn by turn. The claims of a partition's first turn:
        const firstTurn = (partition: string) => {
          const start = claimLog.indexOf(partition)
          let end = start
          while (claimLog[end] === partition) end += 1
          return end - start
        }
        // whichever of "a" and "b" was served first handed its slot on after its one claim (the other one
        // kept it: nothing waited for it any more); "t" claimed again after its truncated one
        const [firstServed] = claimLog.filter((p) => p === "a" || p === "b")
        expect(firstTurn(firstServed ?? "")).toBe(1)
        expect(firstTurn("t")).toBe(2)
        yield* Fiber.interrupt(fiber)
      }).pipe(Effect.provide(Layer.mergeAll(countingStore, MemoryLeaseStore.layer, MemorySink.layer)))
  )

  it.effect(
    "a partition whose complete keeps failing gives its slot up after a turn: a waiting partition is served, and the stuck key's younger record is never sent",
    () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const sink = yield* MemorySink.MemorySink
        const faults = yield* Faulty.FaultyOutboxStore
        // every complete touching this record fails: it is sent, then stays claimed (stranded)
        yield* faults.inject({ operation: "complete", ids: ["stuck-0001"], times: Infinity })
        yield* store.persist([rec("stuck", 1, "K"), rec("stuck", 2, "K")])
        const { fiber } = yield* startRelay({
          owner: "relay-stuck",
          maxPartitions: 1,
          maxTurn: "2 seconds",
          discoveryInterval: "100 millis",
          drainer: { ...dropAll, idleBackoffMax: "100 millis" }
        })
        for (let i = 0; i < 10; i++) yield* TestClock.adjust("100 millis")
        expect(yield* sink.deliveredIds).toContain("stuck-0001")
        // a second partition gets work while the only slot holds the stuck one
        yield* store.persist([rec("waiting", 1), rec("waiting", 2, "W"), rec("waiting", 3, "W")])
        for (let i = 0; i < 100; i++) yield* TestClock.adjust("100 millis")
        const delivered = yield* sink.deliveredIds
        expect(new Set(delivered.filter((id) => id.startsWith("waiting-")))).toEqual(
          new Set(["waiting-0001", "waiting-0002", "waiting-0003"])
        )
        const keyW = delivered.filter((id) => id === "waiting-0002" || id === "waiting-0003")
        expect(keyW).toEqual(["waiting-0002", "waiting-0003"])
        // the stuck record was delivered again by a later turn (at least once), its younger sibling never
        expect(delivered.filter((id) => id === "stuck-0001").length).toBeGreaterThanOrEqual(2)
        expect(delivered).not.toContain("stuck-0002")
        yield* Fiber.interrupt(fiber)
      }).pipe(
        Effect.provide(
          Layer.mergeAll(
            Faulty.layer.pipe(Layer.provide(MemoryOutboxStore.layer)),
            MemoryLeaseStore.layer,
            MemorySink.layer
          )
        )
      )
  )

  it.effect("renews at a third of the TTL, and stops a drainer the moment its renew fails", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const leases = yield* LeaseStore
      const sink = yield* MemorySink.MemorySink
      yield* store.persist([rec("r2", 1)])
      const { fiber, handle } = yield* startRelay({
        owner: "relay-2",
        leaseTtl: "30 seconds",
        discoveryInterval: "1 hour",
        drainer: dropAll
      })
      yield* TestClock.adjust("1 second")
      expect(yield* handle.partitions).toEqual(["r2"])
      const before = yield* leases.current("r2")
      // renewed at 10 s and 20 s: still held at 35 s (past the first TTL)
      yield* TestClock.adjust("34 seconds")
      const renewed = yield* leases.current("r2")
      expect(renewed.token.version).toBe(before.token.version)
      expect(yield* handle.partitions).toEqual(["r2"])
      // someone else takes over: the next renew fails and the drainer stops
      yield* leases.release("r2", renewed.token)
      yield* leases.acquire("r2", "intruder", "1 hour")
      yield* TestClock.adjust("10 seconds")
      expect(yield* handle.partitions).toEqual([])
      yield* store.persist([rec("r2", 2)])
      yield* TestClock.adjust("1 minute")
      expect(yield* sink.deliveredIds).toEqual(["r2-0001"])
      yield* Fiber.interrupt(fiber)
    }).pipe(Effect.provide(memoryLayer))
  )

  it.effect("a stalled drainer is restarted under a new lease epoch, which reclaims what it abandoned", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const leases = yield* LeaseStore
      const sink = yield* MemorySink.MemorySink
      yield* store.persist([rec("r3", 1, "K"), rec("r3", 2, "K")])
      yield* sink.failRecord("r3-0001", { failure: "hang" })
      const { fiber } = yield* startRelay({
        owner: "relay-3",
        discoveryInterval: "5 seconds",
        drainer: { ...dropAll, batchTimeout: "1 minute", watchdogGrace: "0 millis", sendTimeout: "1 hour" }
      })
      yield* TestClock.adjust("1 second")
      const first = yield* leases.current("r3")
      yield* sink.awaitAttempts(1)
      for (let i = 0; i < 14; i++) yield* TestClock.adjust("5 seconds")
      expect(yield* Metric.value(OutboxMetrics.tagged(OutboxMetrics.OutboxDrainStalled, "r3"))).toMatchObject({
        count: 1
      })
      const second = yield* leases.current("r3")
      expect(second.token.version).toBeGreaterThan(first.token.version)
      expect(yield* sink.deliveredIds).toEqual(["r3-0001", "r3-0002"])
      yield* Fiber.interrupt(fiber)
    }).pipe(Effect.provide(memoryLayer))
  )
})

/** A lease store whose `release` always fails: the relay behaves like a crashed process on shutdown. */
const leasesThatCannotRelease = Layer.effect(
  LeaseStore,
  Effect.map(LeaseStore, (inner) =>
    LeaseStore.of({
      ...inner,
      release: (partitionKey) =>
        Effect.fail(new StoreUnavailable({ operation: "lease.release", partitionKey, cause: new Error("crashed") }))
    })
  )
)

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-relay-"))
const sharedFile = path.join(dir, "outbox.db")

describe("Relay configuration", () => {
  it.effect("refuses a lease ttl under 1 ms or not finite, and an empty owner, before leasing anything", () =>
    Effect.gen(function* () {
      for (const [owner, leaseTtl] of [
        ["relay-x", "0 millis"],
        ["relay-x", Duration.infinity],
        ["", "30 seconds"]
      ] as const) {
        const error = yield* Effect.flip(Effect.scoped(Relay.start({ owner, leaseTtl, drainer: dropAll })))
        expect(error._tag).toBe("InvalidConfiguration")
        expect(error.component).toBe("Relay")
      }
      const leases = yield* LeaseStore
      expect(Either.isLeft(yield* Effect.either(leases.current("p")))).toBe(true)
    }).pipe(Effect.provide(memoryLayer))
  )
})

describe("Relay (SQLite file, live clock)", () => {
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

  it.live(
    "two relays share 8 partitions; a crashed one hands its partitions over after lease expiry; all delivered, per-key order held",
    () =>
      Effect.gen(function* () {
        const partitions = Array.from({ length: 8 }, (_, i) => `p${i}`)
        const perPartition = 60
        const recorder = yield* MemorySink.make({ onSend: () => Effect.sleep("2 millis") })

        const relayStores = (
          leaseLayer: typeof SqliteLeaseStore.layer,
          outbox: Layer.Layer<OutboxStore, never, OutboxStore>
        ) =>
          Layer.mergeAll(
            outbox.pipe(Layer.provide(SqliteOutboxStore.layer)),
            leaseLayer,
            Layer.succeed(Sink, recorder.sink)
          )

        // relay A: as if its process died — neither its leases nor the records it holds can be released
        const crashingOutbox = Layer.effect(
          OutboxStore,
          Effect.gen(function* () {
            const faults = yield* Faulty.FaultyOutboxStore
            yield* faults.inject({ operation: "release", times: Infinity })
            return yield* OutboxStore
          })
        ).pipe(Layer.provide(Faulty.layer))
        const layerA = relayStores(leasesThatCannotRelease.pipe(Layer.provide(SqliteLeaseStore.layer)), crashingOutbox)
        const layerB = relayStores(SqliteLeaseStore.layer, Layer.effect(OutboxStore, OutboxStore))

        yield* Effect.provide(
          Effect.gen(function* () {
            const store = yield* OutboxStore
            const batch: Array<NewOutboxRecord> = []
            partitions.forEach((p, i) => {
              for (let n = 0; n < perPartition; n++) batch.push(rec(p, n, i % 2 === 0 ? `k${n % 3}` : undefined))
            })
            yield* store.persist(batch)
          }),
          SqliteOutboxStore.layer
        ).pipe(Effect.orDie)

        const common = { leaseTtl: "10 seconds", discoveryInterval: "100 millis" } as const
        const drainer = {
          ...dropAll,
          maxConcurrency: 4,
          finalDrainBudget: "50 millis",
          idleBackoffMax: "100 millis"
        } as const
        const a = yield* startRelayWith({ owner: "relay-A", maxPartitions: 4, ...common, drainer }, layerA)
        yield* eventually(
          "A holds 4 partitions",
          Effect.map(a.handle.partitions, (ps) => ps.length === 4)
        )
        const b = yield* startRelayWith({ owner: "relay-B", maxPartitions: 8, ...common, drainer }, layerB)
        yield* eventually(
          "B holds the other 4",
          Effect.map(b.handle.partitions, (ps) => ps.length === 4)
        )
        const ownedByA = yield* a.handle.partitions
        expect(new Set([...ownedByA, ...(yield* b.handle.partitions)])).toEqual(new Set(partitions))

        yield* eventually(
          "some deliveries from A's partitions",
          Effect.map(
            recorder.deliveredIds,
            (ids) => ids.filter((id) => ownedByA.includes(id.split("-")[0] ?? "")).length >= 20
          )
        )
        yield* Fiber.interrupt(a.fiber)

        yield* eventually(
          "B took over all 8 partitions",
          Effect.map(b.handle.partitions, (ps) => ps.length === 8)
        )
        yield* eventually(
          "every record delivered",
          Effect.map(recorder.deliveredIds, (ids) => new Set(ids).size === partitions.length * perPartition),
          "60 seconds"
        )
        // duplicates come only from records in flight when a lease changed hands: at most
        // maxConcurrency per handover (every epoch after a partition's first)
        const handovers = yield* Effect.provide(
          Effect.gen(function* () {
            const leases = yield* LeaseStore
            let total = 0
            for (const p of partitions) {
              const current = yield* Effect.either(leases.current(p))
              if (Either.isRight(current)) total += current.right.token.version - 1
            }
            return total
          }),
          SqliteLeaseStore.layer
        ).pipe(Effect.orDie)
        yield* Fiber.interrupt(b.fiber)

        const ids = yield* recorder.deliveredIds
        const unique = new Set(ids)
        expect(unique.size).toBe(partitions.length * perPartition)
        expect(handovers).toBeGreaterThanOrEqual(ownedByA.length)
        const duplicates = ids.length - unique.size
        expect(duplicates).toBeLessThanOrEqual(handovers * drainer.maxConcurrency)
        // per ordering key, first deliveries follow age (= id) order
        const firstSeen: Map<string, Array<string>> = new Map()
        const seen = new Set<string>()
        for (const delivery of yield* recorder.deliveries) {
          const record = delivery.record
          if (seen.has(record.id)) continue
          seen.add(record.id)
          if (Option.isNone(record.orderingKey)) continue
          const key = `${record.partitionKey}/${record.orderingKey.value}`
          const list = firstSeen.get(key) ?? []
          list.push(record.id)
          firstSeen.set(key, list)
        }
        expect(firstSeen.size).toBe(4 * 3)
        for (const list of firstSeen.values()) expect(list).toEqual([...list].sort())
        // nothing is left pending or claimed
        const check = yield* Effect.provide(
          Effect.gen(function* () {
            const store = yield* OutboxStore
            let left = 0
            for (const p of partitions) left += (yield* store.countPending(p)) + (yield* store.countClaimed(p))
            return left
          }),
          SqliteOutboxStore.layer
        ).pipe(Effect.orDie)
        expect(check).toBe(0)
      }).pipe(
        // one connection shared by both relays: two better-sqlite3 connections in one process can
        // stall each other (a busy wait blocks the event loop that would commit the other's transaction)
        Effect.provide(SqliteDatabase.layer({ filename: sharedFile })),
        Effect.orDie
      ),
    120_000
  )
})
