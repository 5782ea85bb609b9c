/**
 * Several OS processes drain one PostgreSQL database at the same time (SPEC §3.4); the test itself is
 * test/support/MultiProcessDrainSuite.ts.
 */
import * as Layer from "effect/Layer"
import { inject } from "vitest"
import * as PostgresOutboxStore from "../src/layers/postgres/PostgresOutboxStore.js"
import { multiProcessDrainSuite } from "./support/MultiProcessDrainSuite.js"
import { clientLayer, createDatabase } from "./support/PostgresServer.js"

multiProcessDrainSuite({
  name: "PostgreSQL",
  shared: "one database",
  worker: "postgres",
  failure: "failure",
  makeTarget: async () => {
    const databaseUrl = await createDatabase(inject("postgresUrl"), "multiprocess")
    return { location: databaseUrl, layer: Layer.provideMerge(PostgresOutboxStore.layer, clientLayer(databaseUrl)) }
  },
  types: { autoId: "serial PRIMARY KEY", integer: "integer", text: "text", number: "float8" }
})
