/**
 * Delivery latency after idle (SPEC §13, issue 28 item 2): per backend, a relay in this process sits idle
 * for `--idle` milliseconds before each record; a second OS process (bench/latencyProducer.ts) commits
 * the record; the relay's sink notes when it is handed the record. Commit (the producer's clock when its
 * persist returned) → delivery, p50/p99/max over `--records` records; the persist's own time is reported
 * beside it. Memory has no second process: its
 * producer persists in this process. Relays run with the library's defaults and their backend's wake-up:
 * `SqliteWakeSignal` (5 ms `PRAGMA data_version` poll), `PostgresWakeSignal` (`LISTEN/NOTIFY`), the
 * in-process `WakeHub` for memory; DynamoDB has none and polls with the 1 s idle bound the CLI uses.
 *
 * The peer users compare with first, `pg-transactional-outbox` (pinned in bench/peer, installed on demand),
 * is measured the same way beside PostgreSQL (backend `peer`): its logical-replication listener on a server
 * with `wal_level=logical`, its producer in a second process.
 *
 * Through the command line (backends `cli-sqlite`, `cli-postgres`): the bundled CLI's `relay stdout` with its
 * defaults runs as a process of its own; the same producer process commits each record; delivery is when
 * this process reads the record's JSON line from the relay's stdout (a pipe: one more hop than a sink).
 *
 * Also measured: the CPU the SQLite wake signal costs while idle (its poll alone, for `--cpu-seconds`),
 * and the DynamoDB requests an idle relay of one partition makes per hour (counted for `--dynamo-idle`
 * seconds, scaled).
 *
 * Usage: `npm run bench -- latency [--quick]`, or directly `node --import tsx bench/latency.ts
 * [--records=200] [--idle=10000] [--backends=memory,sqlite,postgres,peer,dynamodb,cli-sqlite,cli-postgres] [--together]`. The
 * defaults are the issue's method (200 records, 10 s idle: about 35 minutes per backend); `--quick` is
 * shorter. `--together` runs the backends at once, on one schedule: every backend commits a record once a
 * period (`--idle` + 1.5 s), the backends a fraction of the period apart, so no two records are in flight
 * together and each relay is idle at least `--idle` before each of its records (as long as its previous
 * delivery took under 1.5 s) — the issue's method for every backend in about 40 minutes instead of three
 * hours. Writes bench/results/latency.json; with `--merge`, the backends measured replace only their own entries
 * in it, each marked with its own run (date, load, method, schedule), and the rest of the file stays as it was —
 * for re-measuring some backends alone, away from the others' load (without a results file, the run is written
 * whole).
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Redacted from "effect/Redacted"
import { type ChildProcess, spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as readline from "node:readline"
import { fileURLToPath } from "node:url"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as DynamoDbLeaseStore from "../src/layers/dynamodb/DynamoDbLeaseStore.js"
import * as DynamoDbOutboxStore from "../src/layers/dynamodb/DynamoDbOutboxStore.js"
import * as MemoryLeaseStore from "../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as PostgresLeaseStore from "../src/layers/postgres/PostgresLeaseStore.js"
import * as PostgresOutboxStore from "../src/layers/postgres/PostgresOutboxStore.js"
import * as PostgresWakeSignal from "../src/layers/postgres/PostgresWakeSignal.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteLeaseStore from "../src/layers/sqlite/SqliteLeaseStore.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import * as SqliteWakeSignal from "../src/layers/sqlite/SqliteWakeSignal.js"
import * as Relay from "../src/programs/Relay.js"
import * as DynamoDb from "../src/services/DynamoDb.js"
import type { LeaseStore } from "../src/services/LeaseStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { Sink } from "../src/services/Sink.js"
import * as Faulty from "../test/support/FaultyDynamoDb.js"
import { startDynamoLocal } from "../test/support/globalSetup.js"
import { createDatabase, startPostgres } from "../test/support/PostgresServer.js"
import { buildCli } from "../test/support/CliBundle.js"
import { baseEnv } from "../test/support/CliProcess.js"
import * as Peer from "./Peer.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const args = process.argv.slice(2)
const quick = args.includes("--quick")
const flag = (name: string): string | undefined => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
/** Records per backend and idle time before each: the issue's method unless `--records`/`--idle` say otherwise. */
const records = Number(flag("records") ?? (quick ? 30 : 200))
const idleMillis = Number(flag("idle") ?? (quick ? 500 : 10_000))
const backends = (flag("backends") ?? "memory,sqlite,postgres,peer,dynamodb,cli-sqlite,cli-postgres").split(",")
const cpuSeconds = quick ? 3 : 10
const dynamoIdleSeconds = quick ? 10 : 30
const dynamoIdleMax = Duration.seconds(1)
const partitionKey = "latency"
const together = args.includes("--together")
/** `--merge`: the measured backends replace their own entries in the existing results file (see the module doc). */
const merge = args.includes("--merge")
/** `--together`: one record per backend per period, the backends `period / backends` apart. */
const periodMillis = idleMillis + 1500

