/**
 * Drainer histories: random workloads through `Enqueue` → `Relay` (memory outbox, lease and dead-letter
 * stores) → a recording `MemorySink`, with transient and permanent sink failures, failing completes,
 * lost lease renewals (the relay drops the partition and it is leased again under a new epoch), a second
 * relay, and relays interrupted mid-flight. At the end every relay is stopped and a final clean relay
 * runs until the outbox is idle. Then:
 *
 * - every enqueued record was delivered or dead-lettered (all policies are `dlq`), none is left pending
 *   or claimed, and a dead-lettered record was never delivered;
 * - per ordering key, first deliveries come in age order (enqueue order), and nothing is delivered while
 *   an older record of its key is still undelivered and not dead-lettered (R-HOL, SPEC §6);
 * - a record is delivered again only when, since its previous delivery, a complete of it failed or was
 *   interrupted, or its partition's lease was given up (relay stopped, renew lost); duplicates are
 *   counted and bounded by those events.
 *
 * Runs on `TestClock` (the relays' sleeps fire as the history advances time). The seed is printed on
 * failure; `OUTBOX_SEED` replays it.
 */
import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as LogLevel from "effect/LogLevel"
import * as TestClock from "effect/TestClock"
import * as TestContext from "effect/TestContext"
import { randomBytes } from "node:crypto"
import { testSeed } from "../support/Seed.js"
import { StoreUnavailable } from "../../src/domain/OutboxError.js"
import { NewOutboxRecord } from "../../src/domain/OutboxRecord.js"
import * as MemoryDeadLetterStore from "../../src/layers/memory/MemoryDeadLetterStore.js"
import * as MemoryLeaseStore from "../../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../../src/layers/memory/MemoryOutboxStore.js"
import * as MemorySink from "../../src/layers/sinks/MemorySink.js"
import * as Enqueue from "../../src/programs/Enqueue.js"
import * as Relay from "../../src/programs/Relay.js"
import { DeadLetterStore } from "../../src/services/DeadLetterStore.js"
import { yieldToEventLoop } from "../../src/services/EventLoop.js"
import { LeaseStore } from "../../src/services/LeaseStore.js"
import { OutboxStore } from "../../src/services/OutboxStore.js"

const PARTITIONS = 3
const MAX_BATCH = 8
/** Steps of 10 ms of test time a stopping relay is given before the history fails (10 minutes). */
const stopBudget = 60_000

type Action =
  | { readonly _tag: "Enqueue"; readonly partition: number; readonly keys: ReadonlyArray<string | undefined> }
  | { readonly _tag: "SinkTransient"; readonly times: number }
  | { readonly _tag: "SinkPermanent"; readonly pick: number }
  | { readonly _tag: "CompleteFails"; readonly times: number }
  | { readonly _tag: "LoseLease"; readonly partition: number }
  | { readonly _tag: "StartRelay" }
  | { readonly _tag: "StopRelay"; readonly pick: number }
  | { readonly _tag: "Tick"; readonly millis: number }

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      _tag: fc.constant("Enqueue" as const),
      partition: fc.integer({ min: 0, max: PARTITIONS - 1 }),
      keys: fc.array(fc.constantFrom<string | undefined>(undefined, "A", "A", "B", "C"), {
        minLength: 1,
        maxLength: 6
      })
    })
  },
  {
    weight: 2,
    arbitrary: fc.record({ _tag: fc.constant("SinkTransient" as const), times: fc.integer({ min: 1, max: 4 }) })
  },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("SinkPermanent" as const), pick: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({ _tag: fc.constant("CompleteFails" as const), times: fc.integer({ min: 1, max: 2 }) })
  },
  {
    weight: 1,
    arbitrary: fc.record({
      _tag: fc.constant("LoseLease" as const),
      partition: fc.integer({ min: 0, max: PARTITIONS - 1 })
    })
  },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("StartRelay" as const) }) },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("StopRelay" as const), pick: fc.nat() }) },
  {
    weight: 6,
    arbitrary: fc.record({ _tag: fc.constant("Tick" as const), millis: fc.constantFrom(5, 10, 20, 50, 200, 1_000) })
  }
)

