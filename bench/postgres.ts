/**
 * Benchmark of the PostgreSQL OutboxStore (run: `npx tsx bench/postgres.ts`, `--quick` for a short run).
 *
 * Starts its own server (test/support/PostgresServer.ts: loopback, `fsync` on, so every commit is an
 * fsync). In the same process and run, a raw `pg` baseline issues the very same statements
 * (`PostgresOutboxSchema.statements`) in the same transactions, with the same ids, and no Effect, no
 * validation and no row decoding:
 *
 * 1. persist 100 → claim 100 → complete 100, end to end (records/s); the raw and the store side take
 *    turns every 10 batches, each in its own schema, so both see the same machine load; median of the
 *    rounds;
 * 2. relay with a no-op sink draining a backlog of 4 partitions (leases, claims of 100, completes) against a
 *    raw loop claiming and completing the same backlog partition by partition on one connection;
 * 3. claim(100) latency through the store at 1k and 100k pending records (median of many claims; each
 *    measured claim is followed by completing the batch and persisting 100 new records, so the backlog
 *    stays put while the front of the claim index moves).
 *
 * Writes bench/results/postgres.json.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { LeaseToken } from "../src/domain/LeaseToken.js"
import { formatTimeOrderedId, type NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as PostgresOutboxSchema from "../src/layers/postgres/PostgresOutboxSchema.js"
import * as PostgresOutboxStore from "../src/layers/postgres/PostgresOutboxStore.js"
import * as PostgresLeaseStore from "../src/layers/postgres/PostgresLeaseStore.js"
import * as Relay from "../src/programs/Relay.js"
import { OutboxStore, type OutboxStoreService } from "../src/services/OutboxStore.js"
import { Sink } from "../src/services/Sink.js"
import { clientLayer, createDatabase, startPostgres } from "../test/support/PostgresServer.js"

const quick = process.argv.includes("--quick")
const batch = 100
const records = quick ? 3_000 : 10_000
const rounds = quick ? 1 : 3
const latencySamples = quick ? 30 : 100
const payload = new Uint8Array(64).fill(7)
const token = new LeaseToken({ owner: "bench", version: 1 })
const here = path.dirname(fileURLToPath(import.meta.url))

// ---------------------------------------------------------------------------------------------------
// The raw pg baseline (typed here: the package ships no declarations)
// ---------------------------------------------------------------------------------------------------

interface RawResult {
  readonly rows: Array<Record<string, unknown>>
}
interface RawClient {
  connect(): Promise<void>
  query(text: string, values?: ReadonlyArray<unknown>): Promise<RawResult>
  end(): Promise<void>
  on(event: "error", listener: (error: unknown) => void): void
}
type RawClientConstructor = new (config: { readonly connectionString: string }) => RawClient
const requireModule = createRequire(import.meta.url)
const pgModule: { readonly Client: RawClientConstructor } = requireModule("pg")

/** A connected raw client; errors after a failure elsewhere (the server stopping) are ignored. */
const rawClient = async (url: string): Promise<RawClient> => {
  const client = new pgModule.Client({ connectionString: url })
  client.on("error", () => undefined)
  await client.connect()
  return client
}

