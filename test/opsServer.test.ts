import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpServer from "@effect/platform/HttpServer"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as http from "node:http"
import parsePrometheusTextFormat, { type PromFamily } from "parse-prometheus-text-format"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as MemoryDeadLetterStore from "../src/layers/memory/MemoryDeadLetterStore.js"
import * as MemoryLeaseStore from "../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as MemorySink from "../src/layers/sinks/MemorySink.js"
import * as DynamoDbOutboxStore from "../src/layers/dynamodb/DynamoDbOutboxStore.js"
import * as OpsServer from "../src/programs/ops/OpsServer.js"
import * as Prometheus from "../src/programs/ops/Prometheus.js"
import * as Relay from "../src/programs/Relay.js"
import * as DynamoDb from "../src/services/DynamoDb.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { makeTestClientConfig, randomTableName } from "./support/DynamoLocal.js"
import { startDynamoLocal } from "./support/globalSetup.js"

const family = (families: ReadonlyArray<PromFamily>, name: string): PromFamily | undefined =>
  families.find((f) => f.name === name)

const sampleValue = (families: ReadonlyArray<PromFamily>, name: string, labels: Record<string, string>): number => {
  const f = family(families, name)
  if (f === undefined) return 0
  let total = 0
  for (const metric of f.metrics) {
    const ok = Object.entries(labels).every(([k, v]) => metric.labels?.[k] === v)
    if (ok && "value" in metric) total += Number(metric.value)
  }
  return total
}

const rec = (partitionKey: string, n: number) =>
  new NewOutboxRecord({
    id: `${partitionKey}-${String(n).padStart(4, "0")}`,
    partitionKey,
    envelopeId: `env-${n}`,
    bindingId: "b",
    payload: new Uint8Array([n % 256]),
    orderingKey: `k${n % 3}`
  })

/** Serves the operations endpoint on 127.0.0.1 with an ephemeral port; yields its base URL. */
const serve = (options: OpsServer.OpsServerOptions) =>
  Effect.gen(function* () {
    const server = NodeHttpServer.layer(() => http.createServer(), { port: 0, host: "127.0.0.1" })
    const context = yield* Layer.build(Layer.merge(OpsServer.layer(options), server).pipe(Layer.provideMerge(server)))
    return yield* HttpServer.addressWith((address) =>
      Effect.succeed(address._tag === "TcpAddress" ? `http://127.0.0.1:${address.port}` : "")
    ).pipe(Effect.provide(context))
  })

const get = (url: string) =>
  Effect.promise(async () => {
    const response = await fetch(url)
    return { status: response.status, type: response.headers.get("content-type"), body: await response.text() }
  })

describe("Prometheus exposition", () => {
  it.effect("renders counters, gauges and histograms with their tags as labels, parseable by a real parser", () =>
    Effect.gen(function* () {
      const counter = Metric.counter("OpsTestCounter", { description: "a test counter", incremental: true })
      const gauge = Metric.gauge("OpsTestGauge")
      const histogram = Metric.histogram("OpsTestHistogram", MetricBoundaries.fromIterable([1, 10, 100]))
      yield* Metric.incrementBy(Metric.tagged(counter, "partition", 'p"1\\x'), 3)
      yield* Metric.incrementBy(Metric.tagged(counter, "partition", "p2"), 5)
      yield* Metric.set(Metric.tagged(gauge, "partition", "p1"), 7)
      for (const v of [0.5, 5, 50, 500]) yield* Metric.update(histogram, v)
      const text = yield* Prometheus.scrape
      const families = parsePrometheusTextFormat(text)
      expect(family(families, "ops_test_counter_total")?.type).toBe("COUNTER")
      expect(family(families, "ops_test_counter_total")?.help).toBe("a test counter")
      expect(sampleValue(families, "ops_test_counter_total", { partition: 'p"1\\x' })).toBe(3)
      expect(sampleValue(families, "ops_test_counter_total", { partition: "p2" })).toBe(5)
      expect(sampleValue(families, "ops_test_gauge", { partition: "p1" })).toBe(7)
      const h = family(families, "ops_test_histogram")
      expect(h?.type).toBe("HISTOGRAM")
      const series = h?.metrics[0]
      expect(series !== undefined && "buckets" in series ? series.buckets : undefined).toEqual({
        "1": "1",
        "10": "2",
        "100": "3",
        "+Inf": "4"
      })
      expect(series !== undefined && "count" in series ? Number(series.count) : -1).toBe(4)
      expect(series !== undefined && "sum" in series ? Number(series.sum) : -1).toBe(555.5)
    })
  )

  it("makes names and label names valid for Prometheus", () => {
    expect(Prometheus.metricName("a.b-c")).toBe("a_b_c")
    expect(Prometheus.metricName("9lives")).toBe("_9lives")
    expect(Prometheus.labelName("__reserved")).toBe("x__reserved")
    expect(Prometheus.labelName("route-id")).toBe("route_id")
    expect(Prometheus.snakeCase("DynamoDBOutboxClaimScanPages")).toBe("dynamo_db_outbox_claim_scan_pages")
    expect(Prometheus.exposedName("SomeCounter", "counter")).toBe("some_counter_total")
    expect(Prometheus.exposedName("OutboxDrainLatency", "histogram")).toBe("outbox_delivery_latency_seconds")
  })
})

