import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import { outboxStoreContract } from "./contract/OutboxStoreContract.js"

outboxStoreContract(
  "memory",
  (options) =>
    options.staleClaimAfter === undefined
      ? MemoryOutboxStore.layer
      : MemoryOutboxStore.layerWith({ staleClaimAfter: options.staleClaimAfter }),
  { multiIdAtomic: true }
)
