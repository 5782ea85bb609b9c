/**
 * Transactional enqueue on MySQL / MariaDB: an order row and the typed `order.placed` event announcing it (a
 * topic: Schema-encoded payload, keys derived from the value) are written in one `sql.withTransaction`, so they
 * commit together — or, when the business step fails after the event was published, roll back together and
 * nothing is announced.
 *
 * Run it: `DATABASE_URL=mysql://user:password@127.0.0.1:3306/shop npx tsx examples/mysql-transactional-enqueue.ts`
 * (creates an `orders` table and the outbox tables in the database).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { pathToFileURL } from "node:url"
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import { OutboxStore, Topic } from "effect-outbox"
import { MysqlOutboxStore } from "effect-outbox/mysql"

/** An order the shop accepts. */
export interface Order {
  readonly id: string
  readonly customer: string
  readonly totalCents: number
}

/** The business rule that can fail after the outbox record was already persisted. */
export class OrderRejected extends Schema.TaggedError<OrderRejected>()("OrderRejected", {
  orderId: Schema.String,
  reason: Schema.String
}) {}

/** The event, declared once: its Schema and how its keys derive from the value. */
export const OrderPlaced = Topic.make({
  name: "order.placed",
  payload: { orderId: Schema.String, customer: Schema.String, totalCents: Schema.Number },
  partitionKey: (order) => `customer-${order.customer}`,
  orderingKey: (order) => `order-${order.orderId}`,
  idempotencyKey: (order) => order.orderId,
  route: "billing"
})

/** Creates the business table (the outbox store creates its own tables). */
export const migrate = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE IF NOT EXISTS orders (
    id VARCHAR(64) PRIMARY KEY,
    customer VARCHAR(255) NOT NULL,
    total_cents BIGINT NOT NULL
  )`
})

/**
 * Inserts the order and publishes its `order.placed` event in one transaction. Orders over 10,000.00 are
 * rejected *after* the publish, to show that the outbox record rolls back with the order row.
 */
export const placeOrder = (order: Order) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    return yield* sql.withTransaction(
      Effect.gen(function* () {
        yield* sql`INSERT INTO orders (id, customer, total_cents)
                   VALUES (${order.id}, ${order.customer}, ${order.totalCents})`
        const published = yield* Topic.publish(OrderPlaced, {
          orderId: order.id,
          customer: order.customer,
          totalCents: order.totalCents
        })
        if (order.totalCents > 1_000_000) {
          return yield* new OrderRejected({ orderId: order.id, reason: "needs manual approval" })
        }
        return [published.recordId]
      })
    )
  })

/** What the example observed. */
export interface Outcome {
  readonly orders: ReadonlyArray<string>
  readonly pendingRecords: ReadonlyArray<string>
  /** The pending records decoded back with the topic (what a consumer gets from `Topic.decode`). */
  readonly events: ReadonlyArray<Topic.Type<typeof OrderPlaced>>
  readonly rejected: ReadonlyArray<string>
}

/** Places two orders (one rejected after its publish) and reads back what committed. */
export const program = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const store = yield* OutboxStore.OutboxStore
  yield* migrate
  const rejected: Array<string> = []
  for (const order of [
    { id: "A-1001", customer: "ada", totalCents: 4_200 },
    { id: "A-1002", customer: "ada", totalCents: 5_000_000 }
  ]) {
    yield* placeOrder(order).pipe(
      Effect.tap((ids) => Console.log(`order ${order.id} committed with outbox record ${ids.join(", ")}`)),
      Effect.catchTag("OrderRejected", (error) =>
        Effect.sync(() => rejected.push(error.orderId)).pipe(
          Effect.zipRight(
            Console.log(`order ${error.orderId} rejected (${error.reason}): order row and record rolled back`)
          )
        )
      )
    )
  }
  const orders = (yield* sql<{ id: string }>`SELECT id FROM orders ORDER BY id`).map((row) => row.id)
  const pending = yield* store.queryPending("customer-ada", 100)
  const events = yield* Effect.forEach(pending, (record) =>
    Effect.map(Topic.decode(OrderPlaced, record), (decoded) => decoded.value)
  )
  yield* Console.log(
    `orders table: ${orders.join(", ")}; pending outbox records: ${pending.map((r) => r.envelopeId).join(", ")}`
  )
  return { orders, pendingRecords: pending.map((r) => r.envelopeId), events, rejected } satisfies Outcome
})

/** The layers: a MySQL client on `url` and the outbox store on it (same client: publish joins the transaction). */
export const layer = (url: string) =>
  MysqlOutboxStore.layer.pipe(Layer.provideMerge(MysqlClient.layer({ url: Redacted.make(url) })))

/** The example on the database at `url`. */
export const main = (url: string) => Effect.provide(program, layer(url))

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const url = process.env["DATABASE_URL"]
  if (url === undefined)
    throw new Error("set DATABASE_URL to a MySQL database, e.g. mysql://user:password@127.0.0.1:3306/db")
  NodeRuntime.runMain(main(url))
}
