/**
 * RabbitMqSink against a real RabbitMQ 3.10 on 127.0.0.1 (started by this file, see
 * support/RabbitMqServer.ts): per-key order at the consumer, at-least-once with `message_id` = record id,
 * the broker restarted mid-drain, and permanent vs transient classification (SPEC §10).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { type Channel, connect } from "amqplib"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"
import * as RabbitMqSink from "../src/layers/sinks/RabbitMqSink.js"
import {
  allCompleted,
  claimedRecord as record,
  recordTo,
  disposeThrough,
  expectOrdered,
  keyedRecords,
  holdAfter,
  relayUntil
} from "./support/BrokerRelay.js"
import { killedRelayTakenOver } from "./support/BrokerCrash.js"
import { buildCli } from "./support/CliBundle.js"
import { cliRunner, finish, waitFor } from "./support/CliProcess.js"
import { startRabbitMq } from "./support/RabbitMqServer.js"

const rabbit = await startRabbitMq()
afterAll(() => rabbit.dispose())
const bundle = await buildCli()
afterAll(() => bundle.remove())
const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-rabbitmq-cli-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))
const { run, spawnCli } = cliRunner(bundle, directory)

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

/** A fresh durable queue (its name is also the routing key on the default exchange). */
const freshQueue = (args: Record<string, unknown> = {}) =>
  admin(async (channel) => {
    const queue = `q-${crypto.randomBytes(4).toString("hex")}`
    await channel.assertQueue(queue, { durable: true, arguments: args })
    return queue
  })

interface Seen {
  readonly id: string
  readonly partition: string
  readonly orderingKey: string
  readonly persistent: boolean
  readonly test: unknown
}

/** Takes every message now in the queue. */
const drain = (queue: string) =>
  admin(async (channel) => {
    const seen: Array<Seen> = []
    for (;;) {
      const message = await channel.get(queue, { noAck: true })
      if (message === false) return seen
      const headers: Record<string, unknown> = message.properties.headers ?? {}
      seen.push({
        id: String(message.properties.messageId),
        partition: String(headers["Outbox-Partition"]),
        orderingKey: String(headers["Outbox-Ordering-Key"]),
        persistent: message.properties.deliveryMode === 2,
        test: headers["x-test"]
      })
    }
  })

const depth = (queue: string) => admin(async (channel) => (await channel.checkQueue(queue)).messageCount)

