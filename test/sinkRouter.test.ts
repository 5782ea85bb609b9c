/**
 * SinkRouter (SPEC §11): one relay, several sinks keyed by route. A record whose route has no sink is a
 * permanent failure naming the route (dead-lettered); a route's `Retry-After`, outage or failure streak holds
 * back only that route's records — proven with memory sinks, and with a real webhook (a loopback HTTP server
 * answering 503 + Retry-After for a TestClock minute) beside a real NATS JetStream route that keeps delivering
 * in order. Metrics and WARN lines carry the route.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { afterAll, describe, expect, inject, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Metric from "effect/Metric"
import type * as MetricLabel from "effect/MetricLabel"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import * as TestServices from "effect/TestServices"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { connect, type JetStreamManager } from "nats"
import * as OutboxRecord from "../src/domain/OutboxRecord.js"
import * as MemoryDeadLetterStore from "../src/layers/memory/MemoryDeadLetterStore.js"
import * as MemoryLeaseStore from "../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as MemorySink from "../src/layers/sinks/MemorySink.js"
import * as NatsMessage from "../src/layers/sinks/NatsMessage.js"
import * as NatsSink from "../src/layers/sinks/NatsSink.js"
import * as SinkRouter from "../src/layers/sinks/SinkRouter.js"
import * as WebhookSink from "../src/layers/sinks/WebhookSink.js"
import * as RelayCommand from "../src/programs/cli/RelayCommand.js"
import * as Settings from "../src/programs/cli/Settings.js"
import * as Relay from "../src/programs/Relay.js"
import * as Topic from "../src/programs/Topic.js"
import { DeadLetterStore } from "../src/services/DeadLetterStore.js"
import * as OutboxMetrics from "../src/services/OutboxMetrics.js"
import { fromRegister, registerOf, Sink, type SinkService } from "../src/services/Sink.js"

const OrderPlaced = Topic.make({
  name: "order.placed",
  payload: { orderId: Schema.String, n: Schema.Number },
  partitionKey: () => "customer-ada",
  orderingKey: () => "orders",
  idempotencyKey: (order) => order.orderId,
  route: "orders"
})

const InvoiceIssued = Topic.make({
  name: "invoice.issued",
  payload: { invoiceId: Schema.String, n: Schema.Number },
  partitionKey: () => "customer-ada",
  orderingKey: () => "invoices",
  idempotencyKey: (invoice) => invoice.invoiceId,
  route: "billing"
})

const AuditLogged = Topic.make({
  name: "audit.logged",
  payload: { id: Schema.String },
  partitionKey: () => "customer-ada",
  idempotencyKey: (audit) => audit.id,
  route: "audit"
})

const stores = Layer.mergeAll(MemoryLeaseStore.layer, MemoryDeadLetterStore.layer).pipe(
  Layer.provideMerge(MemoryOutboxStore.layer)
)

/** Runs a relay over `sink` in a fiber of its own. */
const startRelay = (sink: SinkService) =>
  Effect.fork(
    Effect.scoped(
      Relay.start({
        owner: "router-relay",
        discoveryInterval: "500 millis",
        drainer: { idleBackoffMin: "100 millis", idleBackoffMax: "1 second" }
      }).pipe(Effect.zipRight(Effect.never))
    ).pipe(Effect.provideService(Sink, sink))
  )

/** Advances the TestClock in small steps until `check` holds (live waits let real I/O finish). */
const driveUntil = <E, R>(what: string, check: Effect.Effect<boolean, E, R>, maxSteps = 400) =>
  Effect.gen(function* () {
    for (let step = 0; step < maxSteps; step++) {
      if (yield* check) return
      yield* TestClock.adjust("100 millis")
      yield* TestServices.provideLive(Effect.sleep("5 millis"))
    }
    return yield* Effect.dieMessage(`gave up waiting for: ${what}`)
  })

const now = Effect.map(DateTime.now, DateTime.toEpochMillis)

/** `sink` in register form (`Sink.fromRegister`): each send runs on the test's runtime and resumes with its exit. */
const inRegisterForm = (sink: SinkService) =>
  Effect.map(Effect.runtime<never>(), (runtime) =>
    fromRegister((record, resume) => {
      const fiber = Runtime.runFork(runtime)(sink.send(record))
      fiber.addObserver(resume)
      return Effect.asVoid(Fiber.interrupt(fiber))
    })
  )

