/**
 * Transactional enqueue on DynamoDB: the order item and its typed `order.placed` event go into one
 * `TransactWriteItems`. `DynamoDbTopic.transactItems` encodes the value with the topic's Schema, derives its
 * keys, allocates the record's seq and returns conditional `Put` entries to add next to the business writes;
 * the transaction commits both or neither. Placing the same order twice cancels the second transaction (the
 * order's condition fails, and so does the event's: its idempotency key is already taken), so no second event
 * is enqueued.
 *
 * Run it against DynamoDB Local: `DYNAMODB_ENDPOINT=http://127.0.0.1:8000 npx tsx examples/dynamodb-transactional-enqueue.ts`
 * (credentials come from the SDK's default chain; any values work for DynamoDB Local).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { pathToFileURL } from "node:url"
import { OutboxStore, Topic } from "effect-outbox"
import { DynamoDb, DynamoDbOutboxStore, DynamoDbTopic } from "effect-outbox/dynamodb"

/** Table names of the example. */
export interface Tables {
  /** The business table (created by the example, key `orderId`). */
  readonly orders: string
  /** The outbox table (created by the outbox store layer when missing). */
  readonly outbox: string
}

/** An order the shop accepts. */
export interface Order {
  readonly id: string
  readonly customer: string
  readonly totalCents: number
}

/** The event, declared once: its Schema and how its keys derive from the value. */
export const OrderPlaced = Topic.make({
  name: "order.placed",
  payload: { orderId: Schema.String, customer: Schema.String, totalCents: Schema.Number },
  partitionKey: (order) => `customer-${order.customer}`,
  orderingKey: (order) => `order-${order.orderId}`,
  idempotencyKey: (order) => order.orderId,
  route: "billing"
})

/** Creates the orders table when missing. */
export const ensureOrdersTable = (tableName: string) =>
  Effect.gen(function* () {
    const dynamo = yield* DynamoDb.DynamoDb
    const exists = yield* dynamo.describeTable({ TableName: tableName }).pipe(
      Effect.as(true),
      Effect.catchIf(
        (error) => error.kind === "ResourceNotFound",
        () => Effect.succeed(false)
      )
    )
    if (exists) return
    yield* dynamo.createTable({
      TableName: tableName,
      BillingMode: "PAY_PER_REQUEST",
      AttributeDefinitions: [{ AttributeName: "orderId", AttributeType: "S" }],
      KeySchema: [{ AttributeName: "orderId", KeyType: "HASH" }]
    })
  })

/**
 * Writes the order and its `order.placed` event in one transaction. Returns false when the
 * transaction was cancelled because the order already exists (nothing was written).
 */
export const placeOrder = (order: Order, tables: Tables) =>
  Effect.gen(function* () {
    const dynamo = yield* DynamoDb.DynamoDb
    const outboxEntries = yield* DynamoDbTopic.transactItems(
      OrderPlaced,
      [{ orderId: order.id, customer: order.customer, totalCents: order.totalCents }],
      { tableName: tables.outbox }
    )
    return yield* dynamo
      .transactWriteItems({
        TransactItems: [
          {
            Put: {
              TableName: tables.orders,
              Item: {
                orderId: { S: order.id },
                customer: { S: order.customer },
                totalCents: { N: String(order.totalCents) }
              },
              ConditionExpression: "attribute_not_exists(orderId)"
            }
          },
          ...outboxEntries
        ]
      })
      .pipe(
        Effect.as(true),
        Effect.catchIf(
          (error) => error.kind === "TransactionCanceled",
          () => Effect.succeed(false)
        )
      )
  })

/** What the example observed. */
export interface Outcome {
  readonly committed: ReadonlyArray<boolean>
  readonly pendingRecords: ReadonlyArray<string>
  /** The pending records decoded back with the topic (what a consumer gets from `Topic.decode`). */
  readonly events: ReadonlyArray<Topic.Type<typeof OrderPlaced>>
}

/** Places an order, then the same order again (cancelled), and reads back the pending outbox records. */
export const program = (tables: Tables) =>
  Effect.gen(function* () {
    const store = yield* OutboxStore.OutboxStore
    yield* ensureOrdersTable(tables.orders)
    const order = { id: "B-2001", customer: "grace", totalCents: 12_500 }
    const first = yield* placeOrder(order, tables)
    yield* Console.log(`order ${order.id}: ${first ? "order item and outbox record committed together" : "cancelled"}`)
    const second = yield* placeOrder(order, tables)
    yield* Console.log(
      `order ${order.id} again: ${second ? "committed" : "transaction cancelled, no second event enqueued"}`
    )
    const pending = yield* store.queryPending("customer-grace", 100)
    const events = yield* Effect.forEach(pending, (record) =>
      Effect.map(Topic.decode(OrderPlaced, record), (decoded) => decoded.value)
    )
    yield* Console.log(`pending outbox records: ${pending.map((r) => r.envelopeId).join(", ")}`)
    return { committed: [first, second], pendingRecords: pending.map((r) => r.envelopeId), events } satisfies Outcome
  })

/** The layers: the DynamoDB client for `config` and the outbox store on `tables.outbox`. */
export const layer = (config: DynamoDb.DynamoDbConfig, tables: Tables) =>
  DynamoDbOutboxStore.layerWith({ tableName: tables.outbox }).pipe(Layer.provideMerge(DynamoDb.layer(config)))

/** The example against the DynamoDB of `config`. */
export const main = (config: DynamoDb.DynamoDbConfig, tables: Tables) =>
  Effect.provide(program(tables), layer(config, tables))

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const endpoint = process.env["DYNAMODB_ENDPOINT"]
  NodeRuntime.runMain(
    main(
      { region: process.env["AWS_REGION"] ?? "us-east-1", ...(endpoint !== undefined ? { endpoint } : {}) },
      { orders: "example-orders", outbox: "effect-outbox" }
    )
  )
}
