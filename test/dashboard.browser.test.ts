/**
 * The dashboard in a real browser (Debian's Chromium driven by playwright-core): a relay drains a SQLite
 * store while the page shows depths falling to zero, a dead-lettered record appearing, and a redrive from
 * the page that gets it delivered; read-only mode hides the buttons and refuses forged POSTs with 403.
 * Screenshots land in .tmp/ (git-ignored).
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
import * as MemorySink from "../src/layers/sinks/MemorySink.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteDeadLetterStore from "../src/layers/sqlite/SqliteDeadLetterStore.js"
import * as SqliteInspection from "../src/layers/sqlite/SqliteInspection.js"
import * as SqliteLeaseStore from "../src/layers/sqlite/SqliteLeaseStore.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import * as OpsServer from "../src/programs/ops/OpsServer.js"
import * as Relay from "../src/programs/Relay.js"
import { DeadLetterStore } from "../src/services/DeadLetterStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"

const chromiumPath = process.env["CHROMIUM_PATH"] ?? "/usr/bin/chromium"
const artefacts = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", ".tmp", "screenshots")

const rec = (partitionKey: string, n: number) =>
  new NewOutboxRecord({
    id: `${partitionKey}-${String(n).padStart(4, "0")}`,
    partitionKey,
    envelopeId: `env-${n}`,
    bindingId: "b",
    payload: new TextEncoder().encode(JSON.stringify({ n })),
    headers: { authorization: "Bearer secret-token-value" },
    orderingKey: `k${n % 4}`
  })

/** SQLite stores on a fresh file, an inspection of it and a recording sink. */
const storesOn = (filename: string) => {
  const database = SqliteDatabase.layer({ filename })
  const outbox = SqliteOutboxStore.layer.pipe(Layer.provideMerge(database))
  const stores = Layer.mergeAll(SqliteLeaseStore.layer, SqliteDeadLetterStore.layer).pipe(Layer.provideMerge(outbox))
  const rest = SqliteInspection.layer.pipe(Layer.provideMerge(stores))
  return Layer.mergeAll(rest, MemorySink.layer)
}

/** Serves the endpoint with its dashboard on 127.0.0.1 (ephemeral port); yields its base URL. */
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

const openPage = (b: Browser, url: string) =>
  Effect.gen(function* () {
    const page = yield* Effect.promise(() => b.newPage({ viewport: { width: 1280, height: 900 } }))
    // the page's confirmation dialogs are accepted, as an operator clicking OK would
    page.on("dialog", (dialog) => void dialog.accept())
    yield* Effect.promise(() => page.goto(url))
    return page
  })

const screenshot = (page: Page, name: string) =>
  Effect.promise(async () => {
    fs.mkdirSync(artefacts, { recursive: true })
    await page.screenshot({ path: path.join(artefacts, name), fullPage: true })
  })

const textOf = (page: Page, selector: string) => Effect.promise(() => page.locator(selector).innerText())

/** Polls an element's text (through a locator: the page's CSP forbids evaluated predicates). */
const waitText = (page: Page, selector: string, expected: string, within: Duration.DurationInput) =>
  textOf(page, selector).pipe(
    Effect.filterOrFail((text) => text === expected),
    Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo(within)))
  )

/** The one page global the in-page check below reads (the test project has no DOM types). */
declare const document: { querySelector(selector: string): { readonly content: string } | null }

const tempDatabase = () => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-dashboard-"))
  return { directory, filename: path.join(directory, "outbox.db") }
}

