/**
 * The NATS JetStream consumer (SPEC §12) against the real nats-server of the test run (and a private one for
 * the restart), with the inbox on SQLite: duplicates processed once, a retryable failure nak'ed and then
 * processed, a permanent failure terminated (never redelivered), per-key order with prefetch 1, the consumer
 * interrupted between the handler and the commit (redelivered after ackWait, processed once), the server
 * restarted under a running consumer.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schedule from "effect/Schedule"
import { connect, headers as natsHeaders, type JetStreamManager, type NatsConnection } from "nats"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, inject } from "vitest"
import type { OutboxRecord } from "../src/domain/OutboxRecord.js"
import * as Topic from "../src/domain/Topic.js"
import * as NatsConsumer from "../src/layers/sinks/NatsConsumer.js"
import * as NatsSink from "../src/layers/sinks/NatsSink.js"
import type * as Receiver from "../src/layers/sinks/Receiver.js"
import { startNats } from "./support/NatsServer.js"
import {
  applyOrder,
  inboxOn,
  type Order,
  OrderPlaced,
  ordersSeen,
  recordOf,
  scriptedHandler
} from "./support/ReceiverFixtures.js"

const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-nats-consumer-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))
let files = 0
const freshFile = () => path.join(directory, `inbox-${files++}.db`)

/** A connection to `url` for the test's own publishing and inspection, closed with the scope. */
const natsAt = (url: string) =>
  Effect.acquireRelease(
    Effect.promise(() => connect({ servers: url })),
    (nc) => Effect.promise(() => nc.close())
  )

/** A fresh file stream capturing `<prefix>.>`; answers the prefix. */
const freshStream = (jsm: JetStreamManager) =>
  Effect.promise(async () => {
    const prefix = `rx${crypto.randomBytes(4).toString("hex")}`
    await jsm.streams.add({ name: prefix, subjects: [`${prefix}.>`] })
    return prefix
  })

/** A connection to the run's server (closed with the scope), its JetStream manager and a fresh stream. */
const streamOnServer = Effect.gen(function* () {
  const url = inject("natsUrl")
  const nc = yield* natsAt(url)
  const jsm = yield* Effect.promise(() => nc.jetstreamManager())
  const prefix = yield* freshStream(jsm)
  return { url, nc, jsm, prefix }
})

/** Publishes `record` as the NATS sink would, but without `Nats-Msg-Id`, so the stream keeps every copy. */
const publishCopy = (nc: NatsConnection, subject: string, record: OutboxRecord) =>
  Effect.promise(() => {
    const h = natsHeaders()
    for (const [name, value] of Object.entries({ ...record.headers, ...Topic.wireHeaders(record) })) h.set(name, value)
    return nc.jetstream().publish(subject, record.payload, { headers: h })
  })

/** Publishes records through the real NATS sink. */
const publishAll = (url: string, records: ReadonlyArray<OutboxRecord>) =>
  Effect.scoped(
    Effect.gen(function* () {
      const sink = yield* NatsSink.make({ servers: url })
      for (const record of records) yield* Effect.orDie(sink.send(record))
    })
  ).pipe(Effect.orDie)

/** Waits until `orders_seen` holds `count` rows (at most 30 s). */
const awaitRows = (count: number) =>
  ordersSeen.pipe(
    Effect.filterOrFail((rows) => rows.length >= count),
    Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("30 seconds"))),
    Effect.orDie
  )

const order = (orderId: string, n: number, customer = "ada"): Order => ({ orderId, customer, n })

const consumerOptions = (
  url: string,
  prefix: string,
  handler: (order: Order) => Effect.Effect<unknown, unknown, SqlClient.SqlClient>,
  rejected: Array<Receiver.Rejection> = []
): NatsConsumer.NatsConsumerOptions<Order, Order, unknown, unknown, SqlClient.SqlClient> => ({
  servers: url,
  stream: prefix,
  durable: "billing",
  consumer: "billing",
  topic: OrderPlaced,
  handler,
  ackWait: "1 second",
  retryDelay: "100 millis",
  pullWait: "1 second",
  onReject: (rejection: Receiver.Rejection) => Effect.sync(() => void rejected.push(rejection))
})

