/**
 * Opens the stores the CLI works on for the configured backend: outbox, leases, dead letters and the
 * `OutboxInspection` port. One row per backend in {@link backends}; the CLI reads backend facts only
 * through the ports (no backend SQL here). Opening failures become one-line {@link CliFailure}s (exit 2
 * for a path or file that cannot be used, see {@link SqliteFile}).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as MemoryDeadLetterStore from "../../layers/memory/MemoryDeadLetterStore.js"
import * as MemoryInspection from "../../layers/memory/MemoryInspection.js"
import * as MemoryLeaseStore from "../../layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../../layers/memory/MemoryOutboxStore.js"
import type { DeadLetterStore } from "../../services/DeadLetterStore.js"
import type { LeaseStore } from "../../services/LeaseStore.js"
import type { OutboxInspection } from "../../services/OutboxInspection.js"
import type { OutboxStore } from "../../services/OutboxStore.js"
import type { BackendName, CliFailure, StoreSettings } from "./Settings.js"
import * as SqliteFile from "./SqliteFile.js"

/**
 * Everything a CLI command may use.
 *
 * @since 0.1.0
 */
export type Stores = OutboxStore | LeaseStore | DeadLetterStore | OutboxInspection

/**
 * The tables of the SQL outbox store (without prefix) a read-only command needs: without them it says
 * "no such table" and creates nothing. (On SQLite the lease and dead-letter tables of a database that so
 * far only a producer wrote are created by their stores when first opened; the PostgreSQL and MySQL
 * backends run no DDL for a read-only command and need those tables too.)
 *
 * @since 0.1.0
 */
export const storeTables: ReadonlyArray<string> = ["outbox", "outbox_fence"]

/**
 * How a command uses the store: `readOnly` commands (`inspect`, `dlq list`) never create a database;
 * opened for the `relay`, the SQLite and PostgreSQL backends also provide their `WakeSignal`
 * (`SqliteWakeSignal`, `PostgresWakeSignal`), so records committed by other processes wake the idle
 * relay (SPEC §13), and SQLite checkpoints its WAL on a worker thread (`SqliteBackend.databaseOptions`).
 *
 * @since 0.1.0
 */
export interface OpenOptions {
  readonly readOnly: boolean
  /** The relay's stores (the `relay` command). @since 0.2.0 */
  readonly relay?: boolean | undefined
}

/**
 * One backend of the CLI: its stores and inspection for the settings.
 *
 * @since 0.1.0
 */
export type BackendLayer = (settings: StoreSettings, options: OpenOptions) => Layer.Layer<Stores, CliFailure>

const memory: BackendLayer = () => {
  const outbox = MemoryOutboxStore.layer
  const stores = Layer.mergeAll(Layer.provideMerge(MemoryDeadLetterStore.layer, outbox), MemoryLeaseStore.layer)
  return Layer.provideMerge(MemoryInspection.layer, stores)
}

// loaded on demand, like every backend with a driver: `--help` needs none of them installed
const sqlite: BackendLayer = (settings, options) =>
  Layer.unwrapEffect(
    Effect.zipRight(
      SqliteFile.check(settings.sqliteFile, options),
      Effect.map(
        Effect.promise(() => import("./SqliteBackend.js")),
        (backend) => backend.layer(settings, options)
      )
    )
  ).pipe(Layer.catchAllCause((cause) => Layer.fail(SqliteFile.openFailure(settings.sqliteFile, cause))))

// loaded on demand: the AWS SDK is the heaviest import of the CLI
const dynamodb: BackendLayer = (settings, options) =>
  Layer.unwrapEffect(
    Effect.map(
      Effect.promise(() => import("./DynamoBackend.js")),
      (backend) => backend.layer(settings, options)
    )
  ).pipe(Layer.catchAllCause((cause) => Layer.fail(SqliteFile.failure(`dynamodb (${settings.dynamodbTable})`, cause))))

// loaded on demand, like DynamoDB; the URL is never part of a message
const postgres: BackendLayer = (settings, options) =>
  Layer.unwrapEffect(
    Effect.map(
      Effect.promise(() => import("./PostgresBackend.js")),
      (backend) => backend.layer(settings, options)
    )
  ).pipe(
    Layer.catchAllCause((cause) =>
      Layer.fail(SqliteFile.failure(`postgres (schema ${settings.postgresSchema})`, cause))
    )
  )

// loaded on demand, like PostgreSQL; the URL is never part of a message
const mysql: BackendLayer = (settings, options) =>
  Layer.unwrapEffect(
    Effect.map(
      Effect.promise(() => import("./MysqlBackend.js")),
      (backend) => backend.layer(settings, options)
    )
  ).pipe(
    Layer.catchAllCause((cause) =>
      Layer.fail(
        SqliteFile.failure(`mysql (database ${Option.getOrElse(settings.mysqlDatabase, () => "of the URL")})`, cause)
      )
    )
  )

/**
 * The backend table.
 *
 * @since 0.1.0
 */
export const backends: { readonly [B in BackendName]: BackendLayer } = {
  memory,
  sqlite,
  dynamodb,
  postgres,
  mysql
}

/**
 * Whether records committed by other processes wake an idle relay of the backend (SPEC §13): SQLite and
 * PostgreSQL provide their `WakeSignal` when opened for the `relay`; memory has no other process. DynamoDB and
 * MySQL have no change signal: their relays poll, and the CLI bounds the idle pause (`RelayCommand`).
 *
 * @since 0.1.0
 */
export const wakesRelay: { readonly [B in BackendName]: boolean } = {
  memory: true,
  sqlite: true,
  dynamodb: false,
  postgres: true,
  mysql: false
}

/**
 * The stores and inspection for the settings. Building the layer runs the backend's migrations or table
 * checks; failures become a {@link CliFailure}.
 *
 * @since 0.1.0
 */
export const layer = (
  settings: StoreSettings,
  options: OpenOptions = { readOnly: false }
): Layer.Layer<Stores, CliFailure> => backends[settings.backend](settings, options)