/** The route sinks of a test: the memory sinks themselves, or each in register form. */
const forms = {
  effect: (sink: SinkService) => Effect.succeed(sink),
  register: inRegisterForm
} as const

/** `OutboxRouteSends{route, outcome}` (under the fiber's metric labels). */
const routeSends = (route: string, outcome: string) =>
  Effect.map(
    Metric.value(OutboxMetrics.OutboxRouteSends.pipe(Metric.tagged("route", route), Metric.tagged("outcome", outcome))),
    (state) => state.count
  )

describe("SinkRouter (memory sinks, TestClock)", () => {
  for (const [form, routeSink] of Object.entries(forms)) {
    it.effect(
      `SPEC §11 a route paused by Retry-After for a minute holds back only its own records; an unrouted record is dead-lettered naming the route (route sinks in ${form} form)`,
      () =>
        Effect.gen(function* () {
          const billing = yield* MemorySink.make()
          const orders = yield* MemorySink.make()
          const router = yield* SinkRouter.make({
            billing: yield* routeSink(billing.sink),
            orders: yield* routeSink(orders.sink)
          })
          expect(registerOf(router)).toBeDefined()
          const outcomes = ["transient", "paused", "delivered"] as const
          const before = yield* Effect.forEach(outcomes, (outcome) => routeSends("billing", outcome))
          yield* billing.failCalls({ failure: "transient", retryAfterMillis: 60_000, times: Infinity })
          const relay = yield* startRelay(router)
          const start = yield* now
          yield* Topic.publish(InvoiceIssued, { invoiceId: "I-0", n: 0 })
          yield* Topic.publish(AuditLogged, { id: "A-0" })
          // one order every 10 seconds while billing is paused: each arrives within two seconds
          for (let n = 0; n < 5; n++) {
            yield* Topic.publish(OrderPlaced, { orderId: `O-${n}`, n })
            const published = yield* now
            yield* driveUntil(
              `order ${n}`,
              Effect.map(orders.deliveredIds, (ids) => ids.length === n + 1)
            )
            expect((yield* now) - published).toBeLessThanOrEqual(2_000)
            yield* Topic.publish(InvoiceIssued, { invoiceId: `I-${n + 1}`, n: n + 1 })
            yield* TestClock.adjust("8 seconds")
          }
          // billing was tried once (its Retry-After then paused the route), and nothing of it was delivered
          expect(yield* billing.attempts).toHaveLength(1)
          expect(yield* billing.deliveredIds).toEqual([])
          const delivered = yield* orders.deliveries
          expect(delivered.map((d) => Either.getOrThrow(Topic.decode(OrderPlaced, d.record)).value.n)).toEqual([
            0, 1, 2, 3, 4
          ])
          expect((yield* now) - start).toBeLessThan(60_000)
          const health = yield* router.health
          expect(health.find((h) => h.route === "billing")).toMatchObject({ failures: 1 })
          // the unrouted record went to the dead-letter queue, its reason naming the route
          const dead = yield* Effect.flatMap(DeadLetterStore, (dlq) => dlq.list({ limit: 10 }))
          expect(dead).toHaveLength(1)
          expect(dead[0]?.lastError).toContain("no sink for route audit")
          expect(dead[0]?.errorCode).toBe("no-route")
          // the pause ends: billing delivers every invoice, in order
          yield* billing.clear
          yield* driveUntil(
            "invoices",
            Effect.map(billing.deliveredIds, (ids) => ids.length === 6),
            1_200
          )
          const invoices = (yield* billing.deliveries).map(
            (d) => Either.getOrThrow(Topic.decode(InvoiceIssued, d.record)).value.n
          )
          expect(invoices).toEqual([0, 1, 2, 3, 4, 5])
          const after = yield* Effect.forEach(outcomes, (outcome) => routeSends("billing", outcome))
          const [transient, paused, deliveredSends] = after.map((count, i) => count - (before[i] ?? 0))
          expect(transient).toBe(1)
          expect(paused).toBeGreaterThan(0)
          expect(deliveredSends).toBe(6)
          yield* Fiber.interrupt(relay)
        }).pipe(Effect.provide(stores))
    )

    it.effect(
      `a failure streak pauses the route (one probe per pause); the default route \`*\` takes other routes (route sinks in ${form} form)`,
      () =>
        Effect.gen(function* () {
          const billing = yield* MemorySink.make()
          const fallback = yield* MemorySink.make()
          const logs: Array<{ readonly message: string; readonly route: unknown; readonly level: string }> = []
          const router = yield* SinkRouter.make(
            { billing: yield* routeSink(billing.sink), [SinkRouter.DefaultRoute]: yield* routeSink(fallback.sink) },
            { streakThreshold: 2, streakPause: "10 seconds", maxPause: "40 seconds" }
          )
          yield* billing.failCalls({ failure: "transient", times: Infinity })
          const relay = yield* startRelay(router).pipe(
            Effect.provide(
              Logger.replace(
                Logger.defaultLogger,
                Logger.make(({ annotations, logLevel, message }) => {
                  const text = Array.isArray(message) ? message.join(" ") : String(message)
                  const route = [...annotations].find(([key]) => key === "route")?.[1]
                  logs.push({ message: text, route, level: logLevel.label })
                })
              )
            )
          )
          yield* Topic.publish(InvoiceIssued, { invoiceId: "I-0", n: 0 })
          yield* Topic.publish(AuditLogged, { id: "A-0" })
          yield* driveUntil(
            "audit via the default route",
            Effect.map(fallback.deliveredIds, (ids) => ids.length === 1)
          )
          // one minute of outage: two failures start the streak pause, then one probe per (doubling) pause
          for (let i = 0; i < 60; i++) {
            yield* TestClock.adjust("1 second")
            yield* TestServices.provideLive(Effect.sleep("2 millis"))
          }
          const attempts = (yield* billing.attempts).length
          expect(attempts).toBeGreaterThanOrEqual(3)
          expect(attempts).toBeLessThanOrEqual(6)
          const warning = logs.find((l) => l.level === "WARN" && l.message.includes("sink failing for route billing"))
          expect(warning?.route).toBe("billing")
          yield* Fiber.interrupt(relay)
        }).pipe(Effect.provide(stores))
    )
  }

  it.effect(
    "in register form the router counts every send under the relay's metric labels, as a send on its own fiber would",
    () =>
      Effect.gen(function* () {
        const relayLabel = `labelled-${crypto.randomUUID()}`
        const seen: Array<ReadonlyArray<MetricLabel.MetricLabel>> = []
        const orders = fromRegister((_record, resume, labels) => {
          seen.push(labels)
          resume(Effect.void)
        })
        const billing = yield* MemorySink.make()
        const router = yield* SinkRouter.make({ orders, billing: billing.sink })
        const relay = yield* startRelay(router).pipe(Effect.tagMetrics("relay", relayLabel))
        for (let n = 0; n < 3; n++) {
          yield* Topic.publish(OrderPlaced, { orderId: `L-${n}`, n })
          yield* Topic.publish(InvoiceIssued, { invoiceId: `L-${n}`, n })
        }
        yield* driveUntil(
          "three deliveries on each route",
          Effect.map(billing.deliveredIds, (ids) => ids.length === 3 && seen.length === 3)
        )
        // the register was handed the relay's labels, and passed them on to the register it wraps
        for (const labels of seen) {
          expect(labels.some((label) => label.key === "relay" && label.value === relayLabel)).toBe(true)
        }
        // a delivery through a register (no effect run) and one through a sink's own send land in the same
        // labelled series a fiber's Metric.increment reaches
        const labelled = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.tagMetrics(effect, "relay", relayLabel)
        expect(yield* labelled(routeSends("orders", "delivered"))).toBe(3)
        expect(yield* labelled(routeSends("billing", "delivered"))).toBe(3)
        yield* Fiber.interrupt(relay)
      }).pipe(Effect.provide(stores))
  )
})

