/**
 * Broker sink benchmark (run: `npx tsx bench/brokers.ts`, `--quick` for a short run).
 *
 * For NATS JetStream and RabbitMQ (servers started on 127.0.0.1 by the test harness modules), a backlog
 * of records in 8 partitions (every other record keyed, 8 keys per partition) is persisted untimed in a
 * SQLite file; a relay then drains it through the broker sink, timed until the store holds nothing pending
 * or claimed. The raw baseline publishes the same messages in the same process with the same
 * acknowledgements (each message's JetStream ack / publisher confirm awaited) from the raw client, with as
 * many messages in flight as the relay allows (8 partitions × `maxConcurrency` 10). Relay and raw rounds
 * alternate; the ratio is best against best, with every round in the results.
 *
 * Goal: relay ≥ 0.6× raw. Writes bench/results/brokers.json.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { connect as amqpConnect } from "amqplib"
import { connect as natsConnect } from "nats"
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
import type { Sink } from "../src/services/Sink.js"
import { startNats } from "../test/support/NatsServer.js"
import { startRabbitMq } from "../test/support/RabbitMqServer.js"

const quick = process.argv.includes("--quick")
const total = quick ? 1_000 : 5_000
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

/** Records per second of a relay draining the backlog from a fresh SQLite file through `sink`. */
const relayRound = (sink: Layer.Layer<Sink, unknown>): Promise<number> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const records = backlog()
      for (let i = 0; i < records.length; i += 100) yield* store.persist(records.slice(i, i + 100))
      const started = performance.now()
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
          for (;;) {
            let left = 0
            for (const p of partitions) left += (yield* store.countPending(p)) + (yield* store.countClaimed(p))
            if (left === 0) break
            yield* Effect.sleep("10 millis")
          }
        })
      )
      return total / ((performance.now() - started) / 1000)
    }).pipe(
      Effect.provide(
        Layer.mergeAll(SqliteOutboxStore.layer, SqliteLeaseStore.layer, sink).pipe(
          Layer.provide(SqliteDatabase.layer({ filename: path.join(directory, `relay-${++files}.db`) }))
        )
      ),
      Effect.orDie
    )
  )

/** Records per second of `publish` over `total` messages with `inFlight` lanes, each awaiting its ack. */
const rawRound = async (publish: (n: number) => Promise<unknown>): Promise<number> => {
  let next = 0
  const started = performance.now()
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < total) await publish(next++)
    })
  )
  return total / ((performance.now() - started) / 1000)
}

interface Figures {
  readonly relay: Array<number>
  readonly raw: Array<number>
}

const measure = async (relay: () => Promise<number>, raw: () => Promise<number>): Promise<Figures> => {
  const figures: Figures = { relay: [], raw: [] }
  await relay() // untimed warm-up round
  for (let round = 0; round < rounds; round++) {
    figures.raw.push(await raw())
    figures.relay.push(await relay())
    console.log(
      `round ${round + 1}/${rounds}: raw ${figures.raw.at(-1)?.toFixed(0)}/s, relay ${figures.relay.at(-1)?.toFixed(0)}/s`
    )
  }
  return figures
}

const summary = (figures: Figures) => {
  const relay = Math.max(...figures.relay)
  const raw = Math.max(...figures.raw)
  return {
    relayRecordsPerSecond: Math.round(relay),
    rawRecordsPerSecond: Math.round(raw),
    ratio: Number((relay / raw).toFixed(2)),
    rounds: figures
  }
}

const loadBefore = os.loadavg()[0] ?? 0

console.log("NATS JetStream …")
const nats = await startNats()
const natsFigures = await (async () => {
  const nc = await natsConnect({ servers: nats.url })
  try {
    const jsm = await nc.jetstreamManager()
    await jsm.streams.add({ name: "bench", subjects: ["bench.>"], duplicate_window: 120_000_000_000 })
    const js = nc.jetstream()
    let base = 0
    return await measure(
      () => relayRound(NatsSink.layer({ servers: nats.url, subject: "bench.relay.{partitionKey}" })),
      () => {
        base += total
        const offset = base
        return rawRound((n) => js.publish(`bench.raw.p${n % 8}`, payload, { msgID: `raw-${offset + n}` }))
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
        () => relayRound(RabbitMqSink.layer({ url: rabbit.url, routingKey: "bench" })),
        () =>
          rawRound(
            (n) =>
              new Promise<void>((resolve, reject) =>
                channel.publish(
                  "",
                  "bench",
                  Buffer.from(payload),
                  {
                    persistent: true,
                    mandatory: true,
                    messageId: `raw-${n}`,
                    headers: { "Outbox-Partition": `p${n % 8}` }
                  },
                  (error: unknown) => (error === null || error === undefined ? resolve() : reject(error))
                )
              )
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
