/**
 * The dashboard's live view in a real browser (Debian's Chromium driven by playwright-core): charts drawn
 * from the in-process ring of snapshots move while a relay drains a backlog, totals since start count the
 * deliveries, a route whose sink is down shows a failure spike on that route only, stored text with markup
 * (partition keys, routes, the sink's error messages) renders as inert text, and a bulk redrive or purge of
 * a filter shows how many entries it touches before it is confirmed. Screenshots of the live page during a
 * drain and after it go to .tmp/screenshots, or with OUTBOX_UPDATE_SCREENSHOTS=1 to docs/ (shown in the
 * README).
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpServer from "@effect/platform/HttpServer"
import { describe, expect, it } from "@effect/vitest"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { type Browser, chromium, type Page } from "playwright-core"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteDeadLetterStore from "../src/layers/sqlite/SqliteDeadLetterStore.js"
import * as SqliteInspection from "../src/layers/sqlite/SqliteInspection.js"
import * as SqliteLeaseStore from "../src/layers/sqlite/SqliteLeaseStore.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import * as OpsServer from "../src/programs/ops/OpsServer.js"
import * as Relay from "../src/programs/Relay.js"
import { DeadLetterStore } from "../src/services/DeadLetterStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { SendError, Sink } from "../src/services/Sink.js"

const chromiumPath = process.env["CHROMIUM_PATH"] ?? "/usr/bin/chromium"
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
/** Screenshots go to .tmp/screenshots; with OUTBOX_UPDATE_SCREENSHOTS=1 they replace the ones in docs/. */
const shots =
  process.env["OUTBOX_UPDATE_SCREENSHOTS"] === "1" ? path.join(root, "docs") : path.join(root, ".tmp", "screenshots")

/** A sink that takes `sendMillis` per send, fails transiently for routes in `down`, permanently by `refuse`. */
interface TestSink {
  readonly down: Set<string>
  readonly refuse: Map<string, string>
  sendMillis: number
}

const sinkLayer = (state: TestSink) =>
  Layer.succeed(
    Sink,
    Sink.of({
      send: (record) =>
        Effect.gen(function* () {
          if (state.sendMillis > 0) yield* Effect.sleep(`${state.sendMillis} millis`)
          const refusal = state.refuse.get(record.id)
          if (refusal !== undefined) {
            return yield* new SendError({ retryable: false, code: "http-400", message: refusal })
          }
          if (state.down.has(record.routeId)) {
            return yield* new SendError({
              retryable: true,
              code: "unreachable",
              message: `route ${record.routeId} is down`
            })
          }
        })
    })
  )

const idOf = (partitionKey: string, n: number, routeId: string) =>
  `${partitionKey}-${routeId}-${String(n).padStart(4, "0")}`

const rec = (partitionKey: string, n: number, routeId: string) =>
  new NewOutboxRecord({
    id: idOf(partitionKey, n, routeId),
    partitionKey,
    envelopeId: `env-${routeId}-${n}`,
    bindingId: "b",
    routeId,
    payload: new TextEncoder().encode(JSON.stringify({ n })),
    orderingKey: `${routeId}-${n % 3}`
  })

const storesOn = (filename: string, sink: TestSink) => {
  const database = SqliteDatabase.layer({ filename })
  const outbox = SqliteOutboxStore.layer.pipe(Layer.provideMerge(database))
  const stores = Layer.mergeAll(SqliteLeaseStore.layer, SqliteDeadLetterStore.layer).pipe(Layer.provideMerge(outbox))
  return Layer.mergeAll(SqliteInspection.layer.pipe(Layer.provideMerge(stores)), sinkLayer(sink))
}

const serveDashboard = (options: OpsServer.OpsDashboardOptions) =>
  Effect.gen(function* () {
    const server = NodeHttpServer.layer(() => http.createServer(), { port: 0, host: "127.0.0.1" })
    const context = yield* Layer.build(OpsServer.layerWithDashboard(options).pipe(Layer.provideMerge(server)))
    return yield* HttpServer.addressWith((address) =>
      Effect.succeed(address._tag === "TcpAddress" ? `http://127.0.0.1:${address.port}/` : "")
    ).pipe(Effect.provide(context))
  })

