/**
 * Broker sink benchmark (run: `npx tsx bench/brokers.ts`, `--quick` for a short run).
 *
 * For NATS JetStream and RabbitMQ (servers started on 127.0.0.1 by the test harness modules), a backlog
 * of records in 8 partitions (every other record keyed, 8 keys per partition) is persisted untimed in a
 * SQLite file; a relay then drains it through the broker sink, timed from its start until the sink has
 * had every record acknowledged and the store holds nothing pending or claimed.
 *
 * The raw baseline publishes the same messages (payload, the sink's headers, a unique message id) in the
 * same process from the raw client with the same acknowledgements (each message's JetStream ack /
 * publisher confirm awaited) and the same client options as the sink (NATS: `noAsyncTraces`), with as
 * many messages in flight as the relay allows (8 partitions × `maxConcurrency` 10), and keeps per-key
 * order as the relay must: a keyed message is published only after the previous message of its key was
 * acknowledged. `raw` is that baseline and `ratio` is relay against it; `rawUnordered` (and
 * `ratioVsUnordered`) is the same client without the per-key wait. Rounds
 * alternate (raw, raw unordered, relay, relay with a no-op sink) after one untimed relay round; figures
 * are best against best, with every round in the results. `relayNoopSink` is the same relay with a sink
 * that accepts every record at once: what the store and the drainer alone reach on this backlog, so
 * `ceilingRatio` (it against raw) bounds the ratio any broker sink could reach here. `cpuMicrosPerRecord`
 * is this process's CPU time per record (the lowest of the rounds) of the relay, the ordered raw client and
 * the relay with the no-op sink: the broker servers run on the same cores.
 *
 * Goal: relay ≥ 0.6× raw. Writes bench/results/brokers.json.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { connect as amqpConnect } from "amqplib"
import { connect as natsConnect, headers as natsHeaders } from "nats"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as NatsSink from "../src/layers/sinks/NatsSink.js"
import * as RabbitMqSink from "../src/layers/sinks/RabbitMqSink.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteLeaseStore from "../src/layers/sqlite/SqliteLeaseStore.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import * as Relay from "../src/programs/Relay.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { Sink } from "../src/services/Sink.js"
import { startNats } from "../test/support/NatsServer.js"
import { startRabbitMq } from "../test/support/RabbitMqServer.js"

const quick = process.argv.includes("--quick")
const total = quick ? 1_000 : 20_000
const rounds = quick ? 1 : 3
const partitions = Array.from({ length: 8 }, (_, i) => `p${i}`)
const inFlight = partitions.length * 10
const payload = new Uint8Array(256).fill(120)
const here = path.dirname(fileURLToPath(import.meta.url))
const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-brokers-bench-"))
let files = 0

const backlog = (): ReadonlyArray<NewOutboxRecord> =>
  Array.from({ length: total }, (_, n) => {
    const partitionKey = partitions[n % partitions.length] ?? "p0"
    const i = Math.floor(n / partitions.length)
    return new NewOutboxRecord({
      partitionKey,
      envelopeId: `env-${n}`,
      bindingId: "b",
      payload,
      ...(i % 2 === 0 ? { orderingKey: `k${i % 16}` } : {})
    })
  })

/** The sink layer with a count of its acknowledged sends. */
const counted = (sink: Layer.Layer<Sink, unknown>, acked: { count: number }): Layer.Layer<Sink, unknown> =>
  Layer.effect(
    Sink,
    Effect.map(Sink, (inner) =>
      Sink.of({
        send: (record) =>
          Effect.tap(inner.send(record), () => {
            acked.count += 1
          })
      })
    )
  ).pipe(Layer.provide(sink))

/** This process's CPU time since `before`, in microseconds per backlog record. */
const cpuPerRecord = (before: NodeJS.CpuUsage): number => {
  const used = process.cpuUsage(before)
  return Number(((used.user + used.system) / total).toFixed(1))
}

/**
 * Records per second of a relay draining the backlog from a fresh SQLite file through `sink`; its CPU time
 * per record is pushed to `cpu`.
 */
