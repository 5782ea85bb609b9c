/**
 * One relay process of the PostgreSQL bench's process rounds (bench/postgres.ts).
 *
 * Usage: `node --import tsx bench/postgresRelayWorker.ts <databaseUrl> <schema> <owner> <maxPartitions> <warmUpSchema> <warmUpRecords>`
 *
 * First, untimed, a warm-up: persists `<warmUpRecords>` records in 4 partitions of `<warmUpSchema>` (its own)
 * and drains them with the same relay, so the measured round does not run the process's code cold. Then
 * builds the PostgreSQL outbox and lease stores on `<schema>` with a no-op sink that counts its sends,
 * prints `ready`, waits for a `go` line on stdin, runs a relay (./postgresRelayOptions.ts, at most
 * `<maxPartitions>` partitions, a pool of `<maxPartitions>` + 4 connections) until a `stop` line or the end
 * of stdin, and prints one JSON line `{ "owner", "sent" }` before exiting.
 */
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as readline from "node:readline"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as PostgresLeaseStore from "../src/layers/postgres/PostgresLeaseStore.js"
import * as PostgresOutboxStore from "../src/layers/postgres/PostgresOutboxStore.js"
import * as Relay from "../src/programs/Relay.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { Sink } from "../src/services/Sink.js"
import { relayOptions } from "./postgresRelayOptions.js"
import { clientLayer } from "../test/support/PostgresServer.js"

const [url, schema, owner, maxPartitionsArg, warmUpSchema, warmUpRecordsArg] = process.argv.slice(2)
if (
  url === undefined ||
  schema === undefined ||
  owner === undefined ||
  maxPartitionsArg === undefined ||
  warmUpSchema === undefined ||
  warmUpRecordsArg === undefined
) {
  process.stderr.write(
    "usage: postgresRelayWorker <databaseUrl> <schema> <owner> <maxPartitions> <warmUpSchema> <warmUpRecords>\n"
  )
  process.exit(2)
}
const maxPartitions = Number(maxPartitionsArg)
const warmUpRecords = Number(warmUpRecordsArg)

const lines = readline.createInterface({ input: process.stdin })
/** Resolves on the first stdin line equal to `word`, or when stdin ends. */
const awaitLine = (word: string): Promise<void> =>
  new Promise((resolve) => {
    lines.on("line", (line) => {
      if (line.trim() === word) resolve()
    })
    lines.on("close", () => resolve())
  })
const go = awaitLine("go")
const stop = awaitLine("stop")

let sent = 0
const sink = Sink.of({
  send: () =>
    Effect.sync(() => {
      sent += 1
    })
})

const stores = (on: string) =>
  Layer.mergeAll(
    PostgresOutboxStore.layerWith({ schema: on }),
    PostgresLeaseStore.layerWith({ schema: on }),
    Layer.succeed(Sink, sink)
  ).pipe(Layer.provide(clientLayer(url, maxPartitions + 4)))

const warmUpPartitions = ["w0", "w1", "w2", "w3"]
const warmUp = Effect.gen(function* () {
  const store = yield* OutboxStore
  let made = 0
  for (let done = 0; done < warmUpRecords; done += 100) {
    for (const partitionKey of warmUpPartitions) {
      yield* store.persist(
        Array.from(
          { length: 100 },
          () =>
            new NewOutboxRecord({
              partitionKey,
              envelopeId: `warm-${++made}`,
              bindingId: "b",
              payload: new Uint8Array(64)
            })
        )
      )
    }
  }
  const relay = yield* Effect.fork(Relay.run(relayOptions(owner, maxPartitions)))
  while (sent < made) yield* Effect.sleep("5 millis")
  yield* Fiber.interrupt(relay)
  sent = 0
}).pipe(Effect.provide(stores(warmUpSchema)))

const program = Effect.gen(function* () {
  process.stdout.write("ready\n")
  yield* Effect.promise(() => go)
  const relay = yield* Effect.fork(Relay.run(relayOptions(owner, maxPartitions)))
  yield* Effect.promise(() => stop)
  yield* Fiber.interrupt(relay)
})

Effect.runPromise(Effect.zipRight(warmUp, program.pipe(Effect.provide(stores(schema))))).then(
  () => {
    process.stdout.write(`${JSON.stringify({ owner, sent })}\n`)
    process.exit(0)
  },
  (error: unknown) => {
    process.stderr.write(`relay worker ${owner} failed: ${String(error)}\n`)
    process.exit(3)
  }
)
