/**
 * The `/metrics` exposition by the Prometheus conventions: every SPEC §8 metric under an `outbox_` snake_case
 * name (counters `_total`, seconds), delivered and dead-lettered counted apart and per record route, label
 * cardinality capped with an overflow value, and a real relay's scrape linted clean by `promtool check
 * metrics` (Debian's `prometheus` package).
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpServer from "@effect/platform/HttpServer"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Schedule from "effect/Schedule"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import parsePrometheusTextFormat, { type PromFamily } from "parse-prometheus-text-format"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as MemoryDeadLetterStore from "../src/layers/memory/MemoryDeadLetterStore.js"
import * as MemoryInspection from "../src/layers/memory/MemoryInspection.js"
import * as MemoryLeaseStore from "../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as MemorySink from "../src/layers/sinks/MemorySink.js"
import * as Observability from "../src/programs/Observability.js"
import * as OpsServer from "../src/programs/ops/OpsServer.js"
import * as Prometheus from "../src/programs/ops/Prometheus.js"
import * as Relay from "../src/programs/Relay.js"
import * as OutboxMetrics from "../src/services/OutboxMetrics.js"
import { OutboxStore } from "../src/services/OutboxStore.js"

const here = path.dirname(fileURLToPath(import.meta.url))

const value = (families: ReadonlyArray<PromFamily>, name: string, labels: Record<string, string>): number => {
  let total = 0
  for (const metric of families.find((f) => f.name === name)?.metrics ?? []) {
    const ok = Object.entries(labels).every(([k, v]) => metric.labels?.[k] === v)
    if (ok && "value" in metric) total += Number(metric.value)
  }
  return total
}

const promtoolCheck = (exposition: string) => {
  const result = spawnSync("promtool", ["check", "metrics"], { input: exposition, encoding: "utf8" })
  return { status: result.status, output: `${result.stdout}${result.stderr}`.trim() }
}

const rec = (partitionKey: string, n: number, routeId: string) =>
  new NewOutboxRecord({
    id: `${partitionKey}-${String(n).padStart(4, "0")}`,
    partitionKey,
    envelopeId: `env-${n}`,
    bindingId: "b",
    routeId,
    payload: new Uint8Array([n % 256]),
    orderingKey: `k${n % 3}`
  })

const stores = Layer.mergeAll(MemoryLeaseStore.layer, MemorySink.layer).pipe(
  Layer.provideMerge(
    MemoryInspection.layer.pipe(
      Layer.provideMerge(MemoryDeadLetterStore.layer),
      Layer.provideMerge(MemoryOutboxStore.layer)
    )
  )
)

describe("Prometheus naming", () => {
  it("maps every SPEC §8 metric key to an outbox_ snake_case name, counters with _total, latency in seconds", () => {
    // every metric defined in the metrics module has a conventional name
    const source = fs.readFileSync(path.join(here, "..", "src", "services", "OutboxMetrics.ts"), "utf8")
    const keys = Array.from(source.matchAll(/Metric\.(?:counter|gauge|histogram)\(\s*"(\w+)"/g), (m) => m[1])
    expect(keys.length).toBeGreaterThanOrEqual(20)
    for (const key of keys) expect(Prometheus.names[key ?? ""], key).toBeDefined()
    for (const [key, mapping] of Object.entries(Prometheus.names)) {
      expect(mapping.name, key).toMatch(/^outbox_[a-z0-9_]+$/)
      expect(mapping.name, key).not.toMatch(/milli|_ms$/)
      expect(Prometheus.exposedName(key, "counter"), key).toBe(mapping.name)
    }
    for (const key of ["OutboxCompletions", "OutboxDelivered", "DLQEntries", "OutboxRecordFailures"]) {
      expect(Prometheus.names[key]?.name, key).toMatch(/_total$/)
    }
    expect(Prometheus.names["OutboxDrainLatency"]).toEqual({ name: "outbox_delivery_latency_seconds", divisor: 1000 })
  })

  it("caps partition and route label values: later values become _overflow with their samples merged", () => {
    const exposition = Prometheus.make({ maxPartitions: 2, maxRoutes: 1 })
    const pairs = Effect.runSync(
      Effect.gen(function* () {
        const counter = Metric.counter("OpsCapSends", { description: "capped", incremental: true })
        for (const [partition, n] of [
          ["a", 1],
          ["b", 2],
          ["c", 4],
          ["d", 8]
        ] as const) {
          yield* Metric.incrementBy(OutboxMetrics.tagged(counter, partition), n)
        }
        yield* Metric.incrementBy(OutboxMetrics.tagged(counter, "a", "r1"), 16)
        yield* Metric.incrementBy(OutboxMetrics.tagged(counter, "a", "r2"), 32)
        return (yield* Metric.snapshot).filter((pair) => pair.metricKey.name === "OpsCapSends")
      })
    )
    const families = parsePrometheusTextFormat(exposition.render(pairs))
    const series = families.find((f) => f.name === "ops_cap_sends_total")?.metrics ?? []
    const partitions = new Set(series.map((m) => m.labels?.["partition"]))
    expect(partitions.size).toBe(3)
    expect(partitions.has(Prometheus.overflow)).toBe(true)
    // nothing is lost: the total over all series is the total incremented
    expect(value(families, "ops_cap_sends_total", {})).toBe(1 + 2 + 4 + 8 + 16 + 32)
    expect(value(families, "ops_cap_sends_total", { partition: Prometheus.overflow })).toBeGreaterThanOrEqual(4)
    const routes = new Set(series.map((m) => m.labels?.["route"]).filter((r) => r !== undefined))
    expect(routes).toEqual(new Set(["r1", Prometheus.overflow]))
    // admission is sticky: the same values keep their own series on the next render
    expect(exposition.render(pairs)).toBe(exposition.render(pairs))
  })
})

describe("a relay's /metrics", () => {
  it.live(
    "counts delivered, dead-lettered and sink failures apart, per route, with store gauges, and passes promtool check metrics",
    () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const sink = yield* MemorySink.MemorySink
        const partition = `expo-${Date.now()}`
        yield* store.persist(
          Array.from({ length: 20 }, (_, i) => rec(partition, i, i % 2 === 0 ? "billing" : "orders"))
        )
        yield* sink.failRecord(`${partition}-0004`, { failure: "permanent", code: "http-400" })
        yield* sink.failRecord(`${partition}-0005`, { failure: "transient", times: 2 })
        const server = NodeHttpServer.layer(() => http.createServer(), { port: 0, host: "127.0.0.1" })
        const context = yield* Layer.build(OpsServer.layerWithDashboard({}).pipe(Layer.provideMerge(server)))
        const base = yield* HttpServer.addressWith((address) =>
          Effect.succeed(address._tag === "TcpAddress" ? `http://127.0.0.1:${address.port}` : "")
        ).pipe(Effect.provide(context))
        yield* Relay.start({
          owner: "expo-relay",
          discoveryInterval: "50 millis",
          drainer: { idleBackoffMax: "50 millis" }
        })
        yield* store.countPending(partition).pipe(
          Effect.filterOrFail((n) => n === 0),
          Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("20 seconds")))
        )
        const text = yield* Effect.promise(() => fetch(`${base}/metrics`).then((r) => r.text()))
        const lint = promtoolCheck(text)
        expect(lint.output).toBe("")
        expect(lint.status).toBe(0)

        const families = parsePrometheusTextFormat(text)
        const names = families.map((f) => f.name)
        for (const name of names) expect(name).toMatch(/^[a-z][a-z0-9_]*$/)
        expect(value(families, "outbox_delivered_total", { partition })).toBe(19)
        expect(value(families, "outbox_delivered_total", { partition, route: "billing" })).toBe(9)
        expect(value(families, "outbox_delivered_total", { partition, route: "orders" })).toBe(10)
        expect(value(families, "outbox_dead_lettered_total", { partition, category: "permanent" })).toBe(1)
        expect(value(families, "outbox_dead_lettered_total", { partition, route: "billing" })).toBe(1)
        expect(value(families, "outbox_sink_failures_total", { partition, route: "orders" })).toBe(2)
        expect(value(families, "outbox_sink_failures_total", { partition, route: "billing" })).toBe(1)
        expect(value(families, "outbox_completions_total", { partition })).toBe(20)
        // the store's own view, read at scrape time
        expect(value(families, "outbox_backlog_records", { partition })).toBe(0)
        expect(value(families, "outbox_oldest_pending_age_seconds", { partition })).toBe(0)
        expect(value(families, "outbox_dead_letter_entries", { category: "permanent" })).toBeGreaterThanOrEqual(1)
        expect(value(families, "outbox_store_up", {})).toBe(1)
        expect(families.find((f) => f.name === "outbox_delivery_latency_seconds")?.type).toBe("HISTOGRAM")
        // before the change these were CamelCase keys: none is exposed that way any more
        expect(names.filter((n) => /[A-Z]/.test(n))).toEqual([])
      }).pipe(Effect.scoped, Effect.provide(stores)),
    60_000
  )

  it("promtool flags what the conventions forbid (the lint is real)", () => {
    const bad = promtoolCheck("# TYPE OutboxCompletions counter\nOutboxCompletions 1\n")
    expect(bad.status).not.toBe(0)
    expect(bad.output).toContain("_total")
  })
})

describe("OpenTelemetry export beside the exposition", () => {
  it.live(
    "still exports the metrics under their Effect keys, the delivered counter included",
    () =>
      Effect.gen(function* () {
        const received: Array<{ readonly path: string; readonly body: string }> = []
        const collector = http.createServer((request, response) => {
          let body = ""
          request.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")))
          request.on("end", () => {
            received.push({ path: request.url ?? "", body })
            response.writeHead(200, { "content-type": "application/json" }).end("{}")
          })
        })
        yield* Effect.acquireRelease(
          Effect.promise(() => new Promise<void>((resolve) => collector.listen(0, "127.0.0.1", resolve))),
          () =>
            Effect.promise(
              () =>
                new Promise<void>((resolve) => {
                  collector.close(() => resolve())
                  collector.closeAllConnections()
                })
            )
        )
        const address = collector.address()
        const port = typeof address === "object" && address !== null ? address.port : 0
        const partition = `otel-${Date.now()}`
        // the export layer's scope closes (and flushes) before the collector's
        yield* Effect.gen(function* () {
          const store = yield* OutboxStore
          yield* store.persist(Array.from({ length: 5 }, (_, i) => rec(partition, i, "billing")))
          yield* Relay.start({
            owner: "otel-relay",
            discoveryInterval: "50 millis",
            drainer: { idleBackoffMax: "50 millis" }
          })
          yield* store.countPending(partition).pipe(
            Effect.filterOrFail((n) => n === 0),
            Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("20 seconds")))
          )
        }).pipe(
          Effect.scoped,
          Effect.provide(Layer.merge(stores, Observability.layerWith({ endpoint: `http://127.0.0.1:${port}` })))
        )
        const metrics = received
          .filter((r) => r.path === "/v1/metrics")
          .map((r) => r.body)
          .join("")
        expect(metrics).toContain("OutboxDelivered")
        expect(metrics).toContain("OutboxCompletions")
        expect(metrics).toContain(partition)
      }).pipe(Effect.scoped),
    60_000
  )
})
