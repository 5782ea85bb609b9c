import * as Layer from "effect/Layer"
import * as MemoryDeadLetterStore from "../src/layers/memory/MemoryDeadLetterStore.js"
import * as MemoryLeaseStore from "../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import { deadLetterStoreContract } from "./contract/DeadLetterStoreContract.js"
import { leaseStoreContract } from "./contract/LeaseStoreContract.js"

leaseStoreContract("memory", () => MemoryLeaseStore.layer)

deadLetterStoreContract("memory", () => Layer.provideMerge(MemoryDeadLetterStore.layer, MemoryOutboxStore.layer))
