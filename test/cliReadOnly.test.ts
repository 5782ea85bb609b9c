/**
 * Read-only commands (`inspect`, `dlq list`, `dashboard`) never create anything, on every backend: a
 * mistyped SQLite file, an existing SQLite file without the outbox tables, a PostgreSQL schema that does
 * not exist, a DynamoDB table that does not exist. Each says "no such file/schema/table" on one line and
 * exits 2; afterwards the file, schema or table still does not exist (checked against the real servers).
 */
import { DynamoDBClient, ListTablesCommand } from "@aws-sdk/client-dynamodb"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, inject } from "vitest"
import { buildCli } from "./support/CliBundle.js"
import { cliRunner } from "./support/CliProcess.js"
import { dynamoEndpoint, makeTestClientConfig, randomTableName } from "./support/DynamoLocal.js"
import { clientLayer, createDatabase } from "./support/PostgresServer.js"

/** Runs SQL statements on a client layer, returning the rows of the last one. */
const query = <E>(client: Layer.Layer<SqlClient.SqlClient, E>, statements: ReadonlyArray<string>) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      let rows: ReadonlyArray<unknown> = []
      for (const statement of statements) rows = yield* sql.unsafe(statement)
      return rows
    }).pipe(Effect.provide(client), Effect.scoped)
  )

const dynamoEnv = {
  AWS_ACCESS_KEY_ID: "local",
  AWS_SECRET_ACCESS_KEY: "local",
  AWS_EC2_METADATA_DISABLED: "true",
  AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true"
}

const bundle = await buildCli()
afterAll(() => bundle.remove())
const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-cli-readonly-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))
const { run } = cliRunner(bundle, directory)

/** The read-only commands, each with the store arguments appended. */
const readOnlyCommands: ReadonlyArray<ReadonlyArray<string>> = [
  ["inspect"],
  ["dlq", "list"],
  ["dashboard", "--http-port", "0"]
]

/** Runs every read-only command with `store`; each must fail on one line containing `expected`, exit 2. */
const refusedEverywhere = async (store: ReadonlyArray<string>, expected: string, env: Record<string, string> = {}) => {
  for (const command of readOnlyCommands) {
    const result = await run([...command, ...store], "", env)
    const what = command.join(" ")
    expect(result.code, `${what}: ${result.stderr}`).toBe(2)
    const lines = result.stderr.split("\n").filter(Boolean)
    expect(lines, what).toHaveLength(1)
    expect(lines[0], what).toContain(expected)
  }
}

describe("read-only commands create nothing", () => {
  it("SQLite: a missing file stays missing; a file without the tables gets none", { timeout: 180_000 }, async () => {
    const missing = path.join(directory, "typo", "outbox.db")
    await refusedEverywhere(["--sqlite-file", missing], "no such database file")
    expect(fs.existsSync(path.dirname(missing))).toBe(false)

    const empty = path.join(directory, "empty.db")
    const sqlite = SqliteClient.layer({ filename: empty })
    await query(sqlite, ["CREATE TABLE orders (id TEXT PRIMARY KEY)"])
    await refusedEverywhere(["--sqlite-file", empty], "no such table: outbox, outbox_fence")
    const tables = await query(sqlite, ["SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"])
    expect(tables).toEqual([{ name: "orders" }])
  })

  it("PostgreSQL: a schema that does not exist stays absent", { timeout: 180_000 }, async () => {
    const url = await createDatabase(inject("postgresUrl"), "readonly")
    const store = ["--backend", "postgres", "--postgres-url", url]
    await refusedEverywhere([...store, "--postgres-schema", "nosuchschema"], "no such schema: nosuchschema")
    const client = clientLayer(url, 1)
    expect(await query(client, ["SELECT nspname FROM pg_namespace WHERE nspname = 'nosuchschema'"])).toEqual([])
    // an existing schema without the tables: "no such table", and still no table
    await query(client, ["CREATE SCHEMA shop"])
    await refusedEverywhere([...store, "--postgres-schema", "shop"], "no such table: shop.outbox")
    expect(await query(client, ["SELECT tablename FROM pg_tables WHERE schemaname = 'shop'"])).toEqual([])
  })

  it("DynamoDB: a table that does not exist is not created", { timeout: 180_000 }, async () => {
    const table = randomTableName("readonly-typo")
    const deadLetters = randomTableName("readonly-typo-dlq")
    await refusedEverywhere(
      [
        "--backend",
        "dynamodb",
        "--dynamodb-endpoint",
        dynamoEndpoint(),
        "--dynamodb-table",
        table,
        "--dynamodb-dlq-table",
        deadLetters
      ],
      `no such table: ${table}`,
      dynamoEnv
    )
    const client = new DynamoDBClient(makeTestClientConfig())
    try {
      const listed = await client.send(new ListTablesCommand({}))
      expect(listed.TableNames ?? []).not.toContain(table)
      expect(listed.TableNames ?? []).not.toContain(deadLetters)
    } finally {
      client.destroy()
    }
  })
})
