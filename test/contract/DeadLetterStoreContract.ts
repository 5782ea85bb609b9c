/**
 * The DeadLetterStore contract (SPEC §5), written once and run against every backend: one suite per
 * concern (single entries; selections; redrive; arguments) under one `describe`.
 *
 * Every test builds a fresh layer (dead-letter store plus the backend's outbox store) from the factory.
 * Tests keep to entries of their own: unique entry ids, route ids and partition keys, and a time
 * window of their own for filters that do not name a route, so a backend may share one table between
 * tests. Only the purge test works below every other test's window (purge spans all routes). Tests run
 * on `TestClock`.
 */
import { describe } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type { DeadLetterStore } from "../../src/services/DeadLetterStore.js"
import type { OutboxStore } from "../../src/services/OutboxStore.js"
import { argumentSuite } from "./deadletter/ArgumentSuite.js"
import type { Run } from "./deadletter/DeadLetterSupport.js"
import { entrySuite } from "./deadletter/EntrySuite.js"
import { redriveSuite } from "./deadletter/RedriveSuite.js"
import { selectionSuite } from "./deadletter/SelectionSuite.js"

/**
 * Runs the DeadLetterStore contract suite against the layer built by `makeLayer` (called once per
 * test). The layer provides the dead-letter store and the outbox store it redrives into.
 */
export const deadLetterStoreContract = (
  name: string,
  makeLayer: () => Layer.Layer<DeadLetterStore | OutboxStore, unknown>
): void => {
  const run: Run = (self) => Effect.provide(self, makeLayer())
  describe(`DeadLetterStore contract: ${name}`, () => {
    entrySuite(run)
    selectionSuite(run)
    redriveSuite(run)
    argumentSuite(run)
  })
}
