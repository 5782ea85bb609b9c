/**
 * The `effect-outbox` command line, end to end: every command runs as its own process (`node <bundle> …`,
 * the CLI bundled once per run by esbuild, see `support/CliBundle.ts`) against a temporary SQLite file, and
 * the tests assert on its output and exit code.
 */
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"
import { DeadLetterEntry } from "../src/domain/DeadLetterEntry.js"
import * as OutboxTable from "../src/layers/dynamodb/OutboxTable.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteDeadLetterStore from "../src/layers/sqlite/SqliteDeadLetterStore.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import { DeadLetterStore } from "../src/services/DeadLetterStore.js"
import * as DynamoDb from "../src/services/DynamoDb.js"
import { buildCli } from "./support/CliBundle.js"
import { dynamoEndpoint, makeTestClientConfig, randomTableName } from "./support/DynamoLocal.js"

/** The CLI, compiled once for the whole file (every spawn below runs this bundle). */
const bundle = await buildCli()
afterAll(() => bundle.remove())
const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-cli-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))
let files = 0
const freshFile = (): string => path.join(directory, `db-${++files}`, "outbox.db")

/** The environment of a spawned CLI: no inherited OUTBOX_* or OTEL_* settings. */
const baseEnv = (): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("OUTBOX_") && !key.startsWith("OTEL_")) env[key] = value
  }
  return env
}

interface Result {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const start = (args: ReadonlyArray<string>, env: Record<string, string> = {}): ChildProcess =>
  spawn(process.execPath, bundle.argv(args), {
    cwd: directory,
    env: { ...baseEnv(), ...env },
    stdio: ["pipe", "pipe", "pipe"]
  })

const collect = (child: ChildProcess) => {
  const output = { stdout: "", stderr: "" }
  child.stdout?.on("data", (chunk: Buffer) => (output.stdout += chunk.toString("utf8")))
  child.stderr?.on("data", (chunk: Buffer) => (output.stderr += chunk.toString("utf8")))
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)))
  return { output, exited }
}

/**
 * How many run-to-completion CLI processes may run at once: the tests run concurrently, and each start is
 * CPU-bound for a second or two, so more processes than cores only slow every one of them down. Long-running
 * relays (`start`) are not counted: a test holding one may need a slot for an `inspect` meanwhile.
 */
const maxRunning = os.availableParallelism() + 1
let running = 0
const waiting: Array<() => void> = []
const slot = async (): Promise<void> => {
  if (running < maxRunning) {
    running++
    return
  }
  await new Promise<void>((resolve) => waiting.push(resolve))
}
const freeSlot = (): void => {
  const next = waiting.shift()
  if (next === undefined) running--
  else next()
}

/** Runs the CLI to completion with `input` on stdin. */
const cli = async (
  args: ReadonlyArray<string>,
  options: { readonly input?: string; readonly env?: Record<string, string> } = {}
): Promise<Result> => {
  await slot()
  try {
    const child = start(args, options.env)
    const { exited, output } = collect(child)
    child.stdin?.end(options.input ?? "")
    const code = await exited
    return { code, ...output }
  } finally {
    freeSlot()
  }
}

