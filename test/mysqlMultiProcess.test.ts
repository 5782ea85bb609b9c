/**
 * Several OS processes drain one MySQL (MariaDB) database at the same time (SPEC §3.5); the test itself
 * is test/support/MultiProcessDrainSuite.ts.
 */
import * as Layer from "effect/Layer"
import { inject } from "vitest"
import * as MysqlOutboxStore from "../src/layers/mysql/MysqlOutboxStore.js"
import { multiProcessDrainSuite } from "./support/MultiProcessDrainSuite.js"
import { clientLayer, createDatabase } from "./support/MysqlServer.js"

multiProcessDrainSuite({
  name: "MySQL",
  shared: "one database",
  worker: "mysql",
  failure: "failure",
  makeTarget: async () => {
    const databaseUrl = await createDatabase(inject("mysqlUrl"), "multiprocess")
    return { location: databaseUrl, layer: Layer.provideMerge(MysqlOutboxStore.layer, clientLayer(databaseUrl)) }
  },
  types: { autoId: "serial PRIMARY KEY", integer: "integer", text: "VARCHAR(255)", number: "DOUBLE" }
})