describe("RabbitMqSink", { timeout: 180_000 }, () => {
  it.live("a relay publishes every record, persistent, in per-key order, with message_id = record id", () =>
    Effect.gen(function* () {
      const queue = yield* freshQueue()
      const partitions = ["a", "b", "c"]
      const left = yield* relayUntil(
        RabbitMqSink.layer({ url: rabbit.url, routingKey: queue }),
        keyedRecords(partitions, 20),
        allCompleted(partitions)
      )
      expect(left).toBe(0)
      const seen = yield* drain(queue)
      expect(seen).toHaveLength(60)
      expect(seen.every((m) => m.persistent && m.test === "yes")).toBe(true)
      expectOrdered(seen, partitions, 20)
    })
  )

  it.live("re-sent records arrive again with the same message_id (at least once, deduplicable)", () =>
    Effect.gen(function* () {
      const queue = yield* freshQueue()
      const sink = yield* RabbitMqSink.make({ url: rabbit.url })
      const records = ["r1", "r2"].map((id) => record(id, queue))
      yield* Effect.forEach(records, (r) => sink.send(r))
      yield* Effect.forEach(records, (r) => sink.send(r))
      const seen = yield* drain(queue)
      expect(seen.map((m) => m.id)).toEqual(["r1", "r2", "r1", "r2"])
    }).pipe(Effect.scoped)
  )

  it.live(
    "classification: unroutable and a missing exchange are permanent; a nack and a stopped broker transient",
    () =>
      Effect.gen(function* () {
        const full = yield* freshQueue({ "x-max-length": 1, "x-overflow": "reject-publish" })
        const sink = yield* RabbitMqSink.make({
          url: rabbit.url,
          timeout: "3 seconds",
          allowedExchanges: [`no-such-exchange-${full}`]
        })
        const unroutable = yield* Effect.flip(sink.send(record("u1", `no-such-queue-${full}`)))
        expect(unroutable).toMatchObject({ retryable: false, code: "unroutable" })
        const noExchange = yield* Effect.flip(sink.send(record("u2", `no-such-exchange-${full}/key`)))
        expect(noExchange).toMatchObject({ retryable: false, code: "not-found" })
        yield* sink.send(record("u3", full))
        const nack = yield* Effect.flip(sink.send(record("u4", full)))
        expect(nack).toMatchObject({ retryable: true, code: "nack" })
        const noAddress = yield* Effect.flip(sink.send(record("u5", "")))
        expect(noAddress).toMatchObject({ retryable: false, code: "no-address" })
        const bad = yield* Effect.flip(RabbitMqSink.make({ url: "http://user:s3cret@127.0.0.1:1" }))
        expect(bad.problems).toEqual(["http://***@127.0.0.1:1/ is not a amqp:// or amqps:// URL"])
      }).pipe(Effect.scoped)
  )

  it.live("no confirm within the timeout (a memory alarm blocks publishers) is a transient timeout", () =>
    Effect.gen(function* () {
      const queue = yield* freshQueue()
      const sink = yield* RabbitMqSink.make({ url: rabbit.url, timeout: "400 millis" })
      yield* sink.send(record("t1", queue))
      yield* Effect.acquireRelease(
        Effect.sync(() => rabbit.ctl("set_vm_memory_high_watermark", "0")),
        () => Effect.sync(() => rabbit.ctl("set_vm_memory_high_watermark", "0.4"))
      )
      const blocked = yield* Effect.flip(sink.send(record("t2", queue)))
      expect(blocked).toMatchObject({ retryable: true, code: "timeout" })
    }).pipe(Effect.scoped)
  )

  it.live("access refused (403) is permanent: the record is dead-lettered or dropped per policy", () =>
    Effect.gen(function* () {
      const queue = yield* freshQueue()
      const exchange = `denied-${queue}`
      yield* admin(async (channel) => {
        await channel.assertExchange(exchange, "fanout", { durable: true })
        await channel.bindQueue(queue, exchange, "")
      })
      const user = `limited-${queue}`
      rabbit.ctl("add_user", user, "limited-pw")
      // may publish to the default exchange only
      rabbit.ctl("set_permissions", "-p", "/", user, ".*", "^amq\\.default$", ".*")
      const url = rabbit.url.replace("guest:guest@", `${user}:limited-pw@`)
      const sink = yield* RabbitMqSink.make({ url, timeout: "3 seconds", allowedExchanges: [exchange] })
      yield* sink.send(record("a1", queue))
      const refused = yield* Effect.flip(sink.send(record("a2", `${exchange}/key`)))
      expect(refused).toMatchObject({ retryable: false, code: "access-refused" })
      expect(refused.message).toContain("ACCESS_REFUSED")
      expect(refused.message).not.toContain("limited-pw")
      // the channel closed by the broker is replaced: the next send goes through
      yield* sink.send(record("a3", queue))

      const denied = (id: string) => recordTo(id, `${exchange}/key`)
      const layer = RabbitMqSink.layer({ url, timeout: "3 seconds", allowedExchanges: [exchange] })
      const deadLettered = yield* disposeThrough(layer, [denied("d1")], "dlq")
      expect(deadLettered).toHaveLength(1)
      expect(deadLettered[0]).toMatchObject({ recordId: "d1", category: "permanent", errorCode: "access-refused" })
      expect(yield* disposeThrough(layer, [denied("d2")], "drop")).toEqual([])
      expect((yield* drain(queue)).map((m) => m.id)).toEqual(["a1", "a3"])
    }).pipe(Effect.scoped)
  )

  it.live(
    "a relay process killed between the confirm and the complete: its successor re-sends with the same message_id (at least once), first deliveries in per-key order",
    () =>
      Effect.gen(function* () {
        const queue = yield* freshQueue()
        const partitions = ["a", "b", "c", "d"]
        const outcome = yield* killedRelayTakenOver({
          broker: "rabbitmq",
          url: rabbit.url,
          target: queue,
          records: keyedRecords(partitions, 30),
          killAfter: 50
        })
        expect(outcome.left).toBe(0)
        expect(outcome.killedSent).toHaveLength(50)
        expect(outcome.claimedAtKill).toBeGreaterThan(0)
        const last = outcome.killedSent.at(-1)
        // the last record the killed relay had confirmed was never completed: the successor sent it again
        expect(outcome.successorSent).toContain(last)
        const seen = yield* drain(queue)
        // every confirmed send is in the queue (and maybe sends in flight at the kill): each record at least
        // once, the re-sent one twice under the same message_id
        expect(seen.length).toBeGreaterThanOrEqual(outcome.killedSent.length + outcome.successorSent.length)
        expect(new Set(seen.map((m) => m.id)).size).toBe(120)
        expect(seen.filter((m) => m.id === last).length).toBeGreaterThanOrEqual(2)
        expectOrdered(seen, partitions, 30)
      })
  )

  it.live("the broker restarted mid-drain: nothing lost, per-key order held (first deliveries)", () =>
    Effect.gen(function* () {
      const queue = yield* freshQueue()
      const partitions = ["a", "b", "c", "d"]
      const atRestart = { stored: 0, down: undefined as unknown }
      // sends after the first 30 wait for the broker to be stopped, so the restart always comes mid-drain
      const held = yield* holdAfter(
        RabbitMqSink.layer({ url: rabbit.url, routingKey: queue, timeout: "2 seconds" }),
        30
      )
      const left = yield* relayUntil(
        held.layer,
        keyedRecords(partitions, 60),
        allCompleted(partitions),
        Effect.gen(function* () {
          yield* Effect.map(depth(queue), (n) => n >= 30).pipe(
            Effect.repeat({ until: (ok) => ok, schedule: Schedule.spaced("20 millis") })
          )
          atRestart.stored = yield* depth(queue)
          yield* Effect.sync(() => rabbit.stopApp())
          yield* held.open
          const sink = yield* RabbitMqSink.make({ url: rabbit.url })
          atRestart.down = yield* Effect.either(sink.send(record("down", queue)))
          yield* Effect.sleep("300 millis")
          yield* Effect.sync(() => rabbit.startApp())
        }).pipe(Effect.scoped)
      )
      expect(left).toBe(0)
      expect(atRestart.stored).toBeLessThan(240)
      expect(atRestart.down).toMatchObject({ _tag: "Left", left: { retryable: true } })
      const seen = yield* drain(queue)
      expect(new Set(seen.map((m) => m.id)).size).toBe(240)
      expectOrdered(seen, partitions, 60)
    })
  )

  it.live("relay rabbitmq <url> delivers through the CLI; the URL's credentials are never logged", () =>
    Effect.gen(function* () {
      const queue = yield* freshQueue()
      const file = path.join(directory, `${queue}.db`)
      const input = [0, 1, 2, 3]
        .map((n) => JSON.stringify({ partitionKey: "p", envelopeId: `e${n}`, bindingId: "b", payload: n }))
        .join("\n")
      const enqueued = yield* Effect.promise(() => run(["enqueue", "--sqlite-file", file], input))
      expect(enqueued.code, enqueued.stderr).toBe(0)
      const user = `cli-${queue}`
      rabbit.ctl("add_user", user, "R-S3CRET-pw")
      rabbit.ctl("set_permissions", "-p", "/", user, ".*", ".*", ".*")
      const relay = spawnCli([
        "relay",
        "rabbitmq",
        rabbit.url.replace("guest:guest@", `${user}:R-S3CRET-pw@`),
        "--routing-key",
        queue,
        "--sqlite-file",
        file,
        "--discovery-interval",
        "200 millis"
      ])
      const { exited, output } = finish(relay)
      yield* Effect.promise(() =>
        waitFor("4 messages", () => Effect.runPromise(Effect.map(depth(queue), (n) => n >= 4)))
      )
      relay.kill("SIGTERM")
      expect(yield* Effect.promise(() => exited)).toBe(0)
      expect(output.stderr).toContain(`sink="rabbitmq amqp://***@127.0.0.1:${new URL(rabbit.url).port}"`)
      expect(output.stderr).not.toMatch(/S3CRET|cli-q-/)
      const seen = yield* drain(queue)
      expect(seen.map((m) => m.partition)).toEqual(["p", "p", "p", "p"])
    })
  )

  it.live(
    "a record naming an exchange outside the configured ones (amq.*, the default exchange, another) is permanent exchange-not-allowed; nothing is published",
    () =>
      Effect.gen(function* () {
        const queue = yield* freshQueue()
        const configured = `orders-${queue}`
        const other = `other-${queue}`
        yield* admin(async (channel) => {
          await channel.assertExchange(configured, "fanout", { durable: false })
          await channel.assertExchange(other, "fanout", { durable: false })
          await channel.bindQueue(queue, configured, "")
          await channel.bindQueue(queue, other, "")
          await channel.bindQueue(queue, "amq.fanout", "")
        })
        const sink = yield* RabbitMqSink.make({ url: rabbit.url, exchange: configured })
        yield* sink.send(record("bare", "key"))
        yield* sink.send(record("named", `${configured}/key`))
        for (const address of ["amq.fanout/key", `/${queue}`, `${other}/key`]) {
          const refused = yield* Effect.flip(sink.send(record(`x-${address}`, address)))
          expect(refused, address).toMatchObject({ retryable: false, code: "exchange-not-allowed" })
        }
        const listed = yield* RabbitMqSink.make({
          url: rabbit.url,
          exchange: configured,
          allowedExchanges: ["amq.fanout", other]
        })
        yield* listed.send(record("amq", "amq.fanout/key"))
        yield* listed.send(record("other", `${other}/key`))
        yield* admin((channel) => channel.unbindQueue(queue, "amq.fanout", ""))
        expect((yield* drain(queue)).map((m) => m.id)).toEqual(["bare", "named", "amq", "other"])
      }).pipe(Effect.scoped)
  )

  it.live("relay rabbitmq --allow-exchange: a listed exchange is delivered, amq.* is dead-lettered", () =>
    Effect.gen(function* () {
      const queue = yield* freshQueue()
      const listed = `listed-${queue}`
      yield* admin(async (channel) => {
        await channel.assertExchange(listed, "fanout", { durable: true })
        await channel.bindQueue(queue, listed, "")
      })
      const file = path.join(directory, `${queue}-allow.db`)
      const input = [
        { partitionKey: "a", envelopeId: "in", bindingId: "b", payload: 1, address: `${listed}/k` },
        { partitionKey: "b", envelopeId: "out", bindingId: "b", payload: 2, address: "amq.topic/k" }
      ]
        .map((r) => JSON.stringify(r))
        .join("\n")
      const enqueued = yield* Effect.promise(() => run(["enqueue", "--sqlite-file", file], input))
      expect(enqueued.code, enqueued.stderr).toBe(0)
      const relay = spawnCli([
        "relay",
        "rabbitmq",
        rabbit.url,
        "--allow-exchange",
        listed,
        "--sqlite-file",
        file,
        "--discovery-interval",
        "200 millis"
      ])
      const { exited } = finish(relay)
      yield* Effect.promise(() =>
        waitFor("a dead letter", async () => {
          const listedDlq = await run(["dlq", "list", "--json", "--sqlite-file", file])
          return listedDlq.stdout.includes("exchange-not-allowed")
        })
      )
      yield* Effect.promise(() =>
        waitFor("1 message", () => Effect.runPromise(Effect.map(depth(queue), (n) => n >= 1)))
      )
      relay.kill("SIGTERM")
      expect(yield* Effect.promise(() => exited)).toBe(0)
      expect((yield* drain(queue)).map((m) => m.partition)).toEqual(["a"])
    })
  )

  it.live("the effect-outbox/rabbitmq entry exports the sink", () =>
    Effect.map(
      Effect.promise(() => import("../src/rabbitmq.js")),
      (entry) => expect(entry.RabbitMqSink.layer).toBe(RabbitMqSink.layer)
    )
  )
})
