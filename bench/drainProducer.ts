/**
 * The producer process of the relay benchmark's second latency run (bench/drain.ts): persists the bench's
 * records (bench/DrainRecords.ts) to a SQLite file in batches of 100 at a steady pace, from a second OS
 * process, so the relay has its process's thread to itself. Prints `ready` once its store is open, starts
 * on a `go` line on stdin, and prints `done <records> <busy milliseconds>` when the last batch committed.
 *
 * Usage: `node --import tsx bench/drainProducer.ts <file> <records per second> <seconds> [background|inline]`
 * (where the database checkpoints its WAL, `SqliteDatabase`'s `checkpoint` option; default `inline`, an
 * application's database's default).
 */
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as readline from "node:readline"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { pacedPersist, recordMaker } from "./DrainRecords.js"

const [file, rateText, secondsText, checkpointText] = process.argv.slice(2)
const perSecond = Number(rateText)
const seconds = Number(secondsText)
const checkpoint = checkpointText === "background" ? "background" : "inline"
if (
  file === undefined ||
  !(perSecond > 0) ||
  !(seconds > 0) ||
  !["inline", "background", undefined].includes(checkpointText)
) {
  process.stderr.write("usage: drainProducer <file> <records per second> <seconds> [background|inline]\n")
  process.exit(2)
}

const runtime = ManagedRuntime.make(
  Layer.provide(SqliteOutboxStore.layer, SqliteDatabase.layer({ filename: file, checkpoint }))
)
const store = await runtime.runPromise(OutboxStore)
// the other process's relay persists nothing: its envelope ids cannot meet these
const makeRecords = recordMaker("x")
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]()
process.stdout.write("ready\n")
await lines.next()
const { records, busyMillis } = await runtime.runPromise(pacedPersist(store, makeRecords, perSecond, seconds))
process.stdout.write(`done ${records} ${busyMillis.toFixed(1)}\n`)
await runtime.dispose()
process.exit(0)