describe("dashboard in Chromium", () => {
  it.live(
    "shows depths falling to zero and a dead-lettered record, and redrives it from the page until it is delivered",
    () => {
      const { directory, filename } = tempDatabase()
      return Effect.gen(function* () {
        const store = yield* OutboxStore
        const deadLetters = yield* DeadLetterStore
        const sink = yield* MemorySink.MemorySink
        const partitions = ["orders", "payments", "shipping"]
        for (const partition of partitions) {
          yield* store.persist(Array.from({ length: 60 }, (_, i) => rec(partition, i)))
        }
        // one record is refused for good: it goes to the dead-letter queue
        yield* sink.failRecord("payments-0007", { failure: "permanent", code: "http-400" })
        const url = yield* serveDashboard({ allowMutations: true, refreshMillis: 250 })
        const page = yield* openPage(yield* browser, url)

        yield* Effect.promise(() => page.waitForSelector('#partitions tr[data-partition="orders"]'))
        yield* screenshot(page, "dashboard-backlog.png")
        expect(Number(yield* textOf(page, "#total-pending"))).toBeGreaterThan(0)

        yield* Relay.start({
          owner: "dashboard-relay",
          discoveryInterval: "100 millis",
          drainer: { idleBackoffMax: "100 millis", batchSize: 20 }
        })
        yield* waitText(page, "#total-pending", "0", "30 seconds")
        yield* waitText(page, "#total-claimed", "0", "30 seconds")
        const row = page.locator("#dead-letters tr[data-entry]")
        yield* Effect.promise(() => row.first().waitFor({ timeout: 15_000 }))
        expect(yield* Effect.promise(() => row.count())).toBe(1)
        const rowText = yield* Effect.promise(() => row.first().innerText())
        expect(rowText).toContain("payments-0007")
        expect(rowText).toContain("permanent")
        expect(rowText).toContain("authorization")
        expect(rowText).not.toContain("secret-token-value")
        expect(yield* textOf(page, "#total-dlq")).toBe("1")
        // the relay's lease is shown with its owner and version
        expect(yield* textOf(page, '#partitions tr[data-partition="orders"]')).toContain("dashboard-relay v")
        yield* screenshot(page, "dashboard.png")

        yield* Effect.promise(() => row.first().locator("input.pick").check())
        yield* Effect.promise(() => page.click("#dlq-redrive"))
        yield* waitText(page, "#dlq-status", "redriven: 1", "10 seconds")
        // the redriven record (a new id, same envelope) reaches the sink; the entry is gone
        yield* sink.deliveries.pipe(
          Effect.map((deliveries) =>
            deliveries.filter((d) => d.record.partitionKey === "payments" && d.record.envelopeId === "env-7")
          ),
          Effect.filterOrFail((delivered) => delivered.length === 1),
          Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo("20 seconds")))
        )
        expect(yield* deadLetters.list({})).toEqual([])
        yield* Effect.promise(() => page.waitForSelector("#dlq-empty:not([hidden])", { timeout: 10_000 }))
        yield* screenshot(page, "dashboard-redriven.png")
      }).pipe(
        Effect.scoped,
        Effect.provide(storesOn(filename)),
        Effect.ensuring(Effect.sync(() => fs.rmSync(directory, { recursive: true, force: true })))
      )
    },
    120_000
  )

  it.live(
    "read-only: no redrive or purge buttons, and forged or cross-origin POSTs get 403",
    () => {
      const { directory, filename } = tempDatabase()
      return Effect.gen(function* () {
        const deadLetters = yield* DeadLetterStore
        const store = yield* OutboxStore
        yield* store.persist([rec("orders", 1)])
        const url = yield* serveDashboard({ allowMutations: false, refreshMillis: 250 })
        const page = yield* openPage(yield* browser, url)
        yield* Effect.promise(() => page.waitForSelector('#partitions tr[data-partition="orders"]'))
        expect(yield* Effect.promise(() => page.locator("#dlq-redrive").count())).toBe(0)
        expect(yield* Effect.promise(() => page.locator("#dlq-purge").count())).toBe(0)
        yield* screenshot(page, "dashboard-read-only.png")

        // a POST from the page itself, with the page's own token, is still refused
        const fromPage = yield* Effect.promise(() =>
          page.evaluate(async () => {
            const token = document.querySelector('meta[name="csrf-token"]')?.content ?? ""
            const response = await fetch("api/dead-letters/purge", {
              method: "POST",
              headers: { "content-type": "application/json", "x-csrf-token": token },
              body: "{}"
            })
            return response.status
          })
        )
        expect(fromPage).toBe(403)
        const forged = yield* Effect.promise(() =>
          fetch(`${url}api/dead-letters/purge`, { method: "POST", headers: { "content-type": "application/json" } })
        )
        expect(forged.status).toBe(403)
        expect(yield* deadLetters.list({})).toEqual([])
      }).pipe(
        Effect.scoped,
        Effect.provide(storesOn(filename)),
        Effect.ensuring(Effect.sync(() => fs.rmSync(directory, { recursive: true, force: true })))
      )
    },
    60_000
  )

  it.live(
    "with mutations on, a POST without the page's CSRF token or from another origin gets 403 and deletes nothing",
    () => {
      const { directory, filename } = tempDatabase()
      return Effect.gen(function* () {
        const url = yield* serveDashboard({ allowMutations: true })
        const page = yield* Effect.promise(() => fetch(url))
        const html = yield* Effect.promise(() => page.text())
        const token = /name="csrf-token" content="([0-9a-f]+)"/.exec(html)?.[1] ?? ""
        expect(token).toHaveLength(32)
        const post = (headers: Record<string, string>) =>
          Effect.promise(() =>
            fetch(`${url}api/dead-letters/purge`, {
              method: "POST",
              headers: { "content-type": "application/json", ...headers },
              body: '{"all":true}'
            }).then((r) => r.status)
          )
        expect(yield* post({})).toBe(403)
        expect(yield* post({ "x-csrf-token": "0".repeat(32) })).toBe(403)
        expect(yield* post({ "x-csrf-token": token, origin: "http://evil.example" })).toBe(403)
        expect(yield* post({ "x-csrf-token": token })).toBe(200)
      }).pipe(
        Effect.scoped,
        Effect.provide(storesOn(filename)),
        Effect.ensuring(Effect.sync(() => fs.rmSync(directory, { recursive: true, force: true })))
      )
    },
    60_000
  )
})
