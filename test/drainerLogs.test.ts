/**
 * What a drainer logs at the default level when records fail (issue 18 items 2 and 15): one WARN per
 * dead-lettered or dropped record (id, partition, category, reason; never payload or header values), a
 * WARN per partition at most once a minute while the sink keeps failing, INFO on recovery, and a WARN
 * when a partition pauses at the sink's request.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as TestClock from "effect/TestClock"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as MemoryDeadLetterStore from "../src/layers/memory/MemoryDeadLetterStore.js"
import * as MemoryLeaseStore from "../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as MemorySink from "../src/layers/sinks/MemorySink.js"
import * as Drainer from "../src/programs/Drainer.js"
import { yieldToEventLoop } from "../src/services/EventLoop.js"
import { LeaseStore } from "../src/services/LeaseStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"

const OWNER = "relay-logs"

interface Line {
  readonly level: string
  readonly message: string
  readonly annotations: Record<string, unknown>
}

/** A logger that keeps every line (at every level) in `lines`. */
const capture = () => {
  const lines: Array<Line> = []
  const layer = Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ annotations, logLevel, message }) => {
      const text = Array.isArray(message) ? message.map(String).join(" ") : String(message)
      lines.push({
        level: logLevel.label,
        message: text,
        annotations: Object.fromEntries(HashMap.toEntries(annotations))
      })
    })
  )
  return { lines, layer }
}

const layer = Layer.mergeAll(
  Layer.provideMerge(MemoryDeadLetterStore.layer, MemoryOutboxStore.layer),
  MemoryLeaseStore.layer,
  MemorySink.layer
)

const SECRET_PAYLOAD = "card=4111-1111-1111-1111"
const SECRET_HEADER = "Bearer s3cr3t-token"

const rec = (partitionKey: string, id: string) =>
  new NewOutboxRecord({
    id,
    partitionKey,
    envelopeId: id,
    bindingId: "b",
    payload: new TextEncoder().encode(SECRET_PAYLOAD),
    headers: { authorization: SECRET_HEADER }
  })

const setup = (partitionKey: string, ids: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    const leases = yield* LeaseStore
    yield* leases.acquire(partitionKey, OWNER, "1 hour")
    if (ids.length > 0) yield* store.persist(ids.map((id) => rec(partitionKey, id)))
  })

const warnings = (lines: ReadonlyArray<Line>, text: string) =>
  lines.filter((l) => l.level === "WARN" && l.message.includes(text))

