import * as Layer from "effect/Layer"
import * as DynamoDbLeaseStore from "../src/layers/dynamodb/DynamoDbLeaseStore.js"
import { relayFairnessContract } from "./contract/RelayFairnessContract.js"
import { outboxTableForFile } from "./support/DynamoOutboxTable.js"

const { dynamoLayer, makeLayer, tableName } = outboxTableForFile("relay-fairness")

// DynamoDB Local runs ~290 transactions/s: smaller histories than the other backends
relayFairnessContract(
  "dynamodb",
  () =>
    Layer.mergeAll(
      makeLayer({}),
      DynamoDbLeaseStore.layerWith({ tableName, ensureTable: false }).pipe(Layer.provide(dynamoLayer))
    ),
  { sharedPartitions: 200, histories: 3 }
)
