/**
 * The lease and dead-letter contracts on the memory backend, plus memory-specific behaviour: redrive
 * deletes an entry only after persisting its record, and concurrent writers of one entry id have
 * exactly one winner.
 */
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { DeadLetterEntry } from "../src/domain/DeadLetterEntry.js"
import * as MemoryDeadLetterStore from "../src/layers/memory/MemoryDeadLetterStore.js"
import * as MemoryLeaseStore from "../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import { DeadLetterStore } from "../src/services/DeadLetterStore.js"
import { LeaseStore } from "../src/services/LeaseStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { deadLetterStoreContract } from "./contract/DeadLetterStoreContract.js"
import { leaseStoreContract } from "./contract/LeaseStoreContract.js"
import * as FaultyOutboxStore from "./support/FaultyOutboxStore.js"

leaseStoreContract("memory", () => MemoryLeaseStore.layer)

deadLetterStoreContract("memory", () => Layer.provideMerge(MemoryDeadLetterStore.layer, MemoryOutboxStore.layer))

const entry = (id: string, failedAt: number, partitionKey = `pk-${id}`): DeadLetterEntry =>
  new DeadLetterEntry({
    id,
    recordId: `rec-${id}`,
    partitionKey,
    envelopeId: `env-${id}`,
    bindingId: "b",
    payload: new Uint8Array([1]),
    headers: {},
    category: "poison",
    reason: "replays spent",
    errorCode: "POISON",
    lastError: "timeout",
    attempts: 6,
    failedAt: DateTime.unsafeMake(failedAt)
  })

const withFaults = MemoryDeadLetterStore.layer.pipe(
  Layer.provideMerge(FaultyOutboxStore.layer),
  Layer.provide(MemoryOutboxStore.layer)
)

describe("MemoryDeadLetterStore", () => {
  it.effect("§5 redrive deletes an entry only after its record is persisted: a failed persist keeps the entry", () =>
    Effect.gen(function* () {
      const dlq = yield* DeadLetterStore
      const outbox = yield* OutboxStore
      const faults = yield* FaultyOutboxStore.FaultyOutboxStore
      yield* dlq.write(entry("first", 1, "p"))
      yield* dlq.write(entry("second", 2, "p"))
      const first = yield* dlq.redrive(["first"])
      expect(first).toHaveLength(1)
      yield* faults.inject({ operation: "persist" })
      const error = yield* Effect.flip(dlq.redrive(["second"]))
      expect(error._tag).toBe("StoreUnavailable")
      expect((yield* Effect.flip(dlq.get("first")))._tag).toBe("NotFound")
      expect((yield* dlq.get("second")).id).toBe("second")
      expect(yield* outbox.countPending("p")).toBe(1)
      const again = yield* dlq.redrive(["second"])
      expect(again).toHaveLength(1)
      expect(yield* outbox.countPending("p")).toBe(2)
    }).pipe(Effect.provide(withFaults))
  )

  it.effect("§5 redrive of the same id twice in one call redrives it once", () =>
    Effect.gen(function* () {
      const dlq = yield* DeadLetterStore
      const outbox = yield* OutboxStore
      yield* dlq.write(entry("twice", 1, "p"))
      const ids = yield* dlq.redrive(["twice", "twice"])
      expect(ids).toHaveLength(1)
      expect(yield* outbox.countPending("p")).toBe(1)
    }).pipe(Effect.provide(Layer.provideMerge(MemoryDeadLetterStore.layer, MemoryOutboxStore.layer)))
  )

  it.effect("§5 concurrent writers of one entry id: exactly one succeeds, the rest get DuplicateRecord", () =>
    Effect.gen(function* () {
      const dlq = yield* DeadLetterStore
      const outcomes = yield* Effect.all(
        Array.from({ length: 20 }, (_, i) => Effect.either(dlq.write(entry("same", i)))),
        { concurrency: "unbounded" }
      )
      expect(outcomes.filter((o) => o._tag === "Right")).toHaveLength(1)
      for (const o of outcomes) if (o._tag === "Left") expect(o.left._tag).toBe("DuplicateRecord")
      expect(yield* dlq.list({})).toHaveLength(1)
    }).pipe(Effect.provide(Layer.provideMerge(MemoryDeadLetterStore.layer, MemoryOutboxStore.layer)))
  )
})

describe("MemoryLeaseStore", () => {
  it.effect("§4 each build of the layer has its own state", () =>
    Effect.gen(function* () {
      const acquire = Effect.flatMap(LeaseStore, (leases) => leases.acquire("p", "node-a", "1 minute"))
      const first = yield* Effect.provide(acquire, MemoryLeaseStore.layer)
      const second = yield* Effect.provide(acquire, MemoryLeaseStore.layer)
      expect(first.token.version).toBe(1)
      expect(second.token.version).toBe(1)
    })
  )
})