const now = (): number => performance.timeOrigin + performance.now()
const progress = (text: string): void => console.log(`… ${text}`)

const percentile = (values: ReadonlyArray<number>, p: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0
}
const round = (n: number): number => Math.round(n * 100) / 100

const sleep = (millis: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.max(0, millis)))

/** `--together`: the common start of the schedule, set once every backend is ready for its first record. */
let scheduleStart: number | undefined
const readyBackends = new Set<string>()
const allReady: Array<() => void> = []

/** Waits until every backend of the run is ready (only with `--together`). */
const ready = (backend: string): Promise<void> => {
  if (!together) return Promise.resolve()
  readyBackends.add(backend)
  if (readyBackends.size < backends.length) return new Promise((resolve) => allReady.push(resolve))
  scheduleStart = now() + 1000
  for (const resolve of allReady.splice(0)) resolve()
  return Promise.resolve()
}

/** Waits before record `i` of `backend`: `--idle` alone, or until its time on the common schedule. */
const waitTurn = (backend: string, i: number): Promise<void> => {
  if (!together || scheduleStart === undefined) return sleep(idleMillis)
  const offset = (backends.indexOf(backend) * periodMillis) / backends.length
  return sleep(scheduleStart + i * periodMillis + offset - now())
}

interface Latency {
  readonly records: number
  readonly idleMillis: number
  readonly p50Millis: number
  readonly p99Millis: number
  readonly maxMillis: number
  readonly persistP50Millis?: number
}

const summary = (samples: ReadonlyArray<number>, persisted: ReadonlyArray<number>): Latency => {
  return {
    records: samples.length,
    idleMillis,
    p50Millis: round(percentile(samples, 50)),
    p99Millis: round(percentile(samples, 99)),
    maxMillis: round(percentile(samples, 100)),
    ...(persisted.length > 0 ? { persistP50Millis: round(percentile(persisted, 50)) } : {})
  }
}

/** A sink that notes when each record reaches it. */
const timingSink = () => {
  const deliveredAt = new Map<string, number>()
  const waiters = new Map<string, () => void>()
  const sink = Sink.of({
    send: (record) =>
      Effect.sync(() => {
        deliveredAt.set(record.id, now())
        waiters.get(record.id)?.()
      })
  })
  const delivered = (id: string): Promise<number> =>
    new Promise((resolve) => {
      const at = deliveredAt.get(id)
      if (at !== undefined) return resolve(at)
      waiters.set(id, () => resolve(deliveredAt.get(id) ?? now()))
    })
  return { sink, delivered }
}

/** The producer process: sends `<pk> <id>` lines, reads `<id> <time>` answers; notes each persist's time. */
const producer = async (argv: ReadonlyArray<string>, persistMillis: Array<number>, script = "latencyProducer.ts") => {
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", path.join(here, script), ...argv], {
    stdio: ["pipe", "pipe", "inherit"]
  })
  const pending: Array<(line: string) => void> = []
  const early: Array<string> = []
  if (child.stdout === null || child.stdin === null) throw new Error("producer without pipes")
  readline.createInterface({ input: child.stdout }).on("line", (line) => {
    const next = pending.shift()
    if (next === undefined) early.push(line)
    else next(line)
  })
  const nextLine = (): Promise<string> =>
    new Promise((resolve) => {
      const line = early.shift()
      if (line !== undefined) resolve(line)
      else pending.push(resolve)
    })
  const ready = await nextLine()
  if (ready !== "ready") throw new Error(`producer: ${ready}`)
  const stdin = child.stdin
  return {
    commit: async (id: string): Promise<number> => {
      stdin.write(`${partitionKey} ${id}\n`)
      const [answered, before, committed] = (await nextLine()).split(" ")
      if (answered !== id || before === undefined || committed === undefined) {
        throw new Error(`producer answered ${answered} for ${id}`)
      }
      persistMillis.push(Number(committed) - Number(before))
      return Number(committed)
    },
    close: () =>
      new Promise<void>((resolve) => {
        child.on("close", () => resolve())
        stdin.end()
      })
  }
}

