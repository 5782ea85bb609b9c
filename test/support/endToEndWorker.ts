/**
 * One process of the end-to-end test (test/endToEnd.test.ts), chosen by its JSON argument:
 *
 * - `producer`: publishes `count` typed orders (`order.placed` of examples/webhook-consumer.ts, the Schema the
 *   consumers decode) to the outbox (a SQLite file or a PostgreSQL database) with `Topic.publishAll`, in batches of 10 with a short
 *   pause between them, then exits 0. Order `i` (1-based) is `{ orderId: "O-<i>", customer: "c<i % customers>",
 *   n: i }`.
 * - `relay`: runs a `Relay` over the outbox and lease stores of that backend (lease 1 s, so a successor
 *   takes over soon after a kill) delivering through the webhook sink (`url`, `secret`), the NATS sink
 *   (`url`, `subject`) or the RabbitMQ sink (`url`, `routingKey`), until killed.
 * - `consumer`: runs the example consumer service of the transport (examples/webhook-consumer.ts,
 *   nats-consumer.ts, rabbitmq-consumer.ts) on the inbox database `inboxDb`, until killed.
 *
 * Prints `ready` once running. Logs only errors.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as NatsConsumerExample from "../../examples/nats-consumer.js"
import * as RabbitMqConsumerExample from "../../examples/rabbitmq-consumer.js"
import * as WebhookConsumerExample from "../../examples/webhook-consumer.js"
import * as NatsSink from "../../src/layers/sinks/NatsSink.js"
import * as RabbitMqSink from "../../src/layers/sinks/RabbitMqSink.js"
import * as WebhookSink from "../../src/layers/sinks/WebhookSink.js"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Redacted from "effect/Redacted"
import type * as SqlClient from "@effect/sql/SqlClient"
import * as PostgresLeaseStore from "../../src/layers/postgres/PostgresLeaseStore.js"
import * as PostgresOutboxStore from "../../src/layers/postgres/PostgresOutboxStore.js"
import * as SqliteDatabase from "../../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteLeaseStore from "../../src/layers/sqlite/SqliteLeaseStore.js"
import * as SqliteOutboxStore from "../../src/layers/sqlite/SqliteOutboxStore.js"
import * as Publish from "../../src/programs/Publish.js"
import * as Relay from "../../src/programs/Relay.js"
import type { Sink } from "../../src/services/Sink.js"
import { orderAt, type Outbox, type Transport, type WorkerConfig } from "./EndToEnd.js"

const ready = Effect.sync(() => void process.stdout.write("ready\n"))

/** The SQL client of the outbox. */
const clientOf = (outbox: Outbox): Layer.Layer<SqlClient.SqlClient, unknown> =>
  outbox._tag === "sqlite"
    ? SqliteDatabase.layer({ filename: outbox.file })
    : PgClient.layer({ url: Redacted.make(outbox.url), maxConnections: 4 })

/** The outbox and lease stores of the outbox's backend. */
const storesOf = (outbox: Outbox) =>
  (outbox._tag === "sqlite"
    ? Layer.merge(SqliteOutboxStore.layer, SqliteLeaseStore.layer)
    : Layer.merge(PostgresOutboxStore.layer, PostgresLeaseStore.layer)
  ).pipe(Layer.provideMerge(clientOf(outbox)))

const sinkOf = (transport: Transport): Layer.Layer<Sink, unknown> => {
  switch (transport._tag) {
    case "webhook":
      return WebhookSink.layerWith({ url: transport.url, signingSecret: transport.secret, timeout: "2 seconds" }).pipe(
        Layer.provide(NodeHttpClient.layerUndici)
      )
    case "nats":
      return NatsSink.layer({ servers: transport.url, subject: transport.subject, timeout: "2 seconds" })
    case "rabbitmq":
      return RabbitMqSink.layer({ url: transport.url, routingKey: transport.queue, timeout: "2 seconds" })
  }
}

const consumerOf = (inboxDb: string, transport: Transport): Layer.Layer<never, unknown> => {
  switch (transport._tag) {
    case "webhook":
      return Layer.discard(
        WebhookConsumerExample.layer({ filename: inboxDb, port: transport.port, secret: transport.secret })
      )
    case "nats":
      return Layer.discard(
        NatsConsumerExample.layer({
          filename: inboxDb,
          servers: transport.url,
          stream: transport.stream,
          ackWait: "1 second"
        })
      )
    case "rabbitmq":
      return Layer.discard(
        RabbitMqConsumerExample.layer({ filename: inboxDb, url: transport.url, queue: transport.queue })
      )
  }
}

const programOf = (config: WorkerConfig): Effect.Effect<void, unknown> => {
  switch (config.role) {
    case "producer":
      return Effect.gen(function* () {
        yield* ready
        for (let first = 1; first <= config.count; first += 10) {
          const batch = Array.from({ length: Math.min(10, config.count - first + 1) }, (_, k) =>
            orderAt(first + k, config.customers)
          )
          yield* Publish.publishAll(WebhookConsumerExample.OrderPlaced, batch)
          yield* Effect.sleep("40 millis")
        }
      }).pipe(Effect.provide(storesOf(config.outbox)))
    case "relay":
      return Effect.scoped(
        Effect.gen(function* () {
          yield* Relay.start({
            owner: `relay-${process.pid}`,
            leaseTtl: "1 second",
            discoveryInterval: "100 millis",
            drainer: {
              batchSize: 20,
              maxConcurrency: 4,
              idleBackoffMin: "5 millis",
              idleBackoffMax: "100 millis",
              onExpired: "drop",
              onPermanentFailure: "drop",
              onPoison: "drop",
              maxReplayAttempts: 100_000
            }
          })
          yield* ready
          return yield* Effect.never
        })
      ).pipe(Effect.provide(Layer.merge(storesOf(config.outbox), sinkOf(config.transport))))
    case "consumer":
      return Effect.zipRight(ready, Effect.never).pipe(Effect.provide(consumerOf(config.inboxDb, config.transport)))
  }
}

const parsed: unknown = JSON.parse(process.argv[2] ?? "null")
const isConfig = (u: unknown): u is WorkerConfig =>
  typeof u === "object" && u !== null && ["producer", "relay", "consumer"].includes(String(Reflect.get(u, "role")))
if (!isConfig(parsed)) {
  process.stderr.write("usage: endToEndWorker '<json config>'\n")
  process.exit(2)
}

Effect.runPromise(programOf(parsed).pipe(Effect.provide(Logger.minimumLogLevel(LogLevel.Error)))).then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${parsed.role} failed: ${String(error)}\n`)
    process.exit(1)
  }
)
