/**
 * Relay fairness benchmark (run: `npx tsx bench/fairness.ts`, `--quick` for a short run; `--only=drain`,
 * `--only=steady` or `--only=discovery` runs one part and prints it without writing the results file).
 *
 * 1. **Drain of many small partitions**: 2,000 partitions of one record each are persisted, then one relay
 *    with `maxPartitions` 64 (otherwise default options, a sink that only counts) is started (after an untimed
 *    drain of 500 partitions on stores of their own, so that the backend's code paths run warm; three timed
 *    rounds on fresh stores, the median round kept, every round's rate beside it); the time until every record
 *    was sent, and until `listPartitions` comes back empty (every record completed), in wall
 *    and CPU seconds of this process. SQLite on a file (WAL, `synchronous = FULL`, the default: every
 *    commit waits for the disk; the lease writes, expiry sweeps, claims and completes asked for in one turn
 *    of the event loop share one) and, informational, the same with `synchronous = NORMAL` (commits do not
 *    wait for the disk: the relay's own cost);
 *    PostgreSQL on a throw-away local server (`fsync` on).
 * 2. **Oldest pending age under a steady producer**: a producer persists records spread at random over
 *    1,000 partitions at a steady rate (half the drain rate measured in 1, at most 400 records/s) for
 *    ~30 s while one relay with `maxPartitions` 64 drains them. Every 250 ms the age of the oldest record
 *    not yet delivered is sampled (the producer's and the sink's own bookkeeping: exact, and the same on
 *    every backend), and so is the relay's unleased gauge (`RelayHandle.unleased`: partitions with work
 *    the relay found without a lease, and how long the oldest has waited). p50/p99/max of the samples and
 *    enqueue-to-delivery latency.
 * 3. **Discovery cost** (R-READ-3): 10,000 partitions were written, 100 still hold work; one discovery
 *    listing (`listPartitions`, drained to its end) per backend — memory, SQLite, PostgreSQL, DynamoDB
 *    Local, MariaDB — with the statements or requests it made, the rows or items it read where the
 *    backend reports them (PostgreSQL: EXPLAIN ANALYZE of each page's statement; DynamoDB: `ScannedCount`;
 *    MariaDB: the session's `Handler_read_%` counters), and its median time over a few rounds beside the
 *    same listing with only the 100 partitions ever written (a listing that costs O(partitions with work)
 *    takes about as long in both).
 *
 * Figures were taken on shared 2-core machines that other processes load heavily: compare the rows of one
 * run, not absolute figures across runs. Writes bench/results/fairness.json.
 */
import type { QueryCommandOutput, WriteRequest } from "@aws-sdk/client-dynamodb"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as DynamoDbOutboxStore from "../src/layers/dynamodb/DynamoDbOutboxStore.js"
import * as RecordItem from "../src/layers/dynamodb/RecordItem.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as MysqlOutboxStore from "../src/layers/mysql/MysqlOutboxStore.js"
import * as PostgresLeaseStore from "../src/layers/postgres/PostgresLeaseStore.js"
import * as PostgresOutboxSchema from "../src/layers/postgres/PostgresOutboxSchema.js"
import * as PostgresOutboxStore from "../src/layers/postgres/PostgresOutboxStore.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteLeaseStore from "../src/layers/sqlite/SqliteLeaseStore.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import * as Relay from "../src/programs/Relay.js"
import * as DynamoDb from "../src/services/DynamoDb.js"
import { LeaseStore } from "../src/services/LeaseStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { Sink } from "../src/services/Sink.js"
import { startDynamoLocal } from "../test/support/globalSetup.js"
import * as MysqlServer from "../test/support/MysqlServer.js"
import * as PostgresServer from "../test/support/PostgresServer.js"
import { progress } from "./Progress.js"

const quick = process.argv.includes("--quick")
const only = process.argv.find((arg) => arg.startsWith("--only="))?.slice("--only=".length)
const here = path.dirname(fileURLToPath(import.meta.url))
const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-fairness-bench-"))
let files = 0
const freshFile = (): string => path.join(directory, `fairness-${++files}.db`)