describe("operations endpoint", () => {
  it.live("serves /metrics whose completion counter moves as a relay drains, /healthz and /readyz", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const running = yield* Ref.make(false)
        const base = yield* serve({ readiness: { relayRunning: Ref.get(running) } })
        const store = yield* OutboxStore
        const partition = `ops-${Date.now()}`

        const before = parsePrometheusTextFormat((yield* get(`${base}/metrics`)).body)
        const completedBefore = sampleValue(before, "outbox_completions_total", { partition })

        const unready = yield* get(`${base}/readyz`)
        expect(unready.status).toBe(503)
        expect(JSON.parse(unready.body)).toMatchObject({ status: "unready", reasons: ["the relay is not running"] })

        yield* store.persist(Array.from({ length: 30 }, (_, i) => rec(partition, i)))
        yield* Relay.start({
          owner: "ops-relay",
          discoveryInterval: "50 millis",
          drainer: { idleBackoffMax: "50 millis" }
        })
        yield* Ref.set(running, true)
        yield* store.countPending(partition).pipe(
          Effect.filterOrFail((n) => n === 0),
          Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("20 seconds")))
        )
        const scrape = yield* get(`${base}/metrics`)
        expect(scrape.status).toBe(200)
        expect(scrape.type).toBe(Prometheus.contentType)
        const after = parsePrometheusTextFormat(scrape.body)
        expect(sampleValue(after, "outbox_completions_total", { partition }) - completedBefore).toBe(30)
        expect(sampleValue(after, "outbox_delivered_total", { partition })).toBe(30)
        expect(family(after, "outbox_delivery_latency_seconds")?.type).toBe("HISTOGRAM")
        // the relay leased the partition once (lease churn is the acquired and lost counters)
        expect(sampleValue(after, "outbox_lease_acquired_total", { partition })).toBe(1)
        expect(sampleValue(after, "outbox_lease_lost_total", { partition })).toBe(0)

        const health = yield* get(`${base}/healthz`)
        expect(health.status).toBe(200)
        const ready = yield* get(`${base}/readyz`)
        expect(ready.status).toBe(200)
        expect(JSON.parse(ready.body)).toMatchObject({ status: "ready", checks: { store: "ok", relay: "running" } })
      })
    ).pipe(
      Effect.provide(
        Layer.mergeAll(
          MemoryOutboxStore.layer,
          MemoryLeaseStore.layer,
          MemorySink.layer,
          MemoryDeadLetterStore.layer.pipe(Layer.provide(MemoryOutboxStore.layer))
        )
      )
    )
  )

  it.live(
    "reports unready with a JSON reason once the DynamoDB server under the store stops",
    () =>
      Effect.gen(function* () {
        const server = yield* Effect.acquireRelease(
          Effect.promise(() => startDynamoLocal()),
          (s) => Effect.promise(() => s.stop())
        )
        const tableName = randomTableName("ops-readyz")
        const dynamo = DynamoDb.layer(makeTestClientConfig(server.endpoint))
        const storeLayer = DynamoDbOutboxStore.layerWith({ tableName, ensureTable: true }).pipe(
          Layer.provideMerge(dynamo)
        )
        yield* Effect.gen(function* () {
          const base = yield* serve({ readiness: { storeTimeout: "2 seconds" } })
          const store = yield* OutboxStore
          yield* store.persist([rec("ops-dynamo", 1)])
          const ready = yield* get(`${base}/readyz`)
          expect(ready.status).toBe(200)
          expect(JSON.parse(ready.body)).toMatchObject({ status: "ready", checks: { store: "ok", relay: "absent" } })
          yield* Effect.promise(() => server.stop())
          const unready = yield* get(`${base}/readyz`)
          expect(unready.status).toBe(503)
          expect(JSON.parse(unready.body)).toMatchObject({
            status: "unready",
            reasons: ["the outbox store did not answer"],
            checks: { store: "unreachable" }
          })
          // liveness does not depend on the store
          expect((yield* get(`${base}/healthz`)).status).toBe(200)
        }).pipe(Effect.provide(storeLayer))
      }).pipe(Effect.scoped),
    60_000
  )
})
