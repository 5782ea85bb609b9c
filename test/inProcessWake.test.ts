/**
 * The in-process wake-up (SPEC §13, issue 28 item 1): a persist through an `OutboxStore` of this process
 * (an enqueue, a dead-letter redrive) ends the idle pause of this process's drainer of that partition at
 * once, on every backend and with no `WakeSignal` in the context; the relay discovers a partition
 * persisted in this process right away. Everything runs on the TestClock with a 10-minute back-off: the
 * clock never moves, so only the wake-up can deliver the record. A persist made as another process would
 * (signalling a hub of its own) still waits for the back-off.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { randomUUID } from "node:crypto"
import { afterAll, inject } from "vitest"
import { DeadLetterEntry } from "../src/domain/DeadLetterEntry.js"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as DynamoDbLeaseStore from "../src/layers/dynamodb/DynamoDbLeaseStore.js"
import * as MemoryDeadLetterStore from "../src/layers/memory/MemoryDeadLetterStore.js"
import * as MemoryLeaseStore from "../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as PostgresLeaseStore from "../src/layers/postgres/PostgresLeaseStore.js"
import * as PostgresOutboxStore from "../src/layers/postgres/PostgresOutboxStore.js"
import * as MemorySink from "../src/layers/sinks/MemorySink.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteLeaseStore from "../src/layers/sqlite/SqliteLeaseStore.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import * as Relay from "../src/programs/Relay.js"
import { DeadLetterStore } from "../src/services/DeadLetterStore.js"
import * as DynamoDb from "../src/services/DynamoDb.js"
import { yieldToEventLoop } from "../src/services/EventLoop.js"
import { LeaseStore } from "../src/services/LeaseStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import type { Sink } from "../src/services/Sink.js"
import { makeHub, WakeHub } from "../src/services/WakeHub.js"
import { outboxTableForFile } from "./support/DynamoOutboxTable.js"
import { makeTestClientConfig } from "./support/DynamoLocal.js"
import { clientLayer, createDatabase } from "./support/PostgresServer.js"
import { idleDrainer as startIdleDrainer } from "./support/IdleDrainer.js"

const OWNER = "in-process-wake"
const dropAll = { onExpired: "drop", onPermanentFailure: "drop", onPoison: "drop" } as const

const rec = (partitionKey: string, id: string) =>
  new NewOutboxRecord({ id, partitionKey, envelopeId: id, bindingId: "b", payload: new Uint8Array([1]) })

const unique = (label: string) => `${label}-${randomUUID().slice(0, 8)}`

/** A persist as another process makes it: it signals a hub this process's drainers do not wait on. */
const elsewhere = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.provideService(effect, WakeHub, makeHub())

/** Waits (in real time: the stores may do I/O; the TestClock never moves) until `check` holds. */
const until = <E, R>(what: string, check: Effect.Effect<boolean, E, R>) =>
  Effect.gen(function* () {
    for (let i = 0; i < 3000; i++) {
      if (yield* check) return
      yield* yieldToEventLoop
      if (i >= 100) yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))
    }
    return yield* Effect.dieMessage(`${what}: never held`)
  })

const delivered = (count: number) =>
  Effect.flatMap(MemorySink.MemorySink, (sink) => Effect.map(sink.deliveredIds, (ids) => ids.length >= count))

/**
 * A drainer of `p` whose idle back-off is 10 minutes, started once its first claim came back empty (so
 * it is in its pause when the test persists).
 */
const idleDrainer = (p: string) =>
  Effect.gen(function* () {
    const fiber = yield* startIdleDrainer(p, OWNER)
    // its first cycle: one claim (nothing there), then the pause
    for (let i = 0; i < 50; i++) yield* yieldToEventLoop
    yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 50)))
    return fiber
  })

type Stores = OutboxStore | LeaseStore | Sink | MemorySink.MemorySink

const sqliteDirectory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-inprocess-wake-"))
afterAll(() => fs.rmSync(sqliteDirectory, { recursive: true, force: true }))
const sqliteFile = () => path.join(sqliteDirectory, `${randomUUID()}.db`)

const postgresUrl = await createDatabase(inject("postgresUrl"), "inprocwake")
const dynamoTable = outboxTableForFile("in-process-wake")
const dynamoClient = DynamoDb.layer(makeTestClientConfig())

const sqliteLayer = () =>
  Layer.mergeAll(SqliteOutboxStore.layer, SqliteLeaseStore.layer, MemorySink.layer).pipe(
    Layer.provideMerge(SqliteDatabase.layer({ filename: sqliteFile() }))
  )

const backends: ReadonlyArray<readonly [string, () => Layer.Layer<Stores, unknown>]> = [
  ["memory", () => Layer.mergeAll(MemoryOutboxStore.layer, MemoryLeaseStore.layer, MemorySink.layer)],
  ["SQLite", sqliteLayer],
  [
    "PostgreSQL",
    () => {
      const schema = unique("w").replace(/-/g, "_")
      return Layer.mergeAll(
        PostgresOutboxStore.layerWith({ schema, notify: false }),
        PostgresLeaseStore.layerWith({ schema }),
        MemorySink.layer
      ).pipe(Layer.provideMerge(clientLayer(postgresUrl)))
    }
  ],
  [
    "DynamoDB",
    () =>
      Layer.mergeAll(
        dynamoTable.makeLayer({}),
        DynamoDbLeaseStore.layerWith({ tableName: dynamoTable.tableName, ensureTable: false }).pipe(
          Layer.provide(dynamoClient)
        ),
        MemorySink.layer
      )
  ]
]