const natsUrl = inject("natsUrl")

/** A loopback webhook answering 503 + `Retry-After: 60` while `state.down`, else 200; records bodies. */
const withWebhook = <A, E, R>(
  use: (
    url: string,
    state: { down: boolean; readonly bodies: Array<string>; readonly paths: Array<string>; attempts: number }
  ) => Effect.Effect<A, E, R>
) =>
  Effect.acquireUseRelease(
    Effect.async<{
      server: Server
      state: { down: boolean; bodies: Array<string>; paths: Array<string>; attempts: number }
    }>((resume) => {
      const state = { down: true, bodies: new Array<string>(), paths: new Array<string>(), attempts: 0 }
      const server = createServer((req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          state.attempts += 1
          if (state.down) {
            res.writeHead(503, { "retry-after": "60" })
            res.end("down for maintenance")
            return
          }
          state.bodies.push(Buffer.concat(chunks).toString("utf8"))
          state.paths.push(req.url ?? "")
          res.writeHead(200)
          res.end("ok")
        })
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ server, state })))
    }),
    ({ server, state }) => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? (address satisfies AddressInfo).port : 0
      return use(`http://127.0.0.1:${port}/hook`, state)
    },
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )

describe("SinkRouter (real webhook and NATS JetStream)", { timeout: 120_000 }, () => {
  it.effect(
    "SPEC §11 the webhook route is down for a (TestClock) minute while the NATS route keeps delivering in order",
    () =>
      Effect.gen(function* () {
        const nc = yield* Effect.acquireRelease(
          Effect.promise(() => connect({ servers: natsUrl })),
          (c) => Effect.promise(() => c.close())
        )
        const jsm: JetStreamManager = yield* Effect.promise(() => nc.jetstreamManager())
        const prefix = `r${crypto.randomBytes(4).toString("hex")}`
        yield* Effect.promise(() => jsm.streams.add({ name: prefix, subjects: [`${prefix}.>`] }))
        const streamCount = Effect.map(
          Effect.promise(() => jsm.streams.info(prefix)),
          (info) => info.state.messages
        )
        yield* withWebhook((url, webhook) =>
          Effect.gen(function* () {
            const sinks = yield* Effect.all({
              billing: SinkRouter.sinkOf(WebhookSink.layerWith({ url })),
              orders: SinkRouter.sinkOf(NatsSink.layer({ servers: natsUrl, subject: `${prefix}.orders` }))
            })
            const router = yield* SinkRouter.make(sinks)
            const relay = yield* startRelay(router)
            const start = yield* now
            yield* Topic.publish(InvoiceIssued, { invoiceId: "I-0", n: 0 })
            for (let n = 0; n < 5; n++) {
              yield* Topic.publish(OrderPlaced, { orderId: `O-${n}`, n })
              const published = yield* now
              yield* driveUntil(
                `order ${n} on NATS`,
                Effect.map(streamCount, (count) => count === n + 1)
              )
              expect((yield* now) - published).toBeLessThanOrEqual(2_000)
              yield* Topic.publish(InvoiceIssued, { invoiceId: `I-${n + 1}`, n: n + 1 })
              yield* TestClock.adjust("8 seconds")
            }
            expect((yield* now) - start).toBeLessThan(60_000)
            // the webhook was asked once; its Retry-After paused the billing route, not the partition
            expect(webhook.attempts).toBe(1)
            expect(webhook.bodies).toEqual([])
            const onNats = yield* Effect.forEach([1, 2, 3, 4, 5], (seq) =>
              Effect.promise(() => jsm.streams.getMessage(prefix, { seq }))
            )
            const decoded = onNats.map((m) =>
              Either.getOrThrow(NatsMessage.decode(OrderPlaced, { headers: m.header, data: m.data }))
            )
            expect(decoded.map((d) => d.value.n)).toEqual([0, 1, 2, 3, 4])
            expect(decoded.map((d) => d.metadata.topic)).toEqual(Array(5).fill("order.placed"))
            const seqs = decoded.map((d) => d.metadata.seq)
            expect([...seqs].sort((a, b) => a - b)).toEqual(seqs)
            // the webhook comes back after the minute: every invoice arrives, in order
            webhook.down = false
            yield* driveUntil(
              "invoices at the webhook",
              Effect.sync(() => webhook.bodies.length === 6),
              1_200
            )
            const invoices = webhook.bodies.map(
              (body) => Either.getOrThrow(Topic.decode(InvoiceIssued, { body })).value.n
            )
            expect(invoices).toEqual([0, 1, 2, 3, 4, 5])
            expect((yield* now) - start).toBeGreaterThanOrEqual(60_000)
            yield* Fiber.interrupt(relay)
          })
        )
        yield* Effect.promise(() => jsm.streams.delete(prefix))
      }).pipe(Effect.scoped, Effect.provide(stores), Effect.provide(NodeHttpClient.layerUndici))
  )
})