/** The raw baseline: the store's statements in the store's transactions, on one connection. */
class RawStore {
  private readonly st: PostgresOutboxSchema.Statements
  private readonly channel: string
  constructor(
    private readonly client: RawClient,
    schema: string
  ) {
    const names = Either.getOrThrow(PostgresOutboxSchema.tableNames("bench", schema, ""))
    this.st = PostgresOutboxSchema.statements(names, { staleReclaim: false })
    this.channel = names.channel
  }
  private async transaction<A>(body: () => Promise<A>): Promise<A> {
    await this.client.query("BEGIN")
    try {
      const result = await body()
      await this.client.query("COMMIT")
      return result
    } catch (error) {
      await this.client.query("ROLLBACK")
      throw error
    }
  }
  persist(inputs: ReadonlyArray<Input>, partitionKey = "p"): Promise<number> {
    return this.transaction(async () => {
      const seq = await this.client.query(this.st.allocateSeq, [[partitionKey], [inputs.length]])
      let next = Number(seq.rows[0]?.["seq_counter"]) - inputs.length + 1
      const now = Date.now()
      const cols: Array<Array<unknown>> = Array.from({ length: 12 }, () => [])
      for (const input of inputs) {
        const values = [input.id, partitionKey, input.envelopeId, "b", "", "", payload, "{}", null, now, null, next++]
        values.forEach((value, i) => cols[i]?.push(value))
      }
      const inserted = await this.client.query(this.st.insert, cols)
      await this.client.query(this.st.notify, [this.channel, [partitionKey]])
      return inserted.rows.length
    })
  }
  claim(limit: number, partitionKey = "p"): Promise<Array<string>> {
    return this.transaction(async () => {
      let fence = await this.client.query(this.st.lockFence, [partitionKey])
      if (fence.rows.length === 0) {
        await this.client.query(this.st.createFence, [partitionKey])
        fence = await this.client.query(this.st.lockFence, [partitionKey])
      }
      if (Number(fence.rows[0]?.["max_version"]) < token.version) {
        await this.client.query(this.st.raiseFence, [partitionKey, token.version])
      }
      const candidates = await this.client.query(this.st.selectClaimable, [
        partitionKey,
        token.version,
        token.version,
        limit
      ])
      if (candidates.rows.length === 0) return []
      const ids = candidates.rows.map((row) => String(row["id"]))
      const now = Date.now()
      const claimed = await this.client.query(this.st.claimUpdate, [
        token.owner,
        token.version,
        now,
        now,
        ids,
        partitionKey,
        token.version
      ])
      return claimed.rows.map((row) => String(row["id"]))
    })
  }
  async complete(ids: ReadonlyArray<string>): Promise<void> {
    const done = await this.client.query(this.st.complete, [Date.now(), Date.now(), ids, token.owner, token.version])
    if (done.rows.length !== ids.length) throw new Error("complete mismatch")
  }
}

// ---------------------------------------------------------------------------------------------------
// Inputs shared by both sides: the same time-ordered ids
// ---------------------------------------------------------------------------------------------------

interface Input {
  readonly id: string
  readonly envelopeId: string
}

let envelopes = 0
const makeInputs = (count: number): Array<Input> => {
  const base = Date.now()
  return Array.from({ length: count }, (_, i) => ({
    id: formatTimeOrderedId(
      base + Math.floor(i / 50),
      Math.floor(Math.random() * 0x1000),
      Math.floor(Math.random() * 0x40000000),
      Math.floor(Math.random() * 0xffffffff)
    ),
    envelopeId: `e${++envelopes}`
  }))
}

const toNew = (input: Input): NewOutboxRecord => ({
  id: input.id,
  partitionKey: "p",
  envelopeId: input.envelopeId,
  bindingId: "b",
  payload
})

const storeCycle = (store: OutboxStoreService, inputs: ReadonlyArray<Input>) =>
  Effect.gen(function* () {
    yield* store.persist(inputs.map(toNew))
    const claimed = yield* store.claim("p", token, batch)
    yield* store.complete(
      claimed.records.map((r) => r.id),
      token
    )
  })

const rawCycle = async (raw: RawStore, inputs: ReadonlyArray<Input>): Promise<void> => {
  await raw.persist(inputs)
  await raw.complete(await raw.claim(batch))
}

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? 0
}
const round3 = (n: number): number => Math.round(n * 1000) / 1000

