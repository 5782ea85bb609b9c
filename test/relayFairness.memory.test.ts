import * as Layer from "effect/Layer"
import * as MemoryLeaseStore from "../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import { relayFairnessContract } from "./contract/RelayFairnessContract.js"

relayFairnessContract("memory", () => Layer.mergeAll(MemoryOutboxStore.layer, MemoryLeaseStore.layer), {
  sharedPartitions: 200,
  histories: 12
})
