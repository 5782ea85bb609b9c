/**
 * A consumer service reading `order.placed` from a NATS JetStream stream: a durable pull consumer (ack after
 * the inbox commit, `nak` with a delay on a retryable failure, `term` on a permanent one, one message in
 * flight so each customer's orders apply in order), each order applied once through the SQLite inbox into
 * `orders_seen`. A relay's NATS sink publishes into the stream.
 *
 * Run it: `NATS_URL=nats://127.0.0.1:4222 NATS_STREAM=ORDERS npx tsx examples/nats-consumer.ts`
 * (writes `.data/nats-consumer.db`).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { pathToFileURL } from "node:url"
import { Topic } from "effect-outbox"
import { NatsConsumer } from "effect-outbox/nats"
import { SqliteDatabase, SqliteInboxStore } from "effect-outbox/sqlite"

/** An order was placed: partitioned and ordered per customer, deduplicated on the order id. */
export const OrderPlaced = Topic.make({
  name: "order.placed",
  payload: { orderId: Schema.String, customer: Schema.String, n: Schema.Number },
  partitionKey: (order) => `customer-${order.customer}`,
  orderingKey: (order) => order.customer,
  idempotencyKey: (order) => order.orderId,
  route: "orders"
})

/** A decoded order. */
export type Order = Topic.Type<typeof OrderPlaced>

/** The consumer's table: one row per order applied, in the order they were applied (`rowid`). */
export const migrate = Effect.flatMap(
  SqlClient.SqlClient,
  (sql) => sql`CREATE TABLE IF NOT EXISTS orders_seen (
    order_id TEXT PRIMARY KEY NOT NULL,
    customer TEXT NOT NULL,
    n INTEGER NOT NULL
  )`
)

/** The handler: applies one order (its row commits with the inbox row, or neither does). */
export const applyOrder = (order: Order) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql`INSERT INTO orders_seen (order_id, customer, n) VALUES (${order.orderId}, ${order.customer}, ${order.n})`
  )

const Seen = Schema.Array(Schema.Struct({ order_id: Schema.String, customer: Schema.String, n: Schema.Number }))

/** What the consumer applied so far, in the order it applied it. */
export const ordersSeen = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql`SELECT order_id, customer, n FROM orders_seen ORDER BY rowid`.pipe(Effect.flatMap(Schema.decodeUnknown(Seen)))
)

/** The SQLite database, the inbox on it and the `orders_seen` table. */
export const inboxLayer = (filename: string) =>
  Layer.effectDiscard(migrate).pipe(
    Layer.provideMerge(SqliteInboxStore.layer),
    Layer.provideMerge(SqliteDatabase.layer({ filename }))
  )

/** The server, the stream and the database. */
export interface Config {
  readonly filename: string
  readonly servers: string
  readonly stream: string
  /** How long before an unacknowledged message is redelivered (default 5 seconds). */
  readonly ackWait?: Duration.DurationInput | undefined
}

/** The service: the consumer running for the layer's lifetime, and the inbox. */
export const layer = (config: Config) =>
  NatsConsumer.layer({
    servers: config.servers,
    stream: config.stream,
    durable: "orders-service",
    consumer: "orders-service",
    topic: OrderPlaced,
    handler: (order) => applyOrder(order),
    prefetch: 1,
    ackWait: config.ackWait ?? "5 seconds",
    retryDelay: "1 second"
  }).pipe(Layer.provideMerge(inboxLayer(config.filename)))

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  NodeRuntime.runMain(
    Layer.launch(
      layer({
        filename: process.env["INBOX_DB"] ?? ".data/nats-consumer.db",
        servers: process.env["NATS_URL"] ?? "nats://127.0.0.1:4222",
        stream: process.env["NATS_STREAM"] ?? "ORDERS"
      })
    )
  )
}
