/**
 * End to end with real processes and servers (SPEC §11, §12): a producer process publishes typed orders to an
 * outbox on SQLite or on PostgreSQL; a relay process delivers them by webhook, NATS JetStream or RabbitMQ (each
 * transport with each outbox); the example consumer service of the transport applies them through its SQLite inbox into `orders_seen`. While the producer runs,
 * the relay and the consumer are each SIGKILLed at random moments several times and started again. At the end
 * `orders_seen` holds every order exactly once (no loss, no double application) and each customer's orders in
 * publish order. Each run prints its kill and record counts.
 *
 * `E2E_KILLS` (default 3) sets how many times each of relay and consumer is killed per transport, `E2E_ORDERS`
 * (default 150) the number of orders, `E2E_SEED` the random seed (printed with each run); `npm run soak:e2e`
 * runs 10 kills of each and 1,000 orders per transport.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as SqlClient from "@effect/sql/SqlClient"
import { type ChildProcess, spawn } from "node:child_process"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { connect as natsConnect } from "nats"
import { build } from "esbuild"
import { afterAll, inject } from "vitest"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import { orderAt, type Outbox, type Transport, type WorkerConfig } from "./support/EndToEnd.js"
import { freePort } from "./support/NatsServer.js"
import { createDatabase } from "./support/PostgresServer.js"
import { freshQueue } from "./support/RabbitMqServer.js"

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-e2e-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))

/** Packages compiled into the worker bundle (ESM of many small modules, slow to load one by one). */
const bundledPackage = /^(?:effect|effect-outbox|@effect\/[^/]+|fast-check|pure-rand)(?:\/|$)/

/**
 * The worker bundled once with esbuild (the project's own sources and Effect compiled in, other packages
 * resolved from node_modules at run time), so that a restarted process is up in about a second.
 */
const bundleDirectory = path.join(
  projectRoot,
  "node_modules",
  ".cache",
  `effect-outbox-e2e-${crypto.randomBytes(6).toString("hex")}`
)
afterAll(() => fs.rmSync(bundleDirectory, { recursive: true, force: true }))
await build({
  absWorkingDir: projectRoot,
  entryPoints: { worker: path.join(projectRoot, "test", "support", "endToEndWorker.ts") },
  outdir: bundleDirectory,
  outExtension: { ".js": ".mjs" },
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  plugins: [
    {
      name: "external-packages",
      setup: (plugins) => {
        plugins.onResolve({ filter: /^[^./]/ }, (args) =>
          bundledPackage.test(args.path) ? undefined : { path: args.path, external: true }
        )
      }
    }
  ],
  logLevel: "warning"
})
// started through a second file: the bundled examples run their own `main` only when they are the entry
const workerBundle = path.join(bundleDirectory, "start.mjs")
fs.writeFileSync(workerBundle, 'import "./worker.mjs"\n')

const kills = Number(process.env["E2E_KILLS"] ?? "3")
const orderCount = Number(process.env["E2E_ORDERS"] ?? "150")
const customers = 7

/** A small seeded generator (mulberry32), so a failing run can be repeated with its seed. */
const random = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** A worker process: resolves `ready` when it printed `ready`; `exited` when it ended. */
interface Worker {
  readonly child: ChildProcess
  readonly ready: Promise<void>
  readonly exited: Promise<{ readonly code: number | null; readonly signal: string | null }>
}

const spawnWorker = (config: WorkerConfig, stderr: Array<string>): Worker => {
  const child = spawn(process.execPath, [workerBundle, JSON.stringify(config)], {
    cwd: projectRoot,
    stdio: ["ignore", "pipe", "pipe"]
  })
  child.stderr?.on("data", (chunk: Buffer) => stderr.push(`${config.role}: ${chunk.toString()}`))
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.once("close", (code, signal) => resolve({ code, signal }))
  )
  const ready = new Promise<void>((resolve, reject) => {
    let out = ""
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString()
      if (out.includes("ready")) resolve()
    })
    void exited.then(() => reject(new Error(`${config.role} exited before it was ready`)))
  })
  ready.catch(() => undefined)
  return { child, ready, exited }
}

