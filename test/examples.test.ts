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