/** What happened, in order: deliveries, complete outcomes and lease hand-backs. */
type Event =
  | { readonly _tag: "Deliver"; readonly id: string; readonly by: string }
  | { readonly _tag: "Complete"; readonly ids: ReadonlyArray<string>; readonly ok: boolean }
  | { readonly _tag: "Handback"; readonly partitionKey: string; readonly by: string }

interface Stats {
  runs: number
  enqueued: number
  delivered: number
  deadLettered: number
  duplicates: number
  failedCompletes: number
  handbacks: number
}

const drainerOptions = {
  batchSize: 4,
  maxBatchSize: MAX_BATCH,
  maxConcurrency: 3,
  sendTimeout: "1 second",
  maxReplayAttempts: 3,
  replayBudget: "500 millis",
  idleBackoffMin: "5 millis",
  idleBackoffMax: "50 millis",
  onExpired: "dlq",
  onPermanentFailure: "dlq",
  onPoison: "dlq"
} as const

const runPrefix = randomBytes(3).toString("hex")
let runCounter = 0

const runHistory = (actions: ReadonlyArray<Action>, stats: Stats): Effect.Effect<void> => {
  const events: Array<Event> = []
  const failing = { completes: 0, renews: new Set<string>() }
  const prefix = `d${runPrefix}-${++runCounter}`
  const partitions = Array.from({ length: PARTITIONS }, (_, i) => `${prefix}-p${i}`)

  /** Records every complete (and fails the next scripted ones); every other call passes through. */
  const recordingStore = Layer.effect(
    OutboxStore,
    Effect.map(Effect.orDie(MemoryOutboxStore.make()), (inner) =>
      OutboxStore.of({
        ...inner,
        complete: (ids, token) =>
          Effect.suspend(() => {
            if (failing.completes > 0) {
              failing.completes--
              events.push({ _tag: "Complete", ids, ok: false })
              return Effect.fail(new StoreUnavailable({ operation: "complete", cause: "scripted" }))
            }
            return inner.complete(ids, token).pipe(
              Effect.tap(() => Effect.sync(() => events.push({ _tag: "Complete", ids, ok: true }))),
              Effect.tapError(() => Effect.sync(() => events.push({ _tag: "Complete", ids, ok: false }))),
              Effect.onInterrupt(() => Effect.sync(() => events.push({ _tag: "Complete", ids, ok: false })))
            )
          })
      })
    )
  )
  /** Loses the next renew of a chosen partition; records every lease release (a hand-back). */
  const recordingLeases = Layer.effect(
    LeaseStore,
    Effect.map(MemoryLeaseStore.make(), (inner) =>
      LeaseStore.of({
        ...inner,
        renew: (partitionKey, token, ttl) =>
          Effect.suspend(() =>
            failing.renews.delete(partitionKey)
              ? Effect.fail(new StoreUnavailable({ operation: "renew", partitionKey, cause: "scripted" }))
              : inner.renew(partitionKey, token, ttl)
          ),
        release: (partitionKey, token) =>
          inner
            .release(partitionKey, token)
            .pipe(
              Effect.ensuring(
                Effect.sync(() =>
                  events.push({ _tag: "Handback", partitionKey, by: `${token.owner}@${token.version}` })
                )
              )
            )
      })
    )
  )
  const sinkLayer = MemorySink.layerWith({
    // sends take 0-30 ms of (test) time, so relays stop and leases move while records are in flight
    onSend: (record) =>
      Effect.sleep(Duration.millis((record.seq % 4) * 10)).pipe(
        Effect.zipRight(
          Effect.sync(() =>
            events.push({
              _tag: "Deliver",
              id: record.id,
              by: `${Option.getOrElse(record.claimedBy, () => "?")}@${record.claimVersion}`
            })
          )
        )
      )
  })
  const world = Layer.mergeAll(
    Layer.provideMerge(MemoryDeadLetterStore.layer, recordingStore),
    recordingLeases,
    sinkLayer
  )

  const program = Effect.gen(function* () {
    const store = yield* OutboxStore
    const dlq = yield* DeadLetterStore
    const sink = yield* MemorySink.MemorySink
    const enqueue = yield* Enqueue.make({ maxOutboxDepth: 0 })
    const context = yield* Effect.context<Relay.RelayRequirements | DeadLetterStore>()
    const relays: Array<Fiber.RuntimeFiber<never, never>> = []
    const enqueued: Array<{ readonly id: string; readonly partitionKey: string; readonly key: string | undefined }> = []
    const permanent = new Set<string>()
    let relayCounter = 0
    let envelope = 0

    const startRelay = Effect.gen(function* () {
      const ready = yield* Deferred.make<void>()
      const owner = `${prefix}-relay${relayCounter++}`
      const fiber = yield* Effect.fork(
        Effect.scoped(
          Relay.start({ owner, leaseTtl: "3 seconds", discoveryInterval: "20 millis", drainer: drainerOptions }).pipe(
            Effect.tap(() => Deferred.succeed(ready, undefined)),
            Effect.zipRight(Effect.never)
          )
        ).pipe(Effect.orDie, Effect.provide(context))
      )
      // a relay that failed to start ends the history with its cause instead of leaving it waiting
      yield* Effect.raceFirst(Deferred.await(ready), Fiber.join(fiber))
      relays.push(fiber)
    })
    const stopRelay = (index: number) =>
      Effect.gen(function* () {
        const [fiber] = relays.splice(index % relays.length, 1)
        if (fiber === undefined) return
        // the relay's final drain may wait on (test) time, and on turns of the event loop (its cycles
        // yield to it): keep both moving until it has stopped, never waiting on it without moving them
        const stopping = yield* Effect.fork(Fiber.interrupt(fiber))
        for (let i = 0; stopping.unsafePoll() === null; i++) {
          if (i === stopBudget)
            return yield* Effect.dieMessage(`relay did not stop within ${stopBudget * 10} ms of test time`)
          yield* TestClock.adjust(Duration.millis(10))
          yield* yieldToEventLoop
        }
        yield* Fiber.join(stopping)
      })
    const tick = (millis: number) =>
      Effect.gen(function* () {
        // small steps, so every woken fiber runs before time moves on
        for (let left = millis; left > 0; left -= 10) yield* TestClock.adjust(Duration.millis(Math.min(10, left)))
      })

    yield* startRelay
    for (const action of actions) {
      switch (action._tag) {
        case "Enqueue": {
          const partitionKey = partitions[action.partition] ?? `${prefix}-p0`
          const records = action.keys.map((key) => {
            const id = `${partitionKey}-r${String(envelope).padStart(4, "0")}`
            enqueued.push({ id, partitionKey, key })
            return new NewOutboxRecord({
              id,
              partitionKey,
              envelopeId: `e${envelope++}`,
              bindingId: "b",
              payload: new TextEncoder().encode(id),
              ...(key !== undefined ? { orderingKey: key } : {})
            })
          })
          yield* Effect.orDie(enqueue.enqueue(records))
          break
        }
        case "SinkTransient":
          yield* sink.failCalls({ failure: "transient", times: action.times })
          break
        case "SinkPermanent": {
          // only a record never sent yet: every send of it then fails permanently
          const attempted = new Set(yield* sink.attempts)
          const fresh = enqueued.filter((r) => !attempted.has(r.id))
          const target = fresh[action.pick % Math.max(1, fresh.length)]
          if (target !== undefined) {
            permanent.add(target.id)
            yield* sink.failRecord(target.id, { failure: "permanent", times: Number.POSITIVE_INFINITY })
          }
          break
        }
        case "CompleteFails":
          failing.completes += action.times
          break
        case "LoseLease":
          failing.renews.add(partitions[action.partition] ?? `${prefix}-p0`)
          break
        case "StartRelay":
          if (relays.length < 2) yield* startRelay
          break
        case "StopRelay":
          if (relays.length > 0) yield* stopRelay(action.pick)
          break
        case "Tick":
          yield* tick(action.millis)
          break
      }
    }

    // stop everything; a final clean relay drains until idle
    while (relays.length > 0) yield* stopRelay(0)
    failing.completes = 0
    failing.renews.clear()
    yield* startRelay
    const live = Effect.map(
      Effect.forEach(partitions, (pk) =>
        Effect.zipWith(store.countPending(pk), store.countClaimed(pk), (p, c) => p + c)
      ),
      (counts) => counts.reduce((a, b) => a + b, 0)
    )
    for (let round = 0; round < 200 && (yield* Effect.orDie(live)) > 0; round++) yield* tick(100)
    const left = yield* Effect.orDie(live)
    while (relays.length > 0) yield* stopRelay(0)

    // ---- checks ----
    const log = events.map((e) =>
      e._tag === "Deliver"
        ? `D ${e.id} by ${e.by}`
        : e._tag === "Complete"
          ? `C ${e.ids.join(",")} ${e.ok}`
          : `H ${e.partitionKey} by ${e.by}`
    )
    const fail = (message: string): never => {
      throw new Error(`${message}\nactions: ${JSON.stringify(actions)}\nevents:\n  ${log.slice(-80).join("\n  ")}`)
    }
    if (left > 0) fail(`${left} records still pending or claimed after the final relay`)
    const delivered = new Set(yield* sink.deliveredIds)
    const entries = yield* Effect.orDie(dlq.list({ limit: 100_000 }))
    const deadLettered = new Set(entries.map((e) => e.recordId))
    for (const r of enqueued) {
      if (!delivered.has(r.id) && !deadLettered.has(r.id)) fail(`${r.id} was neither delivered nor dead-lettered`)
      if (delivered.has(r.id) && deadLettered.has(r.id)) fail(`${r.id} was both delivered and dead-lettered`)
      if (permanent.has(r.id) && delivered.has(r.id)) fail(`${r.id} failed permanently yet was delivered`)
    }

    // per-key order of first deliveries, and no delivery past an older undelivered sibling
    const position = new Map(enqueued.map((r, i) => [r.id, i]))
    const info = new Map(enqueued.map((r) => [r.id, r]))
    const firstSeen = new Set<string>()
    const lastDelivery = new Map<string, number>()
    let duplicates = 0
    let failedCompletes = 0
    let handbacks = 0
    for (const [index, event] of events.entries()) {
      if (event._tag === "Complete" && !event.ok) failedCompletes++
      if (event._tag === "Handback") handbacks++
      if (event._tag !== "Deliver") continue
      const record = info.get(event.id)
      if (record === undefined) continue
      const previous = lastDelivery.get(event.id)
      if (previous !== undefined) {
        duplicates++
        const justified = events
          .slice(previous + 1, index)
          .some(
            (e) =>
              (e._tag === "Complete" && !e.ok && e.ids.includes(event.id)) ||
              (e._tag === "Handback" && e.partitionKey === record.partitionKey)
          )
        if (!justified) fail(`${event.id} delivered again (event ${index}) with no failed complete or hand-back since`)
      } else if (record.key !== undefined) {
        const mine = position.get(event.id) ?? -1
        for (const older of enqueued) {
          if ((position.get(older.id) ?? 0) >= mine) break
          if (older.partitionKey !== record.partitionKey || older.key !== record.key) continue
          if (!firstSeen.has(older.id) && !deadLettered.has(older.id)) {
            fail(`${event.id} (key ${record.key}) delivered before its older sibling ${older.id}`)
          }
        }
        firstSeen.add(event.id)
      } else {
        firstSeen.add(event.id)
      }
      lastDelivery.set(event.id, index)
    }
    const bound = failedCompletes + handbacks * MAX_BATCH
    if (duplicates > bound) fail(`${duplicates} duplicates exceed the bound ${bound}`)
    stats.runs++
    stats.enqueued += enqueued.length
    stats.delivered += delivered.size
    stats.deadLettered += deadLettered.size
    stats.duplicates += duplicates
    stats.failedCompletes += failedCompletes
    stats.handbacks += handbacks
  })
  return program.pipe(
    Effect.provide(world),
    Effect.provide(Logger.minimumLogLevel(LogLevel.None)),
    Effect.provide(TestContext.TestContext)
  )
}

