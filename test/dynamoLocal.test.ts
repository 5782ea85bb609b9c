import {
  CreateTableCommand,
  DeleteTableCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  TransactionCanceledException,
  TransactWriteItemsCommand
} from "@aws-sdk/client-dynamodb"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { dynamoEndpoint, makeTestClientConfig, randomTableName } from "./support/DynamoLocal.js"

describe("DynamoDB Local harness", () => {
  const client = new DynamoDBClient(makeTestClientConfig())
  const TableName = randomTableName("harness")

  beforeAll(async () => {
    await client.send(
      new CreateTableCommand({
        TableName,
        BillingMode: "PAY_PER_REQUEST",
        AttributeDefinitions: [{ AttributeName: "pk", AttributeType: "S" }],
        KeySchema: [{ AttributeName: "pk", KeyType: "HASH" }]
      })
    )
  })

  afterAll(async () => {
    await client.send(new DeleteTableCommand({ TableName }))
    client.destroy()
  })

  it("serves on loopback with the SDK env flags set", () => {
    expect(dynamoEndpoint()).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    expect(process.env["AWS_EC2_METADATA_DISABLED"]).toBe("true")
  })

  it("round-trips an item with a consistent read", async () => {
    await client.send(new PutItemCommand({ TableName, Item: { pk: { S: "a" }, n: { N: "1" } } }))
    const got = await client.send(new GetItemCommand({ TableName, Key: { pk: { S: "a" } }, ConsistentRead: true }))
    expect(got.Item).toEqual({ pk: { S: "a" }, n: { N: "1" } })
  })

  it("cancels a transaction whose condition check fails, with reasons in item order", async () => {
    const error = await client
      .send(
        new TransactWriteItemsCommand({
          TransactItems: [
            {
              ConditionCheck: { TableName, Key: { pk: { S: "missing" } }, ConditionExpression: "attribute_exists(pk)" }
            },
            { Put: { TableName, Item: { pk: { S: "b" } } } }
          ]
        })
      )
      .then(
        () => undefined,
        (e: unknown) => e
      )
    expect(error).toBeInstanceOf(TransactionCanceledException)
    const reasons = error instanceof TransactionCanceledException ? error.CancellationReasons : undefined
    expect(reasons?.map((reason) => reason.Code)).toEqual(["ConditionalCheckFailed", "None"])
    const b = await client.send(new GetItemCommand({ TableName, Key: { pk: { S: "b" } }, ConsistentRead: true }))
    expect(b.Item).toBeUndefined()
  })
})