const drainPartitions = 2000
/** Partitions of the untimed drain each backend runs first, on stores of its own (the code paths warm up). */
const warmUpPartitions = quick ? 100 : 500
/** Timed drains per backend, each on fresh stores: the results keep the median round and every round's rate. */
const drainRounds = quick ? 1 : 3
const maxPartitions = 64
const steadyPartitions = 1000
const steadySeconds = quick ? 10 : 30
const steadyMaxRate = 400
const sampleEveryMillis = 250
const listingTotal = 10_000
const listingWithWork = 100
const listingRounds = quick ? 3 : 7
const drainTimeoutMillis = 240_000

const dropAll = { onExpired: "drop", onPermanentFailure: "drop", onPoison: "drop" } as const

type Stores = Layer.Layer<OutboxStore | LeaseStore>

const round = (n: number, digits = 2): number => Number(n.toFixed(digits))

const percentile = (values: ReadonlyArray<number>, p: number): number => {
  if (values.length === 0) return 0
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? 0
}

const median = (values: ReadonlyArray<number>): number => percentile(values, 50)

const cpuSeconds = (): number => {
  const usage = process.cpuUsage()
  return (usage.user + usage.system) / 1e6
}

const load = (): number => round(os.loadavg()[0] ?? 0)

const pad = (i: number): string => String(i).padStart(5, "0")

const oneRecord = (prefix: string, partitionKey: string, n: number): NewOutboxRecord =>
  new NewOutboxRecord({
    id: `${prefix}-${pad(n)}`,
    partitionKey,
    envelopeId: `e-${n}`,
    bindingId: "b",
    payload: new Uint8Array(64).fill(7)
  })

/** Starts a relay in a fiber of its own; its scope closes when the fiber is interrupted. */
const startRelay = <const Options extends Relay.RelayOptions & { readonly drainer: typeof dropAll }>(
  options: Options,
  sink: Sink["Type"]
) =>
  Effect.gen(function* () {
    const handle = yield* Deferred.make<Relay.RelayHandle>()
    const fiber = yield* Effect.fork(
      Effect.scoped(
        Relay.start(options).pipe(
          Effect.tap((h) => Deferred.succeed(handle, h)),
          Effect.zipRight(Effect.never)
        )
      ).pipe(Effect.provideService(Sink, sink), Effect.orDie)
    )
    return { fiber, handle: yield* Deferred.await(handle) }
  })

const listingIsEmpty = Effect.flatMap(OutboxStore, (store) =>
  Effect.map(Stream.runCollect(Stream.take(store.listPartitions, 1)), (keys) => Chunk.isEmpty(keys))
)

// ---------------------------------------------------------------------------------------------------
// 1. Drain of 2,000 one-record partitions
// ---------------------------------------------------------------------------------------------------

interface DrainFigures {
  readonly partitions: number
  readonly maxPartitions: number
  readonly delivered: number
  readonly sentSeconds: number
  readonly completedSeconds: number
  readonly cpuSeconds: number
  readonly partitionsPerSecond: number
  readonly finished: boolean
  readonly loadAverage1m: number
}

const drain = (stores: Stores, partitions = drainPartitions): Promise<DrainFigures> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const records = Array.from({ length: partitions }, (_, i) => oneRecord("d", `cust-${pad(i)}`, i))
      for (let i = 0; i < records.length; i += 500) yield* store.persist(records.slice(i, i + 500))
      const sent = new Set<string>()
      const sink = Sink.of({
        send: (record) =>
          Effect.sync(() => {
            sent.add(record.id)
          })
      })
      const started = performance.now()
      const cpu0 = cpuSeconds()
      const relay = yield* startRelay({ owner: "fair-drain", maxPartitions, drainer: dropAll }, sink)
      let sentSeconds = 0
      let completedSeconds = 0
      let lastReport = 0
      while (performance.now() - started < drainTimeoutMillis) {
        yield* Effect.sleep("20 millis")
        if (sentSeconds === 0 && sent.size >= partitions) sentSeconds = (performance.now() - started) / 1000
        if (sentSeconds > 0 && (yield* listingIsEmpty)) {
          completedSeconds = (performance.now() - started) / 1000
          break
        }
        if (performance.now() - lastReport > 1000) {
          lastReport = performance.now()
          progress(`drain: ${sent.size}/${partitions} sent`)
        }
      }
      const cpu = cpuSeconds() - cpu0
      yield* Fiber.interrupt(relay.fiber)
      const finished = completedSeconds > 0
      const seconds = finished ? completedSeconds : drainTimeoutMillis / 1000
      return {
        partitions,
        maxPartitions,
        delivered: sent.size,
        sentSeconds: round(sentSeconds, 3),
        completedSeconds: round(completedSeconds, 3),
        cpuSeconds: round(cpu, 3),
        partitionsPerSecond: Math.round(sent.size / seconds),
        finished,
        loadAverage1m: load()
      }
    }).pipe(Effect.provide(stores), Logger.withMinimumLogLevel(LogLevel.Warning), Effect.orDie)
  )

