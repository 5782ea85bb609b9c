/**
 * The drainer's idle pause (SPEC §13): the back-off's steps, and the pause that ends at its timer or at
 * the hub's signal of the partition, whichever comes first. On Effect's live clock the pause is one
 * asynchronous step holding a timer and a hub waiter (`sleepOrWork`); on `TestClock` it is the clock's
 * sleep raced with the hub's wait. Both are checked here, and a drainer on the live clock with a
 * 10-minute back-off is woken by an in-process persist and by a `WakeSignal`.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as MemoryLeaseStore from "../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as MemorySink from "../src/layers/sinks/MemorySink.js"
import { idleBackoff, sleepOrWork } from "../src/programs/drainer/Loop.js"
import { yieldToEventLoop } from "../src/services/EventLoop.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { makeHub, WakeHub, type WakeHubService } from "../src/services/WakeHub.js"
import { WakeSignal } from "../src/services/WakeSignal.js"
import { idleDrainer as startIdleDrainer } from "./support/IdleDrainer.js"

const OWNER = "idle-pause"

const rec = (partitionKey: string, id: string) =>
  new NewOutboxRecord({ id, partitionKey, envelopeId: id, bindingId: "b", payload: new Uint8Array([1]) })

/** A hub that counts the waits registered through `onWork` and not yet ended or cancelled. */
const countingHub = () => {
  const inner = makeHub()
  let open = 0
  const hub: WakeHubService = {
    ...inner,
    onWork: (partitionKey, mark, wake) => {
      let ended = false
      const end = () => {
        if (!ended) {
          ended = true
          open -= 1
        }
      }
      open += 1
      const cancel = inner.onWork(partitionKey, mark, () => {
        end()
        wake()
      })
      return () => {
        end()
        cancel()
      }
    }
  }
  return { hub, open: () => open }
}

/** Polls `check` in real time (the live clock) until it holds; dies after 5 s. */
const eventually = <E, R>(what: string, check: Effect.Effect<boolean, E, R>) =>
  Effect.gen(function* () {
    for (let i = 0; i < 500; i++) {
      if (yield* check) return
      yield* Effect.sleep("10 millis")
    }
    return yield* Effect.dieMessage(`${what}: never held`)
  })

describe("idleBackoff", () => {
  it.effect(
    "doubles from idleBackoffMin up to idleBackoffMax, each step jittered to 80-100 %, and starts over on reset",
    () =>
      Effect.gen(function* () {
        const backoff = idleBackoff({ idleBackoffMin: Duration.millis(10), idleBackoffMax: Duration.millis(80) })
        const steps = [10, 20, 40, 80, 80, 80]
        for (const step of steps) {
          const millis = yield* backoff.nextMillis
          expect(millis).toBeGreaterThanOrEqual(step * 0.8)
          expect(millis).toBeLessThanOrEqual(step)
        }
        backoff.reset()
        const first = yield* backoff.nextMillis
        expect(first).toBeGreaterThanOrEqual(8)
        expect(first).toBeLessThanOrEqual(10)
      })
  )

  it.effect("next sleeps on the context's clock", () =>
    Effect.gen(function* () {
      const backoff = idleBackoff({ idleBackoffMin: Duration.seconds(10), idleBackoffMax: Duration.seconds(10) })
      const fiber = yield* Effect.fork(backoff.next)
      yield* TestClock.adjust("7 seconds")
      expect(fiber.unsafePoll()).toBeNull()
      yield* TestClock.adjust("3 seconds")
      yield* Fiber.join(fiber)
    })
  )
})

describe("WakeHub.onWork", () => {
  it("calls back at once when the partition was signalled after the mark, later when it is, never after a cancel", () => {
    const hub = makeHub()
    const calls: Array<string> = []
    const mark = hub.mark()
    hub.signal("a")
    hub.onWork("a", mark, () => calls.push("already"))
    expect(calls).toEqual(["already"])
    const later = hub.mark()
    hub.onWork("a", later, () => calls.push("later"))
    const cancel = hub.onWork("a", later, () => calls.push("cancelled"))
    cancel()
    hub.signal("b")
    expect(calls).toEqual(["already"])
    hub.signal("a")
    hub.signal("a")
    expect(calls).toEqual(["already", "later"])
  })
})

