/**
 * A relay that cannot serve every partition with work says so (SPEC §6, §8, §10): the
 * `OutboxUnleasedPartitions` / `OutboxUnleasedOldestAge` gauges, a WARN past `starvationThreshold`, and
 * `/readyz` not ready with the reason.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import * as MemoryLeaseStore from "../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as MemorySink from "../src/layers/sinks/MemorySink.js"
import * as Readiness from "../src/programs/ops/Readiness.js"
import * as OutboxMetrics from "../src/services/OutboxMetrics.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { record, startRelay } from "./contract/RelayFairnessContract.js"

const stores = Layer.mergeAll(MemoryOutboxStore.layer, MemoryLeaseStore.layer)

describe("Relay visibility", () => {
  it.effect(
    "a partition left waiting past starvationThreshold shows in the gauges, is logged at WARN once a minute, and makes /readyz not ready",
    () => {
      const lines: Array<{ readonly level: string; readonly message: string; readonly unleased: unknown }> = []
      const logger = Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ annotations, logLevel, message }) => {
          lines.push({
            level: logLevel.label,
            message: Array.isArray(message) ? message.map(String).join(" ") : String(message),
            unleased: Option.getOrUndefined(HashMap.get(annotations, "unleased"))
          })
        })
      )
      return Effect.gen(function* () {
        const store = yield* OutboxStore
        // partition "hog" never finishes its send and never ends its turn: "late" has no slot
        const sink = yield* MemorySink.make({
          onSend: (r) => (r.partitionKey === "hog" ? Effect.never : Effect.void)
        })
        yield* store.persist([record("v", "hog", 1)])
        const relay = yield* startRelay(
          {
            owner: "vis-1",
            maxPartitions: 1,
            starvationThreshold: "1 minute",
            maxTurn: "1 hour",
            maxTurnBatches: 1000
          },
          sink
        )
        yield* TestClock.adjust("1 second")
        expect(yield* relay.handle.partitions).toEqual(["hog"])
        yield* store.persist([record("v", "late", 1)])
        const ready = yield* Readiness.make({ relayRunning: Effect.succeed(true) })
        yield* TestClock.adjust("10 seconds")
        expect((yield* relay.handle.unleased).partitions).toBe(1)
        expect((yield* ready).ready).toBe(true)
        expect(lines.filter((l) => l.level === "WARN" && l.message.includes("no lease"))).toEqual([])

        yield* TestClock.adjust("2 minutes")
        const count = yield* Metric.value(Metric.tagged(OutboxMetrics.OutboxUnleasedPartitions, "relay", "vis-1"))
        const age = yield* Metric.value(Metric.tagged(OutboxMetrics.OutboxUnleasedOldestAge, "relay", "vis-1"))
        expect(count.value).toBe(1)
        expect(age.value).toBeGreaterThanOrEqual(120)
        const warnings = lines.filter((l) => l.level === "WARN" && l.message.includes("no lease"))
        // rounds every 5 s for two minutes; at most one WARN a minute
        expect(warnings.length).toBeGreaterThanOrEqual(1)
        expect(warnings.length).toBeLessThanOrEqual(2)
        expect(warnings[0]?.unleased).toBe(1)
        const verdict = yield* ready
        expect(verdict.ready).toBe(false)
        expect(verdict.reasons.join(" ")).toContain("cannot keep up")

        // the hog's send never ends: shutdown waits for its final-drain budget on the test clock
        const stopping = yield* Effect.fork(Fiber.interrupt(relay.fiber))
        yield* TestClock.adjust("1 minute")
        yield* Fiber.join(stopping)
        // a stopped relay reports nothing waiting
        expect(
          (yield* Metric.value(Metric.tagged(OutboxMetrics.OutboxUnleasedOldestAge, "relay", "vis-1"))).value
        ).toBe(0)
      }).pipe(Effect.provide(Layer.merge(stores, logger)))
    }
  )
})
