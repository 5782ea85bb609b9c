/**
 * The RabbitMQ consumer (SPEC §12) against a real RabbitMQ 3.10 on 127.0.0.1 (started by this file), fed by
 * the real RabbitMqSink, with the inbox on SQLite: duplicates processed once, a retryable failure requeued
 * and then processed with per-key order kept (prefetch 1), a permanent failure and an undecodable message
 * rejected without requeue (to the queue's dead-letter queue), the consumer interrupted between the handler
 * and the commit (requeued, processed once), the broker application restarted under a running consumer.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schedule from "effect/Schedule"
import { type Channel, connect } from "amqplib"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"
import type { OutboxRecord } from "../src/domain/OutboxRecord.js"
import * as RabbitMqConsumer from "../src/layers/sinks/RabbitMqConsumer.js"
import * as RabbitMqSink from "../src/layers/sinks/RabbitMqSink.js"
import type * as Receiver from "../src/layers/sinks/Receiver.js"
import { startRabbitMq } from "./support/RabbitMqServer.js"
import {
  applyOrder,
  inboxOn,
  type Order,
  OrderPlaced,
  ordersSeen,
  recordOf,
  scriptedHandler
} from "./support/ReceiverFixtures.js"

const rabbit = await startRabbitMq()
afterAll(() => rabbit.dispose())
const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-rabbitmq-consumer-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))
let files = 0
const freshFile = () => path.join(directory, `inbox-${files++}.db`)

/** Runs `f` on a fresh admin channel (a broker restart closes connections: each use opens its own). */
const admin = <A>(f: (channel: Channel) => Promise<A>) =>
  Effect.promise(async () => {
    const model = await connect(rabbit.url)
    model.on("error", () => undefined)
    try {
      const channel = await model.createChannel()
      channel.on("error", () => undefined)
      return await f(channel)
    } finally {
      await model.close().catch(() => undefined)
    }
  })

/** A fresh durable queue dead-lettering into `<queue>.dlq`; answers its name (the routing key). */
const freshQueue = admin(async (channel) => {
  const queue = `q-${crypto.randomBytes(4).toString("hex")}`
  await channel.assertQueue(`${queue}.dlq`, { durable: true })
  await channel.assertQueue(queue, {
    durable: true,
    arguments: { "x-dead-letter-exchange": "", "x-dead-letter-routing-key": `${queue}.dlq` }
  })
  return queue
})

/** Publishes records through the real RabbitMQ sink (default exchange, routing key = queue). */
const publishAll = (queue: string, records: ReadonlyArray<OutboxRecord>) =>
  Effect.scoped(
    Effect.gen(function* () {
      const sink = yield* RabbitMqSink.make({ url: rabbit.url, routingKey: queue })
      for (const record of records) yield* Effect.orDie(sink.send(record))
    })
  ).pipe(Effect.orDie)

/** Waits until `orders_seen` holds `count` rows (at most 60 s). */
const awaitRows = (count: number) =>
  ordersSeen.pipe(
    Effect.filterOrFail((rows) => rows.length >= count),
    Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("60 seconds"))),
    Effect.orDie
  )

const queueCounts = (queue: string) =>
  admin(async (channel) => {
    const main = await channel.checkQueue(queue)
    const dlq = await channel.checkQueue(`${queue}.dlq`)
    return { ready: main.messageCount, dead: dlq.messageCount }
  })

const order = (orderId: string, n: number, customer = "ada"): Order => ({ orderId, customer, n })

const consumerOptions = (
  queue: string,
  handler: (order: Order) => Effect.Effect<unknown, unknown, SqlClient.SqlClient>,
  rejected: Array<Receiver.Rejection> = []
): RabbitMqConsumer.RabbitMqConsumerOptions<Order, Order, unknown, unknown, SqlClient.SqlClient> => ({
  url: rabbit.url,
  queue,
  consumer: "billing",
  topic: OrderPlaced,
  handler,
  retryDelay: "100 millis",
  onReject: (rejection: Receiver.Rejection) => Effect.sync(() => void rejected.push(rejection))
})

