/**
 * The multi-process drain test, written once and run on every SQL backend (SPEC §3.2, §3.4, §3.5):
 * 2,000 records in 4 partitions with ordering keys, 3 worker processes (test/support/drainWorker.ts)
 * contending for the same partitions with rising versions. Every record must be completed exactly once,
 * none lost, no failure (SQLITE_BUSY, deadlock, conflict) may reach a caller, and per ordering key the
 * completion order must equal age order.
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
import { NewOutboxRecord } from "../../src/domain/OutboxRecord.js"
import { OutboxStore } from "../../src/services/OutboxStore.js"

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")
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

const CountRow = Schema.Struct({ n: Schema.Union(Schema.Number, Schema.NumberFromString) })

interface WorkerResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** One database the suite drains: where the workers find it, and a layer over it for seeding and checks. */
export interface DrainTarget {
  /** The `drainWorker.ts` argument: a SQLite file or a database URL. */
  readonly location: string
  readonly layer: Layer.Layer<OutboxStore | SqlClient.SqlClient, unknown>
  /** Removes what the target made (files); runs after the checks. */
  readonly cleanup?: () => void
}

/** What differs per backend. */
export interface MultiProcessDrainOptions {
  /** Backend name as the describe block shows it, e.g. "PostgreSQL". */
  readonly name: string
  /** What is shared, e.g. "one database" or "one WAL file". */
  readonly shared: string
  /** The `drainWorker.ts` backend argument. */
  readonly worker: "sqlite" | "postgres" | "mysql"
  /** What the workers must never surface, named in the test title. */
  readonly failure: string
  /** Makes a fresh database for the run. */
  readonly makeTarget: () => Promise<DrainTarget>
  /** Column types of the backend's dialect. */
  readonly types: {
    readonly autoId: string
    readonly integer: string
    readonly text: string
    readonly number: string
  }
}

const runWorker = (backend: string, location: string, index: number): Promise<WorkerResult> =>
  new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", workerScript, backend, location, String(index), String(WORKERS), ...PARTITIONS],
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

/** Registers the multi-process drain test for one backend. */
export const multiProcessDrainSuite = (options: MultiProcessDrainOptions): void => {
  const { autoId, integer, text, number } = options.types
  describe(`${options.name}: several processes drain ${options.shared}`, () => {
    it.live(
      `every record completed exactly once, none lost, no ${options.failure}, per-key completion in age order`,
      () =>
        Effect.gen(function* () {
          const target = yield* Effect.promise(options.makeTarget)
          const layer = Layer.orDie(target.layer)

          // seed: 500 records per partition, 8 ordering keys plus keyless ones, createdAt a permutation
          // of insertion order so that age order differs from seq order
          const expected = yield* Effect.gen(function* () {
            const sql = yield* SqlClient.SqlClient
            const store = yield* OutboxStore
            yield* sql.unsafe(`CREATE TABLE drain_version (v ${integer} NOT NULL)`)
            yield* sql`INSERT INTO drain_version (v) VALUES (0)`
            yield* sql.unsafe(`CREATE TABLE drain_ready (worker ${integer} PRIMARY KEY)`)
            yield* sql.unsafe(`CREATE TABLE drain_log (
              log_id ${autoId}, worker ${integer} NOT NULL, record_id ${text} NOT NULL,
              partition_key ${text} NOT NULL, ordering_key ${text}, created_at ${number} NOT NULL,
              seq ${integer} NOT NULL, version ${integer} NOT NULL)`)
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
            Promise.all(Array.from({ length: WORKERS }, (_, i) => runWorker(options.worker, target.location, i)))
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
            const completed = yield* Effect.flatMap(
              sql`SELECT count(*) AS n FROM outbox WHERE status = 'completed'`,
              Schema.decodeUnknown(Schema.Array(CountRow))
            )
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
          target.cleanup?.()
        }),
      180_000
    )
  })
}
