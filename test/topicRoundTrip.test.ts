/**
 * Typed topics end to end on every backend (SPEC §11): generated values of a non-trivial schema (a tagged
 * union, optional fields, dates, bigints, unicode strings, arrays) are published through the backend's
 * `OutboxStore` (memory, SQLite, PostgreSQL, DynamoDB Local), delivered by one relay through a `SinkRouter`
 * to every sink — memory, webhook (a loopback HTTP server), stdout (JSON lines), NATS JetStream and RabbitMQ
 * (real servers) — and decoded on the other side (`Topic.decode`, `NatsMessage.decode`,
 * `RabbitMqMessage.decode`) back to values equal to those published, with the metadata of their records.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, inject, it } from "@effect/vitest"
import * as Arbitrary from "effect/Arbitrary"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { connect as amqpConnect } from "amqplib"
import { connect as natsConnect } from "nats"
import * as crypto from "node:crypto"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import * as MemoryLeaseStore from "../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as PostgresOutboxStore from "../src/layers/postgres/PostgresOutboxStore.js"
import * as MemorySink from "../src/layers/sinks/MemorySink.js"
import * as NatsMessage from "../src/layers/sinks/NatsMessage.js"
import * as NatsSink from "../src/layers/sinks/NatsSink.js"
import * as RabbitMqMessage from "../src/layers/sinks/RabbitMqMessage.js"
import * as RabbitMqSink from "../src/layers/sinks/RabbitMqSink.js"
import * as SinkRouter from "../src/layers/sinks/SinkRouter.js"
import * as StdoutSink from "../src/layers/sinks/StdoutSink.js"
import * as WebhookSink from "../src/layers/sinks/WebhookSink.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import * as Relay from "../src/programs/Relay.js"
import * as Topic from "../src/programs/Topic.js"
import type { OutboxStore } from "../src/services/OutboxStore.js"
import { Sink } from "../src/services/Sink.js"
import { outboxTableForFile } from "./support/DynamoOutboxTable.js"
import { clientLayer, createDatabase } from "./support/PostgresServer.js"

/** A non-trivial event: a union of shapes with optional fields, instants, bigints, unicode and arrays. */
const Event = Schema.Struct({
  id: Schema.UUID,
  customer: Schema.String,
  at: Schema.DateTimeUtc,
  body: Schema.Union(
    Schema.TaggedStruct("placed", {
      lines: Schema.Array(
        Schema.Struct({ sku: Schema.String, quantity: Schema.Int, note: Schema.optional(Schema.String) })
      ),
      totalMinor: Schema.BigInt
    }),
    Schema.TaggedStruct("cancelled", { reason: Schema.optional(Schema.String), refund: Schema.NullOr(Schema.BigInt) }),
    Schema.TaggedStruct("shipped", {
      carrier: Schema.Literal("dhl", "ups", "post"),
      eta: Schema.optional(Schema.DateTimeUtc)
    })
  )
})
type Event = typeof Event.Type

const routes = ["memory", "webhook", "stdout", "nats", "rabbitmq"] as const
type Route = (typeof routes)[number]

/** One topic per route: the same schema, so every sink carries the same values. */
const topicFor = (route: Route) =>
  Topic.make({
    name: `event.${route}`,
    route,
    payload: Event,
    partitionKey: (event) => `customer-${event.customer.length % 3}`,
    orderingKey: (event) => event.customer,
    idempotencyKey: (event) => event.id
  })

const valuesOf = (count: number, seed: number): ReadonlyArray<Event> => {
  const generated = FastCheck.sample(Arbitrary.make(Event), { numRuns: count, seed })
  const seen = new Set<string>()
  return generated.filter((event) => !seen.has(event.id) && seen.add(event.id) !== undefined)
}

const encoded = (value: Event) => Schema.encodeSync(Event)(value)

// the run's shared broker (test/support/globalSetup.ts); the file's queue is its own (`prefix`)
const rabbitUrl = inject("rabbitUrl")
const natsUrl = inject("natsUrl")

