/**
 * The LeaseStore contract (SPEC §4), written once and run against every backend: one suite per concern
 * (acquire; renew and release; current and whole histories; arguments) under one `describe`.
 *
 * Every test builds a fresh layer from the factory and uses partition keys of its own, so a backend may
 * share one table between tests. Tests run on `TestClock`: expiry happens only through `TestClock.adjust`.
 */
import { describe } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type { LeaseStore } from "../../src/services/LeaseStore.js"
import { acquireSuite } from "./lease/AcquireSuite.js"
import { argumentSuite } from "./lease/ArgumentSuite.js"
import { historySuite } from "./lease/HistorySuite.js"
import { holderSuite } from "./lease/HolderSuite.js"
import type { Run } from "./lease/LeaseSupport.js"

/**
 * Runs the LeaseStore contract suite against the layer built by `makeLayer` (called once per test).
 */
export const leaseStoreContract = (name: string, makeLayer: () => Layer.Layer<LeaseStore, unknown>): void => {
  const run: Run = (self) => Effect.provide(self, makeLayer())
  describe(`LeaseStore contract: ${name}`, () => {
    acquireSuite(run)
    holderSuite(run)
    historySuite(run)
    argumentSuite(run)
  })
}
