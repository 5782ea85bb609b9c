/**
 * A consumer service reading `order.placed` from a RabbitMQ queue: manual acknowledgements after the inbox
 * commit, a retryable failure requeued after a delay, a permanent one rejected without requeue (to the queue's
 * dead-letter exchange, if it has one), prefetch 1 so each customer's orders apply in order; each order applied
 * once through the SQLite inbox into `orders_seen`. A relay's RabbitMQ sink publishes into the queue.
 *
 * Run it: `AMQP_URL=amqp://guest:guest@127.0.0.1:5672 AMQP_QUEUE=orders npx tsx examples/rabbitmq-consumer.ts`
 * (writes `.data/rabbitmq-consumer.db`).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { pathToFileURL } from "node:url"
import { Topic } from "effect-outbox"
import { RabbitMqConsumer } from "effect-outbox/rabbitmq"
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

/** The broker, the queue and the database. */
export interface Config {
  readonly filename: string
  readonly url: string
  readonly queue: string
}

/** The service: the consumer running for the layer's lifetime, and the inbox. */
export const layer = (config: Config) =>
  RabbitMqConsumer.layer({
    url: config.url,
    queue: config.queue,
    consumer: "orders-service",
    topic: OrderPlaced,
    handler: (order) => applyOrder(order),
    prefetch: 1,
    retryDelay: "1 second"
  }).pipe(Layer.provideMerge(inboxLayer(config.filename)))

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  NodeRuntime.runMain(
    Layer.launch(
      layer({
        filename: process.env["INBOX_DB"] ?? ".data/rabbitmq-consumer.db",
        url: process.env["AMQP_URL"] ?? "amqp://guest:guest@127.0.0.1:5672",
        queue: process.env["AMQP_QUEUE"] ?? "orders"
      })
    )
  )
}
