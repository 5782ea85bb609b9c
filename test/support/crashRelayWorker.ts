/**
 * One relay process of the crash campaign (test/crashCampaign.test.ts).
 *
 * Usage: `node --import tsx test/support/crashRelayWorker.ts <dbFile> <sinkLog> <owner> <mode> <partitions…>`
 *
 * Runs a `Relay` over the SQLite outbox and lease stores of `dbFile`, with a short lease (1 s) so a
 * successor takes over quickly after this process is killed. The sink appends one JSON line per
 * delivery (`{ id, partitionKey, orderingKey, seq, owner }`) to `sinkLog` with `fsync`, after a short
 * pretend send, so a `SIGKILL` can land between a delivery and its complete. Prints `ready` once the
 * relay runs. It loads, then waits for a `go` line on stdin before it opens the database (so a standby can be
 * started while its predecessor still runs). Mode `run` runs until killed; mode `final` exits 0 once no partition holds a pending or
 * claimed record (closing the relay, which releases its leases), or 1 after 60 s.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import * as fs from "node:fs"
import * as SqliteDatabase from "../../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteLeaseStore from "../../src/layers/sqlite/SqliteLeaseStore.js"
import * as SqliteOutboxStore from "../../src/layers/sqlite/SqliteOutboxStore.js"
import * as Relay from "../../src/programs/Relay.js"
import { OutboxStore } from "../../src/services/OutboxStore.js"
import { Sink } from "../../src/services/Sink.js"

const [dbFile, sinkLog, owner, mode, ...partitions] = process.argv.slice(2)
if (dbFile === undefined || sinkLog === undefined || owner === undefined || partitions.length === 0) {
  process.stderr.write("usage: crashRelayWorker <dbFile> <sinkLog> <owner> <run|final> <partitions…>\n")
  process.exit(2)
}

const fd = fs.openSync(sinkLog, "a")

/** Appends and syncs one delivery line (one `write` call: a kill never tears it). */
const sink = Sink.of({
  send: (record) =>
    Effect.gen(function* () {
      yield* Effect.sleep(Duration.millis(yield* Random.nextIntBetween(1, 6)))
      yield* Effect.sync(() => {
        const line = JSON.stringify({
          id: record.id,
          partitionKey: record.partitionKey,
          orderingKey: Option.getOrNull(record.orderingKey),
          seq: record.seq,
          owner
        })
        fs.writeSync(fd, `${line}\n`)
        fs.fsyncSync(fd)
      })
    })
})

const relayOptions = {
  owner,
  leaseTtl: "1 second",
  discoveryInterval: "100 millis",
  drainer: {
    batchSize: 10,
    maxBatchSize: 20,
    maxConcurrency: 4,
    idleBackoffMin: "5 millis",
    idleBackoffMax: "50 millis",
    finalDrainBudget: "1 second",
    onExpired: "drop",
    onPermanentFailure: "drop",
    onPoison: "drop"
  }
} satisfies Relay.RelayOptions

const idle = Effect.gen(function* () {
  const store = yield* OutboxStore
  const counts = yield* Effect.forEach(partitions, (pk) =>
    Effect.zipWith(store.countPending(pk), store.countClaimed(pk), (a, b) => a + b)
  )
  return counts.every((n) => n === 0)
})

const program = Effect.scoped(
  Effect.gen(function* () {
    yield* Relay.start(relayOptions)
    yield* Effect.sync(() => process.stdout.write("ready\n"))
    if (mode !== "final") return yield* Effect.never
    const deadline = Date.now() + 60_000
    while (!(yield* Effect.orElseSucceed(idle, () => false))) {
      if (Date.now() > deadline) return yield* Effect.fail("final relay did not drain the outbox within 60 s")
      yield* Effect.sleep("50 millis")
    }
  })
)

// WAL with synchronous=NORMAL loses nothing committed when a process is killed (only on power loss)
const layer = Layer.mergeAll(SqliteOutboxStore.layer, SqliteLeaseStore.layer, Layer.succeed(Sink, sink)).pipe(
  Layer.provideMerge(SqliteDatabase.layer({ filename: dbFile, synchronous: "NORMAL" }))
)

/** Resolves on the first line of stdin (`go`): the process loads while its predecessor still runs. */
const go = new Promise<void>((resolve) => {
  let input = ""
  process.stdin.on("data", (chunk: Buffer) => {
    input += chunk.toString()
    if (input.includes("\n")) resolve()
  })
})

await go
Effect.runPromise(program.pipe(Effect.provide(layer), Effect.provide(Logger.minimumLogLevel(LogLevel.Error)))).then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`relay ${owner} failed: ${String(error)}\n`)
    process.exit(1)
  }
)
