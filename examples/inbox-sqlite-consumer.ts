/**
 * A consumer with the inbox on SQLite (docs/guide.md, "Consuming"): the same delivery twice is processed
 * once; the handler's row commits with the inbox row.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Inbox } from "effect-outbox"
import { SqliteDatabase, SqliteInboxStore } from "effect-outbox/sqlite"

/** What the consumer does with one order: a row in its own table, in the inbox's transaction. */
const applyOrder = (orderId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql`INSERT INTO orders_seen (order_id) VALUES (${orderId})`)

const program = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE IF NOT EXISTS orders_seen (order_id TEXT PRIMARY KEY)`
  const message = { messageId: "rec-1", partitionKey: "orders", orderingKey: "customer-7", seq: 1 }
  const first = yield* Inbox.process("billing", message, applyOrder("o-1"))
  const again = yield* Inbox.process("billing", message, applyOrder("o-1"))
  yield* Effect.log(first._tag, again._tag) // Processed Duplicate
})

program.pipe(
  Effect.provide(SqliteInboxStore.layer.pipe(Layer.provideMerge(SqliteDatabase.layer({ filename: ":memory:" })))),
  Effect.runPromise
)
