import * as MemoryLeaseStore from "../src/layers/memory/MemoryLeaseStore.js"
import { leaseStoreContract } from "./contract/LeaseStoreContract.js"

leaseStoreContract("memory", () => MemoryLeaseStore.layer)
