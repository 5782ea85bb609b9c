/**
 * Generated histories of the memory store against the pure model: 300 per CI run (the CI budget is ≥ 300 on
 * memory), with and without stale reclaim, concurrent claims checked against a serial order.
 */
import type * as Duration from "effect/Duration"
import * as MemoryOutboxStore from "../../src/layers/memory/MemoryOutboxStore.js"
import { runOutboxHistories } from "./OutboxHistory.js"

const makeLayer = (options: { readonly staleClaimAfter?: Duration.DurationInput }) =>
  options.staleClaimAfter === undefined
    ? MemoryOutboxStore.layer
    : MemoryOutboxStore.layerWith({ staleClaimAfter: options.staleClaimAfter })

runOutboxHistories("memory with stale reclaim", makeLayer, {
  runs: 250,
  staleClaimAfterMillis: 30_000,
  maxSteps: 30,
  concurrentClaims: true
})
runOutboxHistories("memory, version-only reclaim", makeLayer, { runs: 50, maxSteps: 30, concurrentClaims: true })