describe("sleepOrWork", () => {
  it.live("live clock: ends at its timer when nothing is signalled, and leaves no waiter on the hub", () =>
    Effect.gen(function* () {
      const { hub, open } = countingHub()
      const fiber = yield* Effect.fork(sleepOrWork(hub, "p", hub.mark(), 150))
      yield* Effect.sleep("30 millis")
      expect(fiber.unsafePoll()).toBeNull()
      expect(open()).toBe(1)
      hub.signal("other")
      yield* Effect.sleep("30 millis")
      expect(fiber.unsafePoll()).toBeNull()
      yield* Fiber.join(fiber)
      expect(open()).toBe(0)
    })
  )

  it.live("live clock: a signal of the partition after the mark ends a 10-minute pause at once", () =>
    Effect.gen(function* () {
      const { hub, open } = countingHub()
      const mark = hub.mark()
      const fiber = yield* Effect.fork(sleepOrWork(hub, "p", mark, 600_000))
      yield* Effect.sleep("20 millis")
      expect(fiber.unsafePoll()).toBeNull()
      hub.signal("p")
      yield* Fiber.join(fiber).pipe(Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => "not woken" }))
      expect(open()).toBe(0)
      // signalled between the mark and the call: returns without waiting
      yield* sleepOrWork(hub, "p", mark, 600_000).pipe(
        Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => "waited for an earlier signal" })
      )
    })
  )

  it.live("live clock: an interrupted pause drops its timer and its hub waiter", () =>
    Effect.gen(function* () {
      const { hub, open } = countingHub()
      const fiber = yield* Effect.fork(sleepOrWork(hub, "p", hub.mark(), 600_000))
      yield* Effect.sleep("20 millis")
      expect(open()).toBe(1)
      yield* Fiber.interrupt(fiber)
      expect(open()).toBe(0)
      hub.signal("p")
    })
  )

  it.effect("TestClock: ends when the clock passes its duration, or at once on the partition's signal", () =>
    Effect.gen(function* () {
      const hub = makeHub()
      const timed = yield* Effect.fork(sleepOrWork(hub, "p", hub.mark(), 1_000))
      yield* Effect.repeatN(yieldToEventLoop, 5)
      yield* TestClock.adjust("999 millis")
      expect(timed.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 millis")
      yield* Fiber.join(timed)
      const woken = yield* Effect.fork(sleepOrWork(hub, "p", hub.mark(), 600_000))
      yield* Effect.repeatN(yieldToEventLoop, 5)
      hub.signal("p")
      yield* Fiber.join(woken)
    })
  )
})

/** A `WakeSignal` whose waits end when the test completes `fire`. */
const firedBy = (fire: Deferred.Deferred<void>): Layer.Layer<WakeSignal> =>
  Layer.succeedContext(
    Context.make(WakeSignal, { awaitWork: () => Deferred.await(fire), awaitAnyWork: Deferred.await(fire) })
  )

/** A drainer of `p` on the live clock with its own hub, in its 10-minute pause once its first claim found nothing. */
const idleDrainer = (p: string, hub: WakeHubService) =>
  Effect.gen(function* () {
    const fiber = yield* startIdleDrainer(p, OWNER).pipe(Effect.provideService(WakeHub, hub))
    yield* Effect.sleep("50 millis")
    return fiber
  })

/** Waits (in real time) until the sink has delivered `id`. */
const delivered = (id: string) =>
  Effect.flatMap(MemorySink.MemorySink, (sink) =>
    eventually(
      `${id} delivered`,
      Effect.map(sink.deliveredIds, (ids) => ids.includes(id))
    )
  )

const stores = Layer.mergeAll(MemoryOutboxStore.layer, MemoryLeaseStore.layer, MemorySink.layer)

