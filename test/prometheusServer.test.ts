/**
 * A real Prometheus (Debian's `prometheus`, started by this file on 127.0.0.1) scraping a running relay's
 * `/metrics` every second while a backlog drains: the delivery rate, the backlog and the oldest pending age
 * are queryable through its HTTP API; every query of the shipped Grafana dashboard evaluates without error
 * and returns series; every shipped alert rule loads and evaluates healthy. The alert rules' own firing and
 * quiet cases are unit-tested with `promtool test rules`, including that each case fails when its alert's
 * expression is broken.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpServer from "@effect/platform/HttpServer"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as MemoryDeadLetterStore from "../src/layers/memory/MemoryDeadLetterStore.js"
import * as MemoryInspection from "../src/layers/memory/MemoryInspection.js"
import * as MemoryLeaseStore from "../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as MemorySink from "../src/layers/sinks/MemorySink.js"
import * as OpsServer from "../src/programs/ops/OpsServer.js"
import * as Relay from "../src/programs/Relay.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { type PromSeries, startPrometheus } from "./support/PrometheusServer.js"

const deploy = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "deploy")
const alertRules = path.join(deploy, "prometheus", "outbox-alerts.yml")
const alertTests = path.join(deploy, "prometheus", "outbox-alerts.test.yml")

const rec = (partitionKey: string, n: number) =>
  new NewOutboxRecord({
    id: `${partitionKey}-${String(n).padStart(4, "0")}`,
    partitionKey,
    envelopeId: `env-${n}`,
    bindingId: "b",
    routeId: n % 2 === 0 ? "billing" : "orders",
    payload: new Uint8Array([n % 256]),
    orderingKey: `k${n % 2}`
  })

const numberOf = (series: PromSeries): number => Number(series.value?.[1] ?? Number.NaN)

const sumOf = (result: ReadonlyArray<PromSeries>): number => result.reduce((sum, s) => sum + numberOf(s), 0)

/** Retries a query until its answer satisfies the predicate (a scrape a second: give it time). */
const eventually = <A>(query: () => Promise<A>, ok: (a: A) => boolean, what: string) =>
  Effect.tryPromise(query).pipe(
    Effect.filterOrFail(ok, (a) => new Error(`not yet: ${what} (last answer ${JSON.stringify(a)})`)),
    Effect.retry(Schedule.spaced("500 millis").pipe(Schedule.upTo("60 seconds"))),
    Effect.orDie
  )

interface Panel {
  readonly title: string
  readonly targets: ReadonlyArray<{ readonly expr: string }>
}

const panels = (): ReadonlyArray<Panel> => {
  const dashboard: { readonly panels: ReadonlyArray<Panel> } = JSON.parse(
    fs.readFileSync(path.join(deploy, "grafana", "effect-outbox.json"), "utf8")
  )
  return dashboard.panels
}

/** Grafana's built-in range variables, as Grafana would substitute them for a short dashboard range. */
const grafanaExpr = (expr: string): string => expr.replaceAll("$__rate_interval", "10s").replaceAll("$__range", "1m")

const stores = (sendMillis: number) =>
  Layer.mergeAll(
    MemoryLeaseStore.layer,
    MemorySink.layerWith({ onSend: () => Effect.sleep(`${sendMillis} millis`) })
  ).pipe(
    Layer.provideMerge(
      MemoryInspection.layer.pipe(
        Layer.provideMerge(MemoryDeadLetterStore.layer),
        Layer.provideMerge(MemoryOutboxStore.layer)
      )
    )
  )

