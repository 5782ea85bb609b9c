/**
 * The command line on the MySQL backend (`--backend mysql --mysql-url …`): enqueue, inspect, the
 * dead-letter commands and the relay (with the MySQL lease fence) work on it, and the URL's password never
 * appears in any output.
 */
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as SqlClient from "@effect/sql/SqlClient"
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { afterAll, inject } from "vitest"
import { DeadLetterEntry } from "../src/domain/DeadLetterEntry.js"
import * as MysqlDeadLetterStore from "../src/layers/mysql/MysqlDeadLetterStore.js"
import * as MysqlOutboxStore from "../src/layers/mysql/MysqlOutboxStore.js"
import { DeadLetterStore } from "../src/services/DeadLetterStore.js"
import { buildCli } from "./support/CliBundle.js"
import { baseEnv, cliRunner, startStdoutRelay, waitFor } from "./support/CliProcess.js"
import { clientLayer, createDatabase } from "./support/MysqlServer.js"

const bundle = await buildCli()
afterAll(() => bundle.remove())

const password = "my-s3cret-never-shown"
/** The database URL as a user with a password (created on the test server for this file). */
const withPassword = async (url: string): Promise<string> => {
  const user = `cli_${randomBytes(4).toString("hex")}`
  await Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql.unsafe(`CREATE USER '${user}'@'127.0.0.1' IDENTIFIED BY '${password}'`).unprepared
      yield* sql.unsafe(`GRANT ALL PRIVILEGES ON *.* TO '${user}'@'127.0.0.1'`).unprepared
    }).pipe(Effect.provide(clientLayer(url, 1)))
  )
  const parsed = new URL(url)
  parsed.username = user
  parsed.password = password
  return parsed.toString()
}

