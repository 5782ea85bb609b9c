/**
 * A batch lets go of each record once it is settled: while the batch's later waves are still in flight, the
 * records it completed are no longer reachable from the drainer (the collector frees them). Checked with the
 * collector itself (`gc`, enabled for this process) and a `FinalizationRegistry` over the records the sink
 * was handed.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as v8 from "node:v8"
import * as vm from "node:vm"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as MemoryLeaseStore from "../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as Drainer from "../src/programs/Drainer.js"
import { LeaseStore } from "../src/services/LeaseStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { Sink } from "../src/services/Sink.js"

/** The collector, callable from this test (`--expose-gc` for this process, read from a fresh context). */
const collect = (): (() => void) => {
  v8.setFlagsFromString("--expose-gc")
  const gc: unknown = vm.runInNewContext("gc")
  if (typeof gc !== "function") throw new Error("the collector could not be exposed")
  return () => {
    gc()
  }
}

const rec = (partitionKey: string, id: string, orderingKey?: string) =>
  new NewOutboxRecord({
    id,
    partitionKey,
    envelopeId: id,
    bindingId: "b",
    payload: new Uint8Array(1_000),
    ...(orderingKey === undefined ? {} : { orderingKey })
  })

/** Lets the finalizers of collected objects run (they are queued as tasks after a collection). */
const turns = Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 20)))

describe("Drainer retention", () => {
  it.live("the records a batch settled are freed while its later waves are still in flight", () =>
    Effect.gen(function* () {
      const gc = collect()
      const p = "retention"
      const leases = yield* LeaseStore
      const store = yield* OutboxStore
      yield* leases.acquire(p, "relay-a", "1 hour")
      // one key of three records and eight keyless ones: the first wave sends k1 and every keyless record and
      // completes them all in one call (k1 has a successor); k2's send then waits until the test lets it go
      const keyless = Array.from({ length: 8 }, (_, i) => `x${i + 1}`)
      yield* store.persist([
        rec(p, "k1", "K"),
        ...keyless.map((id) => rec(p, id)),
        rec(p, "k2", "K"),
        rec(p, "k3", "K")
      ])
      const collected = new Set<string>()
      const registry = new FinalizationRegistry<string>((id) => collected.add(id))
      const k2Started = yield* Deferred.make<void>()
      const k2Released = yield* Deferred.make<void>()
      const sent: Array<string> = []
      // the sink keeps no record: it notes the id and registers the record with the registry
      const sink = Sink.of({
        send: (record) =>
          Effect.suspend(() => {
            sent.push(record.id)
            registry.register(record, record.id)
            return record.id === "k2"
              ? Effect.zipRight(Deferred.succeed(k2Started, undefined), Deferred.await(k2Released))
              : Effect.void
          })
      })
      const d = yield* Drainer.make({
        partitionKey: p,
        owner: "relay-a",
        gaugeInterval: 0,
        onExpired: "drop",
        onPermanentFailure: "drop",
        onPoison: "drop"
      }).pipe(Effect.provideService(Sink, sink))
      const cycle = yield* Effect.fork(d.drainOnce())
      yield* Deferred.await(k2Started)
      expect(sent).toEqual(["k1", ...keyless, "k2"])
      // k1 and the keyless records are completed; k2 is in flight and k3 still to come
      expect(yield* store.countClaimed(p)).toBe(2)
      for (let attempt = 0; attempt < 5 && collected.size < keyless.length + 1; attempt++) {
        gc()
        yield* turns
      }
      expect([...collected].sort()).toEqual(["k1", ...keyless].sort())
      yield* Deferred.succeed(k2Released, undefined)
      expect(yield* Fiber.join(cycle)).toMatchObject({ claimed: 11, delivered: 11 })
      expect(sent).toEqual(["k1", ...keyless, "k2", "k3"])
      expect(yield* store.countClaimed(p)).toBe(0)
    }).pipe(Effect.provide(Layer.mergeAll(MemoryOutboxStore.layer, MemoryLeaseStore.layer)))
  )
})