type Stores = OutboxStore | LeaseStore | Sink

const drainerOptions = { onExpired: "drop", onPermanentFailure: "drop", onPoison: "drop" } as const

/**
 * Runs a relay on `layer` and measures `records` deliveries, each committed by `commit` after `idleMillis`
 * of idle (or at its time on the common schedule). The first record (discovery) is not measured.
 */
const measure = async (
  backend: string,
  layer: Layer.Layer<Stores, unknown>,
  delivered: (id: string) => Promise<number>,
  commit: (id: string) => Promise<number>,
  persistMillis: Array<number>,
  idleBackoffMax: Duration.Duration = Duration.seconds(30)
): Promise<Latency> => {
  const runtimeLayer = layer.pipe(Layer.provide(Logger.minimumLogLevel(LogLevel.Warning)))
  return Effect.runPromise(
    Effect.gen(function* () {
      const relay = yield* Effect.fork(
        Relay.run({ owner: "bench-latency", drainer: { ...drainerOptions, idleBackoffMax } })
      )
      const warm = `warm-${randomUUID()}`
      yield* Effect.promise(() => commit(warm))
      yield* Effect.promise(() => delivered(warm))
      persistMillis.splice(0)
      yield* Effect.promise(() => ready(backend))
      const samples: Array<number> = []
      for (let i = 0; i < records; i++) {
        yield* Effect.promise(() => waitTurn(backend, i))
        const id = `r-${i}-${randomUUID()}`
        const committed = yield* Effect.promise(() => commit(id))
        const at = yield* Effect.promise(() => delivered(id))
        samples.push(at - committed)
        if ((i + 1) % 10 === 0) progress(`${backend}: ${i + 1}/${records} records`)
      }
      yield* Fiber.interrupt(relay)
      return summary(samples, persistMillis)
    }).pipe(Effect.provide(runtimeLayer), Effect.orDie)
  )
}

const inProcessCommit = (store: OutboxStore["Type"], persistMillis: Array<number>) => (id: string) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const before = now()
      yield* store.persist([
        new NewOutboxRecord({ id, partitionKey, envelopeId: id, bindingId: "b", payload: new Uint8Array(64) })
      ])
      const committed = now()
      persistMillis.push(committed - before)
      return committed
    }).pipe(Effect.orDie)
  )

const memoryLatency = async (): Promise<Latency> => {
  const timing = timingSink()
  const outbox = await Effect.runPromise(Layer.build(MemoryOutboxStore.layer).pipe(Effect.scoped))
  const store = outbox.unsafeMap.get(OutboxStore.key)
  if (store === undefined) throw new Error("no store")
  const layer = Layer.mergeAll(Layer.succeedContext(outbox), MemoryLeaseStore.layer, Layer.succeed(Sink, timing.sink))
  const persistMillis: Array<number> = []
  return measure("memory", layer, timing.delivered, inProcessCommit(store, persistMillis), persistMillis)
}

/** The CPU the SQLite wake signal's poll costs while nothing happens, in µs of CPU per second. */
const sqliteIdleCpu = async (
  file: string
): Promise<{ readonly pollMillis: number; readonly cpuMicrosPerSecond: number }> =>
  Effect.runPromise(
    Effect.gen(function* () {
      yield* Effect.sleep("200 millis")
      const before = process.cpuUsage()
      const started = now()
      yield* Effect.sleep(`${cpuSeconds} seconds`)
      const used = process.cpuUsage(before)
      const seconds = (now() - started) / 1000
      return {
        pollMillis: Duration.toMillis(SqliteWakeSignal.defaultPollInterval),
        cpuMicrosPerSecond: round((used.user + used.system) / seconds)
      }
    }).pipe(
      Effect.provide(SqliteWakeSignal.layer.pipe(Layer.provide(SqliteDatabase.layer({ filename: file })))),
      Effect.orDie
    )
  )

/** The SQLite file with the outbox tables, and the idle CPU of its wake signal (measured before any relay runs). */
const sqlitePrepare = async (directory: string) => {
  const file = path.join(directory, "latency.db")
  // the tables exist before the producer opens the file
  await Effect.runPromise(
    Effect.provide(
      Effect.void,
      Layer.mergeAll(SqliteOutboxStore.layer, SqliteLeaseStore.layer).pipe(
        Layer.provide(SqliteDatabase.layer({ filename: file }))
      )
    ).pipe(Effect.orDie)
  )
  progress("SQLite: idle CPU of the wake signal")
  const idleCpu = await sqliteIdleCpu(file)
  return { file, idleCpu }
}

