/**
 * Shared pieces of the receiver tests: an `order.placed` topic keyed by customer, claimed records of it (as a
 * relay hands them to a sink), a SQLite inbox with an `orders_seen` table written by the handler in the
 * inbox's transaction, and a handler whose failures a test scripts.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { OutboxRecord } from "../../src/domain/OutboxRecord.js"
import * as Topic from "../../src/domain/Topic.js"
import * as SqliteDatabase from "../../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteInboxStore from "../../src/layers/sqlite/SqliteInboxStore.js"
import * as Inbox from "../../src/programs/Inbox.js"

/** The event the receivers consume. */
export const OrderPlaced = Topic.make({
  name: "order.placed",
  payload: { orderId: Schema.String, customer: Schema.String, n: Schema.Number },
  partitionKey: (order) => `customer-${order.customer}`,
  orderingKey: (order) => order.customer,
  idempotencyKey: (order) => order.orderId
})

/** A decoded order. */
export type Order = Topic.Type<typeof OrderPlaced>

/** A claimed record of `order` with `seq`, its id `rec-<orderId>`, as a relay hands it to a sink. */
export const recordOf = (order: Order, seq: number, address = ""): OutboxRecord =>
  recordFor(OrderPlaced, order, `rec-${order.orderId}`, seq, address)

/** A claimed record of `value` of `topic` with the given id and `seq`, as a relay hands it to a sink. */
export const recordFor = <A, I>(
  topic: Topic.Topic<A, I>,
  value: A,
  id: string,
  seq: number,
  address = ""
): OutboxRecord => {
  const made = Topic.toRecord(topic, value, DateTime.unsafeMake(1_700_000_000_000))
  if (Either.isLeft(made)) throw new Error(made.left.reason)
  const r = made.right
  return new OutboxRecord({
    id,
    partitionKey: r.partitionKey,
    envelopeId: r.envelopeId,
    bindingId: r.bindingId,
    routeId: r.routeId ?? r.bindingId,
    address,
    payload: r.payload,
    headers: r.headers ?? {},
    orderingKey: Option.fromNullable(r.orderingKey),
    createdAt: DateTime.unsafeMake(1_700_000_000_000 + seq),
    expiresAt: Option.none(),
    seq,
    status: "claimed",
    claimedBy: Option.some("relay"),
    claimVersion: 1,
    claimedAt: Option.none(),
    firstAttemptedAt: Option.none(),
    replayCount: 1,
    completedAt: Option.none()
  })
}

/** The SQLite inbox on `filename` with its client, and the `orders_seen` table created. */
export const inboxOn = (filename: string) =>
  Layer.effectDiscard(
    Effect.flatMap(
      SqlClient.SqlClient,
      (sql) =>
        sql`CREATE TABLE IF NOT EXISTS orders_seen (order_id TEXT PRIMARY KEY, customer TEXT NOT NULL, n INTEGER NOT NULL)`
    )
  ).pipe(
    Layer.provideMerge(SqliteInboxStore.layer),
    Layer.provideMerge(SqliteDatabase.layer({ filename })),
    Layer.orDie
  )

const Seen = Schema.Array(Schema.Struct({ order_id: Schema.String, customer: Schema.String, n: Schema.Number }))

/** The rows of `orders_seen`, in insertion order. */
export const ordersSeen = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql`SELECT order_id, customer, n FROM orders_seen ORDER BY rowid`.pipe(
    Effect.flatMap(Schema.decodeUnknown(Seen)),
    Effect.orDie
  )
)

/** The handler's write: one row per order (a second insert of the same order would fail its primary key). */
export const applyOrder = (order: Order) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql`INSERT INTO orders_seen (order_id, customer, n) VALUES (${order.orderId}, ${order.customer}, ${order.n})`
  )

/**
 * A handler scripted per order id: `failures.get(id)` more runs fail retryably (then it succeeds);
 * `permanent` ids always fail permanently; `dieAfterWrite` ids write their row and then die once, before the
 * inbox commit. `runs` counts handler runs per order id.
 */
export const scriptedHandler = (script: {
  readonly failures?: Map<string, number>
  readonly permanent?: ReadonlySet<string>
  readonly dieAfterWrite?: Set<string>
}) => {
  const runs = new Map<string, number>()
  const handler = (order: Order) =>
    Effect.gen(function* () {
      runs.set(order.orderId, (runs.get(order.orderId) ?? 0) + 1)
      if (script.permanent?.has(order.orderId) === true) {
        return yield* Inbox.permanent(Effect.fail(new Error(`order ${order.orderId} is refused`)))
      }
      const left = script.failures?.get(order.orderId) ?? 0
      if (left > 0) {
        script.failures?.set(order.orderId, left - 1)
        return yield* Effect.fail(new Error(`order ${order.orderId}: try again`))
      }
      yield* applyOrder(order)
      if (script.dieAfterWrite?.delete(order.orderId) === true) {
        return yield* Effect.die(new Error(`crash after the write of ${order.orderId}, before the commit`))
      }
    })
  return { handler, runs }
}
