/**
 * Steady state (SPEC §13, issue 28 item 6): the method users size deployments with. For each target — a
 * backend with a sink that only notes the delivery time, and the webhook, NATS JetStream and RabbitMQ
 * sinks on SQLite — one relay (the library's defaults) runs while a producer in the same process persists
 * records at a fixed rate over 8 partitions (every other record keyed, 16 keys per partition), in calls of
 * up to 25 records every 10 ms.
 *
 * 1. **Highest sustained rate**: a rate is sustained when, over a window of `--seconds` (default 20; the
 *    issue's method is 60), the producer offered it (≥ 95 %) and the backlog (records persisted and not
 *    yet delivered) did not grow: at the end of the window it is at most its size a quarter into the
 *    window plus half a second of production, and at most two seconds of production. The rate starts at
 *    50/s (DynamoDB Local: 10/s) and doubles until a window fails, then three bisection steps between the last sustained and the
 *    first failed rate. Between windows the relay drains what is left.
 * 2. **Latency at 50 % and 80 %** of that rate: commit (the producer's persist returned) → delivery
 *    (the sink's send returned), p50/p99 over the records of a window of the same length.
 *
 * Usage: `npm run bench -- steady [--quick]`, or `node --import tsx bench/steady.ts [--seconds=60]
 * [--targets=memory,sqlite,postgres,mysql,dynamodb,webhook,nats,rabbitmq]`. Writes bench/results/steady.json.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Redacted from "effect/Redacted"
import { connect as amqpConnect } from "amqplib"
import { connect as natsConnect } from "nats"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import { createServer } from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as DynamoDbLeaseStore from "../src/layers/dynamodb/DynamoDbLeaseStore.js"
import * as DynamoDbOutboxStore from "../src/layers/dynamodb/DynamoDbOutboxStore.js"
import * as MemoryLeaseStore from "../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as MysqlLeaseStore from "../src/layers/mysql/MysqlLeaseStore.js"
import * as MysqlOutboxStore from "../src/layers/mysql/MysqlOutboxStore.js"
import * as PostgresLeaseStore from "../src/layers/postgres/PostgresLeaseStore.js"
import * as PostgresOutboxStore from "../src/layers/postgres/PostgresOutboxStore.js"
import * as NatsSink from "../src/layers/sinks/NatsSink.js"
import * as RabbitMqSink from "../src/layers/sinks/RabbitMqSink.js"
import * as WebhookSink from "../src/layers/sinks/WebhookSink.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteLeaseStore from "../src/layers/sqlite/SqliteLeaseStore.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import * as Relay from "../src/programs/Relay.js"
import * as DynamoDb from "../src/services/DynamoDb.js"
import type { LeaseStore } from "../src/services/LeaseStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { Sink } from "../src/services/Sink.js"
import * as Delivered from "./Delivered.js"
import { orderingKeyOf, partitions } from "./DrainRecords.js"
import { startDynamoLocal } from "../test/support/globalSetup.js"
import * as MysqlServer from "../test/support/MysqlServer.js"
import { startNats } from "../test/support/NatsServer.js"
import * as PostgresServer from "../test/support/PostgresServer.js"
import { startRabbitMq } from "../test/support/RabbitMqServer.js"

const here = path.dirname(fileURLToPath(import.meta.url))
const args = process.argv.slice(2)
const quick = args.includes("--quick")
const flag = (name: string): string | undefined => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
const windowSeconds = Number(flag("seconds") ?? (quick ? 5 : 20))
const allTargets = ["memory", "sqlite", "postgres", "mysql", "dynamodb", "webhook", "nats", "rabbitmq"]
const targets = (flag("targets") ?? allTargets.join(",")).split(",")
const tickMillis = 10
const callSize = 25
/** Where the search starts: low enough that the slowest target (DynamoDB Local) starts from a sustained rate. */
const startRate = (target: string): number => (target === "dynamodb" ? 10 : 50)
const maxDoublings = quick ? 6 : 10
const bisections = quick ? 1 : 3
const payload = new Uint8Array(64).fill(7)

