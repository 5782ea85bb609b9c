/**
 * The PostgreSQL wake-up (SPEC §3.4): a committed persist `NOTIFY`s its partition and the wake signal
 * completes that partition's waiters; a rolled-back persist signals nothing; with the listening
 * connection killed (notifications lost) a relay still drains everything by polling; and the wake signal
 * listens again on a new connection, so notifications wake an idle relay again; its checks of the listening
 * connection never cancel a query the application runs on the same pool.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import { inject } from "vitest"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as PostgresLeaseStore from "../src/layers/postgres/PostgresLeaseStore.js"
import * as PostgresOutboxStore from "../src/layers/postgres/PostgresOutboxStore.js"
import * as PostgresWakeSignal from "../src/layers/postgres/PostgresWakeSignal.js"
import * as MemorySink from "../src/layers/sinks/MemorySink.js"
import * as Relay from "../src/programs/Relay.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { WakeSignal } from "../src/services/WakeSignal.js"
import { clientLayer, createDatabase } from "./support/PostgresServer.js"

const url = await createDatabase(inject("postgresUrl"), "wake")

let counter = 0
const record = (pk: string) =>
  new NewOutboxRecord({
    id: `${pk}.${++counter}`,
    partitionKey: pk,
    envelopeId: `e${counter}`,
    bindingId: "b",
    payload: new Uint8Array([counter % 256])
  })

const layer = (schema: string, wake: PostgresWakeSignal.PostgresWakeSignalOptions = {}) =>
  Layer.mergeAll(PostgresOutboxStore.layerWith({ schema }), PostgresWakeSignal.layerWith({ ...wake, schema })).pipe(
    Layer.provideMerge(clientLayer(url))
  )

/**
 * The backends of this database listening on a channel of `schema` (their last statement was a `LISTEN` of
 * one), by pid.
 */
const listenersOf = (schema: string) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => sql<{ pid: number }>`SELECT pid FROM pg_stat_activity
    WHERE datname = current_database() AND query LIKE ${`LISTEN "${schema}.%`} ORDER BY pid`
  ).pipe(Effect.map((rows) => rows.map((row) => row.pid)))

/** Persists to `pk` until `waiter` completes (notifications sent before LISTEN is up are lost by design). */
const persistUntilWoken = (pk: string, waiter: Fiber.RuntimeFiber<void>) =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    for (let attempt = 0; attempt < 50; attempt++) {
      yield* store.persist([record(pk)])
      const woken = yield* Fiber.join(waiter).pipe(Effect.timeoutOption(Duration.millis(200)))
      if (Option.isSome(woken)) return attempt
    }
    return yield* Effect.fail(`no wake-up for ${pk}`)
  })

