/**
 * Input and settings the command line refuses before it does anything silly. `enqueue` reads lines in time
 * linear in their length, up to a documented maximum (`MaxLineBytes`, 8 MiB), and reports a longer line as
 * `line N: longer than …` without buffering it; nonsense settings (a lease TTL under the minimum, a batch
 * size of 0, a negative depth, a MySQL or unparsable PostgreSQL URL, a host that cannot be listened on)
 * are refused with exit code 2 and one line naming the setting — never a value that may hold a secret.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Readable } from "node:stream"
import { afterAll } from "vitest"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import { byteLines, enqueueLines, MaxLineBytes } from "../src/programs/cli/EnqueueCommand.js"
import { isListenHost, postgresUrlProblem } from "../src/programs/cli/Settings.js"
import * as Enqueue from "../src/programs/Enqueue.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { buildCli } from "./support/CliBundle.js"
import { cliRunner } from "./support/CliProcess.js"

const bundle = await buildCli()
afterAll(() => bundle.remove())
const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-cli-limits-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))
const { run } = cliRunner(bundle, directory)

/** `size` bytes of input in 64 KiB chunks, as stdin delivers them. */
function* chunked(parts: ReadonlyArray<Buffer>): Generator<Buffer> {
  for (const part of parts) {
    for (let start = 0; start < part.length; start += 65_536) yield part.subarray(start, start + 65_536)
  }
}

const record = (envelopeId: string, payload: string) =>
  JSON.stringify({ partitionKey: "p", envelopeId, bindingId: "b", payload })

describe("enqueue line length", () => {
  it.live(
    "a 64 MiB line is reported as line 1, too long, without being kept; the lines around it are enqueued",
    () =>
      Effect.gen(function* () {
        const reports: Array<string> = []
        const huge = Buffer.alloc(64 * 1024 * 1024, 0x61)
        const input = Readable.from(
          chunked([Buffer.from(""), huge, Buffer.from(`\n${record("after", "ok")}\n${record("last", "ok")}`)])
        )
        const summary = yield* enqueueLines(input, 500, (line, reason) =>
          Effect.sync(() => reports.push(`line ${line}: ${reason}`))
        )
        expect(reports).toEqual([
          `line 1: longer than the maximum line length of 8,388,608 bytes (67,108,864 bytes); not enqueued`
        ])
        expect(summary).toEqual({ lines: 3, enqueued: 2, duplicates: 0, rejected: 1 })
        const store = yield* OutboxStore
        expect((yield* store.queryPending("p", 10)).map((r) => r.envelopeId)).toEqual(["after", "last"])
      }).pipe(Effect.provide(Layer.provideMerge(Enqueue.layerWith({ maxOutboxDepth: 0 }), MemoryOutboxStore.layer))),
    { timeout: 60_000 }
  )

  it.live(
    "a 7.5 MiB line (under the maximum) arriving in 64 KiB chunks is enqueued whole",
    () =>
      Effect.gen(function* () {
        const payload = "x".repeat(7.5 * 1024 * 1024)
        const reports: Array<string> = []
        const summary = yield* enqueueLines(
          Readable.from(chunked([Buffer.from(`${record("big", payload)}\r\n`)])),
          500,
          (line, reason) => Effect.sync(() => reports.push(`line ${line}: ${reason}`))
        )
        expect(reports).toEqual([])
        expect(summary).toEqual({ lines: 1, enqueued: 1, duplicates: 0, rejected: 0 })
        const store = yield* OutboxStore
        const [stored] = yield* store.queryPending("p", 1)
        expect(stored?.payload.length).toBe(payload.length)
      }).pipe(Effect.provide(Layer.provideMerge(Enqueue.layerWith({ maxOutboxDepth: 0 }), MemoryOutboxStore.layer))),
    { timeout: 60_000 }
  )

  it.effect("byteLines: a line of exactly the maximum (plus \\r) is kept, one byte more is too long", () =>
    Effect.gen(function* () {
      const max = 1000
      const lines = yield* byteLines(
        Stream.fromIterable([
          new Uint8Array(600).fill(97),
          new Uint8Array(400).fill(97),
          Uint8Array.of(13, 10),
          new Uint8Array(1001).fill(98),
          Uint8Array.of(10, 99)
        ]),
        max
      ).pipe(Stream.runCollect)
      expect(
        Chunk.toReadonlyArray(lines).map((line) =>
          line._tag === "Line" ? `line ${line.bytes.length}` : `too long ${line.length}`
        )
      ).toEqual(["line 1000", "too long 1001", "line 1"])
    })
  )

  it("the CLI reports the line number and exits 1; MaxLineBytes is the documented 8 MiB", async () => {
    expect(MaxLineBytes).toBe(8 * 1024 * 1024)
    const operations = fs.readFileSync(new URL("../docs/operations.md", import.meta.url), "utf8")
    expect(operations).toContain("8 MiB")
    const input = `${record("a", "ok")}\n${"y".repeat(MaxLineBytes + 1)}\n${record("c", "ok")}\n`
    const result = await run(["enqueue", "--backend", "memory"], input)
    expect(result.stderr).toContain("line 2: longer than the maximum line length of 8,388,608 bytes")
    expect(result.stdout).toContain("enqueued 2 records")
    expect(result.code).toBe(1)
  })
})

