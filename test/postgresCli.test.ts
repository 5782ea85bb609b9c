/**
 * The command line on the PostgreSQL backend (`--backend postgres --postgres-url …`): enqueue, inspect
 * and the dead-letter commands work on it, and the URL's password never appears in any output; an idle
 * `relay` is woken by the `NOTIFY` of another process's `enqueue` (SPEC §13).
 */
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { afterAll, inject } from "vitest"
import { DeadLetterEntry } from "../src/domain/DeadLetterEntry.js"
import * as PostgresDeadLetterStore from "../src/layers/postgres/PostgresDeadLetterStore.js"
import * as PostgresOutboxStore from "../src/layers/postgres/PostgresOutboxStore.js"
import { DeadLetterStore } from "../src/services/DeadLetterStore.js"
import { buildCli } from "./support/CliBundle.js"
import { cliRunner, startStdoutRelay, waitFor } from "./support/CliProcess.js"
import { clientLayer, createDatabase } from "./support/PostgresServer.js"

const bundle = await buildCli()
afterAll(() => bundle.remove())

const password = "pg-s3cret-never-shown"
/** The database URL with a password (the test server trusts loopback, so any password is accepted). */
const withPassword = (url: string): string => {
  const parsed = new URL(url)
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

describe("CLI on PostgreSQL", () => {
  it.live("enqueue, inspect and dlq list/redrive work on --backend postgres; the password is never printed", () =>
    Effect.gen(function* () {
      const url = withPassword(yield* Effect.promise(() => createDatabase(inject("postgresUrl"), "cli")))
      const flags = ["--backend", "postgres", "--postgres-url", url]
      const enqueued = yield* Effect.promise(() =>
        cli(["enqueue", ...flags], [line("p1", 1), line("p1", 2), line("p2", 3)].join("\n"))
      )
      expect(enqueued.code, enqueued.stderr).toBe(0)
      expect(enqueued.stdout).toContain("enqueued 3 records")

      // a dead-letter entry written through the library, in the schema the CLI uses
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
          PostgresDeadLetterStore.layer.pipe(
            Layer.provideMerge(PostgresOutboxStore.layer),
            Layer.provide(clientLayer(url))
          )
        )
      )

      const [inspected, listed] = yield* Effect.promise(() =>
        Promise.all([cli(["inspect", ...flags, "--json"]), cli(["dlq", "list", ...flags, "--json"])])
      )
      expect(inspected.code, inspected.stderr).toBe(0)
      const report = Schema.decodeUnknownSync(Inspect)(inspected.stdout)
      expect(report.backend).toBe("postgres")
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
        cli(["dlq", "redrive", "dead-1", "--backend", "postgres"], "", { OUTBOX_POSTGRES_URL: url })
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
        cli(["inspect", "--backend", "postgres", "--postgres-url", missing.toString()])
      )
      expect(failed.code).not.toBe(0)
      expect(failed.stderr).toContain(
        'cannot open the postgres (schema public) backend: database "no_such_database" does not exist'
      )
      const noUrl = yield* Effect.promise(() => cli(["inspect", "--backend", "postgres"]))
      expect(noUrl.code).toBe(2)
      expect(noUrl.stderr).toContain("--postgres-url")

      for (const result of [enqueued, inspected, listed, redriven, failed]) {
        expect(result.stdout + result.stderr).not.toContain(password)
      }
    })
  )

  it("an idle relay delivers what another process enqueues within 2 s (LISTEN/NOTIFY wake-up, SPEC §13)", async () => {
    const url = await createDatabase(inject("postgresUrl"), "cli_wake")
    const flags = ["--backend", "postgres", "--postgres-url", url]
    // discovery every 30 s: only the wake-up brings the new partition forward, and the idle drainer's record
    const relay = startStdoutRelay(bundle, [...flags, "--discovery-interval", "30 seconds"])
    const stderr = () => relay.output.stderr
    try {
      await waitFor("relay started", () => stderr().includes('message="relay started"'), 30_000, stderr)
      // the listener is up once the first check of its connection came back; give it that moment
      await new Promise((resolve) => setTimeout(resolve, 1_000))
      const enqueueAndTime = async (n: number) => {
        const result = await cli(["enqueue", ...flags], line("idle", n))
        expect(result.code, result.stderr).toBe(0)
        const committed = Date.now()
        await waitFor(`record ${n} delivered`, () => relay.delivered() >= n, 30_000, stderr)
        return Date.now() - committed
      }
      const first = await enqueueAndTime(1)
      // idle long enough for the drainer's back-off (100 ms doubling) to pass 2 s
      await new Promise((resolve) => setTimeout(resolve, 8_000))
      const second = await enqueueAndTime(2)
      // loosely: without the wake-up, discovery (30 s) and the idle back-off (several seconds) would bring them
      expect(first).toBeLessThan(2_000)
      expect(second).toBeLessThan(2_000)
    } finally {
      expect(await relay.stop()).toBe(0)
    }
  })
})
