import type * as Duration from "effect/Duration"
import * as Layer from "effect/Layer"
import * as SqliteDatabase from "../../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteOutboxStore from "../../src/layers/sqlite/SqliteOutboxStore.js"
import { runOutboxHistories } from "./OutboxHistory.js"

/** A fresh `:memory:` database per history. */
const makeLayer = (options: { readonly staleClaimAfter?: Duration.DurationInput }) =>
  SqliteOutboxStore.layerWith(
    options.staleClaimAfter === undefined ? {} : { staleClaimAfter: options.staleClaimAfter }
  ).pipe(Layer.provide(SqliteDatabase.layer({ filename: ":memory:" })))

runOutboxHistories("sqlite :memory: with stale reclaim", makeLayer, { runs: 200, staleClaimAfterMillis: 30_000 })
runOutboxHistories("sqlite :memory:, version-only reclaim", makeLayer, { runs: 100 })

// Regression, seed 621645656: a replaceTerminal batch reused the id of the terminal record it replaced
// for a record of another identity; the store accepted it, the model (and memory store) reject it with
// InvalidRecord against the state before the batch.
runOutboxHistories("sqlite :memory: regression seed 621645656", makeLayer, {
  runs: 88,
  seed: 621645656,
  staleClaimAfterMillis: 30_000
})
