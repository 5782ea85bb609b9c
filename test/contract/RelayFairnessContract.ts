/**
 * The relay's scheduling contract (SPEC §6, §4), written once and run per backend: with fewer slots than
 * partitions every partition with work is still served, later records on any partition are delivered,
 * several relays share the partitions, and per-key order holds (R-CLAIM-5). Runs on the TestClock: the
 * bounds are simulated time; real I/O gets a few real milliseconds between clock steps.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import { NewOutboxRecord } from "../../src/domain/OutboxRecord.js"
import * as MemorySink from "../../src/layers/sinks/MemorySink.js"
import * as Relay from "../../src/programs/Relay.js"
import { LeaseStore } from "../../src/services/LeaseStore.js"
import { OutboxStore } from "../../src/services/OutboxStore.js"
import { Sink } from "../../src/services/Sink.js"

const dropAll = { onExpired: "drop", onPermanentFailure: "drop", onPoison: "drop" } as const

/** Drainer settings that keep idle pauses short in simulated time. */
const drainer = { ...dropAll, idleBackoffMax: "1 second", finalDrainBudget: "1 second" } as const

/**
 * Sizes per backend (DynamoDB Local runs ~290 transactions/s: keep its histories small).
 */
export interface FairnessSizes {
  /** Partitions of the two-relay test. */
  readonly sharedPartitions: number
  /** Generated histories of the property test. */
  readonly histories: number
  /**
   * Real milliseconds between two TestClock steps of the two-relay test (default 3): a server backend
   * whose lease and claim round trips take longer than a few milliseconds needs more, or leases expire in
   * simulated time while their renewals are still on the wire.
   */
  readonly realPauseMillis?: number
}

/** A record of a partition; `n` orders it (id, envelope and payload carry it). */
export const record = (prefix: string, partitionKey: string, n: number, orderingKey?: string) =>
  new NewOutboxRecord({
    id: `${prefix}:${partitionKey}:${String(n).padStart(5, "0")}`,
    partitionKey,
    envelopeId: `env-${n}`,
    bindingId: "b",
    payload: new Uint8Array([n % 256]),
    ...(orderingKey !== undefined ? { orderingKey } : {})
  })

/** A real pause of a few milliseconds, so that real I/O completes between two clock steps. */
const pauseOf = (millis: number) => Effect.promise<void>(() => new Promise((resolve) => setTimeout(resolve, millis)))
const realPause = pauseOf(3)

/**
 * Steps the TestClock by `step` (a real pause after each) until `check` holds; dies when it does not
 * within `bound` of simulated time. Returns the simulated milliseconds it took.
 */
export const within = <E, R>(
  what: string,
  check: Effect.Effect<boolean, E, R>,
  bound: Duration.DurationInput,
  step: Duration.DurationInput = "100 millis",
  pause: Effect.Effect<void> = realPause
) =>
  Effect.gen(function* () {
    const stepMillis = Duration.toMillis(step)
    const steps = Math.ceil(Duration.toMillis(bound) / stepMillis)
    for (let i = 0; i <= steps; i++) {
      if (yield* check) return i * stepMillis
      yield* TestClock.adjust(step)
      yield* pause
    }
    return yield* Effect.dieMessage(`not within ${Duration.format(Duration.decode(bound))} (simulated): ${what}`)
  })

/** Starts a relay in a fiber of its own with its own sink; its scope closes when the fiber is interrupted. */
export const startRelay = (options: Omit<Relay.RelayOptions, "drainer">, sink: MemorySink.MemorySinkService) =>
  Effect.gen(function* () {
    const handle = yield* Deferred.make<Relay.RelayHandle>()
    const fiber = yield* Effect.fork(
      Effect.scoped(
        Relay.start({ ...options, drainer }).pipe(
          Effect.tap((h) => Deferred.succeed(handle, h)),
          Effect.zipRight(Effect.never)
        )
      ).pipe(Effect.provideService(Sink, sink.sink), Effect.orDie)
    )
    return { fiber, handle: yield* Deferred.await(handle) }
  })

const deliveredOf = (sinks: ReadonlyArray<MemorySink.MemorySinkService>, prefix: string) =>
  Effect.map(
    Effect.forEach(sinks, (s) => s.deliveries),
    (all) => all.flat().filter((d) => d.record.id.startsWith(`${prefix}:`))
  )

const distinctDelivered = (sinks: ReadonlyArray<MemorySink.MemorySinkService>, prefix: string) =>
  Effect.map(deliveredOf(sinks, prefix), (ds) => new Set(ds.map((d) => d.record.id)).size)

/** Every lease of these partitions is released (or at least not live). */
const noLiveLease = (partitions: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const leases = yield* LeaseStore
    for (const p of partitions) {
      const current = yield* Effect.either(leases.current(p))
      expect(Either.isLeft(current) && current.left._tag).toBe("LeaseNotFound")
    }
  })

/**
 * The suite on one backend. `makeLayer` builds fresh stores (one outbox store and one lease store shared
 * by every relay of a test, as relays of several processes share one database).
 */