const relayRound = (sink: Layer.Layer<Sink, unknown>, cpu: Array<number>): Promise<number> => {
  const acked = { count: 0 }
  return Effect.runPromise(
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const records = backlog()
      for (let i = 0; i < records.length; i += 100) yield* store.persist(records.slice(i, i + 100))
      const drained = Effect.gen(function* () {
        let left = 0
        for (const p of partitions) left += (yield* store.countPending(p)) + (yield* store.countClaimed(p))
        return left === 0
      })
      const started = performance.now()
      const cpuBefore = process.cpuUsage()
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Relay.start({
            owner: "bench",
            discoveryInterval: "50 millis",
            drainer: {
              idleBackoffMax: "20 millis",
              onExpired: "drop",
              onPermanentFailure: "drop",
              onPoison: "drop"
            }
          })
          // the acknowledgements are counted in memory; the store is asked only once they are all in
          // (or every 100 ms, should a record be dropped), so that the wait does not compete for it
          for (let polls = 1; acked.count < total; polls++) {
            if (polls % 50 === 0 && (yield* drained)) break
            yield* Effect.sleep("2 millis")
          }
          while (!(yield* drained)) yield* Effect.sleep("2 millis")
        })
      )
      cpu.push(cpuPerRecord(cpuBefore))
      return total / ((performance.now() - started) / 1000)
    }).pipe(
      Effect.provide(
        Layer.mergeAll(SqliteOutboxStore.layer, SqliteLeaseStore.layer, counted(sink, acked)).pipe(
          Layer.provide(SqliteDatabase.layer({ filename: path.join(directory, `relay-${++files}.db`) }))
        )
      ),
      Effect.orDie
    )
  )
}

/** What a raw publish needs of a backlog record: partition, envelope, ordering key, sequence number. */
interface RawMessage {
  readonly n: number
  readonly partitionKey: string
  readonly envelopeId: string
  readonly orderingKey: string | undefined
}

const rawMessages: ReadonlyArray<RawMessage> = backlog().map((record, n) => ({
  n,
  partitionKey: record.partitionKey,
  envelopeId: record.envelopeId,
  orderingKey: record.orderingKey
}))

/**
 * Records per second of `publish` over the backlog's messages with `inFlight` lanes, each awaiting its
 * ack; `ordered`: a keyed message waits for the ack of the previous message of its key. Its CPU time per
 * record is pushed to `cpu`.
 */
const rawRound = async (
  publish: (message: RawMessage) => Promise<unknown>,
  ordered: boolean,
  cpu: Array<number>
): Promise<number> => {
  let next = 0
  const lastOfKey = new Map<string, Promise<unknown>>()
  const started = performance.now()
  const cpuBefore = process.cpuUsage()
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      for (;;) {
        const message = rawMessages[next++]
        if (message === undefined) return
        if (!ordered || message.orderingKey === undefined) {
          await publish(message)
          continue
        }
        const key = `${message.partitionKey}/${message.orderingKey}`
        const previous = lastOfKey.get(key)
        const sent = previous === undefined ? publish(message) : previous.then(() => publish(message))
        lastOfKey.set(key, sent)
        await sent
      }
    })
  )
  const seconds = (performance.now() - started) / 1000
  cpu.push(cpuPerRecord(cpuBefore))
  return total / seconds
}

interface Figures {
  readonly relay: Array<number>
  readonly raw: Array<number>
  readonly rawUnordered: Array<number>
  readonly relayNoopSink: Array<number>
  /** This process's CPU time per record (µs) in each round of the relay, the ordered raw client and the no-op relay. */
  readonly cpu: { readonly relay: Array<number>; readonly raw: Array<number>; readonly relayNoopSink: Array<number> }
}

/** A sink that accepts every record at once: the relay's own ceiling on this backlog (store and drainer). */
const noopSink: Layer.Layer<Sink> = Layer.succeed(Sink, Sink.of({ send: () => Effect.void }))

const measure = async (
  relay: (cpu: Array<number>) => Promise<number>,
  raw: (ordered: boolean, cpu: Array<number>) => Promise<number>
): Promise<Figures> => {
  const figures: Figures = {
    relay: [],
    raw: [],
    rawUnordered: [],
    relayNoopSink: [],
    cpu: { relay: [], raw: [], relayNoopSink: [] }
  }
  await relay([]) // untimed warm-up round
  for (let round = 0; round < rounds; round++) {
    figures.raw.push(await raw(true, figures.cpu.raw))
    figures.rawUnordered.push(await raw(false, []))
    figures.relay.push(await relay(figures.cpu.relay))
    figures.relayNoopSink.push(await relayRound(noopSink, figures.cpu.relayNoopSink))
    console.log(
      `round ${round + 1}/${rounds}: raw ${figures.raw.at(-1)?.toFixed(0)}/s (unordered ${figures.rawUnordered.at(-1)?.toFixed(0)}/s), relay ${figures.relay.at(-1)?.toFixed(0)}/s (no-op sink ${figures.relayNoopSink.at(-1)?.toFixed(0)}/s)`
    )
  }
  return figures
}