const sqliteLatency = async (prepared: { readonly file: string; readonly idleCpu: unknown }) => {
  const { file, idleCpu } = prepared
  const timing = timingSink()
  const stores = Layer.mergeAll(SqliteOutboxStore.layer, SqliteLeaseStore.layer, Layer.succeed(Sink, timing.sink))
  const layer = Layer.merge(stores, SqliteWakeSignal.layer).pipe(
    Layer.provide(SqliteDatabase.layer({ filename: file }))
  )
  const persistMillis: Array<number> = []
  const producerProcess = await producer(["sqlite", file], persistMillis)
  try {
    const latency = await measure("sqlite", layer, timing.delivered, producerProcess.commit, persistMillis)
    return { latency, idleCpu }
  } finally {
    await producerProcess.close()
  }
}

const postgresLatency = async () => {
  const server = await startPostgres()
  try {
    const url = await createDatabase(server.url, "latency")
    const schema = `lat_${randomUUID().slice(0, 8)}`
    const client = PgClient.layer({ url: Redacted.make(url), maxConnections: 4 })
    const timing = timingSink()
    const stores = Layer.mergeAll(
      PostgresOutboxStore.layerWith({ schema }),
      PostgresLeaseStore.layerWith({ schema }),
      Layer.succeed(Sink, timing.sink)
    )
    const layer = Layer.merge(stores, PostgresWakeSignal.layerWith({ schema })).pipe(Layer.provide(client))
    await Effect.runPromise(Effect.provide(Effect.void, layer).pipe(Effect.orDie))
    const persistMillis: Array<number> = []
    const producerProcess = await producer(["postgres", url, schema], persistMillis)
    try {
      return await measure("postgres", layer, timing.delivered, producerProcess.commit, persistMillis)
    } finally {
      await producerProcess.close()
    }
  } finally {
    await server.stop()
  }
}

const dynamoLatency = async () => {
  const server = await startDynamoLocal()
  try {
    const tableName = `latency-${randomUUID().slice(0, 8)}`
    const faults = new Faulty.Faults()
    faults.captureCapacity = true
    const client = Faulty.layer(faults).pipe(
      Layer.provide(
        DynamoDb.layer({
          endpoint: server.endpoint,
          region: "us-east-1",
          credentials: { accessKeyId: "x", secretAccessKey: "x" }
        })
      )
    )
    const timing = timingSink()
    const layer = Layer.mergeAll(
      DynamoDbOutboxStore.layerWith({ tableName, ensureTable: true }),
      DynamoDbLeaseStore.layerWith({ tableName, ensureTable: true }),
      Layer.succeed(Sink, timing.sink)
    ).pipe(Layer.provide(client))
    await Effect.runPromise(Effect.provide(Effect.void, layer).pipe(Effect.orDie))
    const persistMillis: Array<number> = []
    const producerProcess = await producer(["dynamodb", server.endpoint, tableName], persistMillis)
    try {
      const latency = await measure(
        "dynamodb",
        layer,
        timing.delivered,
        producerProcess.commit,
        persistMillis,
        dynamoIdleMax
      )
      progress(`DynamoDB: requests of an idle relay over ${dynamoIdleSeconds} s`)
      const idle = await Effect.runPromise(
        Effect.gen(function* () {
          const relay = yield* Effect.fork(
            Relay.run({ owner: "bench-latency-idle", drainer: { ...drainerOptions, idleBackoffMax: dynamoIdleMax } })
          )
          // the relay leases the partition and drains it; then it is idle
          yield* Effect.sleep("3 seconds")
          faults.reset()
          yield* Effect.sleep(`${dynamoIdleSeconds} seconds`)
          const perHour = 3600 / dynamoIdleSeconds
          const result = {
            seconds: dynamoIdleSeconds,
            idleBackoffMaxMillis: Duration.toMillis(dynamoIdleMax),
            requestsPerHour: Math.round(faults.requests * perHour),
            queriesPerHour: Math.round(faults.queries * perHour),
            readCapacityPerHour: round(faults.readCapacity * perHour)
          }
          yield* Fiber.interrupt(relay)
          return result
        }).pipe(Effect.provide(layer.pipe(Layer.provide(Logger.minimumLogLevel(LogLevel.Warning)))), Effect.orDie)
      )
      return { latency, idle }
    } finally {
      await producerProcess.close()
    }
  } finally {
    await server.stop()
  }
}

