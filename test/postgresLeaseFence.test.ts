/**
 * The PostgreSQL lease fence (SPEC §6 step 5, §13): the shared lease fence tests
 * (test/support/LeaseFenceSuite.ts) over `PostgresLeaseFence`, each test in a fresh schema.
 */
import { inject } from "vitest"
import * as PostgresLeaseFence from "../src/layers/postgres/PostgresLeaseFence.js"
import * as PostgresLeaseStore from "../src/layers/postgres/PostgresLeaseStore.js"
import * as PostgresOutboxStore from "../src/layers/postgres/PostgresOutboxStore.js"
import { leaseFenceSuite } from "./support/LeaseFenceSuite.js"
import { clientLayer, createDatabase } from "./support/PostgresServer.js"

const url = await createDatabase(inject("postgresUrl"), "lease_fence")

leaseFenceSuite({
  name: "PostgreSQL",
  outbox: (schema) => PostgresOutboxStore.layerWith({ schema }),
  leases: (schema) => PostgresLeaseStore.layerWith({ schema }),
  fence: (schema) => PostgresLeaseFence.layerWith({ schema }),
  client: () => clientLayer(url)
})