// ---------------------------------------------------------------------------------------------------
// 2. Oldest pending age under a steady producer over 1,000 partitions
// ---------------------------------------------------------------------------------------------------

interface Distribution {
  readonly samples: number
  readonly p50: number
  readonly p99: number
  readonly max: number
}

const distribution = (values: ReadonlyArray<number>, digits = 3): Distribution => ({
  samples: values.length,
  p50: round(percentile(values, 50), digits),
  p99: round(percentile(values, 99), digits),
  max: round(Math.max(0, ...values), digits)
})

interface SteadyFigures {
  readonly partitions: number
  readonly maxPartitions: number
  readonly offeredPerSecond: number
  readonly seconds: number
  readonly records: number
  readonly delivered: number
  /** Age of the oldest record not yet delivered, sampled every 250 ms (seconds). */
  readonly oldestPendingAgeSeconds: Distribution
  /** The relay's unleased gauge: the oldest wait of a partition with work and no lease (seconds). */
  readonly unleasedOldestWaitSeconds: Distribution
  /** The relay's unleased gauge: partitions with work and no lease. */
  readonly unleasedPartitions: Distribution
  /** Enqueue (persist returned) to first send, milliseconds. */
  readonly deliveryLatencyMillis: Distribution
  readonly cpuSeconds: number
  readonly loadAverage1m: number
}

/** A small deterministic generator (mulberry32), so that every backend sees the same partitions. */
const random = (seed: number) => {
  let a = seed >>> 0
  return (): number => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const steady = (stores: Stores, perSecond: number): Promise<SteadyFigures> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const store = yield* OutboxStore
      /** Records persisted and not yet sent, in creation order, with the time their persist returned. */
      const undelivered = new Map<string, number>()
      const latencies: Array<number> = []
      const sink = Sink.of({
        send: (record) =>
          Effect.sync(() => {
            const at = undelivered.get(record.id)
            if (at === undefined) return
            undelivered.delete(record.id)
            latencies.push(performance.now() - at)
          })
      })
      const relay = yield* startRelay({ owner: "fair-steady", maxPartitions, drainer: dropAll }, sink)
      const next = random(31)
      const tick = 100
      const perTick = perSecond / (1000 / tick)
      const ticks = Math.round((steadySeconds * 1000) / tick)
      const oldest: Array<number> = []
      const unleasedWait: Array<number> = []
      const unleasedCount: Array<number> = []
      let stop = false
      const sampler = yield* Effect.fork(
        Effect.gen(function* () {
          while (!stop) {
            yield* Effect.sleep(`${sampleEveryMillis} millis`)
            const now = performance.now()
            let first: number | undefined
            for (const at of undelivered.values()) {
              first = at
              break
            }
            oldest.push(first === undefined ? 0 : (now - first) / 1000)
            const unleased = yield* relay.handle.unleased
            unleasedWait.push(Duration.toMillis(unleased.oldestWait) / 1000)
            unleasedCount.push(unleased.partitions)
          }
        })
      )
      const cpu0 = cpuSeconds()
      const started = performance.now()
      let n = 0
      let owed = 0
      for (let i = 0; i < ticks; i++) {
        const wait = started + i * tick - performance.now()
        if (wait > 0) yield* Effect.sleep(`${Math.ceil(wait)} millis`)
        owed += perTick
        const batch: Array<NewOutboxRecord> = []
        while (owed >= 1) {
          owed -= 1
          const partition = Math.floor(next() * steadyPartitions)
          batch.push(oneRecord("s", `load-${pad(partition)}`, n++))
        }
        if (batch.length === 0) continue
        yield* store.persist(batch)
        const at = performance.now()
        for (const record of batch) undelivered.set(record.id ?? "", at)
        if (i % 10 === 0) progress(`steady: ${n} persisted, ${undelivered.size} not yet delivered`)
      }
      const offeredSeconds = (performance.now() - started) / 1000
      // the records still on their way are part of the picture: sample until every one is delivered
      const settleBy = performance.now() + 60_000
      while (undelivered.size > 0 && performance.now() < settleBy) yield* Effect.sleep("50 millis")
      stop = true
      yield* Fiber.interrupt(sampler)
      const cpu = cpuSeconds() - cpu0
      yield* Fiber.interrupt(relay.fiber)
      return {
        partitions: steadyPartitions,
        maxPartitions,
        offeredPerSecond: perSecond,
        seconds: round(offeredSeconds, 1),
        records: n,
        delivered: n - undelivered.size,
        oldestPendingAgeSeconds: distribution(oldest),
        unleasedOldestWaitSeconds: distribution(unleasedWait),
        unleasedPartitions: distribution(unleasedCount, 0),
        deliveryLatencyMillis: distribution(latencies, 1),
        cpuSeconds: round(cpu, 2),
        loadAverage1m: load()
      }
    }).pipe(Effect.provide(stores), Logger.withMinimumLogLevel(LogLevel.Warning), Effect.orDie)
  )

