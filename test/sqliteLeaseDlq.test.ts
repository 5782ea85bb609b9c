import * as Layer from "effect/Layer"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteDeadLetterStore from "../src/layers/sqlite/SqliteDeadLetterStore.js"
import * as SqliteLeaseStore from "../src/layers/sqlite/SqliteLeaseStore.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import { deadLetterStoreContract } from "./contract/DeadLetterStoreContract.js"
import { leaseStoreContract } from "./contract/LeaseStoreContract.js"

const database = () => SqliteDatabase.layer({ filename: ":memory:" })

leaseStoreContract("sqlite", () => SqliteLeaseStore.layer.pipe(Layer.provide(database())))

// A small delete chunk so that deleteWhere/purge page through several statements.
deadLetterStoreContract("sqlite", () =>
  SqliteDeadLetterStore.layerWith({ deleteChunk: 64 }).pipe(
    Layer.provideMerge(SqliteOutboxStore.layer),
    Layer.provide(database())
  )
)
