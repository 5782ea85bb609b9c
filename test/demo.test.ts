/**
 * The `npm start` demo with a small workload: two relays drain a SQLite outbox into a local webhook that
 * fails some deliveries on purpose; the demo verifies delivery, dead-lettering, per-key order and
 * duplicates, and prints its summary.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"
import { spawn } from "node:child_process"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as Demo from "../src/programs/cli/Demo.js"

const root = fileURLToPath(new URL("..", import.meta.url))
const tsx = pathToFileURL(path.join(root, "node_modules", "tsx", "dist", "loader.mjs")).href

const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-demo-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))

describe("demo", () => {
  it.live(
    "delivers or dead-letters every record, holds per-key order, and prints the verification and summary",
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
    expect(fs.existsSync(path.join(dataDir, "demo.log"))).toBe(true)
  }, 180_000)
})
