/**
 * One relay process of the broker crash tests (test/support/BrokerCrash.ts).
 *
 * Usage: `node --import tsx test/support/brokerRelayWorker.ts <dbFile> <sentLog> <owner> <nats|rabbitmq>
 * <url> <target> <killAfter> <partitions…>`
 *
 * Runs a `Relay` over the SQLite outbox and lease stores of `dbFile` (lease 1 s, so a successor takes over
 * soon after this process dies) delivering through the NATS sink (subject template `target`) or the
 * RabbitMQ sink (routing key `target`). Every send the broker acknowledged appends the record id to
 * `sentLog` (one `write` and `fsync`). With `killAfter` > 0 the process kills itself with `SIGKILL` right
 * after the `killAfter`-th acknowledged send, before the relay could complete that record (it exits 3
 * should the outbox drain first); with `killAfter` 0 it exits 0 once no partition holds a pending or
 * claimed record, or 1 after 60 s. Prints `ready` once the relay runs.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as fs from "node:fs"
import * as NatsSink from "../../src/layers/sinks/NatsSink.js"
import * as RabbitMqSink from "../../src/layers/sinks/RabbitMqSink.js"
import * as SqliteDatabase from "../../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteLeaseStore from "../../src/layers/sqlite/SqliteLeaseStore.js"
import * as SqliteOutboxStore from "../../src/layers/sqlite/SqliteOutboxStore.js"
import * as Relay from "../../src/programs/Relay.js"
import { OutboxStore } from "../../src/services/OutboxStore.js"
import { Sink } from "../../src/services/Sink.js"

const [dbFile, sentLog, owner, broker, url, target, killAfterText, ...partitions] = process.argv.slice(2)
const killAfter = Number(killAfterText)
if (
  dbFile === undefined ||
  sentLog === undefined ||
  owner === undefined ||
  (broker !== "nats" && broker !== "rabbitmq") ||
  url === undefined ||
  target === undefined ||
  !Number.isInteger(killAfter) ||
  partitions.length === 0
) {
  process.stderr.write(
    "usage: brokerRelayWorker <dbFile> <sentLog> <owner> <nats|rabbitmq> <url> <target> <killAfter> <partitions…>\n"
  )
  process.exit(2)
}

const fd = fs.openSync(sentLog, "a")
let acknowledged = 0

const brokerSink: Layer.Layer<Sink, unknown> =
  broker === "nats"
    ? NatsSink.layer({ servers: url, subject: target, timeout: "2 seconds" })
    : RabbitMqSink.layer({ url, routingKey: target, timeout: "2 seconds" })

/** The broker sink, logging every acknowledged send and dying after the `killAfter`-th. */
const sink = Layer.effect(
  Sink,
  Effect.map(Sink, (inner) =>
    Sink.of({
      send: (record) =>
        Effect.tap(inner.send(record), () =>
          Effect.sync(() => {
            fs.writeSync(fd, `${record.id}\n`)
            fs.fsyncSync(fd)
            acknowledged += 1
            // acknowledged by the broker, not yet completed in the outbox: the process dies here
            if (acknowledged === killAfter) process.kill(process.pid, "SIGKILL")
          })
        )
    })
  )
).pipe(Layer.provide(brokerSink))

const drained = Effect.gen(function* () {
  const store = yield* OutboxStore
  for (const partition of partitions) {
    if ((yield* store.countPending(partition)) + (yield* store.countClaimed(partition)) > 0) return false
  }
  return true
})

const program = Effect.scoped(
  Effect.gen(function* () {
    yield* Relay.start({
      owner,
      leaseTtl: "1 second",
      discoveryInterval: "100 millis",
      drainer: {
        batchSize: 20,
        maxConcurrency: 4,
        idleBackoffMin: "5 millis",
        idleBackoffMax: "50 millis",
        onExpired: "drop",
        onPermanentFailure: "drop",
        onPoison: "drop",
        maxReplayAttempts: 1_000
      }
    })
    yield* Effect.sync(() => process.stdout.write("ready\n"))
    while (!(yield* Effect.orElseSucceed(drained, () => false))) yield* Effect.sleep("50 millis")
    if (killAfter > 0) {
      process.stderr.write(`relay ${owner}: the outbox drained after ${acknowledged} sends, before the kill\n`)
      process.exit(3)
    }
  })
).pipe(
  Effect.timeoutFail({ duration: "60 seconds", onTimeout: () => "the relay did not drain the outbox within 60 s" })
)

const layer = Layer.mergeAll(SqliteOutboxStore.layer, SqliteLeaseStore.layer, sink).pipe(
  Layer.provideMerge(SqliteDatabase.layer({ filename: dbFile }))
)

Effect.runPromise(program.pipe(Effect.provide(layer), Effect.provide(Logger.minimumLogLevel(LogLevel.Error)))).then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`relay ${owner} failed: ${String(error)}\n`)
    process.exit(1)
  }
)
