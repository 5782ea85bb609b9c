/**
 * The drainer and relay with a `WakeSignal` (issue 19 item 4, SPEC §3.4): a signal ends an idle pause or
 * a discovery wait at once; without one they poll exactly as before. The signal here is driven by hand.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as MemoryLeaseStore from "../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as MemorySink from "../src/layers/sinks/MemorySink.js"
import * as Relay from "../src/programs/Relay.js"
import { yieldToEventLoop } from "../src/services/EventLoop.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { makeHub, WakeHub } from "../src/services/WakeHub.js"
import { idleDrainer as startIdleDrainer } from "./support/IdleDrainer.js"
import { WakeSignal } from "../src/services/WakeSignal.js"

const OWNER = "relay-wake"
const dropAll = { onExpired: "drop", onPermanentFailure: "drop", onPoison: "drop" } as const

/** Drives the hand-made `WakeSignal`. */
class WakeControl extends Context.Tag("test/WakeControl")<
  WakeControl,
  {
    /** Wakes every waiter of the partition and every `awaitAnyWork` waiter. */
    readonly signal: (partitionKey: string) => Effect.Effect<void>
    /** Waiters now registered. */
    readonly waiting: Effect.Effect<number>
  }
>() {}

/** A `WakeSignal` whose waits end only when the test calls `signal`. */
const handDriven: Layer.Layer<WakeSignal | WakeControl> = Layer.effectContext(
  Effect.sync(() => {
    const waiters = new Set<{ readonly partitionKey: string | undefined; readonly done: Deferred.Deferred<void> }>()
    const wait = (partitionKey: string | undefined) =>
      Effect.flatMap(Deferred.make<void>(), (done) => {
        const waiter = { partitionKey, done }
        waiters.add(waiter)
        return Deferred.await(done).pipe(Effect.ensuring(Effect.sync(() => waiters.delete(waiter))))
      })
    return Context.make(WakeSignal, { awaitWork: (p) => wait(p), awaitAnyWork: wait(undefined) }).pipe(
      Context.add(WakeControl, {
        signal: (partitionKey) =>
          Effect.forEach(
            Array.from(waiters).filter((w) => w.partitionKey === undefined || w.partitionKey === partitionKey),
            (w) => Deferred.succeed(w.done, undefined),
            { discard: true }
          ),
        waiting: Effect.sync(() => waiters.size)
      })
    )
  })
)

const stores = Layer.mergeAll(MemoryOutboxStore.layer, MemoryLeaseStore.layer, MemorySink.layer)

const rec = (partitionKey: string, id: string) =>
  new NewOutboxRecord({ id, partitionKey, envelopeId: id, bindingId: "b", payload: new Uint8Array([1]) })

/**
 * Runs a persist as another process would: it signals a hub of its own, not the one this process's
 * drainers and relays wait on, so only the `WakeSignal` (or the back-off) can bring its record forward.
 */
const elsewhere = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.provideService(effect, WakeHub, makeHub())

/** A relay whose discovery interval (10 minutes) never passes in a test: only a wake-up brings a round forward. */
const relayRunning = Effect.scoped(
  Effect.zipRight(Relay.start({ owner: OWNER, discoveryInterval: "10 minutes", drainer: dropAll }), Effect.never)
)

/** Lets forked fibers run (the drain loop yields to the event loop between cycles). */
const settle = Effect.repeatN(yieldToEventLoop, 10)

const until = <E, R>(check: Effect.Effect<boolean, E, R>) =>
  Effect.gen(function* () {
    for (let i = 0; i < 1000; i++) {
      if (yield* check) return
      yield* yieldToEventLoop
    }
    return yield* Effect.dieMessage("condition never held")
  })

/** An idle drainer of `p` whose back-off is 10 minutes from the first pause. */
const idleDrainer = (p: string) => startIdleDrainer(p, OWNER)