export const relayFairnessContract = <E>(
  name: string,
  makeLayer: () => Layer.Layer<OutboxStore | LeaseStore, E>,
  sizes: FairnessSizes
) =>
  describe(`Relay scheduling (${name})`, () => {
    it.effect(
      "maxPartitions 3 delivers every record of 10 partitions, and later records on any of them (SPEC §6)",
      () =>
        Effect.gen(function* () {
          const store = yield* OutboxStore
          const sink = yield* MemorySink.make()
          const partitions = Array.from({ length: 10 }, (_, i) => `f10-${i}`)
          yield* store.persist(partitions.flatMap((p) => [record("a", p, 1), record("a", p, 2, "K")]))
          const relay = yield* startRelay({ owner: "fair-1", maxPartitions: 3, discoveryInterval: "1 second" }, sink)
          let most = 0
          yield* within(
            "20 records of 10 partitions delivered",
            Effect.gen(function* () {
              most = Math.max(most, (yield* relay.handle.partitions).length)
              return (yield* distinctDelivered([sink], "a")) === 20
            }),
            "60 seconds"
          )
          expect(most).toBeLessThanOrEqual(3)
          // later records, on partitions that were drained first and last
          yield* store.persist(partitions.map((p) => record("b", p, 3, "K")))
          yield* within(
            "10 later records delivered",
            Effect.gen(function* () {
              most = Math.max(most, (yield* relay.handle.partitions).length)
              return (yield* distinctDelivered([sink], "b")) === 10
            }),
            "60 seconds"
          )
          expect(most).toBeLessThanOrEqual(3)
          // a listing may show a partition that just emptied (R-READ-3) until a claim finds it empty
          yield* within(
            "no partition left waiting",
            Effect.map(relay.handle.unleased, (u) => u.partitions === 0),
            "30 seconds"
          )
          yield* Fiber.interrupt(relay.fiber)
          yield* noLiveLease(partitions)
        }).pipe(Effect.provide(makeLayer())),
      180_000
    )

    it.effect(
      `${sizes.sharedPartitions} partitions with 2 slots on each of two relays all drain; per-key order holds`,
      () =>
        Effect.gen(function* () {
          const store = yield* OutboxStore
          const sinkA = yield* MemorySink.make()
          const sinkB = yield* MemorySink.make()
          const sinks = [sinkA, sinkB]
          const partitions = Array.from({ length: sizes.sharedPartitions }, (_, i) => `two-${i}`)
          yield* store.persist(
            partitions.flatMap((p, i) => [record("c", p, 1, "K"), record("c", p, 2, i % 2 ? "K" : "L")])
          )
          const relays = [
            yield* startRelay({ owner: "fair-A", maxPartitions: 2, discoveryInterval: "1 second" }, sinkA),
            yield* startRelay({ owner: "fair-B", maxPartitions: 2, discoveryInterval: "1 second" }, sinkB)
          ]
          yield* within(
            "every record delivered",
            Effect.map(distinctDelivered(sinks, "c"), (n) => n === 2 * partitions.length),
            "600 seconds",
            "200 millis",
            pauseOf(sizes.realPauseMillis ?? 3)
          )
          const delivered = yield* deliveredOf(sinks, "c")
          // both relays served partitions
          for (const sink of sinks) expect((yield* sink.deliveries).length).toBeGreaterThan(0)
          for (const p of partitions.filter((_, i) => i % 2 === 1)) {
            const order = delivered.filter((d) => d.record.partitionKey === p).map((d) => d.record.id)
            expect(order.indexOf(`c:${p}:00001`)).toBeLessThan(order.lastIndexOf(`c:${p}:00002`))
          }
          yield* Effect.forEach(relays, (r) => Fiber.interrupt(r.fiber))
          yield* noLiveLease(partitions)
        }).pipe(Effect.provide(makeLayer())),
      180_000
    )

    it.effect(
      "generated histories with more partitions than slots: every record delivered within the bound, per-key order held (R-CLAIM-5)",
      () =>
        Effect.gen(function* () {
          const store = yield* OutboxStore
          const history = FastCheck.record({
            slots: FastCheck.integer({ min: 1, max: 3 }),
            extra: FastCheck.integer({ min: 1, max: 8 }),
            waves: FastCheck.array(
              FastCheck.record({
                gapMillis: FastCheck.integer({ min: 0, max: 3000 }),
                records: FastCheck.array(
                  FastCheck.record({
                    partition: FastCheck.nat(11),
                    key: FastCheck.option(FastCheck.constantFrom("x", "y"), { nil: undefined })
                  }),
                  { minLength: 1, maxLength: 12 }
                )
              }),
              { minLength: 1, maxLength: 3 }
            )
          })
          const samples = FastCheck.sample(history, { numRuns: sizes.histories, seed: 31 })
          for (const [h, { slots, extra, waves }] of samples.entries()) {
            const prefix = `h${h}`
            const partitionCount = slots + extra
            const sink = yield* MemorySink.make()
            const relay = yield* startRelay(
              { owner: `fair-h${h}`, maxPartitions: slots, discoveryInterval: "1 second" },
              sink
            )
            let n = 0
            for (const wave of waves) {
              yield* TestClock.adjust(Duration.millis(wave.gapMillis))
              yield* store.persist(
                wave.records.map((r) => {
                  n += 1
                  return record(prefix, `${prefix}-p${r.partition % partitionCount}`, n, r.key)
                })
              )
            }
            // the bound: a turn per partition, each well under the simulated minute
            yield* within(
              `history ${h}: ${n} records over ${partitionCount} partitions with ${slots} slots`,
              Effect.map(distinctDelivered([sink], prefix), (count) => count === n),
              "120 seconds"
            )
            const delivered = yield* deliveredOf([sink], prefix)
            const byKey = new Map<string, Array<string>>()
            for (const d of delivered) {
              if (d.record.orderingKey._tag === "None") continue
              const group = `${d.record.partitionKey}/${d.record.orderingKey.value}`
              const ids = byKey.get(group) ?? []
              // a redelivery repeats an id already in order; only first deliveries must ascend
              if (!ids.includes(d.record.id)) ids.push(d.record.id)
              byKey.set(group, ids)
            }
            for (const [group, ids] of byKey) expect([group, ids]).toEqual([group, [...ids].sort()])
            yield* Fiber.interrupt(relay.fiber)
          }
        }).pipe(Effect.provide(makeLayer()))
    )
  })
