/**
 * Layer factories of the generated inbox histories, shared by the property tests and the soak: one fresh
 * store and app state per history (a new `:memory:` SQLite database; a new table prefix on one PostgreSQL
 * client; fresh consumers on one DynamoDB table).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { randomBytes } from "node:crypto"
import * as DynamoDbInboxStore from "../../src/layers/dynamodb/DynamoDbInboxStore.js"
import * as MemoryInboxStore from "../../src/layers/memory/MemoryInboxStore.js"
import * as OutboxTable from "../../src/layers/dynamodb/OutboxTable.js"
import * as PostgresInboxStore from "../../src/layers/postgres/PostgresInboxStore.js"
import * as SqliteDatabase from "../../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteInboxStore from "../../src/layers/sqlite/SqliteInboxStore.js"
import * as DynamoDb from "../../src/services/DynamoDb.js"
import type { InboxStore } from "../../src/services/InboxStore.js"
import type { TestApp } from "../contract/InboxStoreContract.js"
import { dynamoApp, memoryApp, sqlApp } from "../support/InboxApps.js"
import { sharedClient } from "../support/PostgresServer.js"

type MakeLayer = () => Layer.Layer<InboxStore | TestApp, unknown>

/** Memory store and a memory app. */
export const memory: MakeLayer = () => Layer.merge(MemoryInboxStore.layer, memoryApp)

/** SQLite `:memory:` database per history. */
export const sqlite: MakeLayer = () =>
  Layer.mergeAll(SqliteInboxStore.layer, sqlApp).pipe(Layer.provide(SqliteDatabase.layer({ filename: ":memory:" })))

/** One client on `url`; the store's tables are shared (consumers are fresh per history). */
export const postgres = async (url: string) => {
  const client = await sharedClient(url, 4)
  const makeLayer: MakeLayer = () => Layer.mergeAll(PostgresInboxStore.layer, sqlApp).pipe(Layer.provide(client.layer))
  return { makeLayer, close: () => client.close() }
}

/** Two tables on a DynamoDB endpoint (inbox, app), deleted by `close`. */
export const dynamodb = async (config: DynamoDb.DynamoDbConfig) => {
  const dynamoLayer = DynamoDb.layer(config)
  const suffix = randomBytes(6).toString("hex")
  const table = `inbox-hist-${suffix}`
  const appTable = `inbox-hist-app-${suffix}`
  await Effect.runPromise(
    Effect.all([OutboxTable.ensureTable(table), OutboxTable.ensureTable(appTable)], { discard: true }).pipe(
      Effect.provide(dynamoLayer)
    )
  )
  const makeLayer: MakeLayer = () =>
    Layer.mergeAll(DynamoDbInboxStore.layerWith({ tableName: table, ensureTable: false }), dynamoApp(appTable)).pipe(
      Layer.provide(dynamoLayer)
    )
  return {
    makeLayer,
    close: () =>
      Effect.runPromise(
        Effect.flatMap(DynamoDb.DynamoDb, (d) =>
          Effect.forEach([table, appTable], (TableName) => d.deleteTable({ TableName }), { discard: true })
        ).pipe(Effect.provide(dynamoLayer), Effect.ignore)
      )
  }
}