/** Where the sinks of one run deliver, and how to read back what arrived there. */
const destinations = Effect.gen(function* () {
  const webhookBodies: Array<string> = []
  const server = yield* Effect.acquireRelease(
    Effect.async<ReturnType<typeof createServer>>((resume) => {
      const s = createServer((req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          webhookBodies.push(Buffer.concat(chunks).toString("utf8"))
          res.writeHead(204)
          res.end()
        })
      })
      s.listen(0, "127.0.0.1", () => resume(Effect.succeed(s)))
    }),
    (s) =>
      Effect.async<void>((resume) => {
        s.closeAllConnections()
        s.close(() => resume(Effect.void))
      })
  )
  const address = server.address()
  const port = typeof address === "object" && address !== null ? (address satisfies AddressInfo).port : 0
  const stdoutLines: Array<string> = []
  const memory = yield* MemorySink.make()
  const prefix = `rt${crypto.randomBytes(4).toString("hex")}`
  const nc = yield* Effect.acquireRelease(
    Effect.promise(() => natsConnect({ servers: natsUrl })),
    (c) => Effect.promise(() => c.close())
  )
  const jsm = yield* Effect.promise(() => nc.jetstreamManager())
  yield* Effect.acquireRelease(
    Effect.promise(() => jsm.streams.add({ name: prefix, subjects: [`${prefix}.>`] })),
    () => Effect.promise(() => jsm.streams.delete(prefix))
  )
  const amqp = yield* Effect.acquireRelease(
    Effect.promise(() => amqpConnect(rabbitUrl)),
    (m) => Effect.promise(() => m.close())
  )
  const channel = yield* Effect.promise(() => amqp.createChannel())
  yield* Effect.promise(() => channel.assertQueue(prefix, { durable: true }))
  const sinks = yield* Effect.all({
    memory: Effect.succeed(memory.sink),
    webhook: SinkRouter.sinkOf(WebhookSink.layerWith({ url: `http://127.0.0.1:${port}/events` })),
    stdout: SinkRouter.sinkOf(
      StdoutSink.layerWith({
        stream: {
          write: (chunk, callback) => {
            stdoutLines.push(...chunk.split("\n").filter((line) => line.length > 0))
            callback()
            return true
          }
        }
      })
    ),
    nats: SinkRouter.sinkOf(NatsSink.layer({ servers: natsUrl, subject: `${prefix}.events` })),
    rabbitmq: SinkRouter.sinkOf(RabbitMqSink.layer({ url: rabbitUrl, routingKey: prefix }))
  })
  const router = yield* SinkRouter.make(sinks)

  /** Messages taken from the RabbitMQ queue so far (a read takes them off the queue). */
  const rabbitTaken: Array<RabbitMqMessage.RabbitMqMessageLike> = []

  /** Every delivered message decoded, per route (in arrival order). */
  const received = Effect.gen(function* () {
    const natsInfo = yield* Effect.promise(() => jsm.streams.info(prefix))
    const natsMessages = yield* Effect.forEach(
      Array.from({ length: natsInfo.state.messages }, (_, i) => natsInfo.state.first_seq + i),
      (seq) => Effect.promise(() => jsm.streams.getMessage(prefix, { seq }))
    )
    yield* Effect.promise(async () => {
      for (;;) {
        const message = await channel.get(prefix, { noAck: true })
        if (message === false) return
        rabbitTaken.push(message)
      }
    })
    return {
      memory: (yield* memory.deliveries).map((d) => Topic.decode(topicFor("memory"), d.record)),
      webhook: webhookBodies.map((body) => Topic.decode(topicFor("webhook"), { body })),
      stdout: stdoutLines.map((body) => Topic.decode(topicFor("stdout"), { body })),
      nats: natsMessages.map((m) => NatsMessage.decode(topicFor("nats"), { headers: m.header, data: m.data })),
      rabbitmq: rabbitTaken.map((m) => RabbitMqMessage.decode(topicFor("rabbitmq"), m))
    } satisfies Record<Route, unknown>
  })
  return { router, received }
})

