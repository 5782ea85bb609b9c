import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as Enqueue from "../src/programs/Enqueue.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import * as Faulty from "./support/FaultyOutboxStore.js"

const rec = (partitionKey: string, n: number) =>
  new NewOutboxRecord({
    partitionKey,
    envelopeId: `env-${partitionKey}-${n}`,
    bindingId: "b",
    payload: new Uint8Array([n])
  })

const stores = Faulty.layer.pipe(Layer.provide(MemoryOutboxStore.layer))
const withEnqueue = (options: Enqueue.EnqueueOptions) => Layer.provideMerge(Enqueue.layerWith(options), stores)

const countCalls = Effect.map(Faulty.FaultyOutboxStore, (f) => f.calls).pipe(
  Effect.flatten,
  Effect.map((calls) => calls.filter((c) => c.operation === "countPending").length)
)

describe("Enqueue", () => {
  it.effect("SPEC §7 fails with OutboxFull and persists nothing when a partition reached maxOutboxDepth", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* Enqueue.enqueue([rec("p1", 1), rec("p1", 2), rec("p1", 3)])
      const service = yield* Enqueue.Enqueue
      yield* service.invalidate
      const error = yield* Effect.flip(Enqueue.enqueue([rec("p2", 1), rec("p1", 4)]))
      expect(error._tag).toBe("OutboxFull")
      if (error._tag === "OutboxFull") {
        expect(error.partitionKey).toBe("p1")
        expect(error.depth).toBe(3)
        expect(error.limit).toBe(3)
        expect(error.retryAfterMillis).toBe(250)
      }
      // nothing of the batch was stored, not even the record of the partition with room
      expect(yield* store.countPending("p1")).toBe(3)
      expect(yield* store.countPending("p2")).toBe(0)
    }).pipe(Effect.provide(withEnqueue({ maxOutboxDepth: 3, retryAfter: "250 millis" })))
  )

  it.effect("depth answers are cached for the TTL and counted again after it", () =>
    Effect.gen(function* () {
      yield* Enqueue.enqueue([rec("p1", 1)])
      yield* Enqueue.enqueue([rec("p1", 2)])
      yield* Enqueue.enqueue([rec("p1", 3)])
      expect(yield* countCalls).toBe(1)
      yield* TestClock.adjust("999 millis")
      yield* Enqueue.enqueue([rec("p1", 4)])
      expect(yield* countCalls).toBe(1)
      yield* TestClock.adjust("1 millis")
      yield* Enqueue.enqueue([rec("p1", 5)])
      expect(yield* countCalls).toBe(2)
    }).pipe(Effect.provide(withEnqueue({ maxOutboxDepth: 100 })))
  )

  it.effect("the cached depth grows with the producer's own batches, so the limit holds within the TTL", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* Enqueue.enqueue([rec("p1", 1), rec("p1", 2)])
      yield* Enqueue.enqueue([rec("p1", 3), rec("p1", 4)])
      const error = yield* Effect.flip(Enqueue.enqueue([rec("p1", 5)]))
      expect(error._tag).toBe("OutboxFull")
      expect(yield* countCalls).toBe(1)
      expect(yield* store.countPending("p1")).toBe(4)
    }).pipe(Effect.provide(withEnqueue({ maxOutboxDepth: 4 })))
  )

  it.effect("fails closed: a failing count fails the call and persists nothing", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const faults = yield* Faulty.FaultyOutboxStore
      yield* faults.inject({ operation: "countPending" })
      const unavailable = yield* Effect.flip(Enqueue.enqueue([rec("p1", 1)]))
      expect(unavailable._tag).toBe("StoreUnavailable")
      yield* faults.inject({ operation: "countPending", unsupported: true })
      const unsupported = yield* Effect.flip(Enqueue.enqueue([rec("p1", 1)]))
      expect(unsupported._tag).toBe("DepthUnsupported")
      expect(yield* store.countPending("p1")).toBe(0)
      // a failure is not cached: the next call counts again and goes through
      yield* Enqueue.enqueue([rec("p1", 1)])
      expect(yield* store.countPending("p1")).toBe(1)
    }).pipe(Effect.provide(withEnqueue({ maxOutboxDepth: 10 })))
  )

  it.effect("maxOutboxDepth 0 disables the check (no counts)", () =>
    Effect.gen(function* () {
      for (let i = 0; i < 5; i++) yield* Enqueue.enqueue([rec("p1", i)])
      expect(yield* countCalls).toBe(0)
    }).pipe(Effect.provide(withEnqueue({ maxOutboxDepth: 0 })))
  )

  it.effect("the depth cache is bounded: the least recently used partition is counted again", () =>
    Effect.gen(function* () {
      yield* Enqueue.enqueue([rec("p1", 1)])
      yield* Enqueue.enqueue([rec("p2", 1)])
      yield* Enqueue.enqueue([rec("p3", 1)])
      expect(yield* countCalls).toBe(3)
      yield* Enqueue.enqueue([rec("p3", 2)])
      expect(yield* countCalls).toBe(3)
      yield* Enqueue.enqueue([rec("p1", 2)])
      expect(yield* countCalls).toBe(4)
    }).pipe(Effect.provide(withEnqueue({ maxOutboxDepth: 100, depthCacheSize: 2 })))
  )

  it.effect("store errors of persist pass through typed (DuplicateRecord)", () =>
    Effect.gen(function* () {
      yield* Enqueue.enqueue([rec("p1", 1)])
      const error = yield* Effect.flip(Enqueue.enqueue([rec("p1", 1)]))
      expect(error._tag).toBe("DuplicateRecord")
    }).pipe(Effect.provide(withEnqueue({})))
  )
})