const killWorker = async (worker: Worker): Promise<void> => {
  if (worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill("SIGKILL")
  await worker.exited
}

const sleep = (millis: number) => new Promise((resolve) => setTimeout(resolve, millis))

const Seen = Schema.Array(Schema.Struct({ order_id: Schema.String, customer: Schema.String, n: Schema.Number }))

/** The consumer's `orders_seen` rows in the order they were applied (empty before the table exists). */
const readSeen = (inboxDb: string) =>
  Effect.runPromise(
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql`SELECT order_id, customer, n FROM orders_seen ORDER BY rowid`.pipe(
        Effect.flatMap(Schema.decodeUnknown(Seen)),
        Effect.orElseSucceed((): Schema.Schema.Type<typeof Seen> => [])
      )
    ).pipe(Effect.provide(SqliteDatabase.layer({ filename: inboxDb })), Effect.orDie)
  )

const StatusCounts = Schema.Array(Schema.Struct({ status: Schema.String, n: Schema.Number }))

/** How many records of a SQLite outbox are in each status (a failure's context: stuck or completed). */
const outboxStatus = (outbox: Outbox): Promise<string> =>
  outbox._tag !== "sqlite"
    ? Promise.resolve("(PostgreSQL outbox)")
    : Effect.runPromise(
        Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql`SELECT status, count(*) AS n FROM outbox GROUP BY status`.pipe(
            Effect.flatMap(Schema.decodeUnknown(StatusCounts)),
            Effect.map((rows) => rows.map((row) => `${row.status}=${row.n}`).join(" ")),
            Effect.orElseSucceed(() => "(unreadable)")
          )
        ).pipe(Effect.provide(SqliteDatabase.layer({ filename: outbox.file })), Effect.orDie)
      )

interface RunReport {
  readonly transport: string
  readonly outbox: string
  readonly seed: number
  readonly relayKills: number
  readonly consumerKills: number
  readonly published: number
  readonly applied: number
}

/**
 * Runs producer, relay and consumer for one transport with `kills` SIGKILLs of each of relay and consumer at
 * random moments (each after the victim reported ready, 200–800 ms into its life), then waits for the
 * consumer to have applied every order (at most 60 s + 100 ms per order) and stops everything.
 */
const runTransport = async (name: string, transport: Transport, outbox?: Outbox): Promise<RunReport> => {
  const seed = Number(process.env["E2E_SEED"] ?? String(crypto.randomInt(1, 2 ** 31)))
  const next = random(seed)
  const outboxOf: Outbox = outbox ?? { _tag: "sqlite", file: path.join(directory, `${name}-outbox.db`) }
  const inboxDb = path.join(directory, `${name}-inbox.db`)
  const stderr: Array<string> = []
  const started = Date.now()
  let consumer = spawnWorker({ role: "consumer", inboxDb, transport }, stderr)
  await consumer.ready
  const producer = spawnWorker({ role: "producer", outbox: outboxOf, count: orderCount, customers }, stderr)
  await producer.ready
  let relay = spawnWorker({ role: "relay", outbox: outboxOf, transport }, stderr)
  let relayKills = 0
  let consumerKills = 0
  try {
    const victims: Array<"relay" | "consumer"> = []
    for (let k = 0; k < kills; k++) victims.push("relay", "consumer")
    // a random order of the kills
    for (let i = victims.length - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1))
      const swap = victims[i]
      const other = victims[j]
      if (swap !== undefined && other !== undefined) {
        victims[i] = other
        victims[j] = swap
      }
    }
    for (const victim of victims) {
      const worker = victim === "relay" ? relay : consumer
      await worker.ready
      await sleep(200 + Math.floor(next() * 600))
      await killWorker(worker)
      if (victim === "relay") {
        relayKills += 1
        relay = spawnWorker({ role: "relay", outbox: outboxOf, transport }, stderr)
      } else {
        consumerKills += 1
        consumer = spawnWorker({ role: "consumer", inboxDb, transport }, stderr)
      }
    }
    const chaosEnded = Date.now()
    const produced = await producer.exited
    if (produced.code !== 0) throw new Error(`the producer failed (${String(produced.code)}): ${stderr.join("")}`)
    // the drain is bounded generously: on a loaded machine a consumer applies some tens of orders a second
    const deadline = Date.now() + 60_000 + 100 * orderCount
    let seen = await readSeen(inboxDb)
    while (seen.length < orderCount && Date.now() < deadline) {
      await sleep(250)
      seen = await readSeen(inboxDb)
    }
    const drained = Date.now()
    // a little longer: anything applied twice or late would show now
    await sleep(500)
    seen = await readSeen(inboxDb)
    const expected = Array.from({ length: orderCount }, (_, k) => orderAt(k + 1, customers).orderId)
    const status = seen.length === orderCount ? "" : ` outbox ${await outboxStatus(outboxOf)};`
    const context = `${name} (seed ${seed}):${status} ${stderr.join("").slice(0, 2000)}`
    expect(seen.length, context).toBe(orderCount)
    expect(new Set(seen.map((row) => row.order_id)), context).toEqual(new Set(expected))
    for (let c = 0; c < customers; c++) {
      const ns = seen.filter((row) => row.customer === `c${c}`).map((row) => row.n)
      expect(ns, `${context} per-key order of c${c}`).toEqual([...ns].sort((x, y) => x - y))
    }
    const report = {
      transport: name,
      outbox: outboxOf._tag,
      seed,
      relayKills,
      consumerKills,
      published: orderCount,
      applied: seen.length,
      chaosMillis: chaosEnded - started,
      drainMillis: drained - chaosEnded
    }
    process.stdout.write(`end-to-end ${JSON.stringify(report)}\n`)
    return report
  } finally {
    await Promise.all([killWorker(relay), killWorker(consumer), killWorker(producer)])
  }
}

