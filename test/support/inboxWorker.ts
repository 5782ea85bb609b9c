/**
 * One OS process of the multi-process inbox tests (test/inboxMultiProcess.test.ts).
 *
 * Usage: `node --import tsx test/support/inboxWorker.ts sqlite|postgres <dbFile|databaseUrl> <workerIndex> <workers> <messages>`
 *
 * The worker waits until every worker has registered (so they really run at the same time), then delivers
 * the same messages as every other worker to the one consumer `shared`: `free-<i>` without an ordering key
 * (in an order of its own) and `keyed-<i>` with ordering key `k<i % 4>` and `seq = i` (ascending). The
 * handler counts its runs in this process and inserts `(message_id, worker)` into `app_applied` inside the
 * inbox's transaction. It prints one JSON summary line: outcomes, handler runs and errors.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as PostgresInboxStore from "../../src/layers/postgres/PostgresInboxStore.js"
import * as SqliteDatabase from "../../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteInboxStore from "../../src/layers/sqlite/SqliteInboxStore.js"
import * as Inbox from "../../src/programs/Inbox.js"
import type { InboxStore } from "../../src/services/InboxStore.js"
import { clientLayer } from "./PostgresServer.js"

const [backend, target, indexArg, workersArg, messagesArg] = process.argv.slice(2)
if ((backend !== "sqlite" && backend !== "postgres") || target === undefined || messagesArg === undefined) {
  process.stderr.write("usage: inboxWorker sqlite|postgres <dbFile|databaseUrl> <workerIndex> <workers> <messages>\n")
  process.exit(2)
}
const workerIndex = Number(indexArg)
const workers = Number(workersArg)
const messages = Number(messagesArg)

const CountRow = Schema.Array(Schema.Struct({ n: Schema.Union(Schema.Number, Schema.NumberFromString) }))

const program = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const summary = { worker: workerIndex, processed: 0, duplicate: 0, stale: 0, runs: 0, errors: [] as Array<string> }
  yield* sql`INSERT INTO inbox_ready (worker) VALUES (${workerIndex})`
  for (;;) {
    const ready = yield* Effect.flatMap(sql`SELECT count(*) AS n FROM inbox_ready`, Schema.decodeUnknown(CountRow))
    if ((ready[0]?.n ?? 0) >= workers) break
    yield* Effect.sleep("5 millis")
  }
  // free messages in an order of this worker's (rotated), keyed ones ascending
  const free = Array.from({ length: messages }, (_, i) => (i + workerIndex * 7) % messages)
  const deliveries = [
    ...free.map((i) => ({ messageId: `free-${i}`, partitionKey: "p" })),
    ...Array.from({ length: messages }, (_, i) => ({
      messageId: `keyed-${i}`,
      partitionKey: "p",
      orderingKey: `k${i % 4}`,
      seq: i
    }))
  ]
  const handler = (messageId: string) =>
    Effect.sync(() => void summary.runs++).pipe(
      Effect.zipRight(sql`INSERT INTO app_applied (message_id, worker) VALUES (${messageId}, ${workerIndex})`)
    )
  yield* Effect.forEach(
    deliveries,
    (message) =>
      Inbox.process("shared", message, handler(message.messageId)).pipe(
        Effect.tap((outcome) =>
          Effect.sync(() => {
            if (outcome._tag === "Processed") summary.processed++
            else if (outcome._tag === "Duplicate") summary.duplicate++
            else summary.stale++
          })
        ),
        Effect.catchAll((error) => Effect.sync(() => void summary.errors.push(`${error._tag}: ${error.message}`)))
      ),
    // two deliveries in flight per process (PostgreSQL runs them on two connections)
    { concurrency: 2, discard: true }
  )
  process.stdout.write(JSON.stringify(summary) + "\n")
})

const layer: Layer.Layer<InboxStore | SqlClient.SqlClient, unknown> =
  backend === "sqlite"
    ? SqliteInboxStore.layer.pipe(Layer.provideMerge(SqliteDatabase.layer({ filename: target })))
    : PostgresInboxStore.layer.pipe(Layer.provideMerge(clientLayer(target, 3)))

Effect.runPromise(Effect.provide(program, layer)).catch((error: unknown) => {
  process.stderr.write(`${String(error)}\n`)
  process.exit(1)
})