/** Publishes `values` through every route's topic, relays them, and returns what each sink received. */
const roundTrip = (values: ReadonlyArray<Event>) =>
  Effect.gen(function* () {
    const dest = yield* destinations
    for (const route of routes) {
      const report = yield* Topic.publishAll(topicFor(route), values)
      expect(report.persisted).toHaveLength(values.length)
    }
    // publishing the same events again is skipped, not a second message
    const again = yield* Topic.publishAll(topicFor("memory"), values)
    expect(again.persisted).toHaveLength(0)
    expect(again.skipped).toHaveLength(values.length)
    const relay = yield* Effect.fork(
      Effect.scoped(
        Relay.start({
          owner: "round-trip",
          discoveryInterval: "200 millis",
          drainer: { onExpired: "drop", onPermanentFailure: "drop", onPoison: "drop", idleBackoffMax: "200 millis" }
        }).pipe(Effect.zipRight(Effect.never))
      ).pipe(Effect.provideService(Sink, dest.router))
    )
    const deadline = Date.now() + 90_000
    for (;;) {
      const got = yield* dest.received
      const counts = routes.map((route) => got[route].length)
      if (counts.every((count) => count >= values.length)) {
        yield* Fiber.interrupt(relay)
        return got
      }
      if (Date.now() > deadline) return yield* Effect.dieMessage(`not every sink got every event: ${counts.join(", ")}`)
      yield* Effect.sleep("100 millis")
    }
  })

/** Every sink got every value exactly once, equal to what was published, in age order per ordering key. */
const expectDelivered = (
  values: ReadonlyArray<Event>,
  got: Record<Route, ReadonlyArray<Either.Either<Topic.Decoded<Event>, unknown>>>
) => {
  const byId = new Map(values.map((value) => [value.id, value]))
  for (const route of routes) {
    const decoded = got[route].map((each) => Either.getOrThrow(each))
    expect(decoded).toHaveLength(values.length)
    expect(new Set(decoded.map((d) => d.value.id)).size).toBe(values.length)
    const lastSeq = new Map<string, number>()
    for (const { metadata, value } of decoded) {
      const published = byId.get(value.id)
      expect(published, `${route}: an event that was not published`).toBeDefined()
      if (published === undefined) continue
      expect(encoded(value)).toEqual(encoded(published))
      expect(metadata.topic).toBe(`event.${route}`)
      expect(metadata.partitionKey).toBe(`customer-${published.customer.length % 3}`)
      expect(metadata.orderingKey._tag === "Some" ? metadata.orderingKey.value : "").toBe(published.customer)
      expect(metadata.recordId.length).toBeGreaterThan(0)
      // age order is promised per ordering key only (SPEC §1, §6 step 4): keyless records are groups of one,
      // up to maxConcurrency of them in flight at once, and may reach a destination in any order
      if (published.customer.length === 0) continue
      const key = `${metadata.partitionKey}|${published.customer}`
      expect(metadata.seq).toBeGreaterThan(lastSeq.get(key) ?? -1)
      lastSeq.set(key, metadata.seq)
    }
  }
}

const withRelayServices = <E>(store: Layer.Layer<OutboxStore, E>) =>
  Layer.mergeAll(store, MemoryLeaseStore.layer, NodeHttpClient.layerUndici)

const run = <E>(count: number, seed: number, store: Layer.Layer<OutboxStore, E>) =>
  Effect.gen(function* () {
    const values = valuesOf(count, seed)
    expect(values.length).toBeGreaterThan(count / 2)
    const got = yield* roundTrip(values)
    expectDelivered(values, got)
  }).pipe(Effect.scoped, Effect.provide(withRelayServices(store)))

const dynamo = outboxTableForFile("topic-round-trip")
const postgresUrl = await createDatabase(inject("postgresUrl"), "topic_round_trip")

describe("Topic round trip: publish → relay → every sink → decode", { timeout: 180_000 }, () => {
  it.live("memory", () => run(40, 1, MemoryOutboxStore.layer))

  it.live("SQLite", () =>
    run(40, 2, SqliteOutboxStore.layer.pipe(Layer.provide(SqliteDatabase.layer({ filename: ":memory:" }))))
  )

  it.live("PostgreSQL", () => run(30, 3, PostgresOutboxStore.layer.pipe(Layer.provide(clientLayer(postgresUrl)))))

  it.live("DynamoDB Local", () => run(12, 4, dynamo.makeLayer({})))
})