const now = (): number => performance.timeOrigin + performance.now()
const progress = (text: string): void => console.log(`… ${text}`)
const percentile = (values: ReadonlyArray<number>, p: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0
}
const round = (n: number): number => Math.round(n * 100) / 100

type Stores = Layer.Layer<OutboxStore | LeaseStore, unknown>

/** One target: its stores and its sink, both over servers the target started; `stop` ends them. */
interface Target {
  readonly stores: Stores
  readonly sink: Layer.Layer<Sink, unknown>
  readonly stop: () => Promise<void>
}

/** Notes when each record's send returned, around any sink. */
class Deliveries {
  readonly at = new Map<string, number>()
  delivered = 0
  note(id: string): void {
    if (!this.at.has(id)) {
      this.at.set(id, now())
      this.delivered += 1
    }
  }
  /** The sink noting every send that succeeded. */
  wrap(inner: Layer.Layer<Sink, unknown>): Layer.Layer<Sink, unknown> {
    return Delivered.noting(inner, (record) => this.note(record.id))
  }
}

const noteSink: Layer.Layer<Sink> = Layer.succeed(Sink, Sink.of({ send: () => Effect.void }))

interface Window {
  readonly offeredPerSecond: number
  readonly producedPerSecond: number
  readonly backlogAtQuarter: number
  readonly backlogAtEnd: number
  readonly sustained: boolean
  readonly p50Millis: number
  readonly p99Millis: number
}

/**
 * Runs one window at `rate` records/s against the running relay: produces for `windowSeconds`, then
 * waits (at most 30 s) for the relay to deliver what is left, so the next window starts empty.
 */
const runWindow = (store: OutboxStore["Type"], deliveries: Deliveries, rate: number, run: number) =>
  Effect.gen(function* () {
    const committedAt = new Map<string, number>()
    const start = now()
    const end = start + windowSeconds * 1000
    let produced = 0
    let quarterBacklog: number | undefined
    const deliveredBefore = deliveries.delivered
    const backlog = () => produced - (deliveries.delivered - deliveredBefore)
    for (;;) {
      const t = now()
      if (t >= end) break
      if (quarterBacklog === undefined && t >= start + (windowSeconds * 1000) / 4) quarterBacklog = backlog()
      const due = Math.floor(((t - start) / 1000) * rate) - produced
      for (let left = due; left > 0; left -= callSize) {
        const size = Math.min(callSize, left)
        const records = Array.from({ length: size }, (_, i) => {
          const n = produced + i
          const partitionKey = partitions[n % partitions.length] ?? "p0"
          const id = `s${run}-${n}-${randomUUID().slice(0, 8)}`
          // the partition's own count of records picks the key: every other record of each partition keyed
          const orderingKey = orderingKeyOf(Math.floor(n / partitions.length))
          return new NewOutboxRecord({
            id,
            partitionKey,
            envelopeId: id,
            bindingId: "b",
            payload,
            ...(orderingKey !== undefined ? { orderingKey } : {})
          })
        })
        yield* store.persist(records)
        const at = now()
        for (const record of records) if (record.id !== undefined) committedAt.set(record.id, at)
        produced += size
      }
      yield* Effect.sleep(`${tickMillis} millis`)
    }
    const seconds = (now() - start) / 1000
    const backlogAtEnd = backlog()
    const backlogAtQuarter = quarterBacklog ?? 0
    const producedPerSecond = produced / seconds
    const sustained =
      producedPerSecond >= 0.95 * rate &&
      backlogAtEnd <= backlogAtQuarter + rate / 2 &&
      backlogAtEnd <= Math.max(2 * rate, callSize * partitions.length)
    // drain what is left before the next window
    const drainDeadline = now() + 30_000
    while (backlog() > 0 && now() < drainDeadline) yield* Effect.sleep("20 millis")
    const samples: Array<number> = []
    for (const [id, committed] of committedAt) {
      const delivered = deliveries.at.get(id)
      if (delivered !== undefined) samples.push(delivered - committed)
      deliveries.at.delete(id)
    }
    const window: Window = {
      offeredPerSecond: rate,
      producedPerSecond: Math.round(producedPerSecond),
      backlogAtQuarter,
      backlogAtEnd,
      sustained: sustained && backlog() === 0,
      p50Millis: round(percentile(samples, 50)),
      p99Millis: round(percentile(samples, 99))
    }
    progress(
      `${rate}/s: produced ${window.producedPerSecond}/s, backlog ${backlogAtQuarter} → ${backlogAtEnd}, ` +
        `${window.sustained ? "sustained" : "not sustained"} (p50 ${window.p50Millis} ms, p99 ${window.p99Millis} ms)`
    )
    return window
  })

