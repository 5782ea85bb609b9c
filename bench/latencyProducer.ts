/**
 * The producer process of the latency bench (bench/latency.ts): a second OS process committing records
 * to the store the bench's relay drains. Reads `<partitionKey> <recordId>` lines on stdin; for each it
 * persists one record and prints `<recordId> <before> <committed>`: the times (epoch milliseconds with a
 * fraction: `performance.timeOrigin + performance.now()`) before the persist and once it returned.
 * Prints `ready` once its store is open.
 *
 * Usage: `node --import tsx bench/latencyProducer.ts sqlite <file> | postgres <url> <schema> | dynamodb <endpoint> <table>`
 */
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as readline from "node:readline"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as DynamoDbOutboxStore from "../src/layers/dynamodb/DynamoDbOutboxStore.js"
import * as PostgresOutboxStore from "../src/layers/postgres/PostgresOutboxStore.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import * as DynamoDb from "../src/services/DynamoDb.js"
import { OutboxStore } from "../src/services/OutboxStore.js"

const [backend, target, extra] = process.argv.slice(2)

const storeLayer = (): Layer.Layer<OutboxStore, unknown> => {
  if (backend === "sqlite" && target !== undefined) {
    return Layer.provide(SqliteOutboxStore.layer, SqliteDatabase.layer({ filename: target }))
  }
  if (backend === "postgres" && target !== undefined && extra !== undefined) {
    return Layer.provide(
      PostgresOutboxStore.layerWith({ schema: extra }),
      PgClient.layer({ url: Redacted.make(target), maxConnections: 2 })
    )
  }
  if (backend === "dynamodb" && target !== undefined && extra !== undefined) {
    return Layer.provide(
      DynamoDbOutboxStore.layerWith({ tableName: extra, ensureTable: false }),
      DynamoDb.layer({ endpoint: target, region: "us-east-1", credentials: { accessKeyId: "x", secretAccessKey: "x" } })
    )
  }
  process.stderr.write("usage: latencyProducer sqlite <file> | postgres <url> <schema> | dynamodb <endpoint> <table>\n")
  process.exit(2)
}

const now = (): number => performance.timeOrigin + performance.now()

const runtime = ManagedRuntime.make(storeLayer())
const store = await runtime.runPromise(OutboxStore)
process.stdout.write("ready\n")
for await (const line of readline.createInterface({ input: process.stdin })) {
  const [partitionKey, id] = line.trim().split(" ")
  if (partitionKey === undefined || id === undefined) continue
  const at = now()
  await runtime.runPromise(
    store.persist([
      new NewOutboxRecord({ id, partitionKey, envelopeId: id, bindingId: "b", payload: new Uint8Array(64) })
    ])
  )
  process.stdout.write(`${id} ${at} ${now()}\n`)
}
await runtime.dispose()
process.exit(0)
