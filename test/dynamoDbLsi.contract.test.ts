/**
 * The shared OutboxStore contract suite on the DynamoDB store claiming through the local secondary index
 * `ClaimLocalIndex` (DynamoDB Local), one table created with the index for the file.
 */
import * as RecordItem from "../src/layers/dynamodb/RecordItem.js"
import { outboxStoreContract } from "./contract/OutboxStoreContract.js"
import { outboxTableForFile } from "./support/DynamoOutboxTable.js"

const { makeLayer } = outboxTableForFile("outbox-lsi-contract", { localClaimIndex: true })

outboxStoreContract("dynamodb (ClaimLocalIndex)", makeLayer, {
  multiIdAtomic: false,
  maxPayloadBytes: RecordItem.MaxPayloadBytes
})
