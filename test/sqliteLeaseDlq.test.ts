import * as Layer from "effect/Layer"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteLeaseStore from "../src/layers/sqlite/SqliteLeaseStore.js"
import { leaseStoreContract } from "./contract/LeaseStoreContract.js"

const database = () => SqliteDatabase.layer({ filename: ":memory:" })

leaseStoreContract("sqlite", () => SqliteLeaseStore.layer.pipe(Layer.provide(database())))