describe("nonsense settings: exit 2 and one line naming the setting", () => {
  const refused = async (args: ReadonlyArray<string>, setting: string) => {
    const result = await run(args)
    expect(result.code, `${args.join(" ")}: ${result.stderr}`).toBe(2)
    const lines = result.stderr.split("\n").filter(Boolean)
    expect(lines, args.join(" ")).toHaveLength(1)
    expect(lines[0]).toContain(setting)
    return lines[0] ?? ""
  }

  it("--lease-ttl under the 1 second minimum", async () => {
    const line = await refused(["relay", "stdout", "--backend", "memory", "--lease-ttl", "1 millis"], "relay.leaseTtl")
    expect(line).toContain("at least 1s")
  })

  it("enqueue --batch-size 0 / -3 and --max-depth -1", async () => {
    await refused(["enqueue", "--backend", "memory", "--batch-size", "0"], "--batch-size")
    await refused(["enqueue", "--backend", "memory", "--batch-size", "-3"], "--batch-size")
    await refused(["enqueue", "--backend", "memory", "--max-depth", "-1"], "--max-depth")
  })

  it("a mysql:// URL or an unparsable URL as --postgres-url (never the URL, never getaddrinfo)", async () => {
    const mysql = await refused(
      ["inspect", "--backend", "postgres", "--postgres-url", "mysql://root:S3CRET@127.0.0.1/shop"],
      "postgres.url"
    )
    expect(mysql).toContain("not mysql://")
    expect(mysql).not.toContain("S3CRET")
    for (const url of ["not a url at all", "postgres://user:p@ss#w%rd@127.0.0.1/db", "postgres:///db"]) {
      const line = await refused(["inspect", "--backend", "postgres", "--postgres-url", url], "postgres.url")
      expect(line).not.toContain("ENOTFOUND")
      expect(line).not.toContain("ss#w")
    }
    expect(postgresUrlProblem("postgres://u:p@127.0.0.1:5432/db")).toBeUndefined()
    expect(postgresUrlProblem("postgresql://u@localhost/db?sslmode=disable")).toBeUndefined()
    expect(postgresUrlProblem("postgres:///db?host=/var/run/postgresql")).toBeUndefined()
  })

  it("a bad --http-host is refused with a reason", async () => {
    const line = await refused(
      ["dashboard", "--backend", "memory", "--http-port", "0", "--http-host", "not a host!"],
      "http.host"
    )
    expect(line).toMatch(/http\.host \(env OUTBOX_HTTP_HOST\): Expected an IP address/)
    expect(isListenHost("0.0.0.0")).toBe(true)
    expect(isListenHost("::1")).toBe(true)
    expect(isListenHost("[::1]")).toBe(true)
    expect(isListenHost("relay-1.internal")).toBe(true)
    expect(isListenHost("999.1.1.1")).toBe(false)
  })
})
