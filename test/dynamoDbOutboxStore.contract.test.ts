/**
 * The shared OutboxStore contract suite on the DynamoDB store (DynamoDB Local), one table for the file.
 */
import * as RecordItem from "../src/layers/dynamodb/RecordItem.js"
import { outboxStoreContract } from "./contract/OutboxStoreContract.js"
import { outboxTableForFile } from "./support/DynamoOutboxTable.js"

const { makeLayer } = outboxTableForFile("outbox-contract")

outboxStoreContract("dynamodb", makeLayer, {
  multiIdAtomic: false,
  maxPayloadBytes: RecordItem.MaxPayloadBytes
})