// ---------------------------------------------------------------------------------------------------
// 3. Discovery cost: 10,000 partitions written, 100 with work
// ---------------------------------------------------------------------------------------------------

/** Partition keys per `listPartitions` page of the SQL stores. */
const sqlPage = 100

const listingKey = (i: number): string => `cust-${pad(i)}`
/** Every 100th partition keeps its work. */
const busyKeys = (total: number): ReadonlyArray<string> =>
  Array.from({ length: listingWithWork }, (_, i) => listingKey(i * Math.max(1, total / listingWithWork)))

interface ListingCost {
  readonly backend: string
  readonly partitionsWritten: number
  readonly partitionsWithWork: number
  readonly listed: number
  readonly listedExactly: boolean
  /** Statements (SQL) or requests (DynamoDB) of one listing; 0 for the memory store. */
  readonly statementsPerRound: number | undefined
  /** Rows or items the backend read for one listing, where it reports them. */
  readonly rowsReadPerRound: number | undefined
  readonly rowsReadBy: string
  /** Median wall time of one listing (ms), and of the same listing with only the 100 partitions written. */
  readonly medianMillis: number
  readonly medianMillisOnly100Written: number
}

const listAll = Effect.flatMap(OutboxStore, (store) =>
  Effect.map(Stream.runCollect(store.listPartitions), (keys) => Chunk.toReadonlyArray(keys))
)

/** Median wall milliseconds of `listingRounds` listings (after one warm-up listing). */
const timeListing = <R>(layer: Layer.Layer<OutboxStore, unknown, R>, provide: Layer.Layer<R>) =>
  Effect.runPromise(
    Effect.gen(function* () {
      yield* listAll
      const times: Array<number> = []
      for (let i = 0; i < listingRounds; i++) {
        const t0 = performance.now()
        yield* listAll
        times.push(performance.now() - t0)
      }
      return round(median(times), 3)
    }).pipe(Effect.provide(Layer.provide(layer, provide)), Effect.orDie)
  )

/** Persists one record in each of the first `total` partitions, 1,000 per call. */
const persistPartitions = (total: number) =>
  Effect.flatMap(OutboxStore, (store) =>
    Effect.forEach(
      Array.from({ length: Math.ceil(total / 1000) }, (_, k) => k * 1000),
      (from) =>
        store.persist(
          Array.from({ length: Math.min(1000, total - from) }, (_, i) => oneRecord("l", listingKey(from + i), from + i))
        ),
      { discard: true }
    )
  )

/** Sets every record outside the busy partitions completed (as drainers leave them), with plain SQL. */
const completeAllButBusy = (table: string, total: number, placeholder: (i: number) => string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => {
    const busy = busyKeys(total)
    return sql.unsafe(
      `UPDATE ${table} SET status = 'completed', completed_at = 1, terminal_at = 1 WHERE partition_key NOT IN (${busy.map((_, i) => placeholder(i)).join(", ")})`,
      busy
    )
  })

