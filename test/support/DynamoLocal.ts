/**
 * Helpers for tests that talk to the DynamoDB Local server started by ./globalSetup.ts.
 *
 * One server serves the whole run (shared across test files and workers): give every test file
 * (or test) its own table via `randomTableName`, and delete it when done.
 */
import { randomBytes } from "node:crypto"
import { inject } from "vitest"

export interface TestClientConfig {
  readonly endpoint: string
  readonly region: string
  readonly credentials: {
    readonly accessKeyId: string
    readonly secretAccessKey: string
  }
}

/** The `http://127.0.0.1:<port>` endpoint of this run's DynamoDB Local server. */
export const dynamoEndpoint = (): string => inject("dynamoEndpoint")

/**
 * A `DynamoDBClient` config for DynamoDB Local: explicit region and static dummy credentials
 * (the server runs with `-sharedDb`, so every key/region sees the same tables).
 */
export const makeTestClientConfig = (endpoint: string = dynamoEndpoint()): TestClientConfig => ({
  endpoint,
  region: "us-east-1",
  credentials: { accessKeyId: "local", secretAccessKey: "local" }
})

const tableNamePrefix = /^[A-Za-z0-9_.-]{1,200}$/

/** `<prefix>-<16 random hex chars>`; the prefix must be a valid table-name fragment. */
export const randomTableName = (prefix: string): string => {
  if (!tableNamePrefix.test(prefix)) {
    throw new Error(`randomTableName: invalid prefix ${JSON.stringify(prefix)} (allowed: [A-Za-z0-9_.-]{1,200})`)
  }
  return `${prefix}-${randomBytes(8).toString("hex")}`
}
