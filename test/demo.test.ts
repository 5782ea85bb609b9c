/**
 * The `npm start` demo with a small workload: a producer publishes two typed topics, two relays route them
 * through a `SinkRouter` each (orders to a local webhook that fails some deliveries on purpose, invoices to
 * a JSON-lines ledger); the demo verifies delivery, dead-lettering, per-key order and duplicates on the
 * values decoded with `Topic.decode`, and prints its summary and decoded samples.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"
import { spawn } from "node:child_process"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as Demo from "../src/programs/cli/Demo.js"
import * as Topic from "../src/programs/Topic.js"

const root = fileURLToPath(new URL("..", import.meta.url))
const tsx = pathToFileURL(path.join(root, "node_modules", "tsx", "dist", "loader.mjs")).href

const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-demo-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))

describe("demo", () => {
  it.live(
    "routes order.placed to the webhook and invoice.issued to the JSON-lines ledger through SinkRouter, delivers or dead-letters every event, holds per-key order, decodes both topics and prints the verification, summary and decoded samples",
    () =>
      Effect.gen(function* () {
        let screen = ""
        const dataDir = path.join(directory, "data")
        const result = yield* Demo.run({
          records: 400,
          partitions: 4,
          dataDir,
          timeoutMillis: 150_000,
          write: (text) => {
            screen += text
          },
          tty: false,
          tracing: false
        })
        expect(result.ok).toBe(true)
        expect(result.enqueued).toBe(400)
        // every 400th record (n = 123) is answered 400 and dead-lettered; the rest are delivered
        expect(result.deadLettered).toBe(1)
        expect(result.delivered).toBe(399)
        expect(result.missing).toBe(0)
        expect(result.orderViolations).toBe(0)
        expect(fs.existsSync(path.join(dataDir, "demo.db"))).toBe(true)
        expect(screen).toContain("✔ verified: 399 delivered + 1 dead-lettered = 400 enqueued")
        expect(screen).toMatch(/100%\s+delivered 399/)
        expect(screen).toMatch(/partitions drained\s+\d+\s+\d+\s+4/)
        expect(screen).toMatch(/transient failures \(503\) retried\s+16/)
        expect(screen).toContain("relay-a")
        expect(screen).toContain("relay-b")
        // every fifth event is an invoice, routed to the JSON-lines ledger; the rest are orders, routed to the webhook
        expect(result.routes.orders).toEqual({ published: 320, delivered: 319, duplicates: 0, malformed: 0 })
        expect(result.routes.invoices).toEqual({ published: 80, delivered: 80, duplicates: 0, malformed: 0 })
        expect(screen).toMatch(/order\.placed → webhook\s+319/)
        expect(screen).toMatch(/invoice\.issued → JSON lines\s+80/)
        expect(screen).toContain("What arrived, decoded with Topic.decode:")
        expect(screen).toMatch(
          /route orders \(webhook http:\/\/127\.0\.0\.1:\d+\/hook\): order\.placed\n {4}#\d+ tenant-0\d /
        )
        expect(screen).toMatch(/route invoices \(JSON lines .*invoices\.jsonl\): invoice\.issued\n {4}#\d+ tenant-0\d /)
        // the ledger, read back independently: every line decodes as an invoice, every invoice is there once
        const lines = fs
          .readFileSync(path.join(dataDir, "invoices.jsonl"), "utf8")
          .split("\n")
          .filter((line) => line.length > 0)
        const invoices = lines.map((line) => {
          const decoded = Topic.decode(Demo.InvoiceIssued, { body: line })
          if (Either.isLeft(decoded)) throw new Error(`ledger line does not decode: ${decoded.left.reason}`)
          return decoded.right
        })
        const numbers = invoices.map((invoice) => invoice.value.number).sort((a, b) => a - b)
        expect(numbers).toEqual(Array.from({ length: 80 }, (_, i) => i * 5 + 4))
        for (const { value, metadata } of invoices) {
          expect(typeof value.amountCents).toBe("bigint")
          expect(metadata.topic).toBe("invoice.issued")
          expect(metadata.partitionKey).toBe(value.tenant)
          expect(Option.getOrUndefined(metadata.orderingKey)).toBe(value.account)
        }
        // a ledger line is not an order: decoding it with the other topic is a typed DecodeError
        const foreign = Topic.decode(Demo.OrderPlaced, { body: lines[0] ?? "" })
        expect(Either.isLeft(foreign) && foreign.left._tag).toBe("DecodeError")
      }),
    { timeout: 180_000 }
  )
  it("`effect-outbox demo` runs as a command: periodic plain lines off a TTY, the verification line, the dashboard while it lingers, exit code 0", async () => {
    const dataDir = path.join(directory, "command")
    const child = spawn(
      process.execPath,
      [
        "--import",
        tsx,
        path.join(root, "src", "programs", "cli", "main.ts"),
        "demo",
        "--records",
        "120",
        "--partitions",
        "2",
        "--data-dir",
        dataDir,
        "--linger",
        "3"
      ],
      { cwd: directory, stdio: ["ignore", "pipe", "pipe"] }
    )
    let stdout = ""
    let stderr = ""
    // while the demo lingers after its verification, its dashboard still answers
    let dashboard: Promise<unknown> | undefined
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8")
      const url = /^Dashboard: (http:\/\/127\.0\.0\.1:\d+\/) /m.exec(stdout)?.[1]
      if (url !== undefined && dashboard === undefined) {
        dashboard = fetch(`${url}api/partitions`).then((response) => response.json())
      }
    })
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve))
    expect(stdout).toMatch(/^ {2}dashboard http:\/\/127\.0\.0\.1:\d+\/ /m)
    expect(await dashboard).toMatchObject({
      backend: "sqlite",
      partitions: [
        { partitionKey: "tenant-00", pending: 0, claimed: 0 },
        { partitionKey: "tenant-01", pending: 0, claimed: 0 }
      ]
    })
    expect(code, stderr).toBe(0)
    expect(stdout).toContain("producer  120 records over 2 partitions")
    expect(stdout).toMatch(/^100%\s+delivered 120\s+pending 0\s+claimed 0\s+dlq 0/m)
    expect(stdout).not.toContain("\r")
    expect(stdout).toContain("✔ verified: 120 delivered + 0 dead-lettered = 120 enqueued")
    expect(stdout).toMatch(/order\.placed → webhook\s+96\n/)
    expect(stdout).toMatch(/invoice\.issued → JSON lines\s+24\n/)
    expect(fs.existsSync(path.join(dataDir, "demo.log"))).toBe(true)
  }, 180_000)
})