describe("WakeSignal (memory, TestClock)", () => {
  it.effect("an idle drainer delivers a new record as soon as the signal fires, long before its back-off ends", () =>
    Effect.gen(function* () {
      const p = "wake-drainer"
      const control = yield* WakeControl
      const sink = yield* MemorySink.MemorySink
      const fiber = yield* idleDrainer(p)
      yield* until(Effect.map(control.waiting, (n) => n === 1))
      yield* elsewhere((yield* OutboxStore).persist([rec(p, "r1")]))
      yield* settle
      expect(yield* sink.deliveredIds).toEqual([])
      yield* control.signal(p)
      yield* until(Effect.map(sink.deliveredIds, (ids) => ids.length === 1))
      expect(yield* sink.deliveredIds).toEqual(["r1"])
      expect(yield* Clock.currentTimeMillis).toBe(0)
      yield* Fiber.interrupt(fiber)
    }).pipe(Effect.provide(Layer.merge(stores, handDriven)))
  )

  it.effect("a persist that commits while the claim after a busy cycle runs wakes the drainer (no pause)", () =>
    Effect.gen(function* () {
      const p = "wake-during-claim"
      const sink = yield* MemorySink.MemorySink
      yield* elsewhere((yield* OutboxStore).persist([rec(p, "r1")]))
      const fiber = yield* idleDrainer(p)
      yield* until(Effect.map(sink.deliveredIds, (ids) => ids.length === 2))
      expect(yield* sink.deliveredIds).toEqual(["r1", "r2"])
      expect(yield* Clock.currentTimeMillis).toBe(0)
      yield* Fiber.interrupt(fiber)
    }).pipe(
      Effect.provide(
        Layer.merge(
          Layer.effect(
            OutboxStore,
            Effect.gen(function* () {
              const inner = yield* OutboxStore
              const control = yield* WakeControl
              let injected = false
              // the first claim that finds nothing: r2 is persisted and signalled after its read, as a
              // producer committing while that claim runs
              return OutboxStore.of({
                ...inner,
                claim: (partitionKey, token, limit) =>
                  Effect.tap(inner.claim(partitionKey, token, limit), (batch) => {
                    if (batch.records.length > 0 || injected) return Effect.void
                    injected = true
                    return Effect.zipRight(
                      Effect.orDie(elsewhere(inner.persist([rec(partitionKey, "r2")]))),
                      control.signal(partitionKey)
                    )
                  })
              })
            })
          ),
          Layer.merge(MemoryLeaseStore.layer, MemorySink.layer)
        ).pipe(Layer.provideMerge(Layer.merge(MemoryOutboxStore.layer, handDriven)))
      )
    )
  )

  it.effect("a signal for another partition does not end the pause", () =>
    Effect.gen(function* () {
      const p = "wake-other"
      const control = yield* WakeControl
      const sink = yield* MemorySink.MemorySink
      const fiber = yield* idleDrainer(p)
      yield* until(Effect.map(control.waiting, (n) => n === 1))
      yield* elsewhere((yield* OutboxStore).persist([rec(p, "r1")]))
      yield* control.signal("somewhere-else")
      yield* settle
      expect(yield* sink.deliveredIds).toEqual([])
      yield* TestClock.adjust("10 minutes")
      yield* until(Effect.map(sink.deliveredIds, (ids) => ids.length === 1))
      yield* Fiber.interrupt(fiber)
    }).pipe(Effect.provide(Layer.merge(stores, handDriven)))
  )

  it.effect("without a WakeSignal the idle drainer waits for its back-off", () =>
    Effect.gen(function* () {
      const p = "wake-none"
      const sink = yield* MemorySink.MemorySink
      const fiber = yield* idleDrainer(p)
      yield* settle
      yield* elsewhere((yield* OutboxStore).persist([rec(p, "r1")]))
      yield* settle
      yield* TestClock.adjust("7 minutes")
      yield* settle
      expect(yield* sink.deliveredIds).toEqual([])
      yield* TestClock.adjust("3 minutes")
      yield* until(Effect.map(sink.deliveredIds, (ids) => ids.length === 1))
      yield* Fiber.interrupt(fiber)
    }).pipe(Effect.provide(stores))
  )

  it.effect("the relay discovers a new partition right after the signal, not at its discovery interval", () =>
    Effect.gen(function* () {
      const control = yield* WakeControl
      const sink = yield* MemorySink.MemorySink
      const fiber = yield* Effect.fork(relayRunning)
      // the first round found nothing; the relay now waits for its interval or a signal
      yield* until(Effect.map(control.waiting, (n) => n === 1))
      yield* elsewhere((yield* OutboxStore).persist([rec("wake-new", "n1")]))
      yield* control.signal("wake-new")
      // discovery rounds brought forward by a signal are at least 250 ms apart
      yield* TestClock.adjust("250 millis")
      yield* until(Effect.map(sink.deliveredIds, (ids) => ids.length === 1))
      expect(yield* sink.deliveredIds).toEqual(["n1"])
      expect(yield* Clock.currentTimeMillis).toBe(250)
      yield* Fiber.interrupt(fiber)
    }).pipe(Effect.provide(Layer.merge(stores, handDriven)))
  )

  it.effect(
    "the relay's discovery waits on its hub alone when the WakeSignal signals through that hub, on the signal too when it does not",
    () =>
      Effect.gen(function* () {
        const run = (p: string, through: "relay's hub" | "another hub") =>
          Effect.gen(function* () {
            const hub = makeHub()
            let waits = 0
            const counted = Effect.zipRight(
              Effect.sync(() => waits++),
              Effect.never
            )
            const signal = Layer.succeed(WakeSignal, {
              awaitWork: () => counted,
              awaitAnyWork: counted,
              awaitWorkWhere: () => counted,
              signalsThrough: through === "relay's hub" ? hub : makeHub()
            })
            const sink = yield* MemorySink.MemorySink
            const fiber = yield* Effect.fork(
              relayRunning.pipe(Effect.provide(signal), Effect.provideService(WakeHub, hub))
            )
            // the first round found nothing; the relay now waits for its interval or a signal
            yield* settle
            const waitsWhileIdle = waits
            yield* elsewhere((yield* OutboxStore).persist([rec(p, `${p}-1`)]))
            // the source's signal, as SqliteWakeSignal gives it: on the hub, for every partition
            hub.signalAll()
            yield* TestClock.adjust("250 millis")
            yield* until(Effect.map(sink.deliveredIds, (ids) => ids.includes(`${p}-1`)))
            yield* Fiber.interrupt(fiber)
            return waitsWhileIdle
          })
        expect(yield* run("through-hub", "relay's hub")).toBe(0)
        expect(yield* run("through-other", "another hub")).toBe(1)
        expect(yield* Clock.currentTimeMillis).toBe(500)
      }).pipe(Effect.provide(stores))
  )
})
