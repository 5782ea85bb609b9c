/**
 * The PostgreSQL `OutboxStore` (SPEC §3.4), on `@effect/sql-pg`: provide a `PgClient`, e.g.
 * `PgClient.layer({ url: Redacted.make("postgres://…") })` from `@effect/sql-pg/PgClient` (it provides
 * both `PgClient` and `SqlClient`).
 *
 * - Migrations run at layer start, once per database, under an advisory lock (several processes may start
 *   at once).
 * - Persist joins an enclosing `sql.withTransaction` on the same client (R-PERSIST-6); with `notify` on it
 *   `pg_notify`s the partition keys on commit (`PostgresWakeSignal`).
 * - Claim and expire are one transaction each, fenced by the partition's locked fence row (R-CLAIM-2,
 *   R-EXP-1); claims select through `ClaimOrder` (R-CLAIM-4/5/6).
 * - Complete/release with several ids apply the matching ones and fail naming the rest (R-DONE-3).
 * - Serialization failures and deadlocks are retried; a claim still failing so is `TransactionConflict`,
 *   any other SQL failure `StoreUnavailable`; an undecodable row is `CorruptRecord`.
 * - The payloads of one persist batch together may hold at most `maxBatchPayloadBytes` (default 128 MiB:
 *   they travel hex-encoded in one statement, and a larger one would fail in the driver as
 *   `StoreUnavailable`); a batch over it is `InvalidRecord` naming the record that crosses it, checked
 *   before anything is sent (R-PERSIST-5).
 * - Terminal records are swept after `retention`, at most once per `sweepInterval`; fence rows stay.
 * - Stale reclaim (R-CLAIM-6) only when `staleClaimAfter` is given, against the claiming process's clock.
 *
 * Design notes: docs/design/postgres.md, docs/design/sql.md.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as SqlClock from "../sql/SqlClock.js"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import { InvalidConfiguration, InvalidRecord, StoreUnavailable, TransactionConflict } from "../../domain/OutboxError.js"
import {
  type Backend,
  make as makeStore,
  notClaimedBy,
  OutboxStore,
  type StoreOptions,
  validateStoreOptions
} from "../../services/OutboxStore.js"
import * as SqlDialect from "../sql/SqlDialect.js"
import * as SqlOutboxStatements from "../sql/SqlOutboxStatements.js"
import * as SqlServerBackend from "../sql/SqlServerBackend.js"
import * as SqlSweep from "../sql/SqlSweep.js"
import * as PostgresClaim from "./PostgresClaim.js"
import * as PostgresOutboxSchema from "./PostgresOutboxSchema.js"
import * as PostgresPersist from "./PostgresPersist.js"
import * as PostgresTransaction from "./PostgresTransaction.js"

/**
 * Options of the PostgreSQL outbox store.
 *
 * @since 0.1.0
 */
export interface PostgresOutboxStoreOptions extends StoreOptions, SqlSweep.SweepOptions {
  /** Schema of the tables (created when missing; letters, digits, `_`). Default `public`. */
  readonly schema?: string | undefined
  /** Prefix of every table and index name (letters, digits, `_`). Default none. */
  readonly tablePrefix?: string | undefined
  /** `pg_notify` the store's channel on commit of a persist (default true; see `PostgresWakeSignal`). */
  readonly notify?: boolean | undefined
  /** Most payload bytes of one persist batch together (default {@link MaxBatchPayloadBytes}). */
  readonly maxBatchPayloadBytes?: number | undefined
  /**
   * Run the migrations when the store is built (default true). `false` runs no DDL at all and takes no
   * migration lock: the tables must exist already (read-only tools, roles without CREATE).
   */
  readonly migrate?: boolean | undefined
}

/**
 * The default limit of the payloads of one persist batch together: 128 MiB. The batch is one `unnest`
 * insert whose `bytea[]` parameter the driver writes as one hex string (twice the bytes), and a string
 * past about 512 MiB cannot be built at all.
 *
 * @since 0.1.0
 */
export const MaxBatchPayloadBytes = 128 * 1024 * 1024

const CountRows = Schema.Array(Schema.Struct({ n: PostgresOutboxSchema.BigIntColumn }))

/**
 * Runs migrations (a list of named statement lists) once per database, in one transaction holding an
 * advisory lock on the schema and one on `lockKey`, recording them in `table` under `schema` (both
 * created when missing).
 * Shared by the PostgreSQL stores.
 *
 * @since 0.1.0
 */
