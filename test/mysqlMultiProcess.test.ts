/**
 * Several OS processes drain one MySQL (MariaDB) database at the same time (SPEC §3.5): 2,000 records in 4
 * partitions with ordering keys, 3 worker processes (test/support/drainWorker.ts) contending for
 * the same partitions with rising versions. Every record must be completed exactly once, none lost, no
 * failure may reach a caller, and per ordering key the completion order must equal age order.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { spawn } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import { inject } from "vitest"
import * as MysqlOutboxStore from "../src/layers/mysql/MysqlOutboxStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { clientLayer, createDatabase } from "./support/MysqlServer.js"

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const workerScript = path.join(projectRoot, "test", "support", "drainWorker.ts")

const WORKERS = 3
const PARTITIONS = ["mp-0", "mp-1", "mp-2", "mp-3"]
const PER_PARTITION = 500
const KEYS = 8

const Summary = Schema.Struct({
  worker: Schema.Number,
  rounds: Schema.Number,
  claims: Schema.Number,
  claimed: Schema.Number,
  completed: Schema.Number,
  staleClaims: Schema.Number,
  staleCompletes: Schema.Number,
  errors: Schema.Array(Schema.String)
})

const LogRow = Schema.Struct({
  log_id: Schema.Number,
  worker: Schema.Number,
  record_id: Schema.String,
  partition_key: Schema.String,
  ordering_key: Schema.NullOr(Schema.String),
  created_at: Schema.Number,
  seq: Schema.Number
})

interface WorkerResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const runWorker = (databaseUrl: string, index: number): Promise<WorkerResult> =>
  new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", workerScript, "mysql", databaseUrl, String(index), String(WORKERS), ...PARTITIONS],
      { cwd: projectRoot, stdio: ["ignore", "pipe", "pipe"] }
    )
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    const timer = setTimeout(() => child.kill("SIGKILL"), 150_000)
    child.on("error", reject)
    child.on("close", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })

describe("MySQL: several processes drain one database", () => {
  it.live(
    "every record completed exactly once, none lost, no failure, per-key completion in age order",
    () =>
      Effect.gen(function* () {
        const databaseUrl = yield* Effect.promise(() => createDatabase(inject("mysqlUrl"), "multiprocess"))
        const layer = Layer.provideMerge(MysqlOutboxStore.layer, clientLayer(databaseUrl))

        // seed: 500 records per partition, 8 ordering keys plus keyless ones, createdAt a permutation
        // of insertion order so that age order differs from seq order
        const expected = yield* Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const store = yield* OutboxStore
          yield* sql`CREATE TABLE drain_version (v integer NOT NULL)`
          yield* sql`INSERT INTO drain_version (v) VALUES (0)`
          yield* sql`CREATE TABLE drain_ready (worker integer PRIMARY KEY)`
          yield* sql`CREATE TABLE drain_log (
            log_id serial PRIMARY KEY, worker integer NOT NULL, record_id VARCHAR(255) NOT NULL,
            partition_key VARCHAR(255) NOT NULL, ordering_key VARCHAR(255), created_at DOUBLE NOT NULL, seq integer NOT NULL,
            version integer NOT NULL)`
          const base = 1_700_000_000_000
          const ids: Array<string> = []
          for (const pk of PARTITIONS) {
            const batch = Array.from({ length: PER_PARTITION }, (_, i) => {
              const key = i % 5 === 4 ? undefined : `k${i % KEYS}`
              return new NewOutboxRecord({
                id: `${pk}-r${String(i).padStart(4, "0")}`,
                partitionKey: pk,
                envelopeId: `e${i}`,
                bindingId: "b",
                payload: new TextEncoder().encode(`${pk} ${i}`),
                createdAt: DateTime.unsafeMake(base + ((i * 37) % PER_PARTITION)),
                ...(key !== undefined ? { orderingKey: key } : {})
              })
            })
            const report = yield* store.persist(batch)
            ids.push(...report.persisted)
          }
          return ids
        }).pipe(Effect.provide(layer))
        expect(expected).toHaveLength(PARTITIONS.length * PER_PARTITION)

        const results = yield* Effect.promise(() =>
          Promise.all(Array.from({ length: WORKERS }, (_, i) => runWorker(databaseUrl, i)))
        )
        const summaries = results.map((result, i) => {
          expect(result.stderr, `worker ${i} stderr`).toBe("")
          expect(result.code, `worker ${i} exit code; stdout ${result.stdout}`).toBe(0)
          return Schema.decodeUnknownSync(Schema.parseJson(Summary))(result.stdout.trim())
        })
        for (const summary of summaries) {
          // no failure reached a caller
          expect(summary.errors).toEqual([])
        }
        // the workers really contended: some owners were fenced out
        const fencedOut = summaries.reduce((n, s) => n + s.staleClaims + s.staleCompletes, 0)
        expect(fencedOut).toBeGreaterThan(0)

        yield* Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const store = yield* OutboxStore
          const log = yield* Effect.flatMap(
            sql`SELECT log_id, worker, record_id, partition_key, ordering_key, created_at, seq FROM drain_log ORDER BY log_id`,
            Schema.decodeUnknown(Schema.Array(LogRow))
          )
          // exactly once, none lost
          expect(log).toHaveLength(expected.length)
          expect(new Set(log.map((row) => row.record_id)).size).toBe(expected.length)
          expect([...log.map((row) => row.record_id)].sort()).toEqual([...expected].sort())
          expect(summaries.reduce((n, s) => n + s.completed, 0)).toBe(expected.length)
          for (const pk of PARTITIONS) {
            expect(yield* store.countPending(pk)).toBe(0)
            expect(yield* store.countClaimed(pk)).toBe(0)
          }
          const completed = yield* sql`SELECT count(*) AS n FROM outbox WHERE status = 'completed'`
          expect(completed).toEqual([{ n: expected.length }])
          // per key: completion (commit) order equals age order
          const byKey = new Map<string, Array<(typeof log)[number]>>()
          for (const row of log) {
            if (row.ordering_key === null) continue
            const key = `${row.partition_key}/${row.ordering_key}`
            const list = byKey.get(key) ?? []
            list.push(row)
            byKey.set(key, list)
          }
          expect(byKey.size).toBe(PARTITIONS.length * KEYS)
          for (const [key, rows] of byKey) {
            const ageOrder = [...rows].sort((a, b) => a.created_at - b.created_at || a.seq - b.seq)
            expect(
              rows.map((r) => r.record_id),
              key
            ).toEqual(ageOrder.map((r) => r.record_id))
          }
        }).pipe(Effect.provide(layer))
      }),
    180_000
  )
})