const emptyStats = (): Stats => ({
  runs: 0,
  enqueued: 0,
  delivered: 0,
  deadLettered: 0,
  duplicates: 0,
  failedCompletes: 0,
  handbacks: 0
})

describe("drainer histories (Enqueue → Relay → MemorySink, memory stores, TestClock)", () => {
  it("regression, seed -1366904773: a stopped relay hands its lease back only after its in-flight send finished (SPEC §6 shutdown)", async () => {
    // shrunk counterexample: the relay released the lease while its final drain still had a send in flight,
    // so that send landed after the hand-back and the next owner delivered the record again
    const stats = emptyStats()
    await Effect.runPromise(
      runHistory(
        [
          { _tag: "Enqueue", partition: 0, keys: [undefined] },
          { _tag: "Tick", millis: 5 },
          { _tag: "Enqueue", partition: 0, keys: [undefined] },
          { _tag: "StartRelay" },
          { _tag: "Enqueue", partition: 0, keys: [undefined] }
        ],
        stats
      )
    )
    expect(stats.delivered).toBe(3)
    expect(stats.duplicates).toBe(0)
  })

  it("regression, seed 903486728: a drainer stopped twice (its renew failed, then its relay stopped) still finishes its in-flight send before the lease is handed back", async () => {
    // shrunk counterexample: the failed renew interrupted the drainer, whose final drain waited for the
    // in-flight send; the relay's stop interrupted it again, which cut that wait short, so the lease was
    // handed back, the send landed afterwards, and the next owner delivered the record again
    const stats = emptyStats()
    await Effect.runPromise(
      runHistory(
        [
          { _tag: "LoseLease", partition: 0 },
          { _tag: "StartRelay" },
          { _tag: "Enqueue", partition: 1, keys: [undefined] },
          { _tag: "Tick", millis: 10 },
          { _tag: "Enqueue", partition: 0, keys: [undefined] },
          { _tag: "Tick", millis: 1000 },
          { _tag: "Enqueue", partition: 0, keys: [undefined] }
        ],
        stats
      )
    )
    expect(stats.delivered).toBe(3)
    expect(stats.duplicates).toBe(0)
  })

  it("30 random workloads with sink failures, failing completes, lease moves and interrupted relays: all delivered or dead-lettered, per-key order, justified duplicates", async () => {
    const seed = testSeed("drainer histories")
    const stats = emptyStats()
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(actionArb, { minLength: 5, maxLength: 30 }), (actions) =>
          Effect.runPromise(runHistory(actions, stats))
        ),
        { numRuns: 30, seed }
      )
    } catch (error) {
      console.error(`[drainer histories] failed; replay with OUTBOX_SEED=${seed}`)
      throw error
    }
    console.log(`[drainer histories] seed ${seed}: ${JSON.stringify(stats)}`)
    expect(stats.runs).toBeGreaterThanOrEqual(30)
    expect(stats.delivered).toBeGreaterThan(0)
    expect(stats.deadLettered).toBeGreaterThan(0)
  }, 90_000)
})