export const migrate = (
  tx: PostgresTransaction.Transactions,
  options: {
    readonly lockKey: string
    readonly schema: string
    readonly table: string
    readonly migrations: ReadonlyArray<readonly [string, ReadonlyArray<string>]>
  }
): Effect.Effect<void, SqlError | StoreUnavailable> =>
  tx.transact((conn) =>
    Effect.gen(function* () {
      // the schema lock first: every store of the schema creates it, and concurrent CREATE SCHEMA IF NOT
      // EXISTS statements collide
      yield* tx.run(conn, "SELECT pg_advisory_xact_lock(hashtext($1))", [`effect-outbox:schema:${options.schema}`])
      yield* tx.run(conn, "SELECT pg_advisory_xact_lock(hashtext($1))", [options.lockKey])
      yield* tx.run(conn, `CREATE SCHEMA IF NOT EXISTS "${options.schema}"`, [])
      yield* tx.run(
        conn,
        `CREATE TABLE IF NOT EXISTS ${options.table} (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
        []
      )
      const applied = new Set(
        (yield* decodeRows(
          "migrate",
          Schema.Array(Schema.Struct({ name: Schema.String }))
        )(yield* tx.run(conn, `SELECT name FROM ${options.table}`, []))).map((row) => row.name)
      )
      for (const [name, statements] of options.migrations) {
        if (applied.has(name)) continue
        for (const statement of statements) yield* tx.run(conn, statement, [])
        yield* tx.run(conn, `INSERT INTO ${options.table} (name) VALUES ($1)`, [name])
      }
    })
  )

/**
 * Runs the migrations of a one-table store (names from `PostgresOutboxSchema.storeTableNames`) with
 * {@link migrate}, on the `SqlClient` in context.
 *
 * @since 0.1.0
 */
export const migrateStore = (
  names: PostgresOutboxSchema.StoreTableNames,
  migrations: ReadonlyArray<readonly [string, ReadonlyArray<string>]>
): Effect.Effect<void, StoreUnavailable, SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    migrate(PostgresTransaction.make(sql), {
      lockKey: names.lock,
      schema: names.schema,
      table: names.migrations,
      migrations
    })
  ).pipe(StoreUnavailable.refailTag("SqlError", "migrate"))

/**
 * Decodes result rows with a schema; a mismatch is `StoreUnavailable` naming the operation.
 *
 * @since 0.1.0
 */
export const decodeRows = PostgresClaim.decodeRows

/**
 * Builds the PostgreSQL outbox store on the `SqlClient` in context, running the migrations first.
 *
 * @since 0.1.0
 */
export const make = (
  options: PostgresOutboxStoreOptions = {}
): Effect.Effect<OutboxStore["Type"], StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const names = yield* PostgresOutboxSchema.tableNames(
      "PostgresOutboxStore",
      options.schema ?? "public",
      options.tablePrefix ?? ""
    )
    const { retentionMillis, staleClaimAfterMillis: staleMillis } = yield* validateStoreOptions(
      "PostgresOutboxStore",
      options
    )
    const notify = options.notify ?? true

    const tx = PostgresTransaction.make(sql)
    const { run } = tx
    if (options.migrate !== false) {
      yield* migrate(tx, {
        lockKey: names.migrationLock,
        schema: names.schema,
        table: names.migrations,
        migrations: PostgresOutboxSchema.migrations(names)
      }).pipe(StoreUnavailable.refailTag("SqlError", "migrate"))
    }

    const st = PostgresOutboxSchema.statements(names, { staleReclaim: staleMillis !== undefined })
    const bind = SqlOutboxStatements.binds(SqlDialect.postgres)
    const ctx: PostgresClaim.StoreContext = { run, st, bind, staleMillis }
    const select = <A, I>(
      operation: string,
      schema: Schema.Schema<A, I>,
      conn: Connection,
      text: string,
      params: ReadonlyArray<unknown>
    ) => PostgresClaim.select(ctx, operation, schema, conn, text, params)
    const persistPath = PostgresPersist.make(ctx, notify ? names.channel : undefined)
    const claimIn = PostgresClaim.makeClaim(ctx)
    const maybeSweep = yield* SqlSweep.make("postgres", retentionMillis, options, (cutoff, chunk) =>
      tx.standalone((conn) => Effect.map(run(conn, st.sweep, [cutoff, chunk]), (rows) => rows.length))
    )

    const maxBatchPayloadBytes = options.maxBatchPayloadBytes ?? MaxBatchPayloadBytes
    if (!Number.isSafeInteger(maxBatchPayloadBytes) || maxBatchPayloadBytes < 1) {
      return yield* new InvalidConfiguration({
        component: "PostgresOutboxStore",
        problems: ["maxBatchPayloadBytes must be a positive integer"]
      })
    }
    /** The first record whose payload takes the batch over the limit, as `InvalidRecord`. */
    const oversize = (
      batch: ReadonlyArray<{ readonly id: string; readonly partitionKey: string; readonly payload: Uint8Array }>
    ) => {
      let total = 0
      for (let index = 0; index < batch.length; index++) {
        const record = batch[index]
        if (record === undefined) continue
        total += record.payload.length
        if (total > maxBatchPayloadBytes) {
          return new InvalidRecord({
            index,
            recordId: record.id,
            partitionKey: record.partitionKey,
            reason:
              index === 0 || record.payload.length > maxBatchPayloadBytes
                ? `payload is ${record.payload.length} bytes, over PostgreSQL's limit of ${maxBatchPayloadBytes} bytes per persist`
                : `payloads of the batch up to this record are ${total} bytes, over PostgreSQL's limit of ${maxBatchPayloadBytes} bytes per persist; persist smaller batches`
          })
        }
      }
      return undefined
    }

    const persist: Backend["persist"] = (batch, { replaceTerminal }) => {
      const tooLarge = oversize(batch)
      if (tooLarge !== undefined) return Effect.fail(tooLarge)
      return tx
        .transact((conn) => persistPath.persistIn(conn, batch, replaceTerminal))
        .pipe(StoreUnavailable.refailTag("SqlError", "persist", batch[0]?.partitionKey))
    }

    const claim: Backend["claim"] = (partitionKey, token, limit) =>
      tx
        .transact((conn) => claimIn(conn, partitionKey, token, limit))
        .pipe(
          Effect.catchIf(PostgresOutboxSchema.isConflict, (cause) =>
            Effect.fail(new TransactionConflict({ partitionKey, operation: "claim", cause }))
          ),
          StoreUnavailable.refailTag("SqlError", "claim", partitionKey),
          Effect.zipLeft(maybeSweep)
        )

    const settle = (operation: "complete" | "release", ids: ReadonlyArray<string>, token: LeaseToken.LeaseTokenLike) =>
      Effect.gen(function* () {
        const unique = SqlOutboxStatements.withoutRepeats(ids)
        const now = yield* SqlClock.nowMillis
        const matched = yield* tx.standalone((conn) =>
          operation === "complete"
            ? select(operation, PostgresClaim.IdRows, conn, st.complete, bind.complete(unique, token, now))
            : select(operation, PostgresClaim.IdRows, conn, st.release, bind.release(unique, token))
        )
        const done = new Set(matched.map((row) => row.id))
        if (done.size === unique.length) return
        return yield* notClaimedBy(
          operation,
          token,
          ids.filter((id) => !done.has(id))
        )
      }).pipe(StoreUnavailable.refailTag("SqlError", operation))

    return makeStore(
      SqlServerBackend.make({
        name: "postgres",
        validate: PostgresOutboxSchema.textProblem,
        persist,
        claim,
        /**
         * Completes the ids claimed by the token in one statement, then fails with `StaleFencingToken`
         * naming the ids that were not: with several ids the matching ones stay completed.
         */
        complete: (ids, token) => settle("complete", ids, token),
        /** Releases like {@link complete} completes: matching ids stay released when others mismatch. */
        release: (ids, token) => settle("release", ids, token),
        tx,
        statements: st,
        fence: (conn, operation, partitionKey, token) => PostgresClaim.fence(ctx, conn, operation, partitionKey, token),
        expireRows: (conn, params) => Effect.map(run(conn, st.expire, params), (rows) => rows.length),
        records: (conn, text, params) => PostgresClaim.records(ctx, conn, text, params),
        select,
        countRows: CountRows
      })
    )
  })

/**
 * The PostgreSQL outbox store with the given options (`schema`, `tablePrefix`, `staleClaimAfter`,
 * `retention`, `sweepInterval`, `notify`). Requires a `SqlClient` (a `PgClient`); runs the migrations
 * when built.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: PostgresOutboxStoreOptions
): Layer.Layer<OutboxStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Layer.effect(OutboxStore, make(options))

/**
 * The PostgreSQL outbox store with default options (schema `public`, no prefix, no stale reclaim, 1 hour
 * retention, notify on persist).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<OutboxStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> = layerWith(
  {}
)