const memoryListing = async (): Promise<ListingCost> => {
  const state = (total: number) =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* persistPartitions(total)
      const keep = new Set(busyKeys(total))
      for (let i = 0; i < total; i++) {
        if (keep.has(listingKey(i))) continue
        const token = { owner: "bench", version: 1 }
        const batch = yield* store.claim(listingKey(i), token, 1)
        yield* store.complete(
          batch.records.map((r) => r.id),
          token
        )
      }
    })
  const measure = (total: number) =>
    Effect.runPromise(
      Effect.gen(function* () {
        yield* state(total)
        const keys = yield* listAll
        yield* listAll
        const times: Array<number> = []
        for (let i = 0; i < listingRounds; i++) {
          const t0 = performance.now()
          yield* listAll
          times.push(performance.now() - t0)
        }
        return { keys, millis: round(median(times), 3) }
      }).pipe(Effect.provide(MemoryOutboxStore.layer), Effect.orDie)
    )
  const big = await measure(listingTotal)
  const small = await measure(listingWithWork)
  return {
    backend: "memory",
    partitionsWritten: listingTotal,
    partitionsWithWork: listingWithWork,
    listed: big.keys.length,
    listedExactly: sameKeys(big.keys, busyKeys(listingTotal)),
    statementsPerRound: 0,
    rowsReadPerRound: undefined,
    rowsReadBy: "not reported (the store keeps a set of the partitions with live records)",
    medianMillis: big.millis,
    medianMillisOnly100Written: small.millis
  }
}

const sameKeys = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): boolean =>
  a.length === b.length && [...a].sort().every((k, i) => k === [...b].sort()[i])

/** Statements a listing of `keys` makes through the SQL stores' keyset pages. */
const sqlStatements = (keys: number): number => Math.floor(keys / sqlPage) + 1

const sqliteListing = async (): Promise<ListingCost> => {
  const measure = async (total: number) => {
    const db = SqliteDatabase.layer({ filename: freshFile() })
    const store = SqliteOutboxStore.layer.pipe(Layer.provideMerge(db), Layer.orDie)
    return Effect.runPromise(
      Effect.gen(function* () {
        yield* persistPartitions(total)
        yield* completeAllButBusy("outbox", total, () => "?")
        const sql = yield* SqlClient.SqlClient
        yield* sql.unsafe("ANALYZE")
        const keys = yield* listAll
        yield* listAll
        const times: Array<number> = []
        for (let i = 0; i < listingRounds; i++) {
          const t0 = performance.now()
          yield* listAll
          times.push(performance.now() - t0)
        }
        return { keys, millis: round(median(times), 3) }
      }).pipe(Effect.provide(store), Effect.orDie)
    )
  }
  const big = await measure(listingTotal)
  const small = await measure(listingWithWork)
  return {
    backend: "SQLite",
    partitionsWritten: listingTotal,
    partitionsWithWork: listingWithWork,
    listed: big.keys.length,
    listedExactly: sameKeys(big.keys, busyKeys(listingTotal)),
    statementsPerRound: sqlStatements(big.keys.length),
    rowsReadPerRound: undefined,
    rowsReadBy:
      "not reported by SQLite; the plan is one covering-index seek per listed partition (test/partitionListing.test.ts)",
    medianMillis: big.millis,
    medianMillisOnly100Written: small.millis
  }
}

interface PlanNode {
  readonly "Node Type": string
  readonly "Relation Name"?: string | undefined
  readonly "Actual Rows": number
  readonly "Actual Loops": number
  readonly Plans?: ReadonlyArray<PlanNode> | undefined
}
const PlanNode: Schema.Schema<PlanNode> = Schema.Struct({
  "Node Type": Schema.String,
  "Relation Name": Schema.optional(Schema.String),
  "Actual Rows": Schema.Number,
  "Actual Loops": Schema.Number,
  Plans: Schema.optional(Schema.Array(Schema.suspend(() => PlanNode)))
})
const Explained = Schema.Array(Schema.Struct({ "QUERY PLAN": Schema.Tuple(Schema.Struct({ Plan: PlanNode })) }))
const nodesOf = (node: PlanNode): Array<PlanNode> => [node, ...(node.Plans ?? []).flatMap(nodesOf)]

