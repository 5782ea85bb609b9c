/**
 * The operations endpoint through the command line: `relay --http-port 0` and `dashboard --http-port 0`
 * as their own processes (the bundled CLI) over a SQLite file; the tests read the URL from the log line
 * and talk to it over loopback.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import parsePrometheusTextFormat from "parse-prometheus-text-format"
import { afterAll } from "vitest"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { buildCli } from "./support/CliBundle.js"

const bundle = await buildCli()
afterAll(() => bundle.remove())
const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-ops-cli-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))

const cleanEnv = (): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("OUTBOX_") && !key.startsWith("OTEL_")) env[key] = value
  }
  return env
}

/** Spawns the CLI and resolves with the child and the endpoint URL once it logs it. */
const startWithEndpoint = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  new Promise<{ readonly child: ChildProcess; readonly url: string; readonly stderr: () => string }>(
    (resolve, reject) => {
      const child = spawn(process.execPath, bundle.argv(args), { cwd: directory, env: { ...cleanEnv(), ...env } })
      let stderr = ""
      child.stdout.resume()
      child.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString("utf8")
        const match = /operations endpoint listening" url=(http:\/\/127\.0\.0\.1:\d+\/)/.exec(stderr)
        if (match?.[1] !== undefined) resolve({ child, url: match[1], stderr: () => stderr })
      })
      child.on("exit", (code) => reject(new Error(`exited with ${String(code)} before listening:\n${stderr}`)))
      setTimeout(() => reject(new Error(`no endpoint URL logged within 20 s:\n${stderr}`)), 20_000).unref()
    }
  )

const stop = (child: ChildProcess) =>
  new Promise<number | null>((resolve) => {
    if (child.exitCode !== null) return resolve(child.exitCode)
    child.on("exit", (code) => resolve(code))
    child.kill("SIGTERM")
  })

const seed = (filename: string, partition: string, n: number) =>
  Effect.runPromise(
    Effect.flatMap(OutboxStore, (store) =>
      store.persist(
        Array.from(
          { length: n },
          (_, i) =>
            new NewOutboxRecord({
              partitionKey: partition,
              envelopeId: `env-${i}`,
              bindingId: "b",
              payload: new TextEncoder().encode(`{"n":${i}}`)
            })
        )
      )
    ).pipe(Effect.provide(SqliteOutboxStore.layer.pipe(Layer.provide(SqliteDatabase.layer({ filename })))))
  )

describe("operations endpoint from the command line", () => {
  it.live(
    "relay --http-port serves /metrics with the records it delivered, /readyz ready, and the dashboard",
    () =>
      Effect.promise(async () => {
        const filename = path.join(directory, "relay.db")
        await seed(filename, "cli-ops", 25)
        const { child, url } = await startWithEndpoint([
          "relay",
          "stdout",
          "--sqlite-file",
          filename,
          "--discovery-interval",
          "100 millis",
          "--http-port",
          "0"
        ])
        try {
          let delivered = 0
          for (let attempt = 0; attempt < 100 && delivered < 25; attempt++) {
            const families = parsePrometheusTextFormat(await (await fetch(`${url}metrics`)).text())
            const completions = families.find((f) => f.name === "outbox_delivered_total")
            delivered = (completions?.metrics ?? [])
              .filter((m) => m.labels?.["partition"] === "cli-ops")
              .reduce((sum, m) => sum + ("value" in m ? Number(m.value) : 0), 0)
            if (delivered < 25) await new Promise((r) => setTimeout(r, 200))
          }
          expect(delivered).toBe(25)
          const ready = await fetch(`${url}readyz`)
          expect(ready.status).toBe(200)
          expect(await ready.json()).toMatchObject({ checks: { store: "ok", relay: "running", drainers: "ok" } })
          const page = await (await fetch(url)).text()
          expect(page).toContain("read-only (start the relay with --http-allow-mutations")
          const partitions = (await (await fetch(`${url}api/partitions`)).json()) as {
            partitions: ReadonlyArray<{ partitionKey: string; pending: number }>
          }
          expect(partitions.partitions).toContainEqual(expect.objectContaining({ partitionKey: "cli-ops", pending: 0 }))
        } finally {
          expect(await stop(child)).toBe(0)
        }
      }),
    60_000
  )

  it.live(
    "dashboard serves the page read-only for a store without a relay, whatever the environment says, and the store's gauges on /metrics",
    () =>
      Effect.promise(async () => {
        const filename = path.join(directory, "dashboard.db")
        await seed(filename, "waiting", 3)
        const { child, url } = await startWithEndpoint(["dashboard", "--sqlite-file", filename, "--http-port", "0"], {
          OUTBOX_HTTP_ALLOW_MUTATIONS: "true"
        })
        try {
          const partitions = (await (await fetch(`${url}api/partitions`)).json()) as {
            partitions: ReadonlyArray<{ partitionKey: string; pending: number; lease: unknown }>
          }
          expect(partitions.partitions).toEqual([
            expect.objectContaining({ partitionKey: "waiting", pending: 3, lease: null })
          ])
          const html = await (await fetch(url)).text()
          expect(html).not.toContain('id="dlq-redrive"')
          const token = /name="csrf-token" content="([0-9a-f]+)"/.exec(html)?.[1] ?? ""
          const purge = await fetch(`${url}api/dead-letters/purge`, {
            method: "POST",
            headers: { "content-type": "application/json", "x-csrf-token": token },
            body: "{}"
          })
          expect(purge.status).toBe(403)
          const ready = await (await fetch(`${url}readyz`)).json()
          expect(ready).toMatchObject({ status: "ready", checks: { relay: "absent" } })
          // no relay runs here: /metrics serves the store's own gauges
          const families = parsePrometheusTextFormat(await (await fetch(`${url}metrics`)).text())
          const gauge = (name: string) => {
            const m = families.find((f) => f.name === name)?.metrics.find((s) => s.labels?.["partition"] === "waiting")
            return m !== undefined && "value" in m ? Number(m.value) : undefined
          }
          expect(gauge("outbox_backlog_records")).toBe(3)
          expect(gauge("outbox_oldest_pending_age_seconds")).toBeGreaterThanOrEqual(0)
          expect(families.find((f) => f.name === "outbox_store_up")?.metrics).toEqual([
            expect.objectContaining({ value: "1" })
          ])
        } finally {
          expect(await stop(child)).toBe(0)
        }
      }),
    60_000
  )
})