const summary = (figures: Figures) => {
  const relay = Math.max(...figures.relay)
  const raw = Math.max(...figures.raw)
  const rawUnordered = Math.max(...figures.rawUnordered)
  return {
    relayRecordsPerSecond: Math.round(relay),
    rawRecordsPerSecond: Math.round(raw),
    ratio: Number((relay / raw).toFixed(2)),
    rawUnorderedRecordsPerSecond: Math.round(rawUnordered),
    ratioVsUnordered: Number((relay / rawUnordered).toFixed(2)),
    relayNoopSinkRecordsPerSecond: Math.round(Math.max(...figures.relayNoopSink)),
    ceilingRatio: Number((Math.max(...figures.relayNoopSink) / raw).toFixed(2)),
    cpuMicrosPerRecord: {
      relay: Math.min(...figures.cpu.relay),
      raw: Math.min(...figures.cpu.raw),
      relayNoopSink: Math.min(...figures.cpu.relayNoopSink)
    },
    rounds: figures
  }
}

/** The headers the sinks add to every record. */
const outboxHeaders = (message: RawMessage): Record<string, string> => ({
  "Outbox-Partition": message.partitionKey,
  "Outbox-Envelope-Id": message.envelopeId,
  ...(message.orderingKey === undefined ? {} : { "Outbox-Ordering-Key": message.orderingKey })
})

const loadBefore = os.loadavg()[0] ?? 0

console.log("NATS JetStream …")
const nats = await startNats()
const natsFigures = await (async () => {
  const nc = await natsConnect({ servers: nats.url, noAsyncTraces: true })
  try {
    const jsm = await nc.jetstreamManager()
    await jsm.streams.add({ name: "bench", subjects: ["bench.>"], duplicate_window: 120_000_000_000 })
    const js = nc.jetstream()
    let base = 0
    return await measure(
      (cpu) => relayRound(NatsSink.layer({ servers: nats.url, subject: "bench.relay.{partitionKey}" }), cpu),
      (ordered, cpu) => {
        base += total
        const offset = base
        return rawRound(
          (message) => {
            const h = natsHeaders()
            for (const [name, value] of Object.entries(outboxHeaders(message))) h.set(name, value)
            return js.publish(`bench.raw.${message.partitionKey}`, payload, {
              msgID: `raw-${offset + message.n}`,
              headers: h
            })
          },
          ordered,
          cpu
        )
      }
    )
  } finally {
    await nc.close()
  }
})().finally(() => nats.dispose())

console.log("RabbitMQ …")
const rabbit = await startRabbitMq()
const rabbitFigures = await (async () => {
  const model = await amqpConnect(rabbit.url)
  try {
    const channel = await model.createConfirmChannel()
    await channel.assertQueue("bench", { durable: true })
    const purge = setInterval(() => void channel.purgeQueue("bench").catch(() => undefined), 1_000)
    try {
      return await measure(
        (cpu) => relayRound(RabbitMqSink.layer({ url: rabbit.url, routingKey: "bench" }), cpu),
        (ordered, cpu) =>
          rawRound(
            (message) =>
              new Promise<void>((resolve, reject) =>
                channel.publish(
                  "",
                  "bench",
                  Buffer.from(payload),
                  {
                    persistent: true,
                    mandatory: true,
                    messageId: `raw-${message.n}`,
                    headers: outboxHeaders(message)
                  },
                  (error: unknown) => (error === null || error === undefined ? resolve() : reject(error))
                )
              ),
            ordered,
            cpu
          )
      )
    } finally {
      clearInterval(purge)
    }
  } finally {
    await model.close()
  }
})().finally(() => rabbit.dispose())

const result = {
  generatedAt: new Date().toISOString(),
  quick,
  records: total,
  partitions: partitions.length,
  inFlight,
  goal: "relay ≥ 0.6× raw",
  platform: `${os.platform()} ${os.arch()}, ${os.cpus().length} cores`,
  loadAverage1m: { before: Number(loadBefore.toFixed(2)), after: Number((os.loadavg()[0] ?? 0).toFixed(2)) },
  nats: summary(natsFigures),
  rabbitmq: summary(rabbitFigures)
}
fs.rmSync(directory, { recursive: true, force: true })
fs.mkdirSync(path.join(here, "results"), { recursive: true })
fs.writeFileSync(path.join(here, "results", "brokers.json"), JSON.stringify(result, null, 2) + "\n")
console.log(`NATS relay/raw ${result.nats.ratio}×, RabbitMQ relay/raw ${result.rabbitmq.ratio}× (goal ≥ 0.6×)`)