/** The search and the two latency windows for one target. */
const measureTarget = (name: string, target: Target) =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    const deliveries = new Deliveries()
    const relay = yield* Effect.fork(
      Relay.run({
        owner: `bench-steady-${name}`,
        drainer: { onExpired: "drop", onPermanentFailure: "drop", onPoison: "drop" }
      }).pipe(Effect.provide(deliveries.wrap(target.sink)))
    )
    const windows: Array<Window> = []
    let run = 0
    let passed = 0
    let failed: number | undefined
    let rate = startRate(name)
    for (let i = 0; i < maxDoublings; i++) {
      const window = yield* runWindow(store, deliveries, rate, ++run)
      windows.push(window)
      if (!window.sustained) {
        failed = rate
        break
      }
      passed = rate
      rate *= 2
    }
    for (let i = 0; i < bisections && failed !== undefined && passed > 0; i++) {
      const middle = Math.round((passed + failed) / 2)
      const window = yield* runWindow(store, deliveries, middle, ++run)
      windows.push(window)
      if (window.sustained) passed = middle
      else failed = middle
    }
    const at50 = passed > 0 ? yield* runWindow(store, deliveries, Math.round(passed * 0.5), ++run) : undefined
    const at80 = passed > 0 ? yield* runWindow(store, deliveries, Math.round(passed * 0.8), ++run) : undefined
    yield* Fiber.interrupt(relay)
    return {
      maxSustainedPerSecond: passed,
      firstFailedPerSecond: failed ?? null,
      searchCapped: failed === undefined,
      at50:
        at50 === undefined
          ? null
          : { rate: at50.offeredPerSecond, p50Millis: at50.p50Millis, p99Millis: at50.p99Millis },
      at80:
        at80 === undefined
          ? null
          : { rate: at80.offeredPerSecond, p50Millis: at80.p50Millis, p99Millis: at80.p99Millis },
      windows
    }
  }).pipe(Effect.provide(target.stores), Effect.provide(Logger.minimumLogLevel(LogLevel.Warning)), Effect.orDie)

const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-steady-"))
const sqliteStores = (): Stores => {
  const file = path.join(directory, `steady-${randomUUID().slice(0, 8)}.db`)
  return Layer.mergeAll(SqliteOutboxStore.layer, SqliteLeaseStore.layer).pipe(
    Layer.provide(SqliteDatabase.layer({ filename: file }))
  )
}