const waitFor = async (what: string, check: () => boolean | Promise<boolean>, withinMillis = 60_000) => {
  const deadline = Date.now() + withinMillis
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

const lines = (...records: ReadonlyArray<unknown>): string =>
  records.map((r) => (typeof r === "string" ? r : JSON.stringify(r))).join("\n") + "\n"

const rec = (partitionKey: string, n: number, extra: Record<string, unknown> = {}) => ({
  partitionKey,
  envelopeId: `env-${n}`,
  bindingId: "b",
  payload: { n },
  ...extra
})

const InspectJson = Schema.Struct({
  backend: Schema.String,
  partitions: Schema.Array(
    Schema.Struct({
      partition: Schema.String,
      pending: Schema.Number,
      claimed: Schema.Number,
      oldestPendingAgeMillis: Schema.NullOr(Schema.Number),
      fenceVersion: Schema.NullOr(Schema.Number),
      leaseOwner: Schema.NullOr(Schema.String),
      leaseVersion: Schema.NullOr(Schema.Number)
    })
  ),
  totals: Schema.Struct({ pending: Schema.Number, claimed: Schema.Number }),
  deadLetters: Schema.Struct({
    poison: Schema.Number,
    permanent: Schema.Number,
    expired: Schema.Number,
    total: Schema.Number
  })
})
type InspectJson = typeof InspectJson.Type
const decodeInspect = Schema.decodeUnknownSync(Schema.parseJson(InspectJson))

/** The JSON form of a delivered record (as the webhook and stdout sinks write it), as far as tests read it. */
const Delivered = Schema.Struct({
  id: Schema.String,
  envelopeId: Schema.String,
  partitionKey: Schema.String,
  orderingKey: Schema.NullOr(Schema.String),
  payload: Schema.String
})
const decodeDelivered = Schema.decodeUnknownSync(Schema.parseJson(Delivered))
const decodeIdLine = Schema.decodeUnknownSync(Schema.parseJson(Schema.Struct({ id: Schema.String })))
const decodePayload = Schema.decodeUnknownSync(Schema.parseJson(Schema.Struct({ n: Schema.Number })))

const inspectJson = async (file: string): Promise<InspectJson> => {
  const result = await cli(["inspect", "--sqlite-file", file, "--json"])
  expect(result.code, result.stderr).toBe(0)
  return decodeInspect(result.stdout)
}

/** A webhook receiver on 127.0.0.1 recording every JSON body. */
const receiver = async (status: (body: typeof Delivered.Type) => number = () => 200) => {
  const bodies: Array<typeof Delivered.Type> = []
  const server = http.createServer((request, response) => {
    let text = ""
    request.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")))
    request.on("end", () => {
      const body = decodeDelivered(text)
      const code = status(body)
      if (code === 200) bodies.push(body)
      response.writeHead(code).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address: string | AddressInfo | null = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  return {
    url: `http://127.0.0.1:${port}/hook`,
    bodies,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      })
  }
}

// every command is a fresh Node process (~1.5-4 s to start on a busy 2-core machine). The tests use distinct
// files, tables and ports and run concurrently; commands that only read the same state run at once.
describe.concurrent("effect-outbox CLI", { timeout: 240_000 }, () => {
  it("enqueue reads JSON lines, reports bad lines with their number and still enqueues the good ones", async () => {
    const file = freshFile()
    const input = lines(
      rec("p1", 1, { orderingKey: "k" }),
      "not json at all",
      rec("", 2),
      rec("p1", 3, { payload: "a plain string" }),
      "",
      { partitionKey: "p2", envelopeId: "env-5", bindingId: "b" },
      rec("p2", 6, { expiresAt: "2999-01-01T00:00:00Z", headers: { "x-a": "1" } })
    )
    const first = await cli(["enqueue", "--sqlite-file", file], { input })
    expect(first.code).toBe(1)
    expect(first.stderr).toContain("line 2: not JSON")
    expect(first.stderr).toMatch(/line 3: partitionKey: /)
    expect(first.stderr).toMatch(/line 6: .*payload/)
    expect(first.stderr).not.toMatch(/line (1|4|5|7):/)
    expect(first.stdout).toContain("enqueued 3 records (0 duplicates skipped, 3 lines rejected) from 7 lines")

    // the same good lines again: idempotent per identity
    const again = await cli(["enqueue", "--sqlite-file", file], { input: lines(rec("p1", 1), rec("p2", 6)) })
    expect(again.code).toBe(0)
    expect(again.stdout).toContain("enqueued 0 records (2 duplicates skipped, 0 lines rejected)")

    const [report, text] = await Promise.all([inspectJson(file), cli(["inspect", "--sqlite-file", file])])
    expect(report.backend).toBe("sqlite")
    expect(report.partitions.map((p) => [p.partition, p.pending, p.claimed])).toEqual([
      ["p1", 2, 0],
      ["p2", 1, 0]
    ])
    expect(report.partitions.every((p) => p.fenceVersion === 0 && p.leaseOwner === null)).toBe(true)
    expect(report.partitions.every((p) => (p.oldestPendingAgeMillis ?? -1) >= 0)).toBe(true)
    expect(report.totals).toEqual({ pending: 3, claimed: 0 })

    expect(text.code).toBe(0)
    expect(text.stdout).toMatch(/partition\s+pending\s+claimed\s+oldest pending\s+fence\s+head\s+lease/)
    expect(text.stdout).toMatch(/p1\s+2\s+0\s+\S+\s+0\s+-/)
    expect(text.stdout).toMatch(/total\s+3\s+0/)
    expect(text.stdout).toMatch(/permanent\s+0/)
  })

  it("relay delivers to a webhook in per-key order, shows its lease in inspect, and releases it on SIGTERM", async () => {
    const file = freshFile()
    const hook = await receiver()
    try {
      const records = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map((n) =>
        rec(n % 2 === 0 ? "even" : "odd", n, n < 6 ? { orderingKey: "k" } : {})
      )
      expect((await cli(["enqueue", "--sqlite-file", file], { input: lines(...records) })).code).toBe(0)

      const relay = start([
        "relay",
        "webhook",
        hook.url,
        "--sqlite-file",
        file,
        "--owner",
        "relay-test",
        "--discovery-interval",
        "200 millis",
        "--lease-ttl",
        "20 seconds"
      ])
      const { exited, output } = collect(relay)
      await waitFor("10 deliveries", () => hook.bodies.length >= 10)
      const byKey = (partition: string) =>
        hook.bodies.filter((b) => b.partitionKey === partition && b.orderingKey === "k").map((b) => b.envelopeId)
      expect(byKey("even")).toEqual(["env-0", "env-2", "env-4"])
      expect(byKey("odd")).toEqual(["env-1", "env-3", "env-5"])

      const during = await inspectJson(file)
      expect(during.partitions.map((p) => p.leaseOwner)).toEqual(["relay-test", "relay-test"])
      expect(during.partitions.every((p) => (p.fenceVersion ?? 0) >= 1)).toBe(true)

      relay.kill("SIGTERM")
      expect(await exited).toBe(0)
      expect(output.stderr).toContain('message="relay started"')
      expect(output.stderr).toContain('message="relay stopped"')

      const after = await inspectJson(file)
      expect(after.partitions.map((p) => [p.pending, p.claimed, p.leaseOwner])).toEqual([
        [0, 0, null],
        [0, 0, null]
      ])
      expect(hook.bodies).toHaveLength(10)
    } finally {
      await hook.close()
    }
  })

  it("relay stdout writes one JSON line per record and stops on SIGINT; settings come from a config file", async () => {
    const file = freshFile()
    const config = path.join(directory, `config-${path.basename(path.dirname(file))}.json`)
    fs.writeFileSync(
      config,
      JSON.stringify({ sqlite: { file }, relay: { owner: "from-file", discoveryInterval: "200 millis" } })
    )
    expect((await cli(["enqueue", "--config", config], { input: lines(rec("p", 1), rec("p", 2)) })).code).toBe(0)
    const relay = start(["relay", "stdout", "--config", config])
    const { exited, output } = collect(relay)
    await waitFor("two JSON lines", () => output.stdout.split("\n").filter((l) => l.length > 0).length >= 2)
    relay.kill("SIGINT")
    expect(await exited).toBe(0)
    const delivered = output.stdout
      .split("\n")
      .filter((l) => l.length > 0)
      .map((l) => decodeDelivered(l))
    expect(delivered.map((r) => r.envelopeId).sort()).toEqual(["env-1", "env-2"])
    expect(delivered.every((r) => r.partitionKey === "p" && typeof r.payload === "string")).toBe(true)
    for (const record of delivered) {
      expect(decodePayload(Buffer.from(record.payload, "base64").toString("utf8")).n).toBe(
        Number(record.envelopeId.slice("env-".length))
      )
    }
    expect(output.stderr).toContain("owner=from-file")
  })

  it("rejects bad settings with one clear message naming each setting, exit code 2", async () => {
    const file = freshFile()
    // independent commands, each refused before it opens a store: run at once
    const [badFlag, badEnv, noUrl, badUrl, missingFile, unknownBackend] = await Promise.all([
      cli(["relay", "webhook", "http://127.0.0.1:9/x", "--sqlite-file", file, "--batch-size", "0"]),
      cli(["relay", "stdout", "--sqlite-file", file], {
        env: { OUTBOX_RELAY_LEASE_TTL: "banana", OUTBOX_RELAY_MAX_PARTITIONS: "many" }
      }),
      cli(["relay", "webhook", "--sqlite-file", file]),
      cli(["relay", "--webhook-url", "ftp://example", "--sqlite-file", file]),
      cli(["inspect", "--config", path.join(directory, "absent.json")]),
      cli(["inspect"], { env: { OUTBOX_BACKEND: "cassandra" } })
    ])
    expect(badFlag.code).toBe(2)
    expect(badFlag.stderr).toContain("invalid configuration")
    expect(badFlag.stderr).toContain("relay.batchSize (env OUTBOX_RELAY_BATCH_SIZE): Expected an integer of at least 1")

    expect(badEnv.code).toBe(2)
    expect(badEnv.stderr).toContain(
      'relay.leaseTtl (env OUTBOX_RELAY_LEASE_TTL): Expected a duration but received "banana"'
    )
    expect(badEnv.stderr).toContain("relay.maxPartitions (env OUTBOX_RELAY_MAX_PARTITIONS): Expected an integer")

    expect(noUrl.code).toBe(2)
    expect(noUrl.stderr).toContain("a relay needs a sink: relay webhook <url>")

    expect(badUrl.code).toBe(2)
    expect(badUrl.stderr).toContain("sink.url (env OUTBOX_SINK_URL): Expected an http:// or https:// URL")

    expect(missingFile.code).toBe(2)
    expect(missingFile.stderr).toContain("cannot read config file")

    expect(unknownBackend.code).toBe(2)
    expect(unknownBackend.stderr).toContain(
      "backend (env OUTBOX_BACKEND): Expected one of (sqlite, dynamodb, memory, postgres)"
    )
  })

  it("names an unknown flag or config-file key and exits 2, never taking the flag as a value", async () => {
    const file = freshFile()
    const config = path.join(directory, "typo.json")
    fs.writeFileSync(config, JSON.stringify({ relay: { batchsize: 10 }, sink: { type: "stdout" } }))
    const [relayFlag, redriveFlag, inspectFlag, configKey] = await Promise.all([
      cli(["relay", "stdout", "--sqlite-file", file, "--frobnicate"]),
      cli(["dlq", "redrive", "--sqlite-file", file, "--frobnicate", "some-id"]),
      cli(["inspect", "--sqlite-file", file, "--frobnicate=1"]),
      cli(["relay", "--config", config, "--sqlite-file", file])
    ])
    expect(relayFlag.code).toBe(2)
    expect(relayFlag.stderr.trim()).toBe("effect-outbox: unknown flag --frobnicate for relay (see --help)")
    expect(redriveFlag.code).toBe(2)
    expect(redriveFlag.stderr).toContain("unknown flag --frobnicate for dlq redrive")
    expect(inspectFlag.code).toBe(2)
    expect(inspectFlag.stderr).toContain("unknown flag --frobnicate for inspect")
    expect(configKey.code).toBe(2)
    expect(configKey.stderr.trim()).toBe(`effect-outbox: config file ${config}: unknown key relay.batchsize`)
    // nothing was opened or created by the refused commands
    expect(fs.existsSync(file)).toBe(false)
  })

  it("SQLite paths that cannot be used: one line, exit 2, and read-only commands never create a file", async () => {
    const missing = freshFile()
    const garbage = path.join(directory, "not-a-database.db")
    fs.writeFileSync(garbage, "this is a text file, not a SQLite database\n".repeat(200))
    const [inspectMissing, listMissing, inspectGarbage, enqueueGarbage, unwritable] = await Promise.all([
      cli(["inspect", "--sqlite-file", missing]),
      cli(["dlq", "list", "--sqlite-file", missing]),
      cli(["inspect", "--sqlite-file", garbage]),
      cli(["enqueue", "--sqlite-file", garbage], { input: lines(rec("p", 1)) }),
      cli(["enqueue", "--sqlite-file", "/proc/outbox-test/x/outbox.db"], { input: lines(rec("p", 1)) })
    ])
    for (const result of [inspectMissing, listMissing]) {
      expect(result.code).toBe(2)
      expect(result.stderr.trim()).toBe(`effect-outbox: no such database file: ${missing}`)
    }
    expect(fs.existsSync(missing)).toBe(false)
    expect(fs.existsSync(path.dirname(missing))).toBe(false)
    for (const result of [inspectGarbage, enqueueGarbage]) {
      expect(result.code).toBe(2)
      expect(result.stderr.trim()).toBe(
        `effect-outbox: cannot open the sqlite (${garbage}) backend: not a SQLite database`
      )
    }
    expect(unwritable.code).toBe(2)
    expect(unwritable.stderr.trim()).toMatch(/^effect-outbox: cannot create directory \/proc\/outbox-test for /)
    expect(unwritable.stderr.trim().split("\n")).toHaveLength(1)
  })

  it("--sqlite-table-prefix: enqueue and inspect use the prefixed tables only", async () => {
    const file = freshFile()
    const enqueued = await cli(["enqueue", "--sqlite-file", file, "--sqlite-table-prefix", "tenant_a_"], {
      input: lines(rec("pa", 1), rec("pa", 2))
    })
    expect(enqueued.code, enqueued.stderr).toBe(0)
    const [prefixed, plain] = await Promise.all([
      cli(["inspect", "--sqlite-file", file, "--json"], { env: { OUTBOX_SQLITE_TABLE_PREFIX: "tenant_a_" } }),
      cli(["inspect", "--sqlite-file", file, "--json"])
    ])
    expect(prefixed.code, prefixed.stderr).toBe(0)
    expect(decodeInspect(prefixed.stdout).partitions.map((p) => [p.partition, p.pending, p.fenceVersion])).toEqual([
      ["pa", 2, 0]
    ])
    expect(plain.code, plain.stderr).toBe(0)
    expect(decodeInspect(plain.stdout).partitions).toEqual([])
  })

  it("dlq list, redrive and purge apply the SPEC §5 filters", async () => {
    const file = freshFile()
    const t0 = Date.parse("2026-01-01T00:00:00Z")
    const entry = (id: string, minutes: number, category: "poison" | "permanent" | "expired", routeId: string) =>
      new DeadLetterEntry({
        id,
        recordId: `rec-${id}`,
        partitionKey: "p",
        envelopeId: `env-${id}`,
        bindingId: "b",
        payload: new TextEncoder().encode(`{"id":"${id}"}`),
        headers: {},
        routeId,
        category,
        reason: `failed ${id}`,
        errorCode: "http-400",
        lastError: "webhook answered 400",
        attempts: 1,
        failedAt: DateTime.unsafeMake(t0 + minutes * 60_000)
      })
    await Effect.runPromise(
      Effect.gen(function* () {
        const dlq = yield* DeadLetterStore
        yield* dlq.write(entry("a", 0, "permanent", "billing"))
        yield* dlq.write(entry("b", 10, "poison", "billing"))
        yield* dlq.write(entry("c", 20, "permanent", "shipping"))
        yield* dlq.write(entry("d", 30, "expired", "billing"))
      }).pipe(
        Effect.provide(
          SqliteDeadLetterStore.layer.pipe(
            Layer.provideMerge(SqliteOutboxStore.layer),
            Layer.provide(SqliteDatabase.layer({ filename: file }))
          )
        )
      )
    )
    const ids = (result: Result) =>
      result.stdout
        .split("\n")
        .filter((l) => l.length > 0)
        .map((l) => decodeIdLine(l).id)

    // commands that leave the entries as they are (reads, and two refused before they change anything): at once
    const [all, byRoute, byCategory, byTime, table, inspected, refused, badTime] = await Promise.all([
      cli(["dlq", "list", "--sqlite-file", file, "--json"]),
      cli(["dlq", "list", "--sqlite-file", file, "--json", "--route", "billing"]),
      cli(["dlq", "list", "--sqlite-file", file, "--json", "--category", "permanent"]),
      cli([
        "dlq",
        "list",
        "--sqlite-file",
        file,
        "--json",
        "--since",
        "2026-01-01T00:10:00Z",
        "--before",
        "2026-01-01T00:30:00Z",
        "--limit",
        "5"
      ]),
      cli(["dlq", "list", "--sqlite-file", file, "--limit", "2"]),
      inspectJson(file),
      cli(["dlq", "purge", "--sqlite-file", file]),
      cli(["dlq", "list", "--sqlite-file", file, "--since", "yesterday-ish"])
    ])
    expect(all.code).toBe(0)
    expect(ids(all)).toEqual(["a", "b", "c", "d"])
    expect(ids(byRoute)).toEqual(["a", "b", "d"])
    expect(ids(byCategory)).toEqual(["a", "c"])
    expect(ids(byTime)).toEqual(["b", "c"])

    expect(table.stdout).toMatch(/failed at\s+id\s+category/)
    expect(table.stdout).toContain("2 entries")

    expect(inspected.deadLetters).toEqual({ poison: 1, permanent: 2, expired: 1, total: 4 })

    expect(refused.code).toBe(2)
    expect(refused.stderr).toContain("refusing to purge")

    expect(badTime.code).toBe(2)
    expect(badTime.stderr).toContain("--since")

    // no ids and no filter: refused like purge, nothing redriven
    const everything = await cli(["dlq", "redrive", "--sqlite-file", file])
    expect(everything.code).toBe(2)
    expect(everything.stderr).toContain("refusing to redrive every dead-letter entry")
    expect((await inspectJson(file)).deadLetters.total).toBe(4)

    const redriven = await cli(["dlq", "redrive", "--sqlite-file", file, "c"])
    expect(redriven.code).toBe(0)
    expect(redriven.stdout).toContain("redrove 1 entry into the outbox")
    const afterRedrive = await inspectJson(file)
    expect(afterRedrive.partitions.find((p) => p.partition === "p")?.pending).toBe(1)
    expect(afterRedrive.deadLetters.permanent).toBe(1)

    const purged = await cli(["dlq", "purge", "--sqlite-file", file, "--before", "2026-01-01T00:15:00Z"])
    expect(purged.code).toBe(0)
    expect(purged.stdout).toContain("purged 2 entries")
    expect(ids(await cli(["dlq", "list", "--sqlite-file", file, "--json"]))).toEqual(["d"])
  })
  it("enqueue and inspect on DynamoDB Local: depths, oldest pending age and fence version from the table", async () => {
    const table = randomTableName("cli-outbox")
    const env = {
      OUTBOX_BACKEND: "dynamodb",
      OUTBOX_DYNAMODB_ENDPOINT: dynamoEndpoint(),
      OUTBOX_DYNAMODB_TABLE: table,
      OUTBOX_DYNAMODB_DEAD_LETTER_TABLE: `${table}-dlq`,
      AWS_ACCESS_KEY_ID: "local",
      AWS_SECRET_ACCESS_KEY: "local",
      AWS_EC2_METADATA_DISABLED: "true",
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true"
    }
    const enqueued = await cli(["enqueue"], {
      input: lines(rec("d1", 1, { orderingKey: "k" }), rec("d1", 2), rec("d2", 3)),
      env
    })
    expect(enqueued.code, enqueued.stderr).toBe(0)
    expect(enqueued.stdout).toContain("enqueued 3 records")
    const result = await cli(["inspect", "--json"], { env })
    expect(result.code, result.stderr).toBe(0)
    const report = decodeInspect(result.stdout)
    expect(report.backend).toBe("dynamodb")
    expect(report.partitions.map((p) => [p.partition, p.pending, p.claimed, p.fenceVersion, p.leaseOwner])).toEqual([
      ["d1", 2, 0, 0, null],
      ["d2", 1, 0, 0, null]
    ])
    expect(report.partitions.every((p) => (p.oldestPendingAgeMillis ?? -1) >= 0)).toBe(true)
    expect(report.deadLetters).toEqual({ poison: 0, permanent: 0, expired: 0, total: 0 })
  })
  it("--dynamodb-local-claim-index creates the outbox table with ClaimLocalIndex; a table without it is refused", async () => {
    const withIndex = randomTableName("cli-lsi")
    const withoutIndex = randomTableName("cli-no-lsi")
    const envFor = (table: string): Record<string, string> => ({
      OUTBOX_BACKEND: "dynamodb",
      OUTBOX_DYNAMODB_ENDPOINT: dynamoEndpoint(),
      OUTBOX_DYNAMODB_TABLE: table,
      OUTBOX_DYNAMODB_DEAD_LETTER_TABLE: `${table}-dlq`,
      AWS_ACCESS_KEY_ID: "local",
      AWS_SECRET_ACCESS_KEY: "local",
      AWS_EC2_METADATA_DISABLED: "true",
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true"
    })
    const localIndexes = (table: string) =>
      Effect.runPromise(
        Effect.flatMap(DynamoDb.DynamoDb, (dynamo) => dynamo.describeTable({ TableName: table })).pipe(
          Effect.map((output) =>
            (output.Table?.LocalSecondaryIndexes ?? []).map((index) => ({
              name: index.IndexName,
              keys: (index.KeySchema ?? []).map((key) => `${key.AttributeName ?? "?"} ${key.KeyType ?? "?"}`),
              projection: index.Projection?.ProjectionType
            }))
          ),
          Effect.provide(DynamoDb.layer(makeTestClientConfig()))
        )
      )
    // the two tables are independent: their commands run side by side
    const withTheIndex = async () => {
      const enqueued = await cli(["enqueue", "--dynamodb-local-claim-index"], {
        input: lines(rec("k1", 1, { orderingKey: "a" }), rec("k1", 2, { orderingKey: "a" }), rec("k1", 3)),
        env: envFor(withIndex)
      })
      expect(enqueued.code, enqueued.stderr).toBe(0)
      expect(enqueued.stdout).toContain("enqueued 3 records")
      expect(await localIndexes(withIndex)).toEqual([
        { name: OutboxTable.ClaimLocalIndex, keys: ["PK HASH", "claim_sort RANGE"], projection: "ALL" }
      ])
      // depth counts read the local index (consistently) and see all three records
      const inspected = await cli(["inspect", "--json", "--dynamodb-local-claim-index"], { env: envFor(withIndex) })
      expect(inspected.code, inspected.stderr).toBe(0)
      expect(decodeInspect(inspected.stdout).partitions.map((p) => [p.partition, p.pending])).toEqual([["k1", 3]])
    }
    const withoutTheIndex = async () => {
      // without the option the table is created without the index ...
      const plain = await cli(["enqueue"], { input: lines(rec("k2", 1)), env: envFor(withoutIndex) })
      expect(plain.code, plain.stderr).toBe(0)
      expect(await localIndexes(withoutIndex)).toEqual([])
      // ... and asking for it later (here through the environment) fails naming the missing index
      const refused = await cli(["inspect"], {
        env: { ...envFor(withoutIndex), OUTBOX_DYNAMODB_LOCAL_CLAIM_INDEX: "true" }
      })
      expect(refused.code).not.toBe(0)
      expect(refused.stderr).toContain(OutboxTable.ClaimLocalIndex)
      expect(refused.stderr).toContain("LSI can only be created together with the table")
    }
    try {
      // both run to their end before the tables are deleted, whichever fails
      for (const outcome of await Promise.allSettled([withTheIndex(), withoutTheIndex()])) {
        if (outcome.status === "rejected") throw outcome.reason
      }
    } finally {
      await Effect.runPromise(
        Effect.forEach(
          [withIndex, `${withIndex}-dlq`, withoutIndex, `${withoutIndex}-dlq`],
          (table) =>
            Effect.flatMap(DynamoDb.DynamoDb, (dynamo) => dynamo.deleteTable({ TableName: table })).pipe(Effect.ignore),
          { discard: true }
        ).pipe(Effect.provide(DynamoDb.layer(makeTestClientConfig())))
      )
    }
  })
})

// on its own, after the concurrent block: the exporter has a few seconds to flush its spans as the CLI exits
describe("effect-outbox CLI with OpenTelemetry", { timeout: 240_000 }, () => {
  it("exports spans over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set", async () => {
    const file = freshFile()
    const received: Array<{ readonly path: string; readonly body: string }> = []
    const collector = http.createServer((request, response) => {
      let body = ""
      request.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")))
      request.on("end", () => {
        received.push({ path: request.url ?? "", body })
        response.writeHead(200, { "content-type": "application/json" }).end("{}")
      })
    })
    await new Promise<void>((resolve) => collector.listen(0, "127.0.0.1", resolve))
    const address: string | AddressInfo | null = collector.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    try {
      const result = await cli(["enqueue", "--sqlite-file", file], {
        input: lines(rec("otel", 1)),
        env: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_SERVICE_NAME: "outbox-cli-test" }
      })
      expect(result.code, result.stderr).toBe(0)
      const traces = received.filter((r) => r.path === "/v1/traces").map((r) => r.body)
      expect(traces.length).toBeGreaterThan(0)
      expect(traces.join("")).toContain("OutboxStore.persist")
      expect(traces.join("")).toContain("outbox-cli-test")
    } finally {
      await new Promise<void>((resolve) => {
        collector.close(() => resolve())
        collector.closeAllConnections()
      })
    }
  })
})