const postgresListing = async (serverUrl: string): Promise<ListingCost> => {
  const measure = async (total: number) => {
    const url = await PostgresServer.createDatabase(serverUrl, "listing")
    const client = PostgresServer.clientLayer(url, 2)
    const store = PostgresOutboxStore.layer.pipe(Layer.provideMerge(client), Layer.orDie)
    return Effect.runPromise(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const names = yield* PostgresOutboxSchema.tableNames("bench", "public", "")
        yield* persistPartitions(total)
        yield* completeAllButBusy(names.outbox, total, (i) => `$${i + 1}`)
        yield* sql.unsafe(`VACUUM ANALYZE ${names.outbox}`)
        const keys = yield* listAll
        yield* listAll
        const times: Array<number> = []
        for (let i = 0; i < listingRounds; i++) {
          const t0 = performance.now()
          yield* listAll
          times.push(performance.now() - t0)
        }
        // rows read: EXPLAIN ANALYZE of each page's statement, with the cursors the listing used
        const text = PostgresOutboxSchema.statements(names, { staleReclaim: false }).listPartitions
        const sorted = [...keys].sort()
        let rows = 0
        for (let page = 0; page < sqlStatements(keys.length); page++) {
          const after = page === 0 ? "" : (sorted[page * sqlPage - 1] ?? "")
          const plan = yield* Schema.decodeUnknown(Explained)(
            yield* sql.unsafe(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, [after, sqlPage])
          )
          const root = plan[0]?.["QUERY PLAN"][0].Plan
          rows += (root === undefined ? [] : nodesOf(root))
            .filter((n) => n["Node Type"].includes("Scan") && n["Relation Name"] !== undefined)
            .reduce((sum, n) => sum + n["Actual Rows"] * n["Actual Loops"], 0)
        }
        return { keys, millis: round(median(times), 3), rows }
      }).pipe(Effect.provide(store), Effect.orDie)
    )
  }
  const big = await measure(listingTotal)
  const small = await measure(listingWithWork)
  return {
    backend: "PostgreSQL",
    partitionsWritten: listingTotal,
    partitionsWithWork: listingWithWork,
    listed: big.keys.length,
    listedExactly: sameKeys(big.keys, busyKeys(listingTotal)),
    statementsPerRound: sqlStatements(big.keys.length),
    rowsReadPerRound: big.rows,
    rowsReadBy: "EXPLAIN ANALYZE: actual rows × loops of every scan of a table or index, over the listing's pages",
    medianMillis: big.millis,
    medianMillisOnly100Written: small.millis
  }
}

const StatusRows = Schema.Array(Schema.Struct({ Variable_name: Schema.String, Value: Schema.String }))

const mariadbListing = async (serverUrl: string): Promise<ListingCost> => {
  const measure = async (total: number) => {
    const url = await MysqlServer.createDatabase(serverUrl, "listing")
    const client = MysqlServer.clientLayer(url, 1)
    const store = MysqlOutboxStore.layer.pipe(Layer.provideMerge(client), Layer.orDie)
    return Effect.runPromise(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* persistPartitions(total)
        yield* completeAllButBusy("outbox", total, () => "?")
        yield* sql.unsafe("ANALYZE TABLE outbox")
        const keys = yield* listAll
        yield* listAll
        const times: Array<number> = []
        for (let i = 0; i < listingRounds; i++) {
          const t0 = performance.now()
          yield* listAll
          times.push(performance.now() - t0)
        }
        // rows read and statements: the session's handler and statement counters around one listing (one
        // pooled connection, so the session is the store's), less what the counter reads themselves add
        const counters = Effect.map(
          Effect.flatMap(
            sql.unsafe("SHOW SESSION STATUS WHERE Variable_name LIKE 'Handler_read%' OR Variable_name = 'Com_select'"),
            Schema.decodeUnknown(StatusRows)
          ),
          (rows) => {
            let reads = 0
            let selects = 0
            for (const row of rows) {
              if (row.Variable_name === "Com_select") selects = Number(row.Value)
              else reads += Number(row.Value)
            }
            return { reads, selects }
          }
        )
        const a = yield* counters
        const b = yield* counters
        yield* listAll
        const c = yield* counters
        const overhead = { reads: b.reads - a.reads, selects: b.selects - a.selects }
        return {
          keys,
          millis: round(median(times), 3),
          rows: c.reads - b.reads - overhead.reads,
          statements: c.selects - b.selects - overhead.selects
        }
      }).pipe(Effect.provide(store), Effect.orDie)
    )
  }
  const big = await measure(listingTotal)
  const small = await measure(listingWithWork)
  return {
    backend: "MariaDB",
    partitionsWritten: listingTotal,
    partitionsWithWork: listingWithWork,
    listed: big.keys.length,
    listedExactly: sameKeys(big.keys, busyKeys(listingTotal)),
    statementsPerRound: big.statements,
    rowsReadPerRound: big.rows,
    rowsReadBy: "the session's Handler_read_% counters around one listing",
    medianMillis: big.millis,
    medianMillisOnly100Written: small.millis
  }
}

