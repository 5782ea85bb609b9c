/**
 * The InboxStore contract on MySQL / MariaDB (its own table prefix per test), plus: two connections
 * processing one message at once run its handler once (the second waits on the first's row, then sees
 * `Duplicate`), the handler's writes join a caller's transaction on the same client, and a trim batch
 * deletes through the `processed_at` index in statements whose count depends only on what they delete.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import { inject } from "vitest"
import * as MysqlInboxStore from "../src/layers/mysql/MysqlInboxStore.js"
import * as Inbox from "../src/programs/Inbox.js"
import { InboxStore, type InboxOptions } from "../src/services/InboxStore.js"
import { inboxStoreContract } from "./contract/InboxStoreContract.js"
import { sqlApp, TestApp } from "./support/InboxApps.js"
import { clientLayer, createDatabase } from "./support/MysqlServer.js"

const url = await createDatabase(inject("mysqlUrl"), "inbox")

let prefixes = 0
const storeWith = (options: InboxOptions & { tablePrefix?: string } = {}) =>
  Layer.mergeAll(MysqlInboxStore.layerWith({ tablePrefix: `t${++prefixes}_`, ...options }), sqlApp).pipe(
    Layer.provideMerge(clientLayer(url, 8))
  )

inboxStoreContract("mysql", (options) => storeWith(options), { transactionalWrites: true, trims: true })

const Count = Schema.Array(Schema.Struct({ n: Schema.Number }))
const ExplainRows = Schema.Array(
  Schema.Struct({
    type: Schema.NullOr(Schema.String),
    key: Schema.NullOr(Schema.String),
    Extra: Schema.NullOr(Schema.String)
  })
)

/** Connections of this file's database waiting on a row lock (polled wider than INNODB_TRX's 0.1 s refresh). */
const someoneWaits = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ id: number }>`SELECT t.trx_mysql_thread_id AS id FROM information_schema.INNODB_TRX AS t
    JOIN information_schema.PROCESSLIST AS p ON p.ID = t.trx_mysql_thread_id
    WHERE t.trx_state = 'LOCK WAIT' AND p.DB = DATABASE()`
  return rows.length > 0 ? undefined : yield* Effect.fail("nobody waits yet")
}).pipe(Effect.retry(Schedule.spaced("150 millis")))

describe("MysqlInboxStore", () => {
  it.live(
    "two connections process one message at once: the second waits on the first, then is Duplicate; one handler run",
    () =>
      Effect.gen(function* () {
        const app = yield* TestApp
        const inHandler = yield* Deferred.make<void>()
        const finish = yield* Deferred.make<void>()
        const runs = { n: 0 }
        const message = { messageId: "m1", partitionKey: "p", orderingKey: "k", seq: 1 }
        const handler = (label: string) =>
          Effect.gen(function* () {
            runs.n++
            yield* app.write("race", label)
            yield* Deferred.succeed(inHandler, undefined)
            yield* Deferred.await(finish)
          })
        const first = yield* Effect.fork(Inbox.process("c", message, handler("first")))
        yield* Deferred.await(inHandler)
        // the first unit is open, its id row written; the second (another connection of the pool) queues on it
        const second = yield* Effect.fork(Effect.either(Inbox.process("c", message, handler("second"))))
        yield* someoneWaits
        yield* Deferred.succeed(finish, undefined)
        expect((yield* Fiber.join(first))._tag).toBe("Processed")
        const outcome = yield* Fiber.join(second)
        if (outcome._tag === "Right") expect(outcome.right._tag).toBe("Duplicate")
        else expect(Inbox.dispositionOfError(outcome.left)._tag).toBe("Retry")
        expect(runs.n).toBe(1)
        expect(yield* app.read("race")).toEqual(["first"])
      }).pipe(Effect.provide(storeWith()))
  )

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
    }).pipe(Effect.provide(storeWith()))
  )

  it.effect("trimming a deep history: statements in proportion to what is deleted, each through the index", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const store = yield* InboxStore
      yield* sql.unsafe(`INSERT INTO deep_inbox_processed (consumer, message_id, partition_key, processed_at)
        SELECT 'c', CONCAT('old-', seq), 'p', 0 FROM seq_1_to_300`)
      yield* TestClock.adjust(Duration.hours(2))
      yield* sql.unsafe(`INSERT INTO deep_inbox_processed (consumer, message_id, partition_key, processed_at)
        SELECT 'c', CONCAT('young-', seq), 'p', ${2 * 60 * 60 * 1000} FROM seq_1_to_30000`)
      yield* sql.unsafe(`ANALYZE TABLE deep_inbox_processed`).unprepared
      const plan = yield* Effect.flatMap(
        sql.unsafe(
          `EXPLAIN DELETE FROM deep_inbox_processed WHERE processed_at < ? ORDER BY processed_at LIMIT ?`,
          [1000, 100]
        ),
        Schema.decodeUnknown(ExplainRows)
      )
      expect(plan[0]?.key).toBe("deep_inbox_processed_at")
      expect(plan[0]?.type).toBe("range")
      expect(plan[0]?.Extra ?? "").not.toContain("filesort")
      const report = yield* store.trim
      expect(report).toEqual({ deleted: 300, batches: 4 })
      const left = yield* Effect.flatMap(
        sql`SELECT count(*) AS n FROM deep_inbox_processed`,
        Schema.decodeUnknown(Count)
      )
      expect(left[0]?.n).toBe(30_000)
    }).pipe(Effect.provide(storeWith({ tablePrefix: "deep_", dedupeWindow: Duration.hours(1), trimBatchSize: 100 })))
  )
})