describe("relay routes table (CLI config file)", () => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-routes-"))
  afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))
  let files = 0
  const file = (json: unknown) =>
    Effect.sync(() => {
      const name = path.join(directory, `config-${++files}.json`)
      fs.writeFileSync(name, JSON.stringify(json))
      return name
    })

  it.effect("SPEC §11 reads routes → sinks from the config file, the single sink becoming the default route", () =>
    Effect.gen(function* () {
      const name = yield* file({
        sink: { type: "stdout" },
        routes: {
          billing: { type: "webhook", url: "http://127.0.0.1:9/billing", headers: ["X-Team: billing"] },
          orders: { type: "nats", url: "nats://127.0.0.1:4222", subject: "orders.{partitionKey}" }
        }
      })
      const settings = yield* Settings.load(Settings.relayConfig, yield* Settings.fileProvider(name))
      expect(settings.routes.map(([route, sink]) => [route, sink._tag])).toEqual([
        ["billing", "webhook"],
        ["orders", "nats"]
      ])
      expect(settings.routes[0]?.[1]).toMatchObject({ headers: { "X-Team": "billing" } })
      expect(settings.routes[1]?.[1]).toMatchObject({ subject: Option.some("orders.{partitionKey}") })
      expect(Option.map(settings.sink, (s) => s._tag)).toEqual(Option.some("stdout"))
      // without a single sink, the routes alone are enough
      const only = yield* file({ routes: { billing: { type: "webhook", url: "http://127.0.0.1:9/b" } } })
      const routed = yield* Settings.load(Settings.relayConfig, yield* Settings.fileProvider(only))
      expect(Option.isNone(routed.sink)).toBe(true)
      // a route without its URL is named in the error
      const broken = yield* file({ routes: { billing: { type: "nats" } } })
      const error = yield* Effect.flip(Settings.load(Settings.relayConfig, yield* Settings.fileProvider(broken)))
      expect(error.message).toContain("routes.billing.url")
      expect(error.message).toContain("a nats sink needs a URL")
    })
  )

  it.live(
    "the relay's sink over a routes table sends each record to its route's sink; an unrouted one is permanent",
    () =>
      withWebhook((url, webhook) =>
        Effect.gen(function* () {
          webhook.down = false
          const name = yield* file({
            routes: { a: { type: "webhook", url: `${url}/a` }, b: { type: "webhook", url: `${url}/b` } }
          })
          const settings = yield* Settings.load(Settings.relayConfig, yield* Settings.fileProvider(name))
          const sink = yield* SinkRouter.sinkOf(RelayCommand.relaySinkLayer(settings, Effect.void))
          const record = (route: string, n: number) =>
            Either.getOrThrow(
              Topic.toRecord(
                Topic.make({
                  name: `t.${route}`,
                  route,
                  payload: { n: Schema.Number },
                  partitionKey: () => "p",
                  idempotencyKey: (v) => String(v.n)
                }),
                { n },
                DateTime.unsafeMake(0)
              )
            )
          const stored = (route: string, n: number) => {
            const r = record(route, n)
            return OutboxRecord.fromPrepared(
              {
                id: `${route}-${n}`,
                partitionKey: r.partitionKey,
                envelopeId: r.envelopeId,
                bindingId: r.bindingId,
                routeId: r.routeId ?? "",
                address: "",
                payload: r.payload,
                headers: r.headers ?? {},
                orderingKey: Option.none(),
                createdAt: DateTime.unsafeMake(0),
                expiresAt: Option.none()
              },
              n
            )
          }
          yield* sink.send(stored("a", 1))
          yield* sink.send(stored("b", 2))
          const unrouted = yield* Effect.flip(sink.send(stored("c", 3)))
          expect(unrouted).toMatchObject({ retryable: false, code: "no-route" })
          expect(unrouted.message).toContain("route c")
          expect(webhook.bodies.map((body) => JSON.parse(body).routeId)).toEqual(["a", "b"])
          expect(webhook.paths).toEqual(["/hook/a", "/hook/b"])
        }).pipe(Effect.scoped)
      )
  )
})
