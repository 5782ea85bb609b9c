/**
 * The InboxStore contract on PostgreSQL (its own table prefix per test), plus: the handler's writes join a
 * caller's transaction on the same client, and a trim batch deletes through the `processed_at` index in
 * statements whose count depends only on what they delete.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import { inject } from "vitest"
import * as PostgresInboxStore from "../src/layers/postgres/PostgresInboxStore.js"
import * as Inbox from "../src/programs/Inbox.js"
import { InboxStore, type InboxOptions } from "../src/services/InboxStore.js"
import { inboxStoreContract, TestApp } from "./contract/InboxStoreContract.js"
import { clientLayer, createDatabase } from "./support/PostgresServer.js"

const url = await createDatabase(inject("postgresUrl"), "inbox")

const pgApp = Layer.effect(
  TestApp,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE IF NOT EXISTS app_seen (k text NOT NULL, v text NOT NULL)`
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

let prefixes = 0
const storeWith = (options: InboxOptions & { tablePrefix?: string } = {}) =>
  Layer.mergeAll(PostgresInboxStore.layerWith({ tablePrefix: `t${++prefixes}_`, ...options }), pgApp).pipe(
    Layer.provideMerge(clientLayer(url, 8))
  )

inboxStoreContract("postgres", (options) => storeWith(options), { transactionalWrites: true, trims: true })

const Count = Schema.Array(Schema.Struct({ n: Schema.NumberFromString }))

describe("PostgresInboxStore", () => {
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
    }).pipe(Effect.provide(storeWith()))
  )

  it.effect("trimming a deep history: statements in proportion to what is deleted, each through the index", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const store = yield* InboxStore
      yield* sql.unsafe(`INSERT INTO deep_inbox_processed (consumer, message_id, partition_key, processed_at)
        SELECT 'c', 'old-' || i, 'p', 0 FROM generate_series(1, 300) AS i`)
      yield* TestClock.adjust(Duration.hours(2))
      yield* sql.unsafe(`INSERT INTO deep_inbox_processed (consumer, message_id, partition_key, processed_at)
        SELECT 'c', 'young-' || i, 'p', ${2 * 60 * 60 * 1000} FROM generate_series(1, 30000) AS i`)
      yield* sql.unsafe(`ANALYZE deep_inbox_processed`)
      const plan = yield* sql.unsafe(
        `EXPLAIN SELECT ctid FROM deep_inbox_processed WHERE processed_at < $1 ORDER BY processed_at LIMIT $2`,
        [1000, 100]
      )
      const text = plan.map((row) => String(Reflect.get(row, "QUERY PLAN"))).join("\n")
      expect(text).toMatch(/Index (Only )?Scan using deep_inbox_processed_at/)
      const report = yield* store.trim
      expect(report).toEqual({ deleted: 300, batches: 4 })
      const left = yield* Effect.flatMap(
        sql`SELECT count(*)::text AS n FROM deep_inbox_processed`,
        Schema.decodeUnknown(Count)
      )
      expect(left[0]?.n).toBe(30_000)
    }).pipe(Effect.provide(storeWith({ tablePrefix: "deep_", dedupeWindow: Duration.hours(1), trimBatchSize: 100 })))
  )
})
