/**
 * Soak run of the generated-history property test outside vitest:
 *
 *   npm run soak -- --backend memory --runs 5000 --seed 42 [--steps 60] [--stale-ms 30000]
 *
 * Backends: `memory`, `sqlite` (`:memory:` database per history), `dynamodb` (a DynamoDB Local server
 * started for the run on 127.0.0.1, one table for the run, fresh partitions per history; stale reclaim
 * is always on there), `postgres` (one database and one client for the run, a fresh store layer and fresh
 * partitions per history; on `--postgres-url <url>`, else on a server started for the run on 127.0.0.1),
 * `mysql` (likewise: on `--mysql-url <url>`, else on a MariaDB server started for the run on 127.0.0.1).
 * `--stale-ms 0` runs version-only reclaim (memory, SQLite, PostgreSQL, MySQL). Without `--seed` a
 * random seed is drawn (`OUTBOX_SEED` also sets it). Prints what the histories exercised; on a mismatch
 * prints the seed to replay and exits 1 — the same seed and options replay the same histories.
 *
 * `--inbox` soaks the generated inbox histories instead (SPEC §12):
 * `npm run soak -- --inbox --backend sqlite --runs 10000` (memory, sqlite, postgres, dynamodb).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { randomBytes } from "node:crypto"
import * as MemoryOutboxStore from "../../src/layers/memory/MemoryOutboxStore.js"
import * as SqliteDatabase from "../../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteOutboxStore from "../../src/layers/sqlite/SqliteOutboxStore.js"
import * as DynamoDbOutboxStore from "../../src/layers/dynamodb/DynamoDbOutboxStore.js"
import * as OutboxTable from "../../src/layers/dynamodb/OutboxTable.js"
import * as DynamoDb from "../../src/services/DynamoDb.js"
import type { OutboxStore } from "../../src/services/OutboxStore.js"
import type { ContractLayerOptions } from "../contract/OutboxStoreContract.js"
import { startDynamoLocal } from "../support/globalSetup.js"
import * as PostgresOutboxStore from "../../src/layers/postgres/PostgresOutboxStore.js"
import { createDatabase, sharedClient, startPostgres } from "../support/PostgresServer.js"
import * as MysqlOutboxStore from "../../src/layers/mysql/MysqlOutboxStore.js"
import * as MysqlServer from "../support/MysqlServer.js"
import { checkInboxHistories } from "./InboxHistory.js"
import * as InboxBackends from "./InboxBackends.js"
import { checkOutboxHistories } from "./OutboxHistory.js"

type MakeLayer = (options: ContractLayerOptions) => Layer.Layer<OutboxStore, unknown>

/** A DynamoDB Local server and one outbox table for the whole soak; `close` deletes the table and stops it. */
const dynamoBackend = async (): Promise<{ readonly makeLayer: MakeLayer; readonly close: () => Promise<void> }> => {
  const server = await startDynamoLocal()
  const dynamoLayer = DynamoDb.layer({
    endpoint: server.endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "local", secretAccessKey: "local" }
  })
  const tableName = `outbox-soak-${randomBytes(8).toString("hex")}`
  try {
    await Effect.runPromise(OutboxTable.ensureTable(tableName).pipe(Effect.provide(dynamoLayer)))
  } catch (error) {
    await server.stop()
    throw error
  }
  return {
    // DynamoDB Local's indexes are consistent at once: no index-lag retries (they would sleep on the TestClock)
    makeLayer: (options) =>
      DynamoDbOutboxStore.layerWith({
        tableName,
        ensureTable: false,
        indexLagRetries: 0,
        ...(options.staleClaimAfter !== undefined ? { staleClaimAfter: options.staleClaimAfter } : {})
      }).pipe(Layer.provide(dynamoLayer)),
    close: async () => {
      await Effect.runPromise(
        Effect.flatMap(DynamoDb.DynamoDb, (d) => d.deleteTable({ TableName: tableName })).pipe(
          Effect.provide(dynamoLayer),
          Effect.ignore
        )
      )
      await server.stop()
    }
  }
}

/** A database (on `url`, or on a server started for the soak) and one client for the whole soak. */
const postgresBackend = async (
  url: string | undefined
): Promise<{ readonly makeLayer: MakeLayer; readonly close: () => Promise<void> }> => {
  const server = url === undefined ? await startPostgres() : undefined
  try {
    const client = await sharedClient(await createDatabase(url ?? server?.url ?? "", "soak"))
    return {
      makeLayer: (options) =>
        PostgresOutboxStore.layerWith(
          options.staleClaimAfter === undefined ? {} : { staleClaimAfter: options.staleClaimAfter }
        ).pipe(Layer.provide(client.layer)),
      close: async () => {
        await client.close()
        await server?.stop()
      }
    }
  } catch (error) {
    await server?.stop()
    throw error
  }
}

/** A database (on `url`, or on a MariaDB server started for the soak) and one client for the whole soak. */
const mysqlBackend = async (
  url: string | undefined
): Promise<{ readonly makeLayer: MakeLayer; readonly close: () => Promise<void> }> => {
  const server = url === undefined ? await MysqlServer.startMysql() : undefined
  try {
    const client = await MysqlServer.sharedClient(await MysqlServer.createDatabase(url ?? server?.url ?? "", "soak"))
    return {
      makeLayer: (options) =>
        MysqlOutboxStore.layerWith(
          options.staleClaimAfter === undefined ? {} : { staleClaimAfter: options.staleClaimAfter }
        ).pipe(Layer.provide(client.layer)),
      close: async () => {
        await client.close()
        await server?.stop()
      }
    }
  } catch (error) {
    await server?.stop()
    throw error
  }
}