describe("RabbitMqConsumer", { timeout: 120_000 }, () => {
  it.live("R-INBOX RabbitMQ: the same record published twice is processed once; both copies are acked", () =>
    Effect.gen(function* () {
      const queue = yield* freshQueue
      const { handler, runs } = scriptedHandler({})
      const record = recordOf(order("o-1", 1), 1)
      yield* publishAll(queue, [record, record])
      yield* Effect.forkScoped(RabbitMqConsumer.run(consumerOptions(queue, handler)))
      yield* awaitRows(1)
      yield* queueCounts(queue).pipe(
        Effect.filterOrFail((counts) => counts.ready === 0),
        Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("10 seconds")))
      )
      yield* Effect.sleep("300 millis")
      expect(runs.get("o-1")).toBe(1)
      expect(yield* queueCounts(queue)).toEqual({ ready: 0, dead: 0 })
      expect((yield* ordersSeen).map((row) => row.order_id)).toEqual(["o-1"])
    }).pipe(Effect.scoped, Effect.provide(inboxOn(freshFile())))
  )

  it.live(
    "R-INBOX RabbitMQ: retryable failures are requeued and redelivered; with prefetch 1 every key is applied in order, none lost",
    () =>
      Effect.gen(function* () {
        const queue = yield* freshQueue
        const failures = new Map([
          ["a-2", 2],
          ["b-3", 1],
          ["a-5", 1]
        ])
        const { handler, runs } = scriptedHandler({ failures })
        const records = Array.from({ length: 6 }, (_, n) => [
          recordOf(order(`a-${n}`, n, "ada"), 2 * n + 1),
          recordOf(order(`b-${n}`, n, "bob"), 2 * n + 2)
        ]).flat()
        yield* publishAll(queue, records)
        yield* Effect.forkScoped(RabbitMqConsumer.run(consumerOptions(queue, handler)))
        const rows = yield* awaitRows(12)
        for (const customer of ["ada", "bob"]) {
          expect(rows.filter((row) => row.customer === customer).map((row) => row.n)).toEqual([0, 1, 2, 3, 4, 5])
        }
        expect(runs.get("a-2")).toBe(3)
        expect(runs.get("b-3")).toBe(2)
      }).pipe(Effect.scoped, Effect.provide(inboxOn(freshFile())))
  )

  it.live(
    "R-INBOX RabbitMQ: a permanent failure and an undecodable message go to onReject and are rejected without requeue",
    () =>
      Effect.gen(function* () {
        const queue = yield* freshQueue
        const { handler, runs } = scriptedHandler({ permanent: new Set(["o-3"]) })
        const rejected: Array<Receiver.Rejection> = []
        yield* publishAll(queue, [recordOf(order("o-3", 3), 1)])
        yield* Effect.promise(async () => {
          const model = await connect(rabbit.url)
          const channel = await model.createConfirmChannel()
          channel.sendToQueue(queue, Buffer.from("garbage"), { persistent: true })
          await channel.waitForConfirms()
          await model.close()
        })
        yield* publishAll(queue, [recordOf(order("o-4", 4), 2)])
        yield* Effect.forkScoped(RabbitMqConsumer.run(consumerOptions(queue, handler, rejected)))
        yield* awaitRows(1)
        const counts = yield* queueCounts(queue).pipe(
          Effect.filterOrFail((c) => c.dead === 2),
          Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("10 seconds")))
        )
        expect(counts).toEqual({ ready: 0, dead: 2 })
        expect(runs.get("o-3")).toBe(1)
        expect(rejected.map((r) => r.messageId)).toEqual(["rec-o-3", undefined])
        expect(rejected[1]?.decodeError?._tag).toBe("DecodeError")
        expect((yield* ordersSeen).map((row) => row.order_id)).toEqual(["o-4"])
      }).pipe(Effect.scoped, Effect.provide(inboxOn(freshFile())))
  )

  it.live(
    "R-INBOX RabbitMQ: acked only after the commit: a consumer interrupted between handler and commit leaves the message requeued, processed once",
    () =>
      Effect.gen(function* () {
        const queue = yield* freshQueue
        yield* publishAll(queue, [recordOf(order("o-5", 5), 1)])
        const written = yield* Deferred.make<void>()
        const hanging = (o: Order) =>
          applyOrder(o).pipe(Effect.zipRight(Deferred.succeed(written, undefined)), Effect.zipRight(Effect.never))
        const first = yield* Effect.fork(RabbitMqConsumer.run(consumerOptions(queue, hanging)))
        yield* Deferred.await(written)
        yield* Fiber.interrupt(first)
        expect(yield* ordersSeen).toEqual([])
        const { handler, runs } = scriptedHandler({})
        yield* Effect.forkScoped(RabbitMqConsumer.run(consumerOptions(queue, handler)))
        yield* awaitRows(1)
        yield* Effect.sleep("300 millis")
        expect(runs.get("o-5")).toBe(1)
        expect(yield* queueCounts(queue)).toEqual({ ready: 0, dead: 0 })
        expect((yield* ordersSeen).map((row) => row.order_id)).toEqual(["o-5"])
      }).pipe(Effect.scoped, Effect.provide(inboxOn(freshFile())))
  )

  it.live(
    "R-INBOX RabbitMQ: the broker restarted under a running consumer: it reconnects and processes what follows",
    () =>
      Effect.gen(function* () {
        const queue = yield* freshQueue
        const { handler } = scriptedHandler({})
        yield* publishAll(
          queue,
          [0, 1, 2].map((n) => recordOf(order(`r-${n}`, n), n + 1))
        )
        yield* Effect.forkScoped(RabbitMqConsumer.run(consumerOptions(queue, handler)))
        yield* awaitRows(3)
        rabbit.stopApp()
        rabbit.startApp()
        yield* publishAll(
          queue,
          [3, 4, 5].map((n) => recordOf(order(`r-${n}`, n), n + 1))
        )
        const rows = yield* awaitRows(6)
        expect(rows.map((row) => row.n)).toEqual([0, 1, 2, 3, 4, 5])
      }).pipe(Effect.scoped, Effect.provide(inboxOn(freshFile())))
  )

  it.effect("bad options are InvalidConfiguration naming each problem, never the password", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        RabbitMqConsumer.make({
          url: "http://user:pw@127.0.0.1:1",
          queue: "",
          consumer: "c",
          topic: OrderPlaced,
          handler: () => Effect.void,
          prefetch: 0
        })
      )
      expect(error.problems).toHaveLength(3)
      expect(error.problems.join(" ")).not.toContain("pw")
    })
  )
})