const main = async (): Promise<void> => {
  const loadBefore = os.loadavg()[0] ?? 0
  const server = await startPostgres()
  try {
    const url = await createDatabase(server.url, "bench")
    const raw = await rawClient(url)
    const endToEnd: Array<{ store: number; raw: number }> = []
    for (let round = 0; round < rounds; round++) {
      const runtime = ManagedRuntime.make(
        PostgresOutboxStore.layerWith({ schema: `store_${round}` }).pipe(Layer.provide(clientLayer(url, 4)))
      )
      const store = await runtime.runPromise(OutboxStore)
      // the raw side gets the same tables through the store's migrations
      const migrated = ManagedRuntime.make(
        PostgresOutboxStore.layerWith({ schema: `raw_${round}` }).pipe(Layer.provide(clientLayer(url, 1)))
      )
      await migrated.runPromise(OutboxStore)
      await migrated.dispose()
      const rawStore = new RawStore(raw, `raw_${round}`)
      let storeMillis = 0
      let rawMillis = 0
      for (let done = 0; done < records; done += batch * 10) {
        const storeInputs = Array.from({ length: 10 }, () => makeInputs(batch))
        const rawInputs = Array.from({ length: 10 }, () => makeInputs(batch))
        let started = performance.now()
        for (const inputs of rawInputs) await rawCycle(rawStore, inputs)
        rawMillis += performance.now() - started
        started = performance.now()
        for (const inputs of storeInputs) await runtime.runPromise(storeCycle(store, inputs))
        storeMillis += performance.now() - started
      }
      endToEnd.push({ store: (records / storeMillis) * 1000, raw: (records / rawMillis) * 1000 })
      console.log(
        `round ${round + 1}/${rounds}: store ${Math.round(endToEnd[round]?.store ?? 0)} rec/s, raw ${Math.round(endToEnd[round]?.raw ?? 0)} rec/s`
      )
      await runtime.dispose()
    }
    await raw.end()

    // relay (no-op sink) vs a raw claim/complete loop over the same backlog
    const relayPartitions = ["r0", "r1", "r2", "r3"]
    const relayRecords = quick ? 2_000 : 8_000
    const relayRaw = await rawClient(url)
    const relayRuntime = ManagedRuntime.make(
      Layer.mergeAll(
        PostgresOutboxStore.layerWith({ schema: "relay" }),
        PostgresLeaseStore.layerWith({ schema: "relay" }),
        Layer.succeed(Sink, Sink.of({ send: () => Effect.void }))
      ).pipe(Layer.provideMerge(clientLayer(url, 8)))
    )
    const relayStore = await relayRuntime.runPromise(OutboxStore)
    const migratedRaw = ManagedRuntime.make(
      PostgresOutboxStore.layerWith({ schema: "relay_raw" }).pipe(Layer.provide(clientLayer(url, 1)))
    )
    await migratedRaw.runPromise(OutboxStore)
    await migratedRaw.dispose()
    const rawRelay = new RawStore(relayRaw, "relay_raw")
    for (const pk of relayPartitions) {
      for (let i = 0; i < relayRecords / relayPartitions.length; i += batch) {
        const inputs = makeInputs(batch)
        await rawRelay.persist(inputs, pk)
        await relayRuntime.runPromise(
          relayStore.persist(
            inputs.map((input) => ({ ...toNew(input), partitionKey: pk, envelopeId: `${input.envelopeId}-s` }))
          )
        )
      }
    }
    let started = performance.now()
    for (const pk of relayPartitions) {
      for (;;) {
        const ids = await rawRelay.claim(batch, pk)
        if (ids.length === 0) break
        await rawRelay.complete(ids)
      }
    }
    const rawRelayMillis = performance.now() - started
    await relayRaw.end()
    started = performance.now()
    await relayRuntime.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          yield* Relay.start({
            owner: "bench-relay",
            discoveryInterval: "50 millis",
            drainer: {
              batchSize: batch,
              idleBackoffMin: "1 millis",
              idleBackoffMax: "20 millis",
              onExpired: "drop",
              onPermanentFailure: "drop",
              onPoison: "drop"
            }
          })
          for (;;) {
            let left = 0
            for (const pk of relayPartitions) {
              left += (yield* relayStore.countPending(pk)) + (yield* relayStore.countClaimed(pk))
            }
            if (left === 0) break
            yield* Effect.sleep("20 millis")
          }
        })
      )
    )
    const relayMillis = performance.now() - started
    await relayRuntime.dispose()
    const relayRate = Math.round((relayRecords / relayMillis) * 1000)
    const rawRelayRate = Math.round((relayRecords / rawRelayMillis) * 1000)
    console.log(`relay (no-op sink): store ${relayRate} rec/s, raw loop ${rawRelayRate} rec/s`)

    // claim latency at 1k and 100k pending, through the store
    const latency: Record<string, { medianMillis: number; p95Millis: number }> = {}
    for (const pending of [1_000, 100_000]) {
      const schema = `latency_${pending}`
      const runtime = ManagedRuntime.make(
        PostgresOutboxStore.layerWith({ schema }).pipe(Layer.provideMerge(clientLayer(url, 4)))
      )
      const store = await runtime.runPromise(OutboxStore)
      const fill = await rawClient(url)
      await fill.query(
        `INSERT INTO "${schema}".outbox (id, partition_key, envelope_id, binding_id, payload, created_at,
          seq, status) SELECT 'f' || i, 'p', 'f' || i, 'b', '\\x00', $1::bigint + i, i, 'pending'
          FROM generate_series(1, $2::int) AS i`,
        [Date.now() - 3_600_000, pending]
      )
      await fill.query(`INSERT INTO "${schema}".outbox_seq (partition_key, seq_counter) VALUES ('p', $1)`, [pending])
      await fill.query(`VACUUM ANALYZE "${schema}".outbox`)
      await fill.end()
      const times: Array<number> = []
      for (let i = 0; i < latencySamples; i++) {
        const started = performance.now()
        const claimed = await runtime.runPromise(store.claim("p", token, batch))
        times.push(performance.now() - started)
        await runtime.runPromise(
          Effect.zipRight(
            store.complete(
              claimed.records.map((r) => r.id),
              token
            ),
            store.persist(makeInputs(batch).map(toNew))
          )
        )
      }
      const sorted = [...times].sort((a, b) => a - b)
      latency[String(pending)] = {
        medianMillis: round3(median(times)),
        p95Millis: round3(sorted[Math.floor(sorted.length * 0.95)] ?? 0)
      }
      await runtime.dispose()
    }

    const storeRate = Math.round(median(endToEnd.map((r) => r.store)))
    const rawRate = Math.round(median(endToEnd.map((r) => r.raw)))
    const at1k = latency["1000"]?.medianMillis ?? 0
    const at100k = latency["100000"]?.medianMillis ?? 0
    const result = {
      date: new Date().toISOString(),
      node: process.version,
      platform: `${process.platform} ${process.arch}`,
      cores: os.cpus().length,
      loadAverage1m: { before: round3(loadBefore), after: round3(os.loadavg()[0] ?? 0) },
      quick,
      database: "PostgreSQL on 127.0.0.1, fsync on (one fsync per commit), READ COMMITTED",
      batch,
      records,
      rounds,
      endToEnd: {
        storeRecordsPerSecond: storeRate,
        rawRecordsPerSecond: rawRate,
        ratio: round3(storeRate / rawRate),
        runs: {
          store: endToEnd.map((r) => Math.round(r.store)),
          raw: endToEnd.map((r) => Math.round(r.raw)),
          ratio: endToEnd.map((r) => round3(r.store / r.raw))
        },
        target: "store end to end >= 0.6x raw pg in the same run",
        met: storeRate / rawRate >= 0.6
      },
      relay: {
        records: relayRecords,
        partitions: relayPartitions.length,
        relayRecordsPerSecond: relayRate,
        rawLoopRecordsPerSecond: rawRelayRate,
        ratio: round3(relayRate / rawRelayRate),
        note: "relay with a no-op sink (leases, discovery, claims of 100, completes) against a raw claim/complete loop",
        target: "relay >= 0.6x raw pg in the same run",
        met: relayRate / rawRelayRate >= 0.6
      },
      claimLatency: {
        limit: batch,
        samples: latencySamples,
        byPending: latency,
        ratio100kTo1k: round3(at100k / at1k),
        target: "median claim(100) at 100k pending <= 2x at 1k",
        met: at100k <= 2 * at1k
      }
    }
    fs.mkdirSync(path.join(here, "results"), { recursive: true })
    fs.writeFileSync(path.join(here, "results", "postgres.json"), `${JSON.stringify(result, null, 2)}\n`)
    console.log(
      `persist→claim→complete       store ${storeRate} rec/s   raw ${rawRate} rec/s   ratio ${result.endToEnd.ratio}`
    )
    console.log(
      `claim(100) latency median    1k pending ${at1k} ms   100k pending ${at100k} ms   ratio ${result.claimLatency.ratio100kTo1k}`
    )
  } finally {
    await server.stop()
  }
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
