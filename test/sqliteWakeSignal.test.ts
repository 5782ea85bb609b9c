/**
 * The SQLite wake-up (SPEC §13, issue 28 item 1): `SqliteWakeSignal` notices commits of other connections
 * through `PRAGMA data_version` and signals exactly the partitions that received records (a claim, a
 * complete or a lease write signals nothing); a relay with it delivers a record another OS process commits
 * long before its idle back-off (10 minutes here) and discovers a partition that process created; bad
 * options are refused naming each problem.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as MemorySink from "../src/layers/sinks/MemorySink.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteLeaseStore from "../src/layers/sqlite/SqliteLeaseStore.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import * as SqliteWakeSignal from "../src/layers/sqlite/SqliteWakeSignal.js"
import * as Relay from "../src/programs/Relay.js"
import { LeaseStore } from "../src/services/LeaseStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { WakeSignal } from "../src/services/WakeSignal.js"
import { makeHub, WakeHub, type WakeHubService } from "../src/services/WakeHub.js"

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const workerScript = path.join(projectRoot, "test", "support", "sqlitePersistWorker.ts")
const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-sqlite-wake-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))
const freshFile = () => path.join(directory, `${randomUUID()}.db`)

const rec = (partitionKey: string, id: string) =>
  new NewOutboxRecord({ id, partitionKey, envelopeId: id, bindingId: "b", payload: new Uint8Array([1]) })

const sleep = (millis: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, millis)))

/** Polls `check` every 10 ms for up to `withinMillis` (a bound on the test, not a timing assertion). */
const until = <E, R>(what: string, check: Effect.Effect<boolean, E, R>, withinMillis = 30_000) =>
  Effect.gen(function* () {
    const deadline = Date.now() + withinMillis
    while (!(yield* check)) {
      if (Date.now() > deadline) return yield* Effect.dieMessage(`${what}: never held`)
      yield* sleep(10)
    }
  })

/** A hub that records what it is signalled with. */
const recordingHub = () => {
  const inner = makeHub()
  const signalled: Array<string> = []
  const hub: WakeHubService = {
    ...inner,
    signal: (partitionKey) => {
      signalled.push(partitionKey)
      inner.signal(partitionKey)
    },
    signalAll: () => {
      signalled.push("*")
      inner.signalAll()
    }
  }
  return { hub, signalled }
}

/** Persists one record from another OS process; resolves with `Date.now()` once that process committed. */
const commitFromAnotherProcess = (file: string, partitionKey: string, id: string) =>
  Effect.promise(
    () =>
      new Promise<number>((resolve, reject) => {
        const child = spawn(process.execPath, ["--import", "tsx", workerScript, file, partitionKey, id], {
          cwd: projectRoot,
          stdio: ["ignore", "pipe", "pipe"]
        })
        let stdout = ""
        let stderr = ""
        let committedAt: number | undefined
        child.stdout.on("data", (chunk: Buffer) => {
          stdout += chunk.toString()
          if (committedAt === undefined && stdout.includes("committed")) committedAt = Date.now()
        })
        child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
        child.on("error", reject)
        child.on("close", (code) =>
          code === 0 && committedAt !== undefined
            ? resolve(committedAt)
            : reject(new Error(`persist worker exited ${code}: ${stderr}`))
        )
      })
  )