describe("in-process wake-up (SPEC §13)", { timeout: 60_000 }, () => {
  for (const [name, layer] of backends) {
    it.effect(`${name}: a persist in this process ends the idle drainer's 10-minute pause at once`, () =>
      Effect.gen(function* () {
        const p = unique("wake")
        const fiber = yield* idleDrainer(p)
        yield* (yield* OutboxStore).persist([rec(p, `${p}.1`)])
        yield* until("delivered", delivered(1))
        expect(yield* (yield* MemorySink.MemorySink).deliveredIds).toEqual([`${p}.1`])
        expect(yield* Clock.currentTimeMillis).toBe(0)
        yield* Fiber.interrupt(fiber)
      }).pipe(Effect.provide(layer()))
    )
  }

  it.effect("memory: a persist from elsewhere (another hub) still waits for the back-off", () =>
    Effect.gen(function* () {
      const p = unique("elsewhere")
      const fiber = yield* idleDrainer(p)
      yield* elsewhere((yield* OutboxStore).persist([rec(p, `${p}.1`)]))
      for (let i = 0; i < 50; i++) yield* yieldToEventLoop
      expect(yield* (yield* MemorySink.MemorySink).deliveredIds).toEqual([])
      yield* TestClock.adjust("10 minutes")
      yield* until("delivered after the back-off", delivered(1))
      yield* Fiber.interrupt(fiber)
    }).pipe(Effect.provide(Layer.mergeAll(MemoryOutboxStore.layer, MemoryLeaseStore.layer, MemorySink.layer)))
  )

  it.effect("SQLite: a persist inside the caller's transaction is delivered once that transaction commits", () =>
    Effect.gen(function* () {
      const p = unique("tx")
      const sql = yield* SqlClient.SqlClient
      const sink = yield* MemorySink.MemorySink
      const fiber = yield* idleDrainer(p)
      yield* sql.withTransaction(
        Effect.gen(function* () {
          yield* (yield* OutboxStore).persist([rec(p, `${p}.1`)])
          // the woken drainer's claim waits for the connection this transaction holds
          for (let i = 0; i < 50; i++) yield* yieldToEventLoop
          expect(yield* sink.deliveredIds).toEqual([])
        })
      )
      yield* until("delivered after commit", delivered(1))
      expect(yield* Clock.currentTimeMillis).toBe(0)
      yield* Fiber.interrupt(fiber)
    }).pipe(Effect.provide(sqliteLayer()))
  )

  it.effect("memory: redriving a dead letter ends the idle pause of its partition's drainer at once", () =>
    Effect.gen(function* () {
      const p = unique("redrive")
      const dlq = yield* DeadLetterStore
      const fiber = yield* idleDrainer(p)
      yield* dlq.write(
        new DeadLetterEntry({
          id: `${p}.dlq`,
          recordId: `${p}.old`,
          partitionKey: p,
          envelopeId: "e",
          bindingId: "b",
          payload: new Uint8Array([1]),
          headers: {},
          category: "permanent",
          reason: "sink rejected",
          errorCode: "E400",
          lastError: "400 Bad Request",
          attempts: 1,
          failedAt: DateTime.unsafeMake(0)
        })
      )
      const [id] = yield* dlq.redrive([`${p}.dlq`])
      yield* until("redriven record delivered", delivered(1))
      expect(yield* (yield* MemorySink.MemorySink).deliveredIds).toEqual([id])
      expect(yield* Clock.currentTimeMillis).toBe(0)
      yield* Fiber.interrupt(fiber)
    }).pipe(
      Effect.provide(
        Layer.mergeAll(
          MemoryDeadLetterStore.layer.pipe(Layer.provideMerge(MemoryOutboxStore.layer)),
          MemoryLeaseStore.layer,
          MemorySink.layer
        )
      )
    )
  )

  it.effect("the relay discovers a partition persisted in this process without waiting for its interval", () =>
    Effect.gen(function* () {
      const relay = yield* Effect.fork(
        Effect.scoped(
          Effect.zipRight(
            Relay.start({ owner: OWNER, discoveryInterval: "10 minutes", drainer: dropAll }),
            Effect.never
          )
        )
      )
      // the first round found nothing; the relay waits for its interval or a signal
      for (let i = 0; i < 50; i++) yield* yieldToEventLoop
      yield* (yield* OutboxStore).persist([rec("new-partition", "n1")])
      // discovery rounds brought forward by a signal are at least 250 ms apart
      yield* TestClock.adjust("250 millis")
      yield* until("delivered", delivered(1))
      expect(yield* (yield* MemorySink.MemorySink).deliveredIds).toEqual(["n1"])
      expect(yield* Clock.currentTimeMillis).toBe(250)
      yield* Fiber.interrupt(relay)
    }).pipe(Effect.provide(Layer.mergeAll(MemoryOutboxStore.layer, MemoryLeaseStore.layer, MemorySink.layer)))
  )
})
