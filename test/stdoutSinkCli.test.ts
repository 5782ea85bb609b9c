/**
 * The relay's sinks through the command line, each run as its own process (the CLI bundled once, see
 * `support/CliBundle.ts`) over a temporary SQLite file: `relay stdout | head -n 3` stops gracefully when the
 * reader goes away (issue 18.5), and a webhook relay never logs the credentials, headers or signing secret
 * it is given (issue 18.3, 21.4).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Schema from "effect/Schema"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"
import { buildCli } from "./support/CliBundle.js"
import { baseEnv, cliRunner, finish, waitFor } from "./support/CliProcess.js"

const bundle = await buildCli()
afterAll(() => bundle.remove())
const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-sink-cli-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))
let files = 0
const freshFile = (): string => path.join(directory, `db-${++files}`, "outbox.db")

const { run, spawnCli } = cliRunner(bundle, directory)

const enqueue = async (file: string, records: ReadonlyArray<unknown>) => {
  const result = await run(["enqueue", "--sqlite-file", file], records.map((r) => JSON.stringify(r)).join("\n"))
  expect(result.code, result.stderr).toBe(0)
}

const Inspect = Schema.Struct({
  partitions: Schema.Array(
    Schema.Struct({
      partition: Schema.String,
      pending: Schema.Number,
      claimed: Schema.Number,
      leaseOwner: Schema.NullOr(Schema.String)
    })
  )
})
const inspect = async (file: string) => {
  const result = await run(["inspect", "--sqlite-file", file, "--json"])
  expect(result.code, result.stderr).toBe(0)
  return Schema.decodeUnknownSync(Schema.parseJson(Inspect))(result.stdout)
}

const records = (count: number) =>
  Array.from({ length: count }, (_, n) => ({
    partitionKey: "p",
    envelopeId: `env-${n}`,
    bindingId: "b",
    orderingKey: "k",
    payload: { n }
  }))

describe.concurrent("relay sinks through the CLI", { timeout: 180_000 }, () => {
  it("relay stdout | head -n 3: the relay stops when the reader goes away, exits 0 and releases everything (18.5)", async () => {
    const file = freshFile()
    await enqueue(file, records(50))
    const stderrFile = path.join(directory, `relay-stderr-${files}.log`)
    const relay = [process.execPath, ...bundle.argv(["relay", "stdout", "--sqlite-file", file, "--owner", "piped"])]
    const quoted = relay.map((arg) => `'${arg.replace(/'/g, `'\\''`)}'`).join(" ")
    const pipeline = spawn(
      "bash",
      ["-c", `${quoted} 2>'${stderrFile}' | head -n 3; echo "relay-exit=\${PIPESTATUS[0]}" >&2`],
      { cwd: directory, env: baseEnv() }
    )
    const { exited, output } = finish(pipeline)
    expect(await exited).toBe(0)
    const stderr = fs.readFileSync(stderrFile, "utf8")
    expect(output.stderr, stderr).toContain("relay-exit=0")
    const shown = output.stdout.split("\n").filter((line) => line.length > 0)
    expect(shown.map((line) => JSON.stringify(JSON.parse(line).envelopeId))).toEqual(['"env-0"', '"env-1"', '"env-2"'])
    expect(stderr).not.toContain("EPIPE\n    at")
    expect(stderr).not.toContain("level=WARN")
    expect(stderr).toContain("the reader of stdout has gone away")
    expect(stderr).toContain('message="relay stopped"')
    const after = await inspect(file)
    expect(after.partitions).toHaveLength(1)
    const partition = after.partitions[0]
    expect(partition?.claimed).toBe(0)
    expect(partition?.leaseOwner).toBeNull()
    expect(partition?.pending).toBeGreaterThan(0)
    expect(partition?.pending).toBeLessThanOrEqual(47)
  })

  it("relay stdout | head -n 4 with exactly 4 records: the idle relay notices the closed pipe, stops quietly, exits 0", async () => {
    const file = freshFile()
    await enqueue(file, records(4))
    const stderrFile = path.join(directory, `relay-stderr-${files}.log`)
    const relay = [process.execPath, ...bundle.argv(["relay", "stdout", "--sqlite-file", file, "--owner", "idle"])]
    const quoted = relay.map((arg) => `'${arg.replace(/'/g, `'\\''`)}'`).join(" ")
    const pipeline = spawn(
      "bash",
      ["-c", `${quoted} 2>'${stderrFile}' | head -n 4; echo "relay-exit=\${PIPESTATUS[0]}" >&2`],
      { cwd: directory, env: baseEnv() }
    )
    const { exited, output } = finish(pipeline)
    expect(await exited).toBe(0)
    const stderr = fs.readFileSync(stderrFile, "utf8")
    expect(output.stderr, stderr).toContain("relay-exit=0")
    expect(output.stdout.split("\n").filter((line) => line.length > 0)).toHaveLength(4)
    expect(stderr).toContain("the reader of stdout has gone away")
    expect(stderr).toContain('message="relay stopped"')
    expect(stderr).not.toContain("level=WARN")
    const after = await inspect(file)
    expect(after.partitions[0]?.pending).toBe(0)
    expect(after.partitions[0]?.leaseOwner).toBeNull()
  })

  it("a webhook relay sends URL credentials as Basic auth, headers and a signature, and logs none of them (18.3)", async () => {
    const file = freshFile()
    await enqueue(file, records(3))
    const seen: Array<http.IncomingHttpHeaders> = []
    const server = http.createServer((request, response) => {
      request.resume()
      request.on("end", () => {
        seen.push(request.headers)
        response.writeHead(204).end()
      })
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const address: string | AddressInfo | null = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    try {
      const child = spawnCli(
        [
          "relay",
          "webhook",
          `http://hookuser:pw-S3CRET@127.0.0.1:${port}/hook?api_key=Q-S3CRET`,
          "--sqlite-file",
          file,
          "--header",
          "X-Api-Key: H-S3CRET",
          "--header",
          "X-Other: two",
          "--discovery-interval",
          "200 millis"
        ],
        { OUTBOX_SINK_SIGNING_SECRET: "SIG-S3CRET", OUTBOX_LOG_LEVEL: "Debug" }
      )
      const { exited, output } = finish(child)
      await waitFor("3 deliveries", () => seen.length >= 3)
      child.kill("SIGTERM")
      expect(await exited).toBe(0)
      expect(seen[0]?.["authorization"]).toBe(`Basic ${Buffer.from("hookuser:pw-S3CRET").toString("base64")}`)
      expect(seen[0]?.["x-api-key"]).toBe("H-S3CRET")
      expect(seen[0]?.["x-other"]).toBe("two")
      expect(seen[0]?.["x-outbox-signature"]).toMatch(/^sha256=[0-9a-f]{64}$/)
      expect(output.stderr).toContain(`http://***@127.0.0.1:${port}/hook?api_key=***`)
      expect(output.stderr).not.toMatch(/S3CRET|hookuser/)
    } finally {
      await new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      })
    }
  })

  it("a configured header with an invalid name or a missing colon is refused at start with exit 2 (18.9)", async () => {
    const file = freshFile()
    const [badName, noColon] = await Promise.all([
      run(["relay", "webhook", "http://127.0.0.1:9/x", "--sqlite-file", file, "--header", "Bad Name: V4LUE"]),
      run(["relay", "webhook", "http://127.0.0.1:9/x", "--sqlite-file", file, "--header", "JUSTAV4LUE"])
    ])
    expect(badName.code).toBe(2)
    expect(badName.stderr).toContain('header name "Bad Name" is not a valid HTTP header name')
    expect(noColon.code).toBe(2)
    expect(noColon.stderr).toContain('header line 1 is not of the form "Name: value"')
    expect(badName.stderr + noColon.stderr).not.toContain("V4LUE")
  })
})