/**
 * The CLI's relay (`relay stdout`, the CLI's defaults and wake-up) in a process of its own, the producer in
 * another: commit → the record's JSON line read from the relay's stdout.
 */
const cliLatency = async (backend: "cli-sqlite" | "cli-postgres", directory: string): Promise<Latency> => {
  const bundle = await buildCli()
  const server = backend === "cli-postgres" ? await startPostgres() : undefined
  try {
    let storeFlags: ReadonlyArray<string>
    let producerArgs: ReadonlyArray<string>
    if (server === undefined) {
      const file = path.join(directory, "cli.db")
      storeFlags = ["--sqlite-file", file]
      producerArgs = ["sqlite", file]
    } else {
      const url = await createDatabase(server.url, "cli_latency")
      storeFlags = ["--backend", "postgres", "--postgres-url", url]
      producerArgs = ["postgres", url, "public"]
    }
    const relay = spawn(process.execPath, bundle.argv(["relay", "stdout", ...storeFlags]), {
      env: baseEnv(),
      stdio: ["ignore", "pipe", "pipe"]
    })
    const deliveredAt = new Map<string, number>()
    const waiters = new Map<string, () => void>()
    if (relay.stdout === null || relay.stderr === null) throw new Error("relay without pipes")
    readline.createInterface({ input: relay.stdout }).on("line", (line) => {
      const at = now()
      const parsed: unknown = JSON.parse(line)
      const id = typeof parsed === "object" && parsed !== null ? Reflect.get(parsed, "id") : undefined
      if (typeof id !== "string") return
      deliveredAt.set(id, at)
      waiters.get(id)?.()
    })
    let stderr = ""
    relay.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
    const exited = new Promise<void>((resolve) => relay.on("close", () => resolve()))
    try {
      const deadline = now() + 60_000
      while (!stderr.includes('message="relay started"')) {
        if (now() > deadline) throw new Error(`CLI relay did not start:\n${stderr}`)
        await sleep(20)
      }
      const delivered = (id: string): Promise<number> =>
        new Promise((resolve) => {
          const at = deliveredAt.get(id)
          if (at !== undefined) return resolve(at)
          waiters.set(id, () => resolve(deliveredAt.get(id) ?? now()))
        })
      const persistMillis: Array<number> = []
      const producerProcess = await producer(producerArgs, persistMillis)
      try {
        const warm = `warm-${randomUUID()}`
        await producerProcess.commit(warm)
        await delivered(warm)
        persistMillis.splice(0)
        await ready(backend)
        const samples: Array<number> = []
        for (let i = 0; i < records; i++) {
          await waitTurn(backend, i)
          const id = `r-${i}-${randomUUID()}`
          const committed = await producerProcess.commit(id)
          samples.push((await delivered(id)) - committed)
          if ((i + 1) % 10 === 0) progress(`${backend}: ${i + 1}/${records} records`)
        }
        return summary(samples, persistMillis)
      } finally {
        await producerProcess.close()
      }
    } finally {
      relay.kill("SIGINT")
      await exited
    }
  } finally {
    bundle.remove()
    await server?.stop()
  }
}

/**
 * The peer, `pg-transactional-outbox` (bench/Peer.ts), measured the same way on its own PostgreSQL server
 * with `wal_level=logical`: its replication listener hands each message to a handler that notes the time;
 * a second OS process (bench/peerProducer.ts) stores each message in its own transaction.
 */