const dynamoListing = async (endpoint: string): Promise<ListingCost> => {
  const counts = { requests: 0, scanned: 0 }
  const base = DynamoDb.layer({
    endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "local", secretAccessKey: "local" }
  })
  const counting = Layer.effect(
    DynamoDb.DynamoDb,
    Effect.map(DynamoDb.DynamoDb, (inner) =>
      DynamoDb.DynamoDb.of({
        ...inner,
        query: (input) =>
          Effect.tap(inner.query(input), (out: QueryCommandOutput) =>
            Effect.sync(() => {
              counts.requests += 1
              counts.scanned += out.ScannedCount ?? 0
            })
          )
      })
    )
  ).pipe(Layer.provide(base))
  const measure = async (total: number, name: string) => {
    const tableName = `fairness-${name}-${Date.now().toString(36)}`
    const store = DynamoDbOutboxStore.layerWith({ tableName, ensureTable: true, indexLagRetries: 0 }).pipe(
      Layer.provideMerge(counting),
      Layer.orDie
    )
    return Effect.runPromise(
      Effect.gen(function* () {
        const dynamo = yield* DynamoDb.DynamoDb
        const busy = busyKeys(total)
        const busySet = new Set(busy)
        // the fence items drained partitions leave behind (seq counter kept, no longer listed)
        const drained = Array.from({ length: total }, (_, i) => listingKey(i)).filter((k) => !busySet.has(k))
        for (let from = 0; from < drained.length; from += 25) {
          let items: Record<string, Array<WriteRequest>> | undefined = {
            [tableName]: drained.slice(from, from + 25).map((partitionKey) => ({
              PutRequest: {
                Item: { ...RecordItem.fenceKey(partitionKey), seq_counter: { N: "1" }, max_claim_version: { N: "1" } }
              }
            }))
          }
          while (items !== undefined && Object.keys(items).length > 0) {
            const out: { readonly UnprocessedItems?: Record<string, Array<WriteRequest>> | undefined } =
              yield* dynamo.batchWriteItem({ RequestItems: items })
            items = out.UnprocessedItems
          }
          if (from % 2500 === 0) progress(`DynamoDB Local: ${from}/${drained.length} drained partitions written`)
        }
        const outbox = yield* OutboxStore
        yield* outbox.persist(busy.map((partitionKey, i) => oneRecord("dl", partitionKey, i)))
        const keys = yield* listAll
        yield* listAll
        const times: Array<number> = []
        for (let i = 0; i < listingRounds; i++) {
          const t0 = performance.now()
          yield* listAll
          times.push(performance.now() - t0)
        }
        counts.requests = 0
        counts.scanned = 0
        yield* listAll
        const read = { requests: counts.requests, scanned: counts.scanned }
        yield* dynamo.deleteTable({ TableName: tableName })
        return { keys, millis: round(median(times), 3), ...read }
      }).pipe(Effect.provide(store), Effect.orDie)
    )
  }
  const big = await measure(listingTotal, "big")
  const small = await measure(listingWithWork, "small")
  return {
    backend: "DynamoDB Local",
    partitionsWritten: listingTotal,
    partitionsWithWork: listingWithWork,
    listed: big.keys.length,
    listedExactly: sameKeys(big.keys, busyKeys(listingTotal)),
    statementsPerRound: big.requests,
    rowsReadPerRound: big.scanned,
    rowsReadBy: "ScannedCount of the Query requests (items of the sharded partition index)",
    medianMillis: big.millis,
    medianMillisOnly100Written: small.millis
  }
}

// ---------------------------------------------------------------------------------------------------

const sqliteStores = (synchronous: "FULL" | "NORMAL"): Stores =>
  Layer.mergeAll(SqliteOutboxStore.layer, SqliteLeaseStore.layer).pipe(
    Layer.provide(SqliteDatabase.layer({ filename: freshFile(), synchronous })),
    Layer.orDie
  )