describe("an idle drainer on the live clock", () => {
  it.live("delivers a record persisted in its process long before its 10-minute back-off ends", () =>
    Effect.gen(function* () {
      const hub = makeHub()
      const sink = yield* MemorySink.MemorySink
      const fiber = yield* idleDrainer("live-local", hub)
      expect(yield* sink.deliveredIds).toEqual([])
      yield* Effect.provideService((yield* OutboxStore).persist([rec("live-local", "r1")]), WakeHub, hub)
      yield* delivered("r1")
      expect(yield* sink.deliveredIds).toEqual(["r1"])
      yield* Fiber.interrupt(fiber)
    }).pipe(Effect.provide(stores))
  )

  it.live("delivers a record persisted elsewhere as soon as the WakeSignal fires, not before", () =>
    Effect.gen(function* () {
      const fire = yield* Deferred.make<void>()
      const hub = makeHub()
      const sink = yield* MemorySink.MemorySink
      const fiber = yield* idleDrainer("live-signal", hub).pipe(Effect.provide(firedBy(fire)))
      // persisted as another process would: its signal goes to a hub this drainer does not wait on
      yield* Effect.provideService((yield* OutboxStore).persist([rec("live-signal", "r1")]), WakeHub, makeHub())
      yield* Effect.sleep("100 millis")
      expect(yield* sink.deliveredIds).toEqual([])
      yield* Deferred.succeed(fire, undefined)
      yield* delivered("r1")
      expect(yield* sink.deliveredIds).toEqual(["r1"])
      yield* Fiber.interrupt(fiber)
    }).pipe(Effect.provide(stores))
  )

  it.live(
    "waits on the hub alone when the WakeSignal signals through that hub, on the signal too when it does not",
    () =>
      Effect.gen(function* () {
        const sink = yield* MemorySink.MemorySink
        const run = (p: string, through: "drainer's hub" | "another hub") =>
          Effect.gen(function* () {
            const hub = makeHub()
            let waits = 0
            const signal = Layer.succeed(WakeSignal, {
              awaitWork: () =>
                Effect.zipRight(
                  Effect.sync(() => waits++),
                  Effect.never
                ),
              awaitAnyWork: Effect.never,
              signalsThrough: through === "drainer's hub" ? hub : makeHub()
            })
            const fiber = yield* idleDrainer(p, hub).pipe(Effect.provide(signal))
            const waitsWhileIdle = waits
            yield* Effect.provideService((yield* OutboxStore).persist([rec(p, `${p}-r1`)]), WakeHub, makeHub())
            // the source's signal, as SqliteWakeSignal gives it: on the hub
            hub.signal(p)
            yield* delivered(`${p}-r1`)
            yield* Fiber.interrupt(fiber)
            return waitsWhileIdle
          })
        expect(yield* run("live-through-hub", "drainer's hub")).toBe(0)
        expect(yield* run("live-through-other", "another hub")).toBe(1)
      }).pipe(Effect.provide(stores))
  )

  it.live("waits for the WakeSignal again after it fired: a second signal brings a second record", () =>
    Effect.gen(function* () {
      // each wait ends at the next fire, as a backend's signal does for the commits after the call
      let next = yield* Deferred.make<void>()
      const fire = Effect.suspend(() => {
        const current = next
        return Effect.zipRight(
          Effect.map(Deferred.make<void>(), (fresh) => {
            next = fresh
          }),
          Deferred.succeed(current, undefined)
        )
      })
      const signal = Layer.succeed(WakeSignal, {
        awaitWork: () => Effect.suspend(() => Deferred.await(next)),
        awaitAnyWork: Effect.never
      })
      const p = "live-refire"
      const fiber = yield* idleDrainer(p, makeHub()).pipe(Effect.provide(signal))
      const store = yield* OutboxStore
      for (const id of ["r1", "r2"]) {
        // persisted as another process would: only the signal brings it forward
        yield* Effect.provideService(store.persist([rec(p, `${p}-${id}`)]), WakeHub, makeHub())
        yield* fire
        yield* delivered(`${p}-${id}`)
      }
      yield* Fiber.interrupt(fiber)
    }).pipe(Effect.provide(stores))
  )
})