const browser = Effect.acquireRelease(
  Effect.promise(() => chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox"] })),
  (b: Browser) => Effect.promise(() => b.close())
)

/** Opens the page; every confirmation dialog is recorded and accepted, as an operator clicking OK. */
const openPage = (b: Browser, url: string) =>
  Effect.gen(function* () {
    const page = yield* Effect.promise(() => b.newPage({ viewport: { width: 1280, height: 1000 } }))
    const dialogs: Array<string> = []
    page.on("dialog", (dialog) => {
      dialogs.push(dialog.message())
      void dialog.accept()
    })
    yield* Effect.promise(() => page.goto(url))
    return { page, dialogs }
  })

const textOf = (page: Page, selector: string) => Effect.promise(() => page.locator(selector).innerText())
const attribute = (page: Page, selector: string, name: string) =>
  Effect.promise(() => page.locator(selector).getAttribute(name))

/** Polls until `check` holds for what `read` returns (through locators: the page's CSP forbids eval). */
const until = <A>(read: Effect.Effect<A>, check: (a: A) => boolean, within: Duration.DurationInput, what: string) =>
  read.pipe(
    Effect.filterOrFail(check, (a) => new Error(`${what}: last seen ${JSON.stringify(a)}`)),
    Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo(within))),
    Effect.orDie
  )

const tempDatabase = () => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-dashboard-live-"))
  return { directory, filename: path.join(directory, "outbox.db") }
}

const withDatabase = <A, E, R>(sink: TestSink, body: Effect.Effect<A, E, R>) => {
  const { directory, filename } = tempDatabase()
  return body.pipe(
    Effect.scoped,
    Effect.provide(storesOn(filename, sink)),
    Effect.ensuring(Effect.sync(() => fs.rmSync(directory, { recursive: true, force: true })))
  )
}