describe("a real Prometheus scraping a relay", () => {
  it.live(
    "sees the delivery rate, the backlog falling and the oldest pending age; every dashboard query and alert rule evaluates",
    () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const sink = yield* MemorySink.MemorySink
        const partitions = ["prom-a", "prom-b"]
        for (const p of partitions) yield* store.persist(Array.from({ length: 80 }, (_, i) => rec(p, i)))
        yield* sink.failRecord("prom-a-0010", { failure: "permanent", code: "http-400" })
        yield* sink.failRecord("prom-b-0011", { failure: "transient", times: 3 })

        const server = NodeHttpServer.layer(() => http.createServer(), { port: 0, host: "127.0.0.1" })
        const context = yield* Layer.build(OpsServer.layerWithDashboard({}).pipe(Layer.provideMerge(server)))
        const target = yield* HttpServer.addressWith((address) =>
          Effect.succeed(address._tag === "TcpAddress" ? `127.0.0.1:${address.port}` : "")
        ).pipe(Effect.provide(context))
        const prometheus = yield* Effect.acquireRelease(
          Effect.promise(() => startPrometheus({ targets: [target], ruleFiles: [alertRules] })),
          (p) => Effect.promise(() => p.stop())
        )

        // the backlog is scraped before anything drains it
        yield* eventually(
          () => prometheus.query('sum(outbox_backlog_records{job="effect-outbox"})'),
          (r) => sumOf(r) === 160,
          "backlog of 160 scraped"
        )
        yield* Relay.start({
          owner: "prom-relay",
          discoveryInterval: "100 millis",
          drainer: { idleBackoffMax: "100 millis", batchSize: 10, maxConcurrency: 1 }
        })

        // while the backlog drains (80 sends of 75 ms per partition: about 6 s, six scrapes): a positive delivery rate
        const rate = yield* eventually(
          () => prometheus.query("sum(rate(outbox_delivered_total[5s]))"),
          (r) => sumOf(r) > 0,
          "positive delivery rate"
        )
        expect(sumOf(rate)).toBeGreaterThan(0)
        const age = yield* Effect.promise(() =>
          prometheus.query("max(max_over_time(outbox_oldest_pending_age_seconds[1m]))")
        )
        expect(sumOf(age)).toBeGreaterThan(0)

        // drained: the last scrape shows an empty backlog and no pending age
        yield* eventually(
          () => prometheus.query("sum(outbox_backlog_records) + sum(outbox_claimed_records)"),
          (r) => r.length === 1 && sumOf(r) === 0,
          "backlog drained"
        )
        yield* eventually(
          () => prometheus.query("max(outbox_oldest_pending_age_seconds)"),
          (r) => r.length === 1 && sumOf(r) === 0,
          "no pending age"
        )
        // the backlog series fell over time (first sample above the last)
        const history = yield* Effect.promise(() => prometheus.queryRange("sum(outbox_backlog_records)", 120))
        const values = (history[0]?.values ?? []).map(([, v]) => Number(v))
        expect(Math.max(...values)).toBe(160)
        expect(values[values.length - 1]).toBe(0)
        // and was scraped part-way drained: a draining relay is visible, not only its start and end
        expect(
          values.some((v) => v > 0 && v < 160),
          `backlog samples ${JSON.stringify(values)}`
        ).toBe(true)
        // delivered and dead-lettered apart: 159 delivered, one dead letter
        yield* eventually(
          () => prometheus.query("sum(outbox_delivered_total)"),
          (r) => sumOf(r) === 159,
          "159 delivered"
        )
        expect(sumOf(yield* Effect.promise(() => prometheus.query("sum(outbox_dead_lettered_total)")))).toBe(1)
        expect(
          sumOf(yield* Effect.promise(() => prometheus.query('sum(outbox_sink_failures_total{route="orders"})')))
        ).toBe(3)

        // every panel query of the shipped dashboard evaluates and returns series
        for (const panel of panels()) {
          for (const { expr } of panel.targets) {
            const result = yield* Effect.promise(() => prometheus.query(grafanaExpr(expr)))
            expect(result.length, `${panel.title}: ${expr}`).toBeGreaterThan(0)
          }
        }
        // every shipped alert rule loaded and evaluates without error against real series
        const rules = yield* eventually(
          () => prometheus.rules(),
          (r) => r.length === 7 && r.every((rule) => rule.health === "ok"),
          "all rules evaluated"
        )
        expect(rules.map((r) => r.name).sort()).toEqual([
          "OutboxBacklogGrowing",
          "OutboxDeadLettersIncreasing",
          "OutboxLeaseChurn",
          "OutboxOldestPendingTooOld",
          "OutboxRelayDown",
          "OutboxSinkFailing",
          "OutboxStrandedHead"
        ])
      }).pipe(Effect.scoped, Effect.provide(stores(75))),
    180_000
  )
})

const promtool = (...args: ReadonlyArray<string>) => {
  const result = spawnSync("promtool", args, { encoding: "utf8" })
  return { status: result.status, output: `${result.stdout}${result.stderr}` }
}

/** The alert names of the rules file, in order. */
const alertNames = (rules: string): Array<string> => Array.from(rules.matchAll(/- alert: (\w+)/g), (m) => m[1] ?? "")

/** The rules file with one alert's expression replaced. */
const withExpr = (rules: string, alert: string, expr: string): string =>
  rules.replace(
    new RegExp(`(- alert: ${alert}\\n\\s+expr: )(\\|\\n(?:\\s{10,}.*\\n)+|.*\\n)`),
    (_, head: string) => `${head}${expr}\n`
  )

describe("shipped alert rules", () => {
  it("pass promtool check rules and promtool test rules (each alert firing and quiet)", () => {
    const check = promtool("check", "rules", alertRules)
    expect(check.output).toContain("SUCCESS: 7 rules found")
    expect(check.status).toBe(0)
    const test = promtool("test", "rules", alertTests)
    expect(test.output).toContain("SUCCESS")
    expect(test.status).toBe(0)
  })

  it("the unit tests catch an alert that never fires and one that always fires, for every alert", () => {
    const rules = fs.readFileSync(alertRules, "utf8")
    const tests = fs.readFileSync(alertTests, "utf8")
    const names = alertNames(rules)
    expect(names).toHaveLength(7)
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-alert-mutants-"))
    try {
      fs.writeFileSync(path.join(directory, "outbox-alerts.test.yml"), tests)
      for (const name of names) {
        for (const mutant of ["vector(0) > 1", "vector(1)"]) {
          const mutated = withExpr(rules, name, mutant)
          expect(mutated, name).not.toBe(rules)
          fs.writeFileSync(path.join(directory, "outbox-alerts.yml"), mutated)
          const result = promtool("test", "rules", path.join(directory, "outbox-alerts.test.yml"))
          expect(result.status, `${name} with expr ${mutant}`).not.toBe(0)
          expect(result.output, name).toContain(name)
        }
      }
    } finally {
      fs.rmSync(directory, { recursive: true, force: true })
    }
  })
})
