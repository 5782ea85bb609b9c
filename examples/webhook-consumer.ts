/**
 * A consumer service receiving `order.placed` by webhook: an HTTP server on 127.0.0.1 with the webhook receiver
 * on `POST /hooks/orders` (signature and timestamp verified first, body bounded), each order applied once
 * through the SQLite inbox into `orders_seen`. Point a relay's webhook sink at it with the same secret.
 *
 * Run it: `WEBHOOK_SECRET=… PORT=8080 npx tsx examples/webhook-consumer.ts` (writes `.data/webhook-consumer.db`).
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as HttpServer from "@effect/platform/HttpServer"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { createServer } from "node:http"
import { pathToFileURL } from "node:url"
import { Topic, WebhookReceiver } from "effect-outbox"
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

/** Where the service listens, its database and the shared secret. */
export interface Config {
  readonly filename: string
  readonly port: number
  readonly secret: string
}

/** The service: the HTTP server (kept in the output, so a caller can read its address) and the inbox. */
export const layer = (config: Config) =>
  Layer.unwrapEffect(
    Effect.map(
      WebhookReceiver.router("/hooks/orders", {
        consumer: "orders-service",
        topic: OrderPlaced,
        handler: (order) => applyOrder(order),
        signingSecret: config.secret,
        retryAfter: "1 second"
      }),
      (router) => HttpServer.serve(router)
    )
  ).pipe(
    Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port: config.port, host: "127.0.0.1" })),
    Layer.provideMerge(inboxLayer(config.filename))
  )

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const secret = process.env["WEBHOOK_SECRET"] ?? ""
  NodeRuntime.runMain(
    Layer.launch(
      layer({
        filename: process.env["INBOX_DB"] ?? ".data/webhook-consumer.db",
        port: Number(process.env["PORT"] ?? "8080"),
        secret
      })
    )
  )
}