const postgresStores = async (serverUrl: string): Promise<Stores> => {
  const url = await PostgresServer.createDatabase(serverUrl, "fairness")
  return Layer.mergeAll(PostgresOutboxStore.layer, PostgresLeaseStore.layer).pipe(
    Layer.provide(PostgresServer.clientLayer(url, 10)),
    Layer.orDie
  )
}

const steadyRate = (drained: DrainFigures | undefined): number =>
  drained === undefined || !drained.finished
    ? 50
    : Math.max(10, Math.min(steadyMaxRate, Math.round(drained.partitionsPerSecond / 2)))

interface Results {
  date: string
  quick: boolean
  cpus: number
  loadAverage1m: { before: number; after?: number }
  drain: Record<string, DrainFigures & { readonly roundsPartitionsPerSecond: ReadonlyArray<number> }>
  steady: Record<string, SteadyFigures>
  listing: ReadonlyArray<ListingCost>
}

const main = async (): Promise<void> => {
  const results: Results = {
    date: new Date().toISOString(),
    quick,
    cpus: os.cpus().length,
    loadAverage1m: { before: load() },
    drain: {},
    steady: {},
    listing: []
  }
  const doDrain = only === undefined || only === "drain" || only === "steady"
  const doSteady = only === undefined || only === "steady"
  const doListing = only === undefined || only === "discovery"
  const postgres = doDrain || doListing ? await PostgresServer.startPostgres() : undefined
  try {
    if (doDrain) {
      for (const [name, stores] of [
        ["sqlite", () => Promise.resolve(sqliteStores("FULL"))],
        ["sqliteSynchronousNormal", () => Promise.resolve(sqliteStores("NORMAL"))],
        ["postgres", () => postgresStores(postgres?.url ?? "")]
      ] as const) {
        progress(`drain: ${name} (warm-up, ${warmUpPartitions} partitions, not counted)`)
        await drain(await stores(), warmUpPartitions)
        const rounds: Array<DrainFigures> = []
        for (let r = 0; r < drainRounds; r++) {
          progress(`drain: ${name}, round ${r + 1} of ${drainRounds}`)
          rounds.push(await drain(await stores()))
        }
        // the median round (by partitions/s), with every round's figure beside it
        const sorted = [...rounds].sort((a, b) => a.partitionsPerSecond - b.partitionsPerSecond)
        const median = sorted[Math.floor(sorted.length / 2)] ?? rounds[0]
        if (median === undefined) continue
        const figures = { ...median, roundsPartitionsPerSecond: rounds.map((r) => r.partitionsPerSecond) }
        results.drain[name] = figures
        console.log(`drain ${name}: ${JSON.stringify(figures)}`)
      }
    }
    if (doSteady) {
      for (const [name, stores] of [
        ["sqlite", () => Promise.resolve(sqliteStores("FULL"))],
        ["postgres", () => postgresStores(postgres?.url ?? "")]
      ] as const) {
        const rate = steadyRate(results.drain[name])
        progress(`steady: ${name} at ${rate} records/s`)
        const figures = await steady(await stores(), rate)
        results.steady[name] = figures
        console.log(`steady ${name}: ${JSON.stringify(figures)}`)
      }
    }
    if (doListing) {
      const listing: Array<ListingCost> = []
      progress("discovery: memory")
      listing.push(await memoryListing())
      progress("discovery: SQLite")
      listing.push(await sqliteListing())
      progress("discovery: PostgreSQL")
      listing.push(await postgresListing(postgres?.url ?? ""))
      progress("discovery: MariaDB")
      const mysql = await MysqlServer.startMysql()
      try {
        listing.push(await mariadbListing(mysql.url))
      } finally {
        await mysql.stop()
      }
      progress("discovery: DynamoDB Local")
      const dynamo = await startDynamoLocal()
      try {
        listing.push(await dynamoListing(dynamo.endpoint))
      } finally {
        await dynamo.stop()
      }
      for (const row of listing) console.log(`discovery ${row.backend}: ${JSON.stringify(row)}`)
      results.listing = listing
    }
  } finally {
    await postgres?.stop()
    fs.rmSync(directory, { recursive: true, force: true })
  }
  results.loadAverage1m.after = load()
  if (only === undefined) {
    const file = path.join(here, "results", "fairness.json")
    fs.writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`)
    console.log(`wrote ${file}`)
  }
}

await main()
