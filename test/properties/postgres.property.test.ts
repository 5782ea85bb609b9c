/**
 * Generated histories of the PostgreSQL store against the pure model: one database and one client for
 * the file, a fresh store layer and fresh partition keys per history. Claims lock the partition's fence
 * row, so concurrent claims must match one of the serial orders.
 */
import type * as Duration from "effect/Duration"
import * as Layer from "effect/Layer"
import { afterAll, inject } from "vitest"
import * as PostgresOutboxStore from "../../src/layers/postgres/PostgresOutboxStore.js"
import { createDatabase, sharedClient } from "../support/PostgresServer.js"
import { runOutboxHistories } from "./OutboxHistory.js"

const client = await sharedClient(await createDatabase(inject("postgresUrl"), "histories"))
afterAll(() => client.close())

const makeLayer = (options: { readonly staleClaimAfter?: Duration.DurationInput }) =>
  PostgresOutboxStore.layerWith(
    options.staleClaimAfter === undefined ? {} : { staleClaimAfter: options.staleClaimAfter }
  ).pipe(Layer.provide(client.layer))

runOutboxHistories("postgres with stale reclaim", makeLayer, {
  runs: 50,
  staleClaimAfterMillis: 30_000,
  concurrentClaims: true
})
runOutboxHistories("postgres, version-only reclaim", makeLayer, { runs: 25, concurrentClaims: true })
