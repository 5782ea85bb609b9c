/**
 * One relay process of the PostgreSQL bench's process rounds (bench/postgres.ts).
 *
 * Usage: `node --import tsx bench/postgresRelayWorker.ts <databaseUrl> <schema> <owner> <maxPartitions>`
 *
 * Builds the PostgreSQL outbox and lease stores on `<schema>` with a no-op sink that counts its sends,
 * prints `ready`, waits for a `go` line on stdin, then runs a relay (./postgresRelayOptions.ts, at most `<maxPartitions>`
 * partitions) until a `stop` line or the end of stdin, and prints one JSON line
 * `{ "owner", "sent" }` before exiting.
 */
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as readline from "node:readline"
import * as PostgresLeaseStore from "../src/layers/postgres/PostgresLeaseStore.js"
import * as PostgresOutboxStore from "../src/layers/postgres/PostgresOutboxStore.js"
import * as Relay from "../src/programs/Relay.js"
import { Sink } from "../src/services/Sink.js"
import { relayOptions } from "./postgresRelayOptions.js"
import { clientLayer } from "../test/support/PostgresServer.js"

const [url, schema, owner, maxPartitionsArg] = process.argv.slice(2)
if (url === undefined || schema === undefined || owner === undefined || maxPartitionsArg === undefined) {
  process.stderr.write("usage: postgresRelayWorker <databaseUrl> <schema> <owner> <maxPartitions>\n")
  process.exit(2)
}

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

const layer = Layer.mergeAll(
  PostgresOutboxStore.layerWith({ schema }),
  PostgresLeaseStore.layerWith({ schema }),
  Layer.succeed(Sink, sink)
).pipe(Layer.provide(clientLayer(url, 8)))

const program = Effect.gen(function* () {
  process.stdout.write("ready\n")
  yield* Effect.promise(() => go)
  const relay = yield* Effect.fork(Relay.run(relayOptions(owner, Number(maxPartitionsArg))))
  yield* Effect.promise(() => stop)
  yield* Fiber.interrupt(relay)
})

Effect.runPromise(program.pipe(Effect.provide(layer))).then(
  () => {
    process.stdout.write(`${JSON.stringify({ owner, sent })}\n`)
    process.exit(0)
  },
  (error: unknown) => {
    process.stderr.write(`relay worker ${owner} failed: ${String(error)}\n`)
    process.exit(3)
  }
)