describe("NatsConsumer", () => {
  it.live(
    "R-INBOX NATS: a message in the stream twice is processed once and both copies are acked",
    () =>
      Effect.gen(function* () {
        const { jsm, nc, prefix, url } = yield* streamOnServer
        const { handler, runs } = scriptedHandler({})
        const record = recordOf(order("o-1", 1), 1)
        yield* publishCopy(nc, `${prefix}.orders`, record)
        yield* publishCopy(nc, `${prefix}.orders`, record)
        yield* Effect.forkScoped(NatsConsumer.run(consumerOptions(url, prefix, handler)))
        yield* awaitRows(1)
        const settled = yield* Effect.promise(() => jsm.consumers.info(prefix, "billing")).pipe(
          Effect.filterOrFail((info) => info.num_ack_pending === 0 && info.num_pending === 0),
          Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("10 seconds")))
        )
        expect(settled.delivered.stream_seq).toBe(2)
        expect(runs.get("o-1")).toBe(1)
        expect((yield* ordersSeen).map((row) => row.order_id)).toEqual(["o-1"])
      }).pipe(Effect.scoped, Effect.provide(inboxOn(freshFile()))),
    { timeout: 60_000 }
  )

  it.live(
    "R-INBOX NATS: retryable failures are nak'ed and redelivered; with prefetch 1 every key is applied in order, none lost",
    () =>
      Effect.gen(function* () {
        const { jsm, nc, prefix, url } = yield* streamOnServer
        const failures = new Map([
          ["a-2", 2],
          ["b-3", 1],
          ["a-5", 1]
        ])
        const { handler, runs } = scriptedHandler({ failures })
        const records = Array.from({ length: 6 }, (_, n) => [
          recordOf(order(`a-${n}`, n, "ada"), 2 * n + 1, `${prefix}.orders`),
          recordOf(order(`b-${n}`, n, "bob"), 2 * n + 2, `${prefix}.orders`)
        ]).flat()
        yield* publishAll(url, records)
        yield* Effect.forkScoped(NatsConsumer.run(consumerOptions(url, prefix, handler)))
        const rows = yield* awaitRows(12)
        for (const customer of ["ada", "bob"]) {
          expect(rows.filter((row) => row.customer === customer).map((row) => row.n)).toEqual([0, 1, 2, 3, 4, 5])
        }
        expect(runs.get("a-2")).toBe(3)
        expect(runs.get("b-3")).toBe(2)
        expect(runs.get("a-0")).toBe(1)
      }).pipe(Effect.scoped, Effect.provide(inboxOn(freshFile()))),
    { timeout: 60_000 }
  )

  it.live(
    "R-INBOX NATS: a permanent failure and an undecodable message are passed to onReject and terminated, never redelivered",
    () =>
      Effect.gen(function* () {
        const { jsm, nc, prefix, url } = yield* streamOnServer
        const { handler, runs } = scriptedHandler({ permanent: new Set(["o-3"]) })
        const rejected: Array<Receiver.Rejection> = []
        yield* publishAll(url, [recordOf(order("o-3", 3), 1, `${prefix}.orders`)])
        yield* Effect.promise(() => nc.jetstream().publish(`${prefix}.orders`, new TextEncoder().encode("garbage")))
        yield* publishAll(url, [recordOf(order("o-4", 4), 2, `${prefix}.orders`)])
        yield* Effect.forkScoped(NatsConsumer.run(consumerOptions(url, prefix, handler, rejected)))
        yield* awaitRows(1)
        // longer than ackWait: a terminated message would have come back by now
        yield* Effect.sleep("2500 millis")
        expect(runs.get("o-3")).toBe(1)
        expect(rejected.map((r) => r.messageId)).toEqual(["rec-o-3", undefined])
        expect(rejected[1]?.decodeError?._tag).toBe("DecodeError")
        const info = yield* Effect.promise(() => jsm.consumers.info(prefix, "billing"))
        expect(info.num_ack_pending).toBe(0)
        expect(info.num_redelivered).toBe(0)
        expect((yield* ordersSeen).map((row) => row.order_id)).toEqual(["o-4"])
      }).pipe(Effect.scoped, Effect.provide(inboxOn(freshFile()))),
    { timeout: 60_000 }
  )

  it.live(
    "R-INBOX NATS: acked only after the commit: a consumer interrupted between handler and commit leaves the message to be redelivered and processed once",
    () =>
      Effect.gen(function* () {
        const { jsm, nc, prefix, url } = yield* streamOnServer
        yield* publishAll(url, [recordOf(order("o-5", 5), 1, `${prefix}.orders`)])
        const written = yield* Deferred.make<void>()
        // writes its row, then hangs before the inbox commit
        const hanging = (o: Order) =>
          applyOrder(o).pipe(Effect.zipRight(Deferred.succeed(written, undefined)), Effect.zipRight(Effect.never))
        const first = yield* Effect.fork(NatsConsumer.run(consumerOptions(url, prefix, hanging)))
        yield* Deferred.await(written)
        yield* Fiber.interrupt(first)
        expect(yield* ordersSeen).toEqual([])
        const { handler, runs } = scriptedHandler({})
        yield* Effect.forkScoped(NatsConsumer.run(consumerOptions(url, prefix, handler)))
        yield* awaitRows(1)
        yield* Effect.sleep("1500 millis")
        expect(runs.get("o-5")).toBe(1)
        expect((yield* ordersSeen).map((row) => row.order_id)).toEqual(["o-5"])
        const info = yield* Effect.promise(() => jsm.consumers.info(prefix, "billing"))
        // delivered twice: to the interrupted consumer, then again after ackWait
        expect(info.delivered.consumer_seq).toBe(2)
        expect(info.num_ack_pending).toBe(0)
      }).pipe(Effect.scoped, Effect.provide(inboxOn(freshFile()))),
    { timeout: 60_000 }
  )

  it.live(
    "R-INBOX NATS: the server restarted under a running consumer: it reconnects and processes what follows",
    () =>
      Effect.gen(function* () {
        const server = yield* Effect.acquireRelease(
          Effect.promise(() => startNats()),
          (s) => Effect.promise(() => s.dispose())
        )
        const prefix = yield* Effect.scoped(
          Effect.flatMap(natsAt(server.url), (nc) =>
            Effect.flatMap(
              Effect.promise(() => nc.jetstreamManager()),
              freshStream
            )
          )
        )
        const { handler } = scriptedHandler({})
        yield* publishAll(
          server.url,
          [0, 1, 2].map((n) => recordOf(order(`r-${n}`, n), n + 1, `${prefix}.orders`))
        )
        yield* Effect.forkScoped(NatsConsumer.run(consumerOptions(server.url, prefix, handler)))
        yield* awaitRows(3)
        yield* Effect.promise(() => server.restart())
        yield* publishAll(
          server.url,
          [3, 4, 5].map((n) => recordOf(order(`r-${n}`, n), n + 1, `${prefix}.orders`))
        )
        const rows = yield* awaitRows(6)
        expect(rows.map((row) => row.n)).toEqual([0, 1, 2, 3, 4, 5])
      }).pipe(Effect.scoped, Effect.provide(inboxOn(freshFile()))),
    { timeout: 90_000 }
  )

  it.effect("bad options are InvalidConfiguration naming each problem", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        NatsConsumer.make({
          servers: "http://user:pw@127.0.0.1:1",
          stream: "a.b",
          durable: "",
          consumer: "c",
          topic: OrderPlaced,
          handler: () => Effect.void,
          prefetch: 0
        })
      )
      expect(error.problems).toHaveLength(4)
      expect(error.problems.join(" ")).not.toContain("pw")
    })
  )
})
