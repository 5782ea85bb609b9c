/**
 * Generated histories of the MySQL store (on MariaDB) against the pure model: one database and one client
 * for the file, a fresh store layer and fresh partition keys per history. Claims lock the partition's
 * fence row, so concurrent claims must match one of the serial orders.
 */
import type * as Duration from "effect/Duration"
import * as Layer from "effect/Layer"
import { afterAll, inject } from "vitest"
import * as MysqlOutboxStore from "../../src/layers/mysql/MysqlOutboxStore.js"
import { createDatabase, sharedClient } from "../support/MysqlServer.js"
import { runOutboxHistories } from "./OutboxHistory.js"

const client = await sharedClient(await createDatabase(inject("mysqlUrl"), "histories"))
afterAll(() => client.close())

const makeLayer = (options: { readonly staleClaimAfter?: Duration.DurationInput }) =>
  MysqlOutboxStore.layerWith(
    options.staleClaimAfter === undefined ? {} : { staleClaimAfter: options.staleClaimAfter }
  ).pipe(Layer.provide(client.layer))

runOutboxHistories("mysql with stale reclaim", makeLayer, {
  runs: 50,
  staleClaimAfterMillis: 30_000,
  concurrentClaims: true
})
runOutboxHistories("mysql, version-only reclaim", makeLayer, { runs: 25, concurrentClaims: true })
