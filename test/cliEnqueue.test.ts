/**
 * `effect-outbox enqueue` in process (`enqueueLines` over a byte stream): per-line outcomes when the store
 * rejects one record of a batch (memory, SQLite, DynamoDB Local), a full SQLite disk told in plain words
 * without a WARN per failure, and input that is not valid UTF-8 or carries a secret in a bad field.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Readable } from "node:stream"
import { afterAll } from "vitest"
import * as DynamoDbOutboxStore from "../src/layers/dynamodb/DynamoDbOutboxStore.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import { enqueueLines } from "../src/programs/cli/EnqueueCommand.js"
import * as Enqueue from "../src/programs/Enqueue.js"
import * as DynamoDb from "../src/services/DynamoDb.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { makeTestClientConfig, randomTableName } from "./support/DynamoLocal.js"

const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-cli-enqueue-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))
let files = 0

const line = (n: number, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ partitionKey: "p", envelopeId: `env-${n}`, bindingId: "b", payload: { n }, ...extra })

/** Runs `enqueueLines` over `input`, collecting every report and every log line. */
const run = (input: string | Buffer, batchSize = 500) =>
  Effect.gen(function* () {
    const reports: Array<string> = []
    const logs: Array<string> = []
    const summary = yield* enqueueLines(Readable.from([Buffer.from(input)]), batchSize, (n, reason) =>
      Effect.sync(() => {
        reports.push(`line ${n}: ${reason}`)
      })
    ).pipe(
      Effect.provide(
        Logger.replace(
          Logger.defaultLogger,
          Logger.make(({ message }) => logs.push(String(message)))
        )
      )
    )
    return { summary, reports, logs }
  })

const enqueueOn = <A, E>(stores: Layer.Layer<A, E>) =>
  Layer.provideMerge(Enqueue.layerWith({ maxOutboxDepth: 0 }), stores)

const sqliteOn = (filename: string) =>
  SqliteOutboxStore.layer.pipe(Layer.provideMerge(SqliteDatabase.layer({ filename })))

const rejectedLineSuite = <E>(name: string, stores: () => Layer.Layer<OutboxStore, E>) =>
  it.effect(
    `${name}: a record the store rejects is reported with its own line; the rest of its batch is enqueued`,
    () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        yield* run([line(0, { id: "taken" }), line(1, { id: "taken-too" })].join("\n"))
        // line 3 reuses id "taken" for another identity: InvalidRecord from the store, not from parsing
        const input = [line(2), line(3, { id: "taken" }), line(4), line(5), line(6, { id: "taken-too" }), line(7)].join(
          "\n"
        )
        const { reports, summary } = yield* run(input + "\n")
        expect(reports).toHaveLength(2)
        expect(reports[0]).toMatch(/^line 2: not enqueued: .*id taken is already used/)
        expect(reports[1]).toMatch(/^line 5: not enqueued: .*id taken-too is already used/)
        expect(summary).toEqual({ lines: 6, enqueued: 4, duplicates: 0, rejected: 2 })
        expect(yield* store.countPending("p")).toBe(6)
      }).pipe(Effect.provide(enqueueOn(stores())))
  )

