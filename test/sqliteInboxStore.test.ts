/**
 * The InboxStore contract on SQLite (`:memory:` per test, and one shared file), plus SQLite-specific
 * behaviour: the handler's writes join the caller's own transaction (a savepoint), a trim batch runs through
 * the `processed_at` index (query plan) and its statement count depends only on what it deletes, and the
 * tables honour `tablePrefix`.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteInboxStore from "../src/layers/sqlite/SqliteInboxStore.js"
import * as Inbox from "../src/programs/Inbox.js"
import { InboxStore, type InboxOptions } from "../src/services/InboxStore.js"
import { inboxStoreContract, TestApp } from "./contract/InboxStoreContract.js"

const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-sqlite-inbox-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))

/** The consumer's own table on the same client: handler writes join the inbox's transaction. */
export const sqlApp = Layer.effect(
  TestApp,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE IF NOT EXISTS app_seen (k TEXT NOT NULL, v TEXT NOT NULL)`
    return TestApp.of({
      write: (k, v) => sql`INSERT INTO app_seen (k, v) VALUES (${k}, ${v})`,
      read: (k) =>
        sql`SELECT v FROM app_seen WHERE k = ${k} ORDER BY v`.pipe(
          Effect.flatMap(Schema.decodeUnknown(Schema.Array(Schema.Struct({ v: Schema.String })))),
          Effect.map((rows) => rows.map((row) => row.v))
        )
    })
  })
)

const storeOn = (filename: string, options: InboxOptions & { tablePrefix?: string } = {}) =>
  Layer.mergeAll(SqliteInboxStore.layerWith(options), sqlApp).pipe(
    Layer.provideMerge(SqliteDatabase.layer({ filename }))
  )

inboxStoreContract("sqlite", (options) => storeOn(":memory:", options), { transactionalWrites: true, trims: true })

const sharedFile = path.join(directory, "shared.db")
inboxStoreContract("sqlite-file", (options) => storeOn(sharedFile, options), {
  transactionalWrites: true,
  trims: true
})

const Count = Schema.Array(Schema.Struct({ n: Schema.Number }))

describe("SqliteInboxStore", () => {
  it.effect("inside a caller's transaction, a failure after processing rolls back the inbox row too", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const store = yield* InboxStore
      const exit = yield* Effect.exit(
        sql.withTransaction(
          Inbox.process("c", { messageId: "m1", partitionKey: "p" }, Effect.void).pipe(
            Effect.zipRight(Effect.fail("caller gives up"))
          )
        )
      )
      expect(exit._tag).toBe("Failure")
      expect(yield* store.isProcessed("c", "m1")).toBe(false)
      expect((yield* Inbox.process("c", { messageId: "m1", partitionKey: "p" }, Effect.void))._tag).toBe("Processed")
    }).pipe(Effect.provide(storeOn(":memory:")))
  )

  it.effect("a trim batch is a search of the processed_at index (no scan of the table)", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const plan = yield* sql.unsafe(`EXPLAIN QUERY PLAN ${SqliteInboxStore.dialect("").trimStatement}`, [0, 10])
      const details = plan.map((row) => String(Reflect.get(row, "detail")))
      expect(
        details.some(
          (d) => d.includes("USING INDEX inbox_processed_at") || d.includes("USING COVERING INDEX inbox_processed_at")
        )
      ).toBe(true)
      expect(details.some((d) => /^SCAN inbox_processed\b(?! USING)/.test(d))).toBe(false)
      expect(details.some((d) => d.includes("TEMP B-TREE"))).toBe(false)
    }).pipe(Effect.provide(storeOn(":memory:")))
  )

  it.effect("trimming a deep history costs statements in proportion to what it deletes (O(batch) each)", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const store = yield* InboxStore
      // 300 old ids, then 30,000 young ones written directly (the history a busy consumer keeps)
      yield* Inbox.process("c", { messageId: "seed", partitionKey: "p" }, Effect.void)
      yield* sql`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300)
        INSERT INTO inbox_processed (consumer, message_id, partition_key, processed_at)
        SELECT 'c', 'old-' || i, 'p', 0 FROM n`
      yield* TestClock.adjust(Duration.hours(2))
      const now = 2 * 60 * 60 * 1000
      yield* sql`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 30000)
        INSERT INTO inbox_processed (consumer, message_id, partition_key, processed_at)
        SELECT 'c', 'young-' || i, 'p', ${now} FROM n`
      const report = yield* store.trim
      expect(report).toEqual({ deleted: 301, batches: 4 })
      const left = yield* Effect.flatMap(sql`SELECT count(*) AS n FROM inbox_processed`, Schema.decodeUnknown(Count))
      expect(left[0]?.n).toBe(30_000)
      // with nothing old left, one statement that deletes nothing
      expect(yield* store.trim).toEqual({ deleted: 0, batches: 1 })
    }).pipe(Effect.provide(storeOn(":memory:", { dedupeWindow: Duration.hours(1), trimBatchSize: 100 })))
  )

  it.effect("tablePrefix names the tables; an invalid prefix fails the layer", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* Inbox.process("c", { messageId: "m1", partitionKey: "p", orderingKey: "k", seq: 1 }, Effect.void)
      const rows = yield* Effect.flatMap(
        sql`SELECT count(*) AS n FROM app1_inbox_processed`,
        Schema.decodeUnknown(Count)
      )
      expect(rows[0]?.n).toBe(1)
      const error = yield* Effect.flip(
        Layer.build(SqliteInboxStore.layerWith({ tablePrefix: "bad-prefix" })).pipe(Effect.scoped)
      )
      expect(error._tag).toBe("InvalidConfiguration")
    }).pipe(Effect.provide(storeOn(":memory:", { tablePrefix: "app1_" })))
  )
})
