/**
 * The consumer's own state for the inbox tests (`TestApp` of the contract): a plain map (memory, not
 * transactional), a table on the same SQL client (its writes join the inbox's transaction), items in a
 * DynamoDB table added with `DynamoDbInboxStore.write`. `read` returns a key's values sorted.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as DynamoDbInboxStore from "../../src/layers/dynamodb/DynamoDbInboxStore.js"
import * as DynamoDb from "../../src/services/DynamoDb.js"
import { TestApp } from "../contract/InboxStoreContract.js"

/** A map in memory. */
export const memoryApp = Layer.sync(TestApp, () => {
  const state = new Map<string, Array<string>>()
  return TestApp.of({
    write: (key, value) => Effect.sync(() => void state.set(key, [...(state.get(key) ?? []), value])),
    read: (key) => Effect.sync(() => [...(state.get(key) ?? [])].sort())
  })
})

/** A table `app_seen (k, v)` on the client in context (created when missing). */
export const sqlApp = Layer.effect(
  TestApp,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE IF NOT EXISTS app_seen (k TEXT NOT NULL, v TEXT NOT NULL)`
    return TestApp.of({
      write: (k, v) => Effect.asVoid(sql`INSERT INTO app_seen (k, v) VALUES (${k}, ${v})`),
      read: (k) =>
        sql`SELECT v FROM app_seen WHERE k = ${k} ORDER BY v`.pipe(
          Effect.flatMap(Schema.decodeUnknown(Schema.Array(Schema.Struct({ v: Schema.String })))),
          Effect.map((rows) => rows.map((row) => row.v))
        )
    })
  })
)

/** Items `PK = key`, `SK = value` in `table`, written in the inbox's transaction. */
export const dynamoApp = (table: string) =>
  Layer.effect(
    TestApp,
    Effect.map(DynamoDb.DynamoDb, (dynamo) =>
      TestApp.of({
        write: (k, v) =>
          DynamoDbInboxStore.write([{ Put: { TableName: table, Item: { PK: { S: k }, SK: { S: v } } } }]),
        read: (k) =>
          dynamo
            .query({
              TableName: table,
              KeyConditionExpression: "PK = :k",
              ExpressionAttributeValues: { ":k": { S: k } },
              ConsistentRead: true
            })
            .pipe(Effect.map((out) => (out.Items ?? []).map((item) => item["SK"]?.S ?? "").sort()))
      })
    )
  )