describe("enqueue (CLI) per-line outcomes", () => {
  rejectedLineSuite("memory", () => MemoryOutboxStore.layer)
  rejectedLineSuite("sqlite", () => sqliteOn(":memory:"))

  it.effect("sqlite: a full disk is said in plain words once per batch, with no WARN per failure", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const pages = yield* sql<{ page_count: number }>`PRAGMA page_count`.pipe(
        Effect.map((rows) => rows[0]?.page_count ?? 0)
      )
      // room for a few records only: every later batch fails with SQLITE_FULL
      yield* sql.unsafe(`PRAGMA max_page_count = ${pages + 40}`)
      const big = "x".repeat(3000)
      const input = Array.from({ length: 100 }, (_, n) => line(n + 1, { payload: `${big}${n}` })).join("\n") + "\n"
      const { reports, summary, logs } = yield* run(input, 10)
      expect(summary.enqueued).toBeGreaterThan(0)
      expect(summary.rejected).toBeGreaterThan(0)
      expect(summary.enqueued + summary.rejected).toBe(100)
      expect(reports.length).toBeGreaterThan(0)
      // one report per failed batch of 10, each naming the condition and its lines
      expect(reports.length).toBe(Math.ceil(summary.rejected / 10))
      for (const report of reports)
        expect(report).toMatch(/^line \d+: not enqueued: disk full \(lines \d+-\d+, 10 records\)$/)
      expect(logs.filter((message) => message.includes("rollback"))).toEqual([])
    }).pipe(Effect.provide(enqueueOn(sqliteOn(path.join(directory, `full-${++files}.db`)))))
  )

  it.effect("bytes that are not UTF-8 and lone surrogates are rejected by line; payloadBase64 stores exact bytes", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const input = Buffer.concat([
        Buffer.from(line(1) + "\n"),
        Buffer.from('{"partitionKey":"p","envelopeId":"env-2","bindingId":"b","payload":"caf'),
        Buffer.from([0xc3, 0x28]),
        Buffer.from('"}\n'),
        Buffer.from(line(3, { payload: "\ud800 lone" }) + "\n"),
        Buffer.from(JSON.stringify({ partitionKey: "p", envelopeId: "env-4", bindingId: "b", payloadBase64: "AP8Q" })),
        Buffer.from("\r\n")
      ])
      const { reports, summary } = yield* run(input)
      expect(reports).toEqual([
        "line 2: not valid UTF-8 (send binary payloads as payloadBase64)",
        "line 3: payload is not valid Unicode (a lone surrogate)"
      ])
      expect(summary).toEqual({ lines: 4, enqueued: 2, duplicates: 0, rejected: 2 })
      const stored = yield* store.queryPending("p", 10)
      const binary = stored.find((record) => record.envelopeId === "env-4")
      expect(Array.from(binary?.payload ?? [])).toEqual([0x00, 0xff, 0x10])
    }).pipe(Effect.provide(enqueueOn(MemoryOutboxStore.layer)))
  )

  it.effect("messages name the field at fault, never its value (a header value is not echoed)", () =>
    Effect.gen(function* () {
      const secret = "Bearer s3cr3t-t0ken"
      const input = [
        line(1, { headers: { authorization: 42, "x-ok": "1" } }),
        line(2, { headers: [secret] }),
        line(3, { expiresAt: secret }),
        line(4, { partitionKey: 7, routeId: { secret } }),
        `{"partitionKey": "p", "authorization": "${secret}"`,
        line(6, { payloadBase64: secret, payload: undefined })
      ].join("\n")
      const { reports } = yield* run(input + "\n")
      expect(reports).toHaveLength(6)
      for (const report of reports) {
        expect(report).not.toContain("s3cr3t")
        expect(report).not.toContain("42")
      }
      expect(reports[0]).toBe("line 1: headers.authorization: must be a string")
      expect(reports[1]).toMatch(/^line 2: headers: /)
      expect(reports[2]).toMatch(/^line 3: expiresAt: must be an ISO-8601 instant/)
      expect(reports[3]).toMatch(/^line 4: .*partitionKey: must be a non-empty string/)
      expect(reports[3]).toMatch(/routeId: must be a string/)
      expect(reports[4]).toBe("line 5: not JSON (a line must hold one JSON object)")
      expect(reports[5]).toMatch(/^line 6: payloadBase64: must be base64/)
    }).pipe(Effect.provide(enqueueOn(MemoryOutboxStore.layer)))
  )
})

const table = randomTableName("cli-enqueue")
const dynamoLayer = DynamoDb.layer(makeTestClientConfig())
afterAll(() =>
  Effect.runPromise(
    Effect.flatMap(DynamoDb.DynamoDb, (d) => d.deleteTable({ TableName: table })).pipe(
      Effect.provide(dynamoLayer),
      Effect.ignore
    )
  )
)

describe("enqueue (CLI) on DynamoDB Local", () => {
  it.effect("an oversize payload is rejected on its own line; the other lines of its batch are enqueued", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const input = [line(1), line(2, { payload: "y".repeat(420_000) }), line(3)].join("\n") + "\n"
      const { reports, summary } = yield* run(input)
      expect(reports).toHaveLength(1)
      expect(reports[0]).toMatch(/^line 2: not enqueued: /)
      expect(reports[0]).not.toContain("yyyy")
      expect(summary).toEqual({ lines: 3, enqueued: 2, duplicates: 0, rejected: 1 })
      expect(yield* store.countPending("p")).toBe(2)
    }).pipe(
      Effect.provide(
        enqueueOn(
          DynamoDbOutboxStore.layerWith({ tableName: table, ensureTable: true }).pipe(Layer.provide(dynamoLayer))
        )
      )
    )
  )
})
