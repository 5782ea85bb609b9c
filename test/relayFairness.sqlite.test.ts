import * as Layer from "effect/Layer"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteLeaseStore from "../src/layers/sqlite/SqliteLeaseStore.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import { relayFairnessContract } from "./contract/RelayFairnessContract.js"

relayFairnessContract(
  "sqlite",
  () =>
    Layer.mergeAll(SqliteOutboxStore.layer, SqliteLeaseStore.layer).pipe(
      Layer.provide(SqliteDatabase.layer({ filename: ":memory:" }))
    ),
  { sharedPartitions: 200, histories: 8 }
)
