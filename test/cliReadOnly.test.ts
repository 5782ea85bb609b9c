/**
 * Read-only commands (`inspect`, `dlq list`, `dashboard`) never create anything, on every backend: a
 * mistyped SQLite file, an existing SQLite file without the outbox tables, a PostgreSQL schema that does
 * not exist, a MySQL database that does not exist, a DynamoDB table that does not exist. Each says "no such
 * file/schema/database/table" on one line and exits 2; afterwards the file, schema, database or table still
 * does not exist (checked against the real servers). On PostgreSQL and MySQL they run no DDL at all: a
 * role or user with only `SELECT` (and `USAGE`) runs `inspect` and `dlq list`.
 */
import { DynamoDBClient, ListTablesCommand } from "@aws-sdk/client-dynamodb"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, inject } from "vitest"
import { buildCli } from "./support/CliBundle.js"
import { cliRunner } from "./support/CliProcess.js"
import { dynamoEndpoint, makeTestClientConfig, randomTableName } from "./support/DynamoLocal.js"
import * as MysqlServer from "./support/MysqlServer.js"
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

/** Lines for `enqueue`: two records of partition p1, one of p2. */
const enqueueInput = ["1", "2", "3"]
  .map((n) =>
    JSON.stringify({ partitionKey: n === "3" ? "p2" : "p1", envelopeId: `env-${n}`, bindingId: "b", payload: { n } })
  )
  .join("\n")

const InspectReport = Schema.parseJson(
  Schema.Struct({ partitions: Schema.Array(Schema.Struct({ partition: Schema.String, pending: Schema.Number })) })
)

/** `inspect --json` and `dlq list` with `store` succeed and see the records {@link enqueueInput} wrote. */
const readsAll = async (store: ReadonlyArray<string>) => {
  const inspected = await run(["inspect", ...store, "--json"])
  expect(inspected.code, inspected.stderr).toBe(0)
  const report = Schema.decodeUnknownSync(InspectReport)(inspected.stdout)
  expect(report.partitions.map((p) => [p.partition, p.pending])).toEqual([
    ["p1", 2],
    ["p2", 1]
  ])
  const listed = await run(["dlq", "list", ...store])
  expect(listed.code, listed.stderr).toBe(0)
}

/** A random suffix for server-wide names (roles, users, databases). */
const suffix = () => randomBytes(4).toString("hex")

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

  it(
    "PostgreSQL: a role with only USAGE and SELECT runs inspect and dlq list (no DDL, no migration)",
    { timeout: 180_000 },
    async () => {
      const url = await createDatabase(inject("postgresUrl"), "readonly_role")
      const admin = ["--backend", "postgres", "--postgres-url", url, "--postgres-schema", "shop"]
      const enqueued = await run(["enqueue", ...admin], enqueueInput)
      expect(enqueued.code, enqueued.stderr).toBe(0)
      const role = `reader_${suffix()}`
      const client = clientLayer(url, 1)
      await query(client, [
        `CREATE ROLE ${role} LOGIN`,
        `GRANT USAGE ON SCHEMA shop TO ${role}`,
        `GRANT SELECT ON ALL TABLES IN SCHEMA shop TO ${role}`
      ])
      const tablesBefore = await query(client, ["SELECT tablename FROM pg_tables WHERE schemaname = 'shop' ORDER BY 1"])
      const readerUrl = new URL(url)
      readerUrl.username = role
      await readsAll(["--backend", "postgres", "--postgres-url", readerUrl.toString(), "--postgres-schema", "shop"])
      // the role cannot create a schema: a missing one is still the clear message, and stays missing
      await refusedEverywhere(
        ["--backend", "postgres", "--postgres-url", readerUrl.toString(), "--postgres-schema", "nosuchschema"],
        "no such schema: nosuchschema"
      )
      expect(await query(client, ["SELECT tablename FROM pg_tables WHERE schemaname = 'shop' ORDER BY 1"])).toEqual(
        tablesBefore
      )
    }
  )

  it(
    "MySQL: a database that does not exist stays absent; one without the tables gets none",
    { timeout: 180_000 },
    async () => {
      const url = await MysqlServer.createDatabase(inject("mysqlUrl"), "readonly")
      const store = ["--backend", "mysql", "--mysql-url", url]
      const client = MysqlServer.clientLayer(url, 1)
      const missing = `nosuchdb_${suffix()}`
      await refusedEverywhere([...store, "--mysql-database", missing], `no such database: ${missing}`)
      // the URL's own database missing: the server refuses the connection; the same message
      const missingUrl = new URL(url)
      missingUrl.pathname = `/${missing}`
      await refusedEverywhere(
        ["--backend", "mysql", "--mysql-url", missingUrl.toString()],
        `no such database: ${missing}`
      )
      expect(
        await query(client, [`SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '${missing}'`])
      ).toEqual([])
      // an existing database without the tables (the URL's): "no such table", and still no table
      const database = new URL(url).pathname.slice(1)
      await refusedEverywhere(store, `no such table: ${database}.outbox`)
      expect(
        await query(client, [`SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = '${database}'`])
      ).toEqual([])
    }
  )

  it(
    "MySQL: a user with only SELECT runs inspect and dlq list (no DDL, no migration)",
    { timeout: 180_000 },
    async () => {
      const url = await MysqlServer.createDatabase(inject("mysqlUrl"), "readonly_user")
      const enqueued = await run(["enqueue", "--backend", "mysql", "--mysql-url", url], enqueueInput)
      expect(enqueued.code, enqueued.stderr).toBe(0)
      const database = new URL(url).pathname.slice(1)
      const user = `reader_${suffix()}`
      const client = MysqlServer.clientLayer(url, 1)
      await query(client, [
        `CREATE USER '${user}'@'127.0.0.1'`,
        `GRANT SELECT ON \`${database}\`.* TO '${user}'@'127.0.0.1'`
      ])
      const listTables = `SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = '${database}' ORDER BY 1`
      const tablesBefore = await query(client, [listTables])
      const readerUrl = new URL(url)
      readerUrl.username = user
      await readsAll(["--backend", "mysql", "--mysql-url", readerUrl.toString()])
      expect(await query(client, [listTables])).toEqual(tablesBefore)
      // the user cannot see (or create) another database: the clear message, nothing created
      const missing = `nosuchdb_${suffix()}`
      await refusedEverywhere(
        ["--backend", "mysql", "--mysql-url", readerUrl.toString(), "--mysql-database", missing],
        `no such database: ${missing}`
      )
    }
  )

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