describe("dashboard live view in Chromium", () => {
  it.live(
    "charts move while a relay drains a backlog, and totals since start count the deliveries",
    () => {
      const sink: TestSink = { down: new Set(), refuse: new Map(), sendMillis: 15 }
      return withDatabase(
        sink,
        Effect.gen(function* () {
          const store = yield* OutboxStore
          for (const partition of ["orders", "payments", "shipping"]) {
            for (const route of ["billing", "fulfilment"]) {
              yield* store.persist(Array.from({ length: 60 }, (_, i) => rec(partition, i, route)))
            }
          }
          sink.refuse.set("payments-billing-0007", "answered 400: bad order (amount must be positive)")
          const url = yield* serveDashboard({
            allowMutations: true,
            refreshMillis: 250,
            history: { intervalMillis: 250 }
          })
          const { page } = yield* openPage(yield* browser, url)
          fs.mkdirSync(shots, { recursive: true })
          yield* until(
            attribute(page, "#chart-pending", "data-last"),
            (v) => Number(v) === 360,
            "10 seconds",
            "pending chart at the backlog"
          )
          yield* Relay.start({
            owner: "live-relay",
            discoveryInterval: "100 millis",
            drainer: { idleBackoffMax: "100 millis", batchSize: 10, maxConcurrency: 2 }
          })
          // the delivered/s chart rises while the backlog drains, and keeps gaining points
          yield* until(
            attribute(page, "#chart-delivered", "data-last"),
            (v) => Number(v) > 0,
            "20 seconds",
            "delivered/s above zero"
          )
          const pathBefore = yield* attribute(page, "#chart-delivered path.line", "d")
          const pointsBefore = Number(yield* attribute(page, "#chart-delivered", "data-points"))
          yield* until(
            attribute(page, "#chart-pending", "data-last"),
            (v) => Number(v) > 0 && Number(v) < 300,
            "30 seconds",
            "pending part-way down"
          )
          // the chart gains a point every 250 ms: waited for, since a fast relay gets part-way down in less
          yield* until(
            attribute(page, "#chart-delivered", "data-points"),
            (v) => Number(v) > pointsBefore,
            "10 seconds",
            "delivered/s chart gaining points"
          )
          yield* Effect.promise(() => page.screenshot({ path: path.join(shots, "dashboard-live.png"), fullPage: true }))
          expect(yield* attribute(page, "#chart-delivered path.line", "d")).not.toBe(pathBefore)
          expect(Number(yield* attribute(page, "#chart-age", "data-peak"))).toBeGreaterThan(0)

          yield* until(textOf(page, "#total-pending"), (t) => t === "0", "60 seconds", "backlog drained")
          yield* until(
            textOf(page, "#total-delivered"),
            (t) => Number(t) >= 359,
            "10 seconds",
            "359 delivered since start"
          )
          yield* until(
            attribute(page, "#chart-pending", "data-last"),
            (v) => v === "0",
            "10 seconds",
            "pending chart back at zero"
          )
          expect(Number(yield* textOf(page, "#total-dead-lettered"))).toBeGreaterThanOrEqual(1)
          expect(Number(yield* attribute(page, "#chart-dead-lettered", "data-peak"))).toBeGreaterThan(0)
          expect(Number(yield* attribute(page, "#chart-pending", "data-peak"))).toBeGreaterThanOrEqual(300)
          // the dead letter shows the receiver's own answer, not only the category
          const row = page.locator("#dead-letters tr[data-entry]", { hasText: "payments-billing-0007" })
          yield* Effect.promise(() => row.waitFor({ timeout: 10_000 }))
          expect(yield* Effect.promise(() => row.locator('[data-field="last-error"]').innerText())).toBe(
            "http-400: answered 400: bad order (amount must be positive)"
          )
          // both routes are listed with their deliveries
          expect(Number(yield* textOf(page, '#routes tr[data-route="fulfilment"] [data-field="delivered"]'))).toBe(180)
          yield* Effect.promise(() =>
            page.screenshot({ path: path.join(shots, "dashboard-after.png"), fullPage: true })
          )
        })
      )
    },
    180_000
  )

  it.live(
    "an outage of one route's sink shows as a failure spike on that route only, and its records flow once it is back",
    () => {
      const sink: TestSink = { down: new Set(["invoices"]), refuse: new Map(), sendMillis: 5 }
      return withDatabase(
        sink,
        Effect.gen(function* () {
          const store = yield* OutboxStore
          for (const route of ["invoices", "emails"]) {
            yield* store.persist(Array.from({ length: 30 }, (_, i) => rec("outage", i, route)))
          }
          const url = yield* serveDashboard({ refreshMillis: 250, history: { intervalMillis: 250 } })
          const { page } = yield* openPage(yield* browser, url)
          yield* Relay.start({
            owner: "outage-relay",
            discoveryInterval: "100 millis",
            drainer: { idleBackoffMax: "100 millis", batchSize: 20 }
          })
          const invoices = '#routes tr[data-route="invoices"]'
          const emails = '#routes tr[data-route="emails"]'
          yield* until(
            textOf(page, `${emails} [data-field="delivered"]`),
            (t) => Number(t) === 30,
            "30 seconds",
            "emails delivered during the invoices outage"
          )
          yield* until(
            textOf(page, `${invoices} [data-field="failure-peak"]`),
            (t) => Number(t) > 0,
            "10 seconds",
            "a failure spike on invoices"
          )
          expect(yield* textOf(page, `${emails} [data-field="failure-peak"]`)).toBe("0")
          expect(yield* textOf(page, `${emails} [data-field="failures"]`)).toBe("0")
          expect(Number(yield* textOf(page, `${invoices} [data-field="delivered"]`))).toBe(0)
          expect(Number(yield* attribute(page, "#chart-failures", "data-peak"))).toBeGreaterThan(0)

          sink.down.clear()
          yield* until(
            textOf(page, `${invoices} [data-field="delivered"]`),
            (t) => Number(t) === 30,
            "60 seconds",
            "invoices delivered after the outage"
          )
          expect(yield* textOf(page, `${emails} [data-field="failures"]`)).toBe("0")
        })
      )
    },
    120_000
  )

  it.live(
    "stored text with markup (partition key, route, the sink's error) renders as inert text, the error cut to 500 characters",
    () => {
      const partition = `<img src=x onerror="document.title='pwned-partition'">`
      const route = `<script>document.title='pwned-route'</script>`
      const error = `answered 400: <b id="injected">bad</b><img src=x onerror="document.title='pwned-error'"> ${"x".repeat(2000)}`
      const sink: TestSink = { down: new Set(), refuse: new Map(), sendMillis: 0 }
      return withDatabase(
        sink,
        Effect.gen(function* () {
          const store = yield* OutboxStore
          sink.refuse.set(idOf(partition, 1, route), error)
          yield* store.persist([rec(partition, 1, route), rec(partition, 2, route)])
          const url = yield* serveDashboard({
            allowMutations: true,
            refreshMillis: 250,
            history: { intervalMillis: 250 }
          })
          const { page } = yield* openPage(yield* browser, url)
          yield* Relay.start({
            owner: "hostile-relay",
            discoveryInterval: "100 millis",
            drainer: { idleBackoffMax: "100 millis" }
          })
          const row = page.locator("#dead-letters tr[data-entry]")
          yield* Effect.promise(() => row.first().waitFor({ timeout: 20_000 }))
          yield* Effect.promise(() => page.locator("#routes tr[data-route]").first().waitFor({ timeout: 10_000 }))
          // the route's row appears with the first history sample that saw its dead letter
          yield* Effect.promise(() => page.locator("#routes").getByText(route).first().waitFor({ timeout: 20_000 }))
          const cell = yield* Effect.promise(() => row.first().locator('[data-field="last-error"]').innerText())
          expect(cell.startsWith(`http-400: answered 400: <b id="injected">bad</b><img src=x onerror=`)).toBe(true)
          expect(cell.length).toBeLessThanOrEqual("http-400: ".length + 501)
          expect(cell.endsWith("…")).toBe(true)
          expect(yield* Effect.promise(() => row.first().innerText())).toContain(partition)
          expect(yield* textOf(page, "#partitions")).toContain(partition)
          expect(yield* textOf(page, "#routes")).toContain(route)
          // nothing of it became markup: no image, no injected element, no script ran
          expect(yield* Effect.promise(() => page.locator("img").count())).toBe(0)
          expect(yield* Effect.promise(() => page.locator("#injected").count())).toBe(0)
          expect(yield* Effect.promise(() => page.locator("#routes script, #dead-letters script").count())).toBe(0)
          expect(yield* Effect.promise(() => page.title())).toBe("effect-outbox")
        })
      )
    },
    120_000
  )

  it.live(
    "bulk redrive and purge of a filter show how many entries match before the operator confirms",
    () => {
      const sink: TestSink = { down: new Set(), refuse: new Map(), sendMillis: 0 }
      return withDatabase(
        sink,
        Effect.gen(function* () {
          const store = yield* OutboxStore
          const deadLetters = yield* DeadLetterStore
          const records = [
            ...Array.from({ length: 3 }, (_, i) => rec("bulk", i, "billing")),
            ...Array.from({ length: 2 }, (_, i) => rec("bulk", i, "orders"))
          ]
          for (const r of records) sink.refuse.set(r.id ?? "", "answered 422: rejected")
          yield* store.persist(records)
          const url = yield* serveDashboard({
            allowMutations: true,
            refreshMillis: 250,
            history: { intervalMillis: 250 }
          })
          const { dialogs, page } = yield* openPage(yield* browser, url)
          yield* Relay.start({
            owner: "bulk-relay",
            discoveryInterval: "100 millis",
            drainer: { idleBackoffMax: "100 millis" }
          })
          yield* until(
            Effect.map(deadLetters.list({}), (entries) => entries.length).pipe(Effect.orDie),
            (n) => n === 5,
            "20 seconds",
            "five dead letters"
          )
          // the receiver accepts them now: redrive every billing entry through the filter
          sink.refuse.clear()
          yield* Effect.promise(() => page.fill('#dlq-filters input[name="route"]', "billing"))
          yield* Effect.promise(() => page.click("#dlq-redrive-matching"))
          // generous: under a full parallel test run the page's periodic refreshes and this action's requests
          // queue behind each other on the loaded machine
          yield* until(textOf(page, "#dlq-status"), (t) => t === "redriven: 3", "30 seconds", "three redriven")
          expect(dialogs[0]).toBe(
            "Redrive 3 dead-letter entries matching route=billing? They are enqueued again as new records."
          )
          const left = yield* deadLetters.list({})
          expect(left.map((e) => e.routeId).sort()).toEqual(["orders", "orders"])

          yield* Effect.promise(() => page.fill('#dlq-filters input[name="route"]', "orders"))
          yield* Effect.promise(() => page.click("#dlq-purge"))
          yield* until(textOf(page, "#dlq-status"), (t) => t === "purged: 2", "30 seconds", "two purged")
          expect(dialogs[1]).toBe("Delete 2 dead-letter entries matching route=orders? This cannot be undone.")
          expect(yield* deadLetters.list({})).toEqual([])
        })
      )
    },
    120_000
  )
})
