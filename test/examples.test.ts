/**
 * The runnable examples, executed: a typed `order.placed` topic published with business rows on SQLite,
 * PostgreSQL and MySQL (R-PERSIST-6: `Topic.publish` joins one `sql.withTransaction`) and with a business item
 * in one `TransactWriteItems` on DynamoDB Local (`DynamoDbTopic.transactItems`); what committed decodes back
 * to the published value. No example builds a record by hand.
 */
import { DynamoDBClient, DeleteTableCommand } from "@aws-sdk/client-dynamodb"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, inject } from "vitest"
import * as DynamoExample from "../examples/dynamodb-transactional-enqueue.js"
import * as MysqlExample from "../examples/mysql-transactional-enqueue.js"
import * as PostgresExample from "../examples/postgres-transactional-enqueue.js"
import * as SqliteExample from "../examples/sqlite-transactional-enqueue.js"
import { makeTestClientConfig, randomTableName } from "./support/DynamoLocal.js"
import { createDatabase as createMysqlDatabase } from "./support/MysqlServer.js"
import { createDatabase } from "./support/PostgresServer.js"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Schedule from "effect/Schedule"
import { connect as natsConnect } from "nats"
import * as NatsConsumerExample from "../examples/nats-consumer.js"
import * as RabbitMqConsumerExample from "../examples/rabbitmq-consumer.js"
import * as WebhookConsumerExample from "../examples/webhook-consumer.js"
import { OrderPlaced, ordersSeen } from "../examples/webhook-consumer.js"
import * as NatsSink from "../src/layers/sinks/NatsSink.js"
import * as RabbitMqSink from "../src/layers/sinks/RabbitMqSink.js"
import * as WebhookSink from "../src/layers/sinks/WebhookSink.js"
import { freshQueue } from "./support/RabbitMqServer.js"
import { recordFor } from "./support/ReceiverFixtures.js"

const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-examples-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))

describe("examples", () => {
  it.live("R-PERSIST-6 SQLite example: the order row and its record commit together, and roll back together", () =>
    Effect.gen(function* () {
      const outcome = yield* SqliteExample.main(path.join(directory, "orders.db"))
      expect(outcome.orders).toEqual(["A-1001"])
      expect(outcome.pendingRecords).toEqual(["order.placed:A-1001"])
      expect(outcome.events).toEqual([{ orderId: "A-1001", customer: "ada", totalCents: 4_200 }])
      expect(outcome.rejected).toEqual(["A-1002"])
    })
  )

  it.live("R-PERSIST-6 PostgreSQL example: the order row and its record commit together, and roll back together", () =>
    Effect.gen(function* () {
      const url = yield* Effect.promise(() => createDatabase(inject("postgresUrl"), "example"))
      const outcome = yield* PostgresExample.main(url)
      expect(outcome.orders).toEqual(["A-1001"])
      expect(outcome.pendingRecords).toEqual(["order.placed:A-1001"])
      expect(outcome.events).toEqual([{ orderId: "A-1001", customer: "ada", totalCents: 4_200 }])
      expect(outcome.rejected).toEqual(["A-1002"])
    })
  )

  it.live("R-PERSIST-6 MySQL example: the order row and its record commit together, and roll back together", () =>
    Effect.gen(function* () {
      const url = yield* Effect.promise(() => createMysqlDatabase(inject("mysqlUrl"), "example"))
      const outcome = yield* MysqlExample.main(url)
      expect(outcome.orders).toEqual(["A-1001"])
      expect(outcome.pendingRecords).toEqual(["order.placed:A-1001"])
      expect(outcome.events).toEqual([{ orderId: "A-1001", customer: "ada", totalCents: 4_200 }])
      expect(outcome.rejected).toEqual(["A-1002"])
    })
  )

  it.live(
    "R-PERSIST-6 DynamoDB example: order item and record in one TransactWriteItems; a repeat is cancelled whole",
    () =>
      Effect.gen(function* () {
        const config = makeTestClientConfig()
        const tables = { orders: randomTableName("example-orders"), outbox: randomTableName("example-outbox") }
        const outcome = yield* DynamoExample.main(config, tables).pipe(
          Effect.ensuring(
            Effect.promise(async () => {
              const client = new DynamoDBClient(config)
              for (const TableName of [tables.orders, tables.outbox]) {
                await client.send(new DeleteTableCommand({ TableName })).catch(() => undefined)
              }
              client.destroy()
            })
          )
        )
        expect(outcome.committed).toEqual([true, false])
        expect(outcome.pendingRecords).toEqual(["order.placed:B-2001"])
        expect(outcome.events).toEqual([{ orderId: "B-2001", customer: "grace", totalCents: 12_500 }])
      }),
    { timeout: 120_000 }
  )
})

