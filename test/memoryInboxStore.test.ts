/**
 * The InboxStore contract on the memory backend, plus: a trim batch touches only what it deletes, however
 * deep the history of younger ids (O(batch)), and invalid options fail the layer.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import * as MemoryInboxStore from "../src/layers/memory/MemoryInboxStore.js"
import { inboxStoreContract, TestApp } from "./contract/InboxStoreContract.js"

const memoryApp = Layer.sync(TestApp, () => {
  const state = new Map<string, Array<string>>()
  return TestApp.of({
    write: (key, value) => Effect.sync(() => void state.set(key, [...(state.get(key) ?? []), value])),
    read: (key) => Effect.sync(() => [...(state.get(key) ?? [])].sort())
  })
})

inboxStoreContract("memory", (options) => Layer.merge(MemoryInboxStore.layerWith(options), memoryApp), {
  transactionalWrites: false,
  trims: true
})

describe("MemoryInboxStore", () => {
  it.effect("a trim batch touches O(batch) entries whatever the number of younger ids (SPEC §12 retention)", () =>
    Effect.gen(function* () {
      const { store, stats } = yield* MemoryInboxStore.makeWithStats({
        dedupeWindow: Duration.hours(1),
        trimBatchSize: 100
      })
      for (let i = 0; i < 250; i++) yield* store.process("c", { messageId: `old-${i}`, partitionKey: "p" }, Effect.void)
      yield* TestClock.adjust(Duration.hours(2))
      for (let i = 0; i < 20_000; i++) {
        yield* store.process("c", { messageId: `young-${i}`, partitionKey: "p" }, Effect.void)
      }
      const report = yield* store.trim
      expect(report).toEqual({ deleted: 250, batches: 3 })
      // 250 deleted + one young entry looked at by the last batch
      expect(stats.trimTouched()).toBe(251)
      expect(stats.ids()).toBe(20_000)
    })
  )

  it.effect("invalid options fail the layer with InvalidConfiguration naming each problem", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        MemoryInboxStore.make({ dedupeWindow: Duration.zero, trimBatchSize: 0, maxTrimBatches: 1.5 })
      )
      expect(error._tag).toBe("InvalidConfiguration")
      expect(error.problems).toHaveLength(3)
    })
  )
})
