import * as Layer from "effect/Layer"
import { inject } from "vitest"
import * as PostgresLeaseStore from "../src/layers/postgres/PostgresLeaseStore.js"
import * as PostgresOutboxStore from "../src/layers/postgres/PostgresOutboxStore.js"
import { relayFairnessContract } from "./contract/RelayFairnessContract.js"
import { clientLayer, createDatabase } from "./support/PostgresServer.js"

// one database for the file; every test uses its own partitions
const url = await createDatabase(inject("postgresUrl"), "relay_fairness")

relayFairnessContract(
  "postgres",
  () => Layer.mergeAll(PostgresOutboxStore.layer, PostgresLeaseStore.layer).pipe(Layer.provide(clientLayer(url))),
  { sharedPartitions: 200, histories: 6, realPauseMillis: 10 }
)
