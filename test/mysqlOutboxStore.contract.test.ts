import * as Layer from "effect/Layer"
import { inject } from "vitest"
import * as MysqlOutboxStore from "../src/layers/mysql/MysqlOutboxStore.js"
import { type ContractLayerOptions, outboxStoreContract } from "./contract/OutboxStoreContract.js"
import { clientLayer, createDatabase } from "./support/MysqlServer.js"

const capabilities = { multiIdAtomic: false } as const

// one database for the file; every test uses its own partitions
const url = await createDatabase(inject("mysqlUrl"), "outbox_contract")

const storeOn = (options: MysqlOutboxStore.MysqlOutboxStoreOptions) => (contract: ContractLayerOptions) =>
  MysqlOutboxStore.layerWith(
    contract.staleClaimAfter === undefined ? options : { ...options, staleClaimAfter: contract.staleClaimAfter }
  ).pipe(Layer.provide(clientLayer(url)))

outboxStoreContract("mysql", storeOn({}), capabilities)
outboxStoreContract("mysql-prefixed", storeOn({ database: "outbox_test", tablePrefix: "t_" }), capabilities)
