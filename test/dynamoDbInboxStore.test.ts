/**
 * The InboxStore contract on DynamoDB Local (one outbox table shared by the tests; the consumer's own items
 * in a second table, written with `DynamoDbInboxStore.write`), plus: a refused condition of a handler's item
 * cancels the whole unit, a unit's commit that loses a race reports `Duplicate`, and `write` outside a unit
 * is refused.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { afterAll, beforeAll } from "vitest"
import * as DynamoDbInboxStore from "../src/layers/dynamodb/DynamoDbInboxStore.js"
import * as OutboxTable from "../src/layers/dynamodb/OutboxTable.js"
import * as Inbox from "../src/programs/Inbox.js"
import * as DynamoDb from "../src/services/DynamoDb.js"
import { InboxStore } from "../src/services/InboxStore.js"
import { inboxStoreContract, TestApp } from "./contract/InboxStoreContract.js"
import { makeTestClientConfig, randomTableName } from "./support/DynamoLocal.js"

const table = randomTableName("inbox")
const appTable = randomTableName("inbox-app")
const dynamoLayer = DynamoDb.layer(makeTestClientConfig())

beforeAll(() =>
  Effect.runPromise(
    Effect.all([OutboxTable.ensureTable(table), OutboxTable.ensureTable(appTable)], {
      concurrency: 2,
      discard: true
    }).pipe(Effect.provide(dynamoLayer))
  )
)
afterAll(() =>
  Effect.runPromise(
    Effect.flatMap(DynamoDb.DynamoDb, (d) =>
      Effect.forEach([table, appTable], (TableName) => d.deleteTable({ TableName }), { discard: true })
    ).pipe(Effect.provide(dynamoLayer))
  )
)

/** The consumer's own items: `PK = key`, `SK = value`, written in the inbox's transaction. */
const dynamoApp = Layer.effect(
  TestApp,
  Effect.map(DynamoDb.DynamoDb, (dynamo) =>
    TestApp.of({
      write: (k, v) =>
        DynamoDbInboxStore.write([{ Put: { TableName: appTable, Item: { PK: { S: k }, SK: { S: v } } } }]),
      read: (k) =>
        dynamo
          .query({
            TableName: appTable,
            KeyConditionExpression: "PK = :k",
            ExpressionAttributeValues: { ":k": { S: k } },
            ConsistentRead: true
          })
          .pipe(Effect.map((out) => (out.Items ?? []).map((item) => item["SK"]?.S ?? "").sort()))
    })
  )
)

const storeLayer = (options: DynamoDbInboxStore.DynamoDbInboxStoreOptions = {}) =>
  Layer.mergeAll(DynamoDbInboxStore.layerWith({ tableName: table, ensureTable: false, ...options }), dynamoApp).pipe(
    Layer.provideMerge(dynamoLayer)
  )

inboxStoreContract("dynamodb", (options) => storeLayer(options), { transactionalWrites: true, trims: false })

describe("DynamoDbInboxStore", () => {
  it.effect("a handler item whose condition fails cancels the unit: HandlerFailed, retryable, nothing written", () =>
    Effect.gen(function* () {
      const store = yield* InboxStore
      const error = yield* Effect.flip(
        Inbox.process(
          "c-cond",
          { messageId: "m1", partitionKey: "p" },
          DynamoDbInboxStore.write([
            {
              Put: {
                TableName: appTable,
                Item: { PK: { S: "cond" }, SK: { S: "x" } },
                ConditionExpression: "attribute_exists(PK)"
              }
            }
          ])
        )
      )
      expect(error._tag).toBe("HandlerFailed")
      if (error._tag === "HandlerFailed") expect(error.retryable).toBe(true)
      expect(yield* store.isProcessed("c-cond", "m1")).toBe(false)
    }).pipe(Effect.provide(storeLayer()))
  )

  it.effect("a commit that finds the id recorded meanwhile reports Duplicate and writes none of its items", () =>
    Effect.gen(function* () {
      const app = yield* TestApp
      // the handler of the first delivery lets a second delivery commit before its own commit
      const outcome = yield* Inbox.process(
        "c-late",
        { messageId: "m1", partitionKey: "p" },
        Effect.zipRight(
          app.write("late", "first"),
          Inbox.process("c-late", { messageId: "m1", partitionKey: "p" }, app.write("late", "second"))
        )
      )
      expect(outcome).toEqual({ _tag: "Duplicate" })
      expect(yield* app.read("late")).toEqual(["second"])
    }).pipe(Effect.provide(storeLayer()))
  )

  it.effect("more items than fit a transaction: HandlerFailed, not retryable", () =>
    Effect.gen(function* () {
      const items = Array.from({ length: DynamoDbInboxStore.maxHandlerItems + 2 }, (_, i) => ({
        Put: { TableName: appTable, Item: { PK: { S: "many" }, SK: { S: String(i) } } }
      }))
      const error = yield* Effect.flip(
        Inbox.process("c-many", { messageId: "m1", partitionKey: "p" }, DynamoDbInboxStore.write(items))
      )
      expect(error._tag === "HandlerFailed" && error.retryable).toBe(false)
    }).pipe(Effect.provide(storeLayer()))
  )

  it.effect("write outside a unit fails with InvalidArgument", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(DynamoDbInboxStore.write([]))
      expect(error._tag).toBe("InvalidArgument")
    })
  )
})