/** A NATS JetStream stream of its own for one run. */
const natsTransport = (prefix: string): Promise<Transport> => {
  const url = inject("natsUrl")
  const stream = `${prefix}${crypto.randomBytes(4).toString("hex")}`
  return (async () => {
    const nc = await natsConnect({ servers: url })
    const jsm = await nc.jetstreamManager()
    await jsm.streams.add({ name: stream, subjects: [`${stream}.>`] })
    await nc.close()
    return { _tag: "nats", url, stream, subject: `${stream}.orders` }
  })()
}

/** A webhook receiver on a free loopback port. */
const webhookTransport = async (): Promise<Transport> => {
  const port = await freePort()
  return { _tag: "webhook", url: `http://127.0.0.1:${port}/hooks/orders`, port, secret: "end-to-end" }
}

/** The run's shared broker (test/support/globalSetup.ts), a fresh queue of its own per run. */
const rabbitTransport = async (prefix: string): Promise<Transport> => {
  const url = inject("rabbitUrl")
  return { _tag: "rabbitmq", url, queue: await freshQueue(url, prefix) }
}

/** The outbox of a run: a SQLite file (`runTransport`'s default) or a fresh PostgreSQL database. */
const outboxes: ReadonlyArray<readonly [string, () => Promise<Outbox | undefined>]> = [
  ["SQLite", () => Promise.resolve(undefined)],
  [
    "PostgreSQL",
    async () => ({ _tag: "postgres", url: await createDatabase(inject("postgresUrl"), "e2e") }) satisfies Outbox
  ]
]

const transports: ReadonlyArray<readonly [string, string, (run: string) => Promise<Transport>]> = [
  ["webhook", "webhook", () => webhookTransport()],
  ["NATS JetStream", "nats", (run) => natsTransport(run === "nats" ? "E2E" : "E2EPG")],
  ["RabbitMQ", "rabbitmq", (run) => rabbitTransport(run === "rabbitmq" ? "orders_" : "orders_pg_")]
]

describe("end to end: producer → outbox → relay → transport → consumer inbox, relay and consumer SIGKILLed", () => {
  for (const [outboxName, makeOutbox] of outboxes) {
    for (const [transportName, key, makeTransport] of transports) {
      const run = outboxName === "SQLite" ? key : `${key}-pg`
      it.live(
        `${transportName}, outbox on ${outboxName}: every order applied exactly once, in per-customer order`,
        () =>
          Effect.gen(function* () {
            const transport = yield* Effect.promise(() => makeTransport(run))
            const outbox = yield* Effect.promise(makeOutbox)
            const report = yield* Effect.promise(() => runTransport(run, transport, outbox))
            expect(report.relayKills + report.consumerKills).toBe(2 * kills)
          }),
        { timeout: 600_000 }
      )
    }
  }
})