const backends: Record<string, MakeLayer> = {
  memory: (options) =>
    options.staleClaimAfter === undefined
      ? MemoryOutboxStore.layer
      : MemoryOutboxStore.layerWith({ staleClaimAfter: options.staleClaimAfter }),
  sqlite: (options) =>
    SqliteOutboxStore.layerWith(
      options.staleClaimAfter === undefined ? {} : { staleClaimAfter: options.staleClaimAfter }
    ).pipe(Layer.provide(SqliteDatabase.layer({ filename: ":memory:" })))
}

const argument = (name: string): string | undefined => {
  const index = process.argv.indexOf(`--${name}`)
  return index >= 0 ? process.argv[index + 1] : undefined
}

const integer = (name: string, fallback: number | undefined): number | undefined => {
  const raw = argument(name)
  if (raw === undefined) return fallback
  const value = Number(raw)
  if (!Number.isSafeInteger(value)) throw new Error(`--${name} must be an integer, got ${raw}`)
  return value
}

/**
 * `--inbox`: generated inbox histories (./InboxHistory.ts) instead of outbox ones, on `memory`, `sqlite`,
 * `postgres` or `dynamodb` (servers started for the run as above).
 */
const inboxSoak = async (backend: string, runs: number, seed: number | undefined, maxSteps: number) => {
  const dynamo = backend === "dynamodb" ? await startDynamoLocal() : undefined
  const pgServer = backend === "postgres" && argument("postgres-url") === undefined ? await startPostgres() : undefined
  const started = process.hrtime.bigint()
  const closers: Array<() => Promise<unknown>> = []
  try {
    const makeLayer =
      backend === "memory"
        ? InboxBackends.memory
        : backend === "sqlite"
          ? InboxBackends.sqlite
          : backend === "postgres"
            ? await InboxBackends.postgres(
                await createDatabase(argument("postgres-url") ?? pgServer?.url ?? "", "inbox_soak")
              ).then((b) => (closers.push(b.close), b.makeLayer))
            : await InboxBackends.dynamodb({
                endpoint: dynamo?.endpoint ?? "",
                region: "us-east-1",
                credentials: { accessKeyId: "local", secretAccessKey: "local" }
              }).then((b) => (closers.push(b.close), b.makeLayer))
    const result = await checkInboxHistories(`inbox soak ${backend}`, makeLayer, {
      runs,
      maxSteps,
      transactionalWrites: backend !== "memory",
      ...(seed !== undefined ? { seed } : {})
    })
    const seconds = Number(process.hrtime.bigint() - started) / 1e9
    console.log(
      `inbox backend ${backend}: ${result.stats.histories} histories (seed ${result.seed}) agree with the model in ${seconds.toFixed(1)} s`
    )
    console.log(JSON.stringify(result.stats, null, 2))
  } finally {
    for (const close of closers) await close()
    await dynamo?.stop()
    await pgServer?.stop()
  }
}

const main = async (): Promise<void> => {
  const backend = argument("backend") ?? "memory"
  if (process.argv.includes("--inbox")) {
    if (!["memory", "sqlite", "postgres", "dynamodb"].includes(backend)) throw new Error(`unknown backend ${backend}`)
    return inboxSoak(backend, integer("runs", 1000) ?? 1000, integer("seed", undefined), integer("steps", 30) ?? 30)
  }
  const known = [...Object.keys(backends), "dynamodb", "postgres", "mysql"]
  if (!known.includes(backend)) throw new Error(`unknown backend ${backend} (known: ${known.join(", ")})`)
  const runs = integer("runs", 1000) ?? 1000
  const seed = integer("seed", undefined)
  const maxSteps = integer("steps", 40) ?? 40
  const staleMs = integer("stale-ms", 30_000) ?? 30_000
  if (backend === "dynamodb" && staleMs <= 0)
    throw new Error("--stale-ms must be > 0 on dynamodb (stale reclaim is always on)")
  const dynamo = backend === "dynamodb" ? await dynamoBackend() : undefined
  const postgres = backend === "postgres" ? await postgresBackend(argument("postgres-url")) : undefined
  const mysql = backend === "mysql" ? await mysqlBackend(argument("mysql-url")) : undefined
  const makeLayer = dynamo?.makeLayer ?? postgres?.makeLayer ?? mysql?.makeLayer ?? backends[backend]
  if (makeLayer === undefined) throw new Error(`unknown backend ${backend}`)
  const started = process.hrtime.bigint()
  try {
    const result = await checkOutboxHistories(`soak ${backend}`, makeLayer, {
      runs,
      maxSteps,
      ...(seed !== undefined ? { seed } : {}),
      ...(staleMs > 0 ? { staleClaimAfterMillis: staleMs } : {}),
      // memory, SQLite, PostgreSQL and MySQL claim atomically, so concurrent claims must match a serial order; DynamoDB
      // claims record by record (concurrent claims are checked by its contract and fault suites)
      concurrentClaims: backend !== "dynamodb"
    })
    const seconds = Number(process.hrtime.bigint() - started) / 1e9
    console.log(
      `backend ${backend}: ${result.runs} histories (seed ${result.seed}) agree with the model in ${seconds.toFixed(1)} s`
    )
    console.log(JSON.stringify(result.stats, null, 2))
  } finally {
    await dynamo?.close()
    await postgres?.close()
    await mysql?.close()
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : String(error))
  process.exit(1)
})