describe("PostgresWakeSignal", () => {
  it.live("a committed persist wakes its partition's waiters and awaitAnyWork, not other partitions'", () =>
    Effect.gen(function* () {
      const wake = yield* WakeSignal
      const store = yield* OutboxStore
      const sql = yield* SqlClient.SqlClient
      const other = yield* Effect.fork(wake.awaitWork("w-other"))
      const mine = yield* Effect.fork(wake.awaitWork("w-1"))
      yield* persistUntilWoken("w-1", mine)
      expect(yield* Fiber.poll(other)).toEqual(Option.none())
      // LISTEN is up now: any-work waiters wake on the next commit, and a rolled-back persist wakes nobody
      const rolledBack = yield* Effect.fork(wake.awaitWork("w-rolled-back"))
      const failed = yield* sql
        .withTransaction(Effect.zipRight(store.persist([record("w-rolled-back")]), Effect.fail("business failure")))
        .pipe(Effect.flip)
      expect(failed).toBe("business failure")
      const any = yield* Effect.fork(wake.awaitAnyWork)
      const next = yield* Effect.fork(wake.awaitWork("w-2"))
      yield* store.persist([record("w-2")])
      yield* Fiber.join(next)
      yield* Fiber.join(any)
      // notifications arrive in commit order: w-2's came, so a w-rolled-back one would have come before it
      expect(yield* Fiber.poll(rolledBack)).toEqual(Option.none())
      expect(yield* Fiber.poll(other)).toEqual(Option.none())
      yield* Fiber.interrupt(other)
      yield* Fiber.interrupt(rolledBack)
    }).pipe(Effect.provide(layer("wake_basic")))
  )

  it.live("awaitWorkWhere wakes only for a partition its predicate accepts", () =>
    Effect.gen(function* () {
      const wake = yield* WakeSignal
      const store = yield* OutboxStore
      const where = wake.awaitWorkWhere
      expect(where).toBeDefined()
      if (where === undefined) return
      const warm = yield* Effect.fork(wake.awaitWork("where-warm"))
      yield* persistUntilWoken("where-warm", warm)
      const other = yield* Effect.fork(where((pk) => pk === "where-other"))
      yield* store.persist([record("where-held")])
      // notifications come in commit order: once the marker's arrived, where-held's was seen and ignored
      const marker = yield* Effect.fork(wake.awaitWork("where-marker"))
      yield* store.persist([record("where-marker")])
      yield* Fiber.join(marker)
      expect(yield* Fiber.poll(other)).toEqual(Option.none())
      yield* store.persist([record("where-other")])
      yield* Fiber.join(other)
    }).pipe(Effect.provide(layer("wake_where")))
  )

  it.live("a relay runs no discovery round for notifications of a partition it drains already", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const sink = yield* MemorySink.MemorySink
      let listings = 0
      const counting = OutboxStore.of({
        ...store,
        listPartitions: Stream.suspend(() => {
          listings += 1
          return store.listPartitions
        })
      })
      const warm = yield* Effect.fork(Effect.flatMap(WakeSignal, (wake) => wake.awaitWork("held-0")))
      const persisted = (yield* persistUntilWoken("held-0", warm)) + 1
      const delivered = (n: number) =>
        Effect.repeat(sink.deliveredIds, {
          until: (ids) => ids.length >= n,
          schedule: Schedule.spaced("20 millis")
        }).pipe(Effect.timeout("20 seconds"))
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Relay.start({
            owner: "relay-held",
            discoveryInterval: "1 hour",
            drainer: { idleBackoffMax: "1 hour", onExpired: "drop", onPermanentFailure: "drop", onPoison: "drop" }
          }).pipe(Effect.provideService(OutboxStore, counting))
          yield* delivered(persisted)
          // past the 250 ms floor between rounds: a signal now could start one at once
          yield* Effect.sleep("300 millis")
          const before = listings
          // every persist in the held partition is delivered through its drainer's own wake-up, with no listing
          for (let i = 1; i <= 5; i++) {
            yield* store.persist([record("held-0")])
            yield* delivered(persisted + i)
            yield* Effect.sleep("300 millis")
          }
          expect(listings).toBe(before)
          // a persist in a partition it does not drain yet starts a round at once
          yield* store.persist([record("held-new")])
          yield* delivered(persisted + 6)
          expect(listings).toBeGreaterThan(before)
        })
      )
    }).pipe(
      Effect.provide(
        Layer.mergeAll(layer("wake_held"), MemorySink.layer).pipe(
          Layer.provideMerge(
            PostgresLeaseStore.layerWith({ schema: "wake_held" }).pipe(Layer.provide(clientLayer(url)))
          )
        )
      )
    )
  )

  it.live(
    "with the listening connection killed (notifications lost), a relay still drains every record by polling",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const store = yield* OutboxStore
        const wake = yield* WakeSignal
        const sink = yield* MemorySink.MemorySink
        const waiter = yield* Effect.fork(wake.awaitWork("lost-0"))
        yield* persistUntilWoken("lost-0", waiter)
        const listeners = yield* sql<{ pid: number }>`SELECT pid FROM pg_stat_activity
        WHERE datname = current_database() AND query LIKE 'LISTEN%'`
        expect(listeners.length).toBeGreaterThan(0)
        for (const { pid } of listeners) yield* sql`SELECT pg_terminate_backend(${pid})`
        const persisted = new Set<string>()
        for (const pk of ["lost-1", "lost-2", "lost-3"]) {
          for (let i = 0; i < 5; i++) {
            const report = yield* store.persist([record(pk)])
            for (const id of report.persisted) persisted.add(id)
          }
        }
        const stillWaiting = yield* Effect.fork(wake.awaitWork("lost-1"))
        yield* Effect.scoped(
          Effect.gen(function* () {
            yield* Relay.start({
              owner: "relay-polling",
              discoveryInterval: "100 millis",
              drainer: {
                idleBackoffMin: "20 millis",
                idleBackoffMax: "100 millis",
                onExpired: "drop",
                onPermanentFailure: "drop",
                onPoison: "drop"
              }
            })
            yield* Effect.repeat(sink.deliveredIds, {
              until: (ids) => [...persisted].every((id) => ids.includes(id)),
              schedule: Schedule.spaced("50 millis")
            }).pipe(Effect.timeoutFail({ duration: "30 seconds", onTimeout: () => "relay did not drain" }))
          })
        )
        for (const pk of ["lost-1", "lost-2", "lost-3"]) expect(yield* store.countPending(pk)).toBe(0)
        // the dead listener delivered nothing
        expect(yield* Fiber.poll(stillWaiting)).toEqual(Option.none())
        yield* Fiber.interrupt(stillWaiting)
      }).pipe(
        Effect.provide(
          Layer.mergeAll(layer("wake_lost"), MemorySink.layer).pipe(
            Layer.provideMerge(
              PostgresLeaseStore.layerWith({ schema: "wake_lost" }).pipe(Layer.provide(clientLayer(url)))
            )
          )
        )
      )
  )

  it.live(
    "after the listening connection is terminated, the signal listens again on a new one: NOTIFY wakes an idle relay",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const store = yield* OutboxStore
        const sink = yield* MemorySink.MemorySink
        /** Persists one record at a time until the relay delivers one: only a notification can wake it. */
        const persistUntilDelivered = (pk: string) =>
          Effect.gen(function* () {
            for (let attempt = 0; attempt < 100; attempt++) {
              const report = yield* store.persist([record(pk)])
              const delivered = yield* Effect.repeat(sink.deliveredIds, {
                until: (ids) => report.persisted.some((id) => ids.includes(id)),
                schedule: Schedule.spaced("20 millis")
              }).pipe(Effect.timeoutOption(Duration.millis(500)))
              if (Option.isSome(delivered)) return attempt
            }
            return yield* Effect.fail(`no delivery in ${pk} woken by a notification`)
          })
        yield* Effect.scoped(
          Effect.gen(function* () {
            // discovery and idle back-off far beyond the test: the relay drains only when notified
            yield* Relay.start({
              owner: "relay-notified",
              discoveryInterval: "1 hour",
              drainer: {
                idleBackoffMin: "1 hour",
                idleBackoffMax: "1 hour",
                onExpired: "drop",
                onPermanentFailure: "drop",
                onPoison: "drop"
              }
            })
            yield* persistUntilDelivered("again-0")
            const killed = yield* listenersOf("wake_again")
            expect(killed.length).toBeGreaterThan(0)
            for (const pid of killed) yield* sql`SELECT pg_terminate_backend(${pid})`
            yield* persistUntilDelivered("again-0")
            // woken through a new listening connection
            const now = yield* listenersOf("wake_again").pipe(
              Effect.filterOrFail(
                (pids) => pids.length > 0,
                () => "no listening connection"
              ),
              Effect.retry({ schedule: Schedule.spaced("20 millis"), times: 500 })
            )
            expect(now.filter((pid) => killed.includes(pid))).toEqual([])
          })
        )
        expect(yield* store.countPending("again-0")).toBe(0)
      }).pipe(
        Effect.provide(
          Layer.mergeAll(layer("wake_again", { checkInterval: "200 millis" }), MemorySink.layer).pipe(
            Layer.provideMerge(
              PostgresLeaseStore.layerWith({ schema: "wake_again" }).pipe(Layer.provide(clientLayer(url)))
            )
          )
        )
      ),
    60_000
  )

  it.effect("a checkInterval below 1 ms is InvalidConfiguration", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        Effect.scoped(PostgresWakeSignal.make({ schema: "wake_config", checkInterval: "0 millis" }))
      )
      expect(error._tag).toBe("InvalidConfiguration")
      expect(error.problems).toEqual(["checkInterval must be a finite duration of at least 1 millisecond"])
    }).pipe(Effect.provide(clientLayer(url)))
  )

  it.live("its checks never cancel a query of the application on the shared pool", () =>
    Effect.gen(function* () {
      const wake = yield* WakeSignal
      const any = yield* Effect.fork(wake.awaitAnyWork)
      const sql = yield* SqlClient.SqlClient
      // a check's answer arrives as its ping's query returns; a ping interrupted then must not be cancelled on
      // the server, where the cancel would reach whatever query the pool runs on that connection next
      const failures: Array<string> = []
      const query = sql`SELECT pg_sleep(0.002)`.pipe(
        Effect.catchAll((error) =>
          Effect.sync(() => {
            failures.push(String(error.cause ?? error.message))
          })
        )
      )
      const started = yield* Clock.currentTimeMillis
      const loop = Effect.repeat(query, {
        while: () => Effect.map(Clock.currentTimeMillis, (now) => now - started < 3_000)
      })
      yield* Effect.all([loop, loop, loop, loop, loop, loop], { concurrency: "unbounded", discard: true })
      expect(failures).toEqual([])
      expect(yield* Fiber.poll(any)).toEqual(Option.none())
      yield* Fiber.interrupt(any)
    }).pipe(Effect.provide(layer("wake_cancel", { checkInterval: "50 millis" })))
  )

  it.live("while its connection is healthy, the checks keep the same listening backend and wake no waiter", () =>
    Effect.gen(function* () {
      const wake = yield* WakeSignal
      const any = yield* Effect.fork(wake.awaitAnyWork)
      const first = yield* listenersOf("wake_healthy").pipe(
        Effect.filterOrFail(
          (pids) => pids.length > 0,
          () => "no listening connection"
        ),
        Effect.retry({ schedule: Schedule.spaced("20 millis"), times: 500 })
      )
      // several checks (each a ping through the listening connection)
      yield* Effect.sleep("1 second")
      expect(yield* listenersOf("wake_healthy")).toEqual(first)
      expect(yield* Fiber.poll(any)).toEqual(Option.none())
      yield* Fiber.interrupt(any)
    }).pipe(Effect.provide(layer("wake_healthy", { checkInterval: "200 millis" })))
  )
})