describe("Drainer logs (memory, TestClock)", () => {
  it.effect(
    "a dead-lettered record logs one WARN with id, partition, category and reason, never payload or headers",
    () => {
      const { layer: logger, lines } = capture()
      return Effect.gen(function* () {
        const p = "logs-dlq"
        yield* setup(p, ["r1"])
        const sink = yield* MemorySink.MemorySink
        yield* sink.failRecord("r1", { failure: "permanent", code: "http-422" })
        const d = yield* Drainer.make({ partitionKey: p, owner: OWNER })
        const result = yield* d.drainOnce()
        expect(result.deadLettered).toBe(1)
        const dead = warnings(lines, "dead-lettered")
        expect(dead).toHaveLength(1)
        expect(dead[0]?.message).toBe("record dead-lettered (permanent)")
        expect(dead[0]?.annotations).toMatchObject({
          recordId: "r1",
          partition: p,
          category: "permanent",
          reason: "the sink rejected the record permanently",
          errorCode: "http-422"
        })
        const everything = JSON.stringify(lines)
        expect(everything).not.toContain(SECRET_PAYLOAD)
        expect(everything).not.toContain(SECRET_HEADER)
      }).pipe(Effect.provide(layer), Effect.provide(logger))
    }
  )

  it.effect("a dropped record (drop policy) logs a WARN naming it and its category", () => {
    const { layer: logger, lines } = capture()
    return Effect.gen(function* () {
      const p = "logs-drop"
      yield* setup(p, ["r1"])
      const sink = yield* MemorySink.MemorySink
      yield* sink.failRecord("r1", { failure: "permanent" })
      const d = yield* Drainer.make({
        partitionKey: p,
        owner: OWNER,
        onExpired: "drop",
        onPermanentFailure: "drop",
        onPoison: "drop"
      })
      expect((yield* d.drainOnce()).dropped).toBe(1)
      const dropped = warnings(lines, "dropped by policy")
      expect(dropped.map((l) => l.annotations)).toMatchObject([{ recordId: "r1", partition: p, category: "permanent" }])
    }).pipe(Effect.provide(layer), Effect.provide(logger))
  })

  it.effect("the drain loop's cycles log with the drainer's partition and owner, as drainOnce's do", () => {
    const { layer: logger, lines } = capture()
    return Effect.gen(function* () {
      const p = "logs-loop"
      yield* setup(p, ["r1"])
      const sink = yield* MemorySink.MemorySink
      yield* sink.failRecord("r1", { failure: "permanent" })
      const d = yield* Drainer.make({ partitionKey: p, owner: OWNER, onPermanentFailure: "drop" })
      const fiber = yield* Effect.fork(d.run)
      while (warnings(lines, "dropped by policy").length < 1) yield* yieldToEventLoop
      yield* Fiber.interrupt(fiber)
      expect(warnings(lines, "dropped by policy").map((l) => l.annotations)).toMatchObject([
        { recordId: "r1", partition: p, owner: OWNER, category: "permanent" }
      ])
    }).pipe(Effect.provide(layer), Effect.provide(logger))
  })

  it.effect("a sink failing for minutes logs a WARN once per minute with the count, then INFO on recovery", () => {
    const { layer: logger, lines } = capture()
    return Effect.gen(function* () {
      const p = "logs-failing"
      yield* setup(p, ["r1"])
      const sink = yield* MemorySink.MemorySink
      yield* sink.failRecord("r1", { failure: "transient", times: 7, code: "ECONNREFUSED" })
      const d = yield* Drainer.make({ partitionKey: p, owner: OWNER, maxReplayAttempts: 100 })
      // 7 failed attempts 20 s apart: warnings at the 1st (0 s), the 4th (60 s) and the 7th (120 s) only
      for (let i = 0; i < 7; i++) {
        expect((yield* d.drainOnce()).deferred).toBe(1)
        yield* TestClock.adjust("20 seconds")
      }
      const failing = warnings(lines, "sink failing for partition")
      expect(failing.map((l) => l.message)).toEqual([
        "sink failing for partition logs-failing: 1 failures since 1970-01-01T00:00:00.000Z, last error ECONNREFUSED: scripted transient failure for r1",
        "sink failing for partition logs-failing: 4 failures since 1970-01-01T00:00:00.000Z, last error ECONNREFUSED: scripted transient failure for r1",
        "sink failing for partition logs-failing: 7 failures since 1970-01-01T00:00:00.000Z, last error ECONNREFUSED: scripted transient failure for r1"
      ])
      expect(lines.filter((l) => l.message.includes("recovered"))).toEqual([])
      expect((yield* d.drainOnce()).delivered).toBe(1)
      const recovered = lines.filter((l) => l.message.includes("recovered"))
      expect(recovered.map((l) => [l.level, l.message])).toEqual([
        ["INFO", "sink recovered for partition logs-failing after 7 failures over 2m 20s"]
      ])
      expect(JSON.stringify(lines)).not.toContain(SECRET_PAYLOAD)
    }).pipe(Effect.provide(layer), Effect.provide(logger))
  })

  it.effect("a partition pausing for a sink's Retry-After logs a WARN naming the partition and the pause", () => {
    const { layer: logger, lines } = capture()
    return Effect.gen(function* () {
      const p = "logs-pause"
      yield* setup(p, ["r1"])
      const sink = yield* MemorySink.MemorySink
      yield* sink.failRecord("r1", { failure: "transient", times: 1, retryAfterMillis: 45_000 })
      const d = yield* Drainer.make({ partitionKey: p, owner: OWNER, idleBackoffMax: "1 second" })
      const fiber = yield* Effect.fork(d.run)
      while ((yield* sink.attempts).length < 1) yield* yieldToEventLoop
      for (let i = 0; i < 5; i++) yield* yieldToEventLoop
      const paused = warnings(lines, "paused")
      expect(paused.map((l) => l.message)).toEqual(["partition logs-pause paused for 45s at the sink's request"])
      expect(paused[0]?.annotations).toMatchObject({ partition: p, pauseMillis: 45_000 })
      // the pause holds: no second attempt before it ends
      yield* TestClock.adjust("44 seconds")
      for (let i = 0; i < 5; i++) yield* yieldToEventLoop
      expect(yield* sink.attempts).toHaveLength(1)
      yield* TestClock.adjust("2 seconds")
      while ((yield* sink.deliveredIds).length < 1) {
        yield* TestClock.adjust("100 millis")
        yield* yieldToEventLoop
      }
      expect(yield* sink.deliveredIds).toEqual(["r1"])
      yield* Fiber.interrupt(fiber)
    }).pipe(Effect.provide(layer), Effect.provide(logger))
  })
})
