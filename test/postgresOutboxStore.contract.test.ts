import * as Layer from "effect/Layer"
import { inject } from "vitest"
import * as PostgresOutboxStore from "../src/layers/postgres/PostgresOutboxStore.js"
import { type ContractLayerOptions, outboxStoreContract } from "./contract/OutboxStoreContract.js"
import { clientLayer, createDatabase } from "./support/PostgresServer.js"

const capabilities = { multiIdAtomic: false } as const

// one database for the file; every test uses its own partitions
const url = await createDatabase(inject("postgresUrl"), "outbox_contract")

const storeOn = (options: PostgresOutboxStore.PostgresOutboxStoreOptions) => (contract: ContractLayerOptions) =>
  PostgresOutboxStore.layerWith(
    contract.staleClaimAfter === undefined ? options : { ...options, staleClaimAfter: contract.staleClaimAfter }
  ).pipe(Layer.provide(clientLayer(url)))

outboxStoreContract("postgres", storeOn({}), capabilities)
// a lowered batch payload limit (the default, 128 MiB, is too large to send in a test): the same check
outboxStoreContract(
  "postgres-prefixed",
  storeOn({ schema: "outbox_test", tablePrefix: "t_", maxBatchPayloadBytes: 64 * 1024 }),
  { ...capabilities, maxPayloadBytes: 64 * 1024 }
)