const peerLatency = async (): Promise<Latency> => {
  Peer.ensureInstalled()
  const peer = Peer.load()
  const server = await startPostgres({ settings: { wal_level: "logical" } })
  let shutdown: (() => Promise<void>) | undefined
  try {
    const url = await createDatabase(server.url, "peer")
    const schema = `peer_${randomUUID().slice(0, 8)}`
    const setup: Peer.SetupConfig = {
      outboxOrInbox: "outbox",
      database: "peer",
      schema,
      table: "outbox",
      listenerRole: "postgres",
      publication: `${schema}_pub`,
      replicationSlot: `${schema}_slot`
    }
    const admin = peer.newClient(url)
    await admin.connect()
    await admin.query(peer.DatabaseSetup.dropAndCreateTable(setup))
    await admin.query(peer.DatabaseSetup.setupReplicationCore(setup))
    // the slot in a statement of its own (it cannot be created in a transaction that wrote)
    await admin.query(`SELECT pg_create_logical_replication_slot('${setup.replicationSlot}', 'pgoutput')`)
    await admin.end()
    const deliveredAt = new Map<string, number>()
    const waiters = new Map<string, () => void>()
    const delivered = (id: string): Promise<number> =>
      new Promise((resolve) => {
        const at = deliveredAt.get(id)
        if (at !== undefined) return resolve(at)
        waiters.set(id, () => resolve(deliveredAt.get(id) ?? now()))
      })
    ;[shutdown] = peer.initializeReplicationMessageListener(
      Peer.config(url, schema),
      {
        handle: async (message) => {
          deliveredAt.set(message.id, now())
          waiters.get(message.id)?.()
        }
      },
      peer.getDisabledLogger()
    )
    const persistMillis: Array<number> = []
    const producerProcess = await producer([url, schema], persistMillis, "peerProducer.ts")
    try {
      const warm = randomUUID()
      await producerProcess.commit(warm)
      await delivered(warm)
      persistMillis.splice(0)
      await ready("peer")
      const samples: Array<number> = []
      for (let i = 0; i < records; i++) {
        await waitTurn("peer", i)
        const id = randomUUID()
        const committed = await producerProcess.commit(id)
        samples.push((await delivered(id)) - committed)
        if ((i + 1) % 10 === 0) progress(`peer: ${i + 1}/${records} records`)
      }
      return summary(samples, persistMillis)
    } finally {
      await producerProcess.close()
    }
  } finally {
    await shutdown?.()
    await server.stop()
  }
}

/** p99 goals (ms) of issue 28; through the CLI, the goal of its backend. */
const goals = {
  memory: 10,
  sqlite: 100,
  postgres: 15,
  dynamodb: 1500,
  "cli-sqlite": 100,
  "cli-postgres": 15
} as const

const main = async (): Promise<void> => {
  const loadBefore = os.loadavg()[0] ?? 0
  const started = performance.now()
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-latency-"))
  const result: Record<string, unknown> = {}
  // with --together, the wake signal's idle CPU is measured before any backend runs (it is this process's CPU)
  const sqlite = together && backends.includes("sqlite") ? await sqlitePrepare(directory) : undefined
  const one = async (backend: string): Promise<void> => {
    progress(`${backend}: ${records} records, ${idleMillis} ms idle before each`)
    if (backend === "memory") result["memory"] = { latency: await memoryLatency() }
    else if (backend === "sqlite") result["sqlite"] = await sqliteLatency(sqlite ?? (await sqlitePrepare(directory)))
    else if (backend === "postgres") result["postgres"] = { latency: await postgresLatency() }
    else if (backend === "dynamodb") result["dynamodb"] = await dynamoLatency()
    else if (backend === "peer") result["peer"] = { latency: await peerLatency() }
    else if (backend === "cli-sqlite" || backend === "cli-postgres") {
      result[backend] = { latency: await cliLatency(backend, directory) }
    } else throw new Error(`unknown backend ${backend}`)
    console.log(backend, JSON.stringify(result[backend]))
  }
  try {
    if (together) await Promise.all(backends.map(one))
    else for (const backend of backends) await one(backend)
  } finally {
    fs.rmSync(directory, { recursive: true, force: true })
  }
  const run = {
    date: new Date().toISOString(),
    loadAverage1m: { before: loadBefore, after: os.loadavg()[0] ?? 0 },
    seconds: Math.round((performance.now() - started) / 1000),
    quick,
    method: {
      records,
      idleMillis,
      issueMethod: records >= 200 && idleMillis >= 10_000,
      schedule: together
        ? `backends together: one record per backend every ${periodMillis} ms, the backends ${Math.round(periodMillis / backends.length)} ms apart`
        : "backends one after another",
      producer: "a second OS process (memory: the same process)"
    }
  }
  const file = path.join(here, "results", "latency.json")
  // with nothing to merge into (no results file yet), the run is written whole
  const output =
    merge && fs.existsSync(file)
      ? {
          ...(JSON.parse(fs.readFileSync(file, "utf8")) as Record<string, unknown>),
          ...Object.fromEntries(
            Object.entries(result).map(([backend, entry]) => [
              backend,
              { ...(entry as Record<string, unknown>), run: { ...run, backends } }
            ])
          )
        }
      : { ...run, goalsP99Millis: goals, ...result }
  fs.writeFileSync(file, `${JSON.stringify(output, null, 2)}\n`)
  console.log(`written ${file}`)
  process.exit(0)
}

await main()
