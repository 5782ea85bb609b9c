/**
 * The same messages delivered to one consumer by several OS processes at once (SPEC §12 concurrency), on a
 * SQLite WAL file and on PostgreSQL: 3 worker processes (test/support/inboxWorker.ts) each deliver the same
 * 100 keyless and 100 keyed messages. Every keyless message is applied exactly once; no handler runs for a
 * delivery that does not commit (handler runs = Processed outcomes = applied rows); every keyed message is
 * applied at most once and, per key, in `seq` order of commit; no error reaches a worker.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, inject } from "vitest"
import * as PostgresInboxStore from "../src/layers/postgres/PostgresInboxStore.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteInboxStore from "../src/layers/sqlite/SqliteInboxStore.js"
import { clientLayer, createDatabase } from "./support/PostgresServer.js"

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const workerScript = path.join(projectRoot, "test", "support", "inboxWorker.ts")
const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-inbox-mp-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))

const WORKERS = 3
const MESSAGES = 100

const Summary = Schema.parseJson(
  Schema.Struct({
    worker: Schema.Number,
    processed: Schema.Number,
    duplicate: Schema.Number,
    stale: Schema.Number,
    runs: Schema.Number,
    errors: Schema.Array(Schema.String)
  })
)
const Applied = Schema.Array(
  Schema.Struct({ id: Schema.Union(Schema.Number, Schema.NumberFromString), message_id: Schema.String })
)

const runWorker = (backend: string, target: string, index: number) =>
  Effect.async<{ code: number | null; stdout: string; stderr: string }>((resume) => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", workerScript, backend, target, String(index), String(WORKERS), String(MESSAGES)],
      { cwd: projectRoot, stdio: ["ignore", "pipe", "pipe"] }
    )
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    const timer = setTimeout(() => child.kill("SIGKILL"), 150_000)
    child.on("close", (code) => {
      clearTimeout(timer)
      resume(Effect.succeed({ code, stdout, stderr }))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

const scenario = (backend: "sqlite" | "postgres", target: string, serial: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql.unsafe(`CREATE TABLE inbox_ready (worker integer NOT NULL)`)
    yield* sql.unsafe(`CREATE TABLE app_applied (id ${serial}, message_id text NOT NULL, worker integer NOT NULL)`)
    const results = yield* Effect.forEach(
      Array.from({ length: WORKERS }, (_, i) => i),
      (i) => runWorker(backend, target, i),
      { concurrency: "unbounded" }
    )
    const summaries = []
    for (const result of results) {
      expect(result.code, result.stderr).toBe(0)
      summaries.push(yield* Schema.decodeUnknown(Summary)(result.stdout.trim()))
    }
    for (const s of summaries) expect(s.errors).toEqual([])
    const applied = yield* Effect.flatMap(
      sql.unsafe(`SELECT id, message_id FROM app_applied ORDER BY id`),
      Schema.decodeUnknown(Applied)
    )
    const ids = applied.map((row) => row.message_id)
    // at most once, and every keyless message exactly once
    expect(new Set(ids).size).toBe(ids.length)
    for (let i = 0; i < MESSAGES; i++) expect(ids).toContain(`free-${i}`)
    // no handler ran without committing
    const runs = summaries.reduce((n, s) => n + s.runs, 0)
    const processed = summaries.reduce((n, s) => n + s.processed, 0)
    expect(runs).toBe(processed)
    expect(processed).toBe(ids.length)
    const settled = summaries.reduce((n, s) => n + s.processed + s.duplicate + s.stale, 0)
    expect(settled).toBe(WORKERS * 2 * MESSAGES)
    // per key, applied in seq order
    const lastSeq = new Map<string, number>()
    for (const id of ids) {
      if (!id.startsWith("keyed-")) continue
      const seq = Number(id.slice("keyed-".length))
      const key = `k${seq % 4}`
      expect(seq).toBeGreaterThan(lastSeq.get(key) ?? -1)
      lastSeq.set(key, seq)
    }
  })

describe("Inbox: one message delivered by several processes at once is processed once", () => {
  it.live(
    "SQLite WAL file: 3 processes, 200 messages each, every message applied at most once, keyless exactly once",
    () => {
      const file = path.join(directory, "inbox.db")
      return Effect.gen(function* () {
        yield* Effect.provide(SqliteInboxStore.migrate(), SqliteDatabase.layer({ filename: file }))
        yield* scenario("sqlite", file, "INTEGER PRIMARY KEY AUTOINCREMENT")
      }).pipe(Effect.provide(SqliteDatabase.layer({ filename: file })))
    },
    180_000
  )

  it.live(
    "PostgreSQL: 3 processes, 200 messages each, every message applied at most once, keyless exactly once",
    () =>
      Effect.gen(function* () {
        const url = yield* Effect.promise(() => createDatabase(inject("postgresUrl"), "inbox_mp"))
        yield* Effect.gen(function* () {
          yield* PostgresInboxStore.migrate()
          yield* scenario("postgres", url, "bigserial PRIMARY KEY")
        }).pipe(Effect.provide(Layer.fresh(clientLayer(url, 2))))
      }),
    180_000
  )
})