/** Three orders of two customers, the first one delivered twice: the consumer must apply each once. */
const consumerRecords = (address: string) => {
  const orders = [
    { orderId: "A-1", customer: "ada", n: 1 },
    { orderId: "B-1", customer: "bob", n: 1 },
    { orderId: "A-2", customer: "ada", n: 2 }
  ]
  const records = orders.map((order, i) => recordFor(OrderPlaced, order, `rec-${order.orderId}`, i + 1, address))
  return [records[0], ...records].flatMap((record) => (record === undefined ? [] : [record]))
}

/** Waits until the example's `orders_seen` holds three rows; answers their order ids. */
const awaitThreeOrders = ordersSeen.pipe(
  Effect.filterOrFail((rows) => rows.length >= 3),
  Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("30 seconds"))),
  Effect.map((rows) => rows.map((row) => row.order_id)),
  Effect.orDie
)

describe("consumer examples", () => {
  it.live("webhook consumer: signed deliveries from the webhook sink, a duplicate applied once", () =>
    Effect.gen(function* () {
      const server = yield* HttpServer.HttpServer
      const port = server.address._tag === "TcpAddress" ? server.address.port : 0
      const sink = yield* WebhookSink.make({ url: `http://127.0.0.1:${port}/hooks/orders`, signingSecret: "example" })
      for (const record of consumerRecords("")) yield* Effect.orDie(sink.send(record))
      expect(yield* awaitThreeOrders).toEqual(["A-1", "B-1", "A-2"])
    }).pipe(
      Effect.provide(
        WebhookConsumerExample.layer({ filename: path.join(directory, "webhook.db"), port: 0, secret: "example" })
      ),
      Effect.provide(NodeHttpClient.layerUndici)
    )
  )

  it.live("NATS consumer: records published by the NATS sink into a stream are applied in order", () =>
    Effect.gen(function* () {
      const url = inject("natsUrl")
      const stream = `EXAMPLE${Date.now()}`
      yield* Effect.promise(async () => {
        const nc = await natsConnect({ servers: url })
        const jsm = await nc.jetstreamManager()
        await jsm.streams.add({ name: stream, subjects: [`${stream}.>`] })
        await nc.close()
      })
      yield* Effect.scoped(
        Effect.gen(function* () {
          const sink = yield* NatsSink.make({ servers: url })
          // the repeated record is also removed by the stream's duplicate window (Nats-Msg-Id)
          for (const record of consumerRecords(`${stream}.orders`)) yield* Effect.orDie(sink.send(record))
        })
      )
      const seen = yield* awaitThreeOrders.pipe(
        Effect.provide(NatsConsumerExample.layer({ filename: path.join(directory, "nats.db"), servers: url, stream }))
      )
      expect(seen).toEqual(["A-1", "B-1", "A-2"])
    }).pipe(Effect.orDie)
  )

  it.live("RabbitMQ consumer: records published by the RabbitMQ sink into a queue, a duplicate applied once", () =>
    Effect.gen(function* () {
      // the run's shared broker (test/support/globalSetup.ts), a fresh queue of the test's own
      const rabbitUrl = inject("rabbitUrl")
      const queue = yield* Effect.promise(() => freshQueue(rabbitUrl, "orders_"))
      yield* Effect.scoped(
        Effect.gen(function* () {
          const sink = yield* RabbitMqSink.make({ url: rabbitUrl, routingKey: queue })
          for (const record of consumerRecords("")) yield* Effect.orDie(sink.send(record))
        })
      )
      const seen = yield* awaitThreeOrders.pipe(
        Effect.provide(
          RabbitMqConsumerExample.layer({ filename: path.join(directory, "rabbitmq.db"), url: rabbitUrl, queue })
        )
      )
      expect(seen).toEqual(["A-1", "B-1", "A-2"])
    }).pipe(Effect.scoped, Effect.orDie)
  )
})