interface Result {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const { run: cli } = cliRunner(bundle, process.cwd())

const Inspect = Schema.parseJson(
  Schema.Struct({
    backend: Schema.String,
    partitions: Schema.Array(
      Schema.Struct({
        partition: Schema.String,
        pending: Schema.Number,
        fenceVersion: Schema.NullOr(Schema.Number),
        oldestPendingAgeMillis: Schema.NullOr(Schema.Number)
      })
    ),
    deadLetters: Schema.Struct({ permanent: Schema.Number })
  })
)

const line = (partitionKey: string, n: number) =>
  JSON.stringify({ partitionKey, envelopeId: `env-${n}`, bindingId: "b", payload: { n } })

describe("CLI on MySQL", () => {
  it.live("enqueue, inspect and dlq list/redrive work on --backend mysql; the password is never printed", () =>
    Effect.gen(function* () {
      const url = yield* Effect.promise(async () => withPassword(await createDatabase(inject("mysqlUrl"), "cli")))
      const flags = ["--backend", "mysql", "--mysql-url", url]
      const enqueued = yield* Effect.promise(() =>
        cli(["enqueue", ...flags], [line("p1", 1), line("p1", 2), line("p2", 3)].join("\n"))
      )
      expect(enqueued.code, enqueued.stderr).toBe(0)
      expect(enqueued.stdout).toContain("enqueued 3 records")

      // a dead-letter entry written through the library, in the database the CLI uses
      yield* Effect.flatMap(DeadLetterStore, (dlq) =>
        dlq.write(
          new DeadLetterEntry({
            id: "dead-1",
            recordId: "r-1",
            partitionKey: "p3",
            envelopeId: "env-9",
            bindingId: "b",
            payload: new Uint8Array([1]),
            headers: {},
            category: "permanent",
            reason: "rejected",
            errorCode: "HTTP_400",
            lastError: "bad request",
            attempts: 1,
            failedAt: DateTime.unsafeMake(1_767_225_600_000)
          })
        )
      ).pipe(
        Effect.provide(
          MysqlDeadLetterStore.layer.pipe(Layer.provideMerge(MysqlOutboxStore.layer), Layer.provide(clientLayer(url)))
        )
      )

      const [inspected, listed] = yield* Effect.promise(() =>
        Promise.all([cli(["inspect", ...flags, "--json"]), cli(["dlq", "list", ...flags, "--json"])])
      )
      expect(inspected.code, inspected.stderr).toBe(0)
      const report = Schema.decodeUnknownSync(Inspect)(inspected.stdout)
      expect(report.backend).toBe("mysql")
      expect(report.partitions.map((p) => [p.partition, p.pending])).toEqual([
        ["p1", 2],
        ["p2", 1]
      ])
      expect(report.partitions[0]?.fenceVersion).toBe(0)
      expect(report.deadLetters.permanent).toBe(1)
      expect(listed.code, listed.stderr).toBe(0)
      expect(listed.stdout).toContain('"dead-1"')

      // redrive through the environment variable instead of the flag
      const redriven = yield* Effect.promise(() =>
        cli(["dlq", "redrive", "dead-1", "--backend", "mysql"], "", { OUTBOX_MYSQL_URL: url })
      )
      expect(redriven.code, redriven.stderr).toBe(0)
      const after = Schema.decodeUnknownSync(Inspect)(
        (yield* Effect.promise(() => cli(["inspect", ...flags, "--json"]))).stdout
      )
      expect(after.partitions.map((p) => p.partition)).toEqual(["p1", "p2", "p3"])
      expect(after.deadLetters.permanent).toBe(0)

      // an unreachable database: a clear failure, still without the password
      const missing = new URL(url)
      missing.pathname = "/no_such_database"
      const failed = yield* Effect.promise(() =>
        cli(["inspect", "--backend", "mysql", "--mysql-url", missing.toString()])
      )
      expect(failed.code).toBe(2)
      expect(failed.stderr).toContain("no such database: no_such_database")
      const noUrl = yield* Effect.promise(() => cli(["inspect", "--backend", "mysql"]))
      expect(noUrl.code).toBe(2)
      expect(noUrl.stderr).toContain("--mysql-url")

      for (const result of [enqueued, inspected, listed, redriven, failed]) {
        expect(result.stdout + result.stderr).not.toContain(password)
      }
    })
  )

  it.live("relay stdout on --backend mysql (stores and lease fence) delivers in order and completes everything", () =>
    Effect.gen(function* () {
      const url = yield* Effect.promise(async () => withPassword(await createDatabase(inject("mysqlUrl"), "cli_relay")))
      const flags = ["--backend", "mysql", "--mysql-url", url]
      const input = Array.from({ length: 6 }, (_, n) =>
        JSON.stringify({ partitionKey: "p", envelopeId: `env-${n}`, bindingId: "b", orderingKey: "k", payload: { n } })
      )
      const enqueued = yield* Effect.promise(() => cli(["enqueue", ...flags], input.join("\n")))
      expect(enqueued.code, enqueued.stderr).toBe(0)
      // the relay stops once the reader has all six and goes away
      const relay = [process.execPath, ...bundle.argv(["relay", "stdout", ...flags, "--owner", "cli-relay"])]
      const quoted = relay.map((arg) => `'${arg.replace(/'/g, `'\\''`)}'`).join(" ")
      const piped = yield* Effect.promise(
        () =>
          new Promise<Result>((resolve, reject) => {
            const child = spawn("bash", ["-c", `${quoted} | head -n 6; echo "relay-exit=\${PIPESTATUS[0]}" >&2`], {
              env: baseEnv(),
              stdio: ["ignore", "pipe", "pipe"]
            })
            let stdout = ""
            let stderr = ""
            child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
            child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
            child.on("error", reject)
            child.on("close", (code) => resolve({ code, stdout, stderr }))
          })
      )
      expect(piped.stderr).toContain("relay-exit=0")
      const shown = piped.stdout.split("\n").filter((l) => l.length > 0)
      expect(
        shown.map(
          (l) => Schema.decodeUnknownSync(Schema.parseJson(Schema.Struct({ envelopeId: Schema.String })))(l).envelopeId
        )
      ).toEqual(["env-0", "env-1", "env-2", "env-3", "env-4", "env-5"])
      expect(piped.stdout + piped.stderr).not.toContain(password)
      const after = Schema.decodeUnknownSync(
        Schema.parseJson(
          Schema.Struct({
            partitions: Schema.Array(
              Schema.Struct({
                pending: Schema.Number,
                claimed: Schema.Number,
                leaseOwner: Schema.NullOr(Schema.String)
              })
            )
          })
        )
      )((yield* Effect.promise(() => cli(["inspect", ...flags, "--json"]))).stdout)
      expect(after.partitions.map((p) => [p.pending, p.claimed, p.leaseOwner])).toEqual([[0, 0, null]])
    })
  )

  it("an idle relay delivers what another process enqueues within 2 s (the 1 s idle poll bound: MySQL has no wake-up)", async () => {
    const url = await createDatabase(inject("mysqlUrl"), "cli_idle")
    const flags = ["--backend", "mysql", "--mysql-url", url]
    // the partition exists before the relay starts: its drainer runs from the first discovery round on
    expect((await cli(["enqueue", ...flags], line("idle", 1))).code).toBe(0)
    const relay = startStdoutRelay(bundle, flags)
    const stderr = () => relay.output.stderr
    try {
      await waitFor("the first record delivered", () => relay.delivered() >= 1, 30_000, stderr)
      // idle long enough for the drainer's default back-off (100 ms doubling up to 30 s) to pass 4 s
      await new Promise((resolve) => setTimeout(resolve, 8_000))
      const result = await cli(["enqueue", ...flags], line("idle", 2))
      expect(result.code, result.stderr).toBe(0)
      const committed = Date.now()
      await waitFor("the second record delivered", () => relay.delivered() >= 2, 30_000, stderr)
      // loosely: without the bound, the pause running 8 s into the idle time would end 2 to 5 s later
      expect(Date.now() - committed).toBeLessThan(2_000)
    } finally {
      expect(await relay.stop()).toBe(0)
    }
  })
})
