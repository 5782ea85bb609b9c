/**
 * The shared `OutboxStore` contract suite (SPEC §2), written once and run against every backend. The
 * tests live by concern in `./outbox/`; a backend's runner calls {@link outboxStoreContract} once.
 */
import { describe } from "@effect/vitest"
import { argumentsContract } from "./outbox/Arguments.js"
import { claimContract } from "./outbox/Claim.js"
import { expireContract } from "./outbox/Expire.js"
import { type ContractCapabilities, makeHarness, type MakeLayer } from "./outbox/Harness.js"
import { persistContract } from "./outbox/Persist.js"
import { readsContract } from "./outbox/Reads.js"
import { settleContract } from "./outbox/Settle.js"

export type { ContractCapabilities, ContractLayerOptions, MakeLayer } from "./outbox/Harness.js"

/**
 * Registers the contract suite for one backend.
 *
 * @param name suite name (also used in partition keys)
 * @param makeLayer builds a fresh store layer for one test
 * @param capabilities where the backend differs within the contract
 */
export const outboxStoreContract = (name: string, makeLayer: MakeLayer, capabilities: ContractCapabilities): void => {
  const harness = makeHarness(name, makeLayer)
  describe(`OutboxStore contract: ${name}`, () => {
    persistContract(harness, capabilities)
    claimContract(harness)
    settleContract(harness, capabilities)
    expireContract(harness)
    readsContract(harness)
    argumentsContract(harness)
  })
}
