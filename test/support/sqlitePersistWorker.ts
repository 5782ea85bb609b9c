/**
 * Another OS process committing to a SQLite outbox (test/sqliteWakeSignal.test.ts): persists one record
 * and exits, printing `committed` once the persist returned.
 *
 * Usage: `node --import tsx test/support/sqlitePersistWorker.ts <dbFile> <partitionKey> <recordId>`
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { NewOutboxRecord } from "../../src/domain/OutboxRecord.js"
import * as SqliteDatabase from "../../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteOutboxStore from "../../src/layers/sqlite/SqliteOutboxStore.js"
import { OutboxStore } from "../../src/services/OutboxStore.js"

const [file, partitionKey, id] = process.argv.slice(2)
if (file === undefined || partitionKey === undefined || id === undefined) {
  process.stderr.write("usage: sqlitePersistWorker <dbFile> <partitionKey> <recordId>\n")
  process.exit(2)
}

const program = Effect.gen(function* () {
  const store = yield* OutboxStore
  yield* store.persist([
    new NewOutboxRecord({ id, partitionKey, envelopeId: id, bindingId: "b", payload: new Uint8Array([1]) })
  ])
  process.stdout.write("committed\n")
})

await Effect.runPromise(
  program.pipe(Effect.provide(Layer.provideMerge(SqliteOutboxStore.layer, SqliteDatabase.layer({ filename: file }))))
)