describe("SqliteWakeSignal", { timeout: 120_000 }, () => {
  it.live("signals the partition another connection persisted to, and nothing for leases, claims or completes", () =>
    Effect.gen(function* () {
      const file = freshFile()
      const { hub, signalled } = recordingHub()
      const other = Layer.mergeAll(SqliteOutboxStore.layer, SqliteLeaseStore.layer).pipe(
        Layer.provideMerge(SqliteDatabase.layer({ filename: file }))
      )
      // the tables exist before the signal reads them
      yield* Effect.provide(Effect.void, other)
      const signal = SqliteWakeSignal.layerWith({ pollInterval: "5 millis" }).pipe(
        Layer.provide(SqliteDatabase.layer({ filename: file }))
      )
      yield* Effect.gen(function* () {
        yield* Effect.gen(function* () {
          const store = yield* OutboxStore
          const leases = yield* LeaseStore
          yield* store.persist([rec("p-1", "r1")])
          yield* until(
            "p-1 signalled",
            Effect.sync(() => signalled.includes("p-1"))
          )
          const lease = yield* leases.acquire("p-1", "owner", "1 minute")
          const batch = yield* store.claim("p-1", lease.token, 10)
          expect(batch.records.map((r) => r.id)).toEqual(["r1"])
          yield* store.complete(["r1"], lease.token)
          yield* leases.renew("p-1", lease.token, "1 minute")
          // several polls of the signal go by
          yield* sleep(200)
          expect(signalled).toEqual(["p-1"])
          yield* store.persist([rec("p-2", "r2")])
          yield* until(
            "p-2 signalled",
            Effect.sync(() => signalled.includes("p-2"))
          )
          expect(signalled).toEqual(["p-1", "p-2"])
        }).pipe(Effect.provide(other))
      }).pipe(Effect.provide(Layer.provide(signal, Layer.succeed(WakeHub, hub))))
    })
  )

  it.live("awaitWorkWhere wakes only for a partition its predicate accepts", () =>
    Effect.gen(function* () {
      const file = freshFile()
      const { hub, signalled } = recordingHub()
      const other = SqliteOutboxStore.layer.pipe(Layer.provideMerge(SqliteDatabase.layer({ filename: file })))
      yield* Effect.provide(Effect.void, other)
      const signal = SqliteWakeSignal.layerWith({ pollInterval: "5 millis" }).pipe(
        Layer.provide(SqliteDatabase.layer({ filename: file }))
      )
      yield* Effect.gen(function* () {
        const wake = yield* WakeSignal
        const where = wake.awaitWorkWhere
        expect(where).toBeDefined()
        if (where === undefined) return
        const waiter = yield* Effect.fork(where((pk) => pk === "p-other"))
        yield* Effect.gen(function* () {
          const store = yield* OutboxStore
          yield* store.persist([rec("p-held", "h1")])
          yield* until(
            "p-held signalled",
            Effect.sync(() => signalled.includes("p-held"))
          )
          expect(yield* Fiber.poll(waiter)).toEqual(Option.none())
          yield* store.persist([rec("p-other", "o1")])
          yield* Fiber.join(waiter)
          expect(signalled).toEqual(["p-held", "p-other"])
        }).pipe(Effect.provide(other))
      }).pipe(Effect.provide(Layer.provide(signal, Layer.succeed(WakeHub, hub))))
    })
  )

  it.live(
    "a relay delivers records another OS process commits long before its 10-minute back-off, in a new partition too",
    () =>
      Effect.gen(function* () {
        const file = freshFile()
        const database = SqliteDatabase.layer({ filename: file })
        const stores = Layer.mergeAll(SqliteOutboxStore.layer, SqliteLeaseStore.layer, MemorySink.layer)
        const layer = Layer.mergeAll(stores, SqliteWakeSignal.layer).pipe(Layer.provideMerge(database))
        yield* Effect.gen(function* () {
          const sink = yield* MemorySink.MemorySink
          yield* Relay.start({
            owner: "sqlite-wake",
            discoveryInterval: "10 minutes",
            drainer: {
              idleBackoffMin: "10 minutes",
              idleBackoffMax: "10 minutes",
              onExpired: "drop",
              onPermanentFailure: "drop",
              onPoison: "drop"
            }
          })
          const deliveredWithin = (id: string, committedAt: number) =>
            Effect.gen(function* () {
              yield* until(
                `${id} delivered`,
                Effect.map(sink.deliveredIds, (ids) => ids.includes(id))
              )
              // loosely: far below the back-off, whatever the machine's load
              expect(Date.now() - committedAt).toBeLessThan(30_000)
            })
          // a partition the relay has not seen: discovery is brought forward by the signal
          const first = yield* commitFromAnotherProcess(file, "mp-wake", "a1")
          yield* deliveredWithin("a1", first)
          // the drainer of that partition is idle now, in a 10-minute pause
          yield* sleep(300)
          const second = yield* commitFromAnotherProcess(file, "mp-wake", "a2")
          yield* deliveredWithin("a2", second)
          expect(yield* sink.deliveredIds).toEqual(["a1", "a2"])
        }).pipe(Effect.scoped, Effect.provide(layer))
      })
  )

  it.effect("refuses a pollInterval below 1 ms and a bad tablePrefix, naming both", () =>
    Effect.gen(function* () {
      const error = yield* SqliteWakeSignal.make({ pollInterval: 0, tablePrefix: "bad-prefix" }).pipe(
        Effect.scoped,
        Effect.provide(SqliteDatabase.layer({ filename: ":memory:" })),
        Effect.flip
      )
      expect(error._tag).toBe("InvalidConfiguration")
      expect(error.message).toContain("pollInterval")
      expect(error.message).toContain("tablePrefix")
    })
  )
})