const makeTarget = async (name: string): Promise<Target> => {
  const none = async () => undefined
  switch (name) {
    case "memory":
      return { stores: Layer.mergeAll(MemoryOutboxStore.layer, MemoryLeaseStore.layer), sink: noteSink, stop: none }
    case "sqlite":
      return { stores: sqliteStores(), sink: noteSink, stop: none }
    case "postgres": {
      const server = await PostgresServer.startPostgres()
      const url = await PostgresServer.createDatabase(server.url, "steady")
      const client = PgClient.layer({ url: Redacted.make(url), maxConnections: 8 })
      return {
        stores: Layer.mergeAll(PostgresOutboxStore.layer, PostgresLeaseStore.layer).pipe(Layer.provide(client)),
        sink: noteSink,
        stop: () => server.stop()
      }
    }
    case "mysql": {
      const server = await MysqlServer.startMysql()
      const url = await MysqlServer.createDatabase(server.url, "steady")
      const client = MysqlClient.layer({ url: Redacted.make(url), maxConnections: 8 })
      return {
        stores: Layer.mergeAll(MysqlOutboxStore.layer, MysqlLeaseStore.layer).pipe(Layer.provide(client)),
        sink: noteSink,
        stop: () => server.stop()
      }
    }
    case "dynamodb": {
      const server = await startDynamoLocal()
      const tableName = `steady-${randomUUID().slice(0, 8)}`
      const client = DynamoDb.layer({
        endpoint: server.endpoint,
        region: "us-east-1",
        credentials: { accessKeyId: "x", secretAccessKey: "x" }
      })
      return {
        stores: Layer.mergeAll(
          DynamoDbOutboxStore.layerWith({ tableName, ensureTable: true }),
          DynamoDbLeaseStore.layerWith({ tableName, ensureTable: true })
        ).pipe(Layer.provide(client)),
        sink: noteSink,
        stop: () => server.stop()
      }
    }
    case "webhook": {
      const receiver = createServer((request, response) => {
        request.resume()
        request.on("end", () => response.writeHead(204).end())
      })
      await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
      const address = receiver.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      return {
        stores: sqliteStores(),
        sink: WebhookSink.layerWith({ url: `http://127.0.0.1:${port}/hook` }).pipe(
          Layer.provide(NodeHttpClient.layerUndici)
        ),
        stop: () => new Promise<void>((resolve) => receiver.close(() => resolve()))
      }
    }
    case "nats": {
      const server = await startNats()
      const nc = await natsConnect({ servers: server.url, noAsyncTraces: true })
      const jsm = await nc.jetstreamManager()
      await jsm.streams.add({ name: "steady", subjects: ["steady.>"], max_msgs: 100_000 })
      await nc.close()
      return {
        stores: sqliteStores(),
        sink: NatsSink.layer({ servers: server.url, subject: "steady.{partitionKey}" }),
        stop: () => server.dispose()
      }
    }
    case "rabbitmq": {
      const server = await startRabbitMq()
      const model = await amqpConnect(server.url)
      const channel = await model.createChannel()
      await channel.assertQueue("steady", { durable: true })
      // the queue is only a destination: emptied every second so the broker's memory stays flat
      const purge = setInterval(() => void channel.purgeQueue("steady").catch(() => undefined), 1_000)
      return {
        stores: sqliteStores(),
        sink: RabbitMqSink.layer({ url: server.url, routingKey: "steady" }),
        stop: async () => {
          clearInterval(purge)
          await model.close()
          await server.dispose()
        }
      }
    }
    default:
      throw new Error(`unknown target ${name} (known: ${allTargets.join(", ")})`)
  }
}

const main = async (): Promise<void> => {
  const loadBefore = os.loadavg()[0] ?? 0
  const started = performance.now()
  const result: Record<string, unknown> = {}
  try {
    for (const name of targets) {
      progress(`${name}: windows of ${windowSeconds} s`)
      const target = await makeTarget(name)
      try {
        result[name] = await Effect.runPromise(measureTarget(name, target))
      } finally {
        await target.stop()
      }
      console.log(name, JSON.stringify(result[name]))
    }
  } finally {
    fs.rmSync(directory, { recursive: true, force: true })
  }
  const output = {
    date: new Date().toISOString(),
    loadAverage1m: { before: loadBefore, after: os.loadavg()[0] ?? 0 },
    seconds: Math.round((performance.now() - started) / 1000),
    quick,
    method: {
      windowSeconds,
      issueWindowSeconds: 60,
      partitions: partitions.length,
      keyed: "every other record, 16 keys per partition",
      producer: `the same process, calls of up to ${callSize} records every ${tickMillis} ms`,
      sustained:
        "≥ 95 % of the rate offered; backlog at the end ≤ backlog a quarter in + 0.5 s of production and ≤ 2 s of production",
      search: `from 50/s (DynamoDB Local 10/s) doubling, then ${bisections} bisection steps`
    },
    ...result
  }
  const file = path.join(here, "results", "steady.json")
  fs.writeFileSync(file, `${JSON.stringify(output, null, 2)}\n`)
  console.log(`written ${file}`)
  process.exit(0)
}

await main()
