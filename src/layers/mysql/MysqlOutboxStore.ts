/**
 * The MySQL / MariaDB `OutboxStore` (SPEC §3.5), on `@effect/sql-mysql2`: provide a `MysqlClient`, e.g.
 * `MysqlClient.layer({ url: Redacted.make("mysql://…") })` from `@effect/sql-mysql2/MysqlClient` (it
 * provides both `MysqlClient` and `SqlClient`). Written to MySQL 8 semantics (no `RETURNING`), verified
 * against MariaDB 10.11.
 *
 * - Migrations run at layer start, once per database and prefix, under a `GET_LOCK` named lock (several
 *   processes may start at once).
 * - Persist joins an enclosing `sql.withTransaction` on the same client (R-PERSIST-6).
 * - Claim and expire are one transaction each, fenced by the partition's fence row locked
 *   `SELECT … FOR UPDATE` (R-CLAIM-2, R-EXP-1); claims select through `ClaimOrder` over the claim index
 *   (R-CLAIM-4/5/6) and never lock rows of other partitions.
 * - Complete/release with several ids lock the matching rows, apply them and fail naming the rest
 *   (R-DONE-3: the matching ones stay applied).
 * - Deadlocks (1213) and lock-wait timeouts (1205) are retried; a claim still failing so is
 *   `TransactionConflict`, any other SQL failure (a lost or killed connection) `StoreUnavailable`, with the
 *   transaction rolled back by the server; an undecodable row is `CorruptRecord`.
 * - Keys (id, partition key, envelope id, binding id, ordering key) hold at most 255 characters and text
 *   must be well-formed UTF-16; anything else is `InvalidRecord`.
 * - Terminal records are swept after `retention`, at most once per `sweepInterval`; fence rows stay.
 * - Stale reclaim (R-CLAIM-6) only when `staleClaimAfter` is given, against the claiming process's clock.
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
import {
  InvalidConfiguration,
  type StaleFencingToken,
  StoreUnavailable,
  TransactionConflict
} from "../../domain/OutboxError.js"
import {
  type Backend,
  make as makeStore,
  notClaimedBy,
  OutboxStore,
  type StoreOptions,
  validateStoreOptions
} from "../../services/OutboxStore.js"
import * as SqlDialect from "../sql/SqlDialect.js"
import * as SqlOutboxRow from "../sql/SqlOutboxRow.js"
import * as SqlOutboxStatements from "../sql/SqlOutboxStatements.js"
import * as SqlServerBackend from "../sql/SqlServerBackend.js"
import * as SqlSweep from "../sql/SqlSweep.js"
import { withReservedConnection } from "../sql/SqlTransaction.js"
import * as MysqlClaim from "./MysqlClaim.js"
import * as MysqlOutboxSchema from "./MysqlOutboxSchema.js"
import * as MysqlPersist from "./MysqlPersist.js"
import * as MysqlTransaction from "./MysqlTransaction.js"

/**
 * Options of the MySQL outbox store.
 *
 * @since 0.1.0
 */
export interface MysqlOutboxStoreOptions extends StoreOptions, SqlSweep.SweepOptions {
  /**
   * Database of the tables (created when missing; letters, digits, `_`). Default: the connection's
   * current database.
   */
  readonly database?: string | undefined
  /** Prefix of every table and index name (letters, digits, `_`). Default none. */
  readonly tablePrefix?: string | undefined
  /**
   * Run the migrations when the store is built (default true). `false` runs no DDL at all and takes no
   * migration lock: the tables must exist already (read-only tools, roles without CREATE).
   */
  readonly migrate?: boolean | undefined
}

/** Seconds a layer waits for the migration lock. */
const migrationLockSeconds = 60

const CountRows = Schema.Array(Schema.Struct({ n: SqlOutboxRow.BigIntColumn }))
const LockRows = Schema.Array(Schema.Struct({ got: Schema.NullOr(SqlOutboxRow.BigIntColumn) }))
const NameRows = Schema.Array(Schema.Struct({ name: Schema.String }))

/**
 * Runs migrations (a list of named statement lists) once per database and prefix, on one connection
 * holding the `GET_LOCK` named lock `lock` (released after, or by the server when the connection drops),
 * recording them in `table` (created when missing, with the database). MySQL commits DDL implicitly, so
 * each statement is idempotent (`IF NOT EXISTS`) and a migration is recorded after its statements ran.
 * Shared by the MySQL stores.
 *
 * @since 0.1.0
 */
export const migrate = (
  tx: MysqlTransaction.Transactions,
  options: {
    readonly lock: string
    readonly database: string | undefined
    readonly table: string
    readonly migrations: (collation: string) => ReadonlyArray<readonly [string, ReadonlyArray<string>]>
  }
): Effect.Effect<void, SqlError | StoreUnavailable, SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    withReservedConnection(sql, (conn) =>
      Effect.gen(function* () {
        const got = yield* MysqlClaim.decodeRows(
          "migrate",
          LockRows
        )(yield* tx.run(conn, "SELECT GET_LOCK(?, ?) AS got", [options.lock, migrationLockSeconds]))
        if (got[0]?.got !== 1) {
          return yield* new StoreUnavailable({
            operation: "migrate",
            cause: `the migration lock was not granted within ${migrationLockSeconds} s`
          })
        }
        yield* Effect.ensuring(
          Effect.gen(function* () {
            if (options.database !== undefined) {
              yield* tx.unprepared(conn, `CREATE DATABASE IF NOT EXISTS \`${options.database}\``)
            }
            const collations = yield* MysqlClaim.decodeRows(
              "migrate",
              NameRows
            )(yield* tx.run(conn, MysqlOutboxSchema.collationQuery, []))
            const collation = MysqlOutboxSchema.pickCollation(collations.map((row) => row.name))
            yield* tx.unprepared(
              conn,
              `CREATE TABLE IF NOT EXISTS ${options.table} (name VARCHAR(255) NOT NULL PRIMARY KEY,
  applied_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP) ${MysqlOutboxSchema.tableOptions(collation)}`
            )
            const applied = new Set(
              (yield* MysqlClaim.decodeRows(
                "migrate",
                NameRows
              )(yield* tx.run(conn, `SELECT name FROM ${options.table}`, []))).map((row) => row.name)
            )
            for (const [name, statements] of options.migrations(collation)) {
              if (applied.has(name)) continue
              for (const statement of statements) yield* tx.unprepared(conn, statement)
              yield* tx.run(conn, `INSERT INTO ${options.table} (name) VALUES (?)`, [name])
            }
          }),
          Effect.ignore(tx.run(conn, "SELECT RELEASE_LOCK(?)", [options.lock]))
        )
      })
    )
  )

/**
 * Runs the migrations of a one-table store (names from `MysqlOutboxSchema.storeTableNames`) with
 * {@link migrate}, on the `SqlClient` in context.
 *
 * @since 0.1.0
 */
export const migrateStore = (
  names: MysqlOutboxSchema.StoreTableNames,
  migrations: (collation: string) => ReadonlyArray<readonly [string, ReadonlyArray<string>]>
): Effect.Effect<void, StoreUnavailable, SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    migrate(MysqlTransaction.make(sql), {
      lock: names.lock,
      database: names.database,
      table: names.migrations,
      migrations
    })
  ).pipe(StoreUnavailable.refailTag("SqlError", "migrate"))

/**
 * Builds the MySQL outbox store on the `SqlClient` in context, running the migrations first.
 *
 * @since 0.1.0
 */
export const make = (
  options: MysqlOutboxStoreOptions = {}
): Effect.Effect<OutboxStore["Type"], StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const names = yield* MysqlOutboxSchema.tableNames("MysqlOutboxStore", options.database, options.tablePrefix ?? "")
    const { retentionMillis, staleClaimAfterMillis: staleMillis } = yield* validateStoreOptions(
      "MysqlOutboxStore",
      options
    )

    const tx = MysqlTransaction.make(sql)
    if (options.migrate !== false) {
      yield* migrate(tx, {
        lock: names.migrationLock,
        database: names.database,
        table: names.migrations,
        migrations: (collation) => MysqlOutboxSchema.migrations(names, collation)
      }).pipe(StoreUnavailable.refailTag("SqlError", "migrate"))
    }

    const st = MysqlOutboxSchema.statements(names, { staleReclaim: staleMillis !== undefined })
    const bind = SqlOutboxStatements.binds(SqlDialect.mysql)
    const ctx: MysqlClaim.StoreContext = { tx, st, bind, staleMillis }
    const select = <A, I>(
      operation: string,
      schema: Schema.Schema<A, I>,
      conn: Connection,
      text: string,
      params: ReadonlyArray<unknown>
    ) => MysqlClaim.select(ctx, operation, schema, conn, text, params)
    const persistPath = MysqlPersist.make(ctx)
    const claimIn = MysqlClaim.makeClaim(ctx)
    const maybeSweep = yield* SqlSweep.make("mysql", retentionMillis, options, (cutoff, chunk) =>
      tx.standalone((conn) => Effect.map(tx.write(conn, st.sweep, [cutoff, chunk]), (r) => r.affectedRows))
    )

    // the store's own transactions run statements on their connection and nothing else
    const connectionOnly = { connectionOnly: true }

    const persist: Backend["persist"] = (batch, { replaceTerminal }) =>
      tx
        .transact((conn) => persistPath.persistIn(conn, batch, replaceTerminal), connectionOnly)
        .pipe(StoreUnavailable.refailTag("SqlError", "persist", batch[0]?.partitionKey))

    const claim: Backend["claim"] = (partitionKey, token, limit) =>
      tx
        .transact((conn) => claimIn(conn, partitionKey, token, limit), connectionOnly)
        .pipe(
          Effect.catchIf(MysqlOutboxSchema.isConflict, (cause) =>
            Effect.fail(new TransactionConflict({ partitionKey, operation: "claim", cause }))
          ),
          StoreUnavailable.refailTag("SqlError", "claim", partitionKey),
          Effect.zipLeft(maybeSweep)
        )

    /** The ids of `unique` the token held that the statement changed (one id: by the affected-row count). */
    const settleIds = (
      operation: "complete" | "release",
      unique: ReadonlyArray<string>,
      token: LeaseToken.LeaseTokenLike,
      now: number
    ): Effect.Effect<ReadonlySet<string>, SqlError | StoreUnavailable> => {
      const statement = (ids: ReadonlyArray<string>) =>
        operation === "complete"
          ? ([st.complete(ids.length), bind.complete(ids, token, now)] as const)
          : ([st.release(ids.length), bind.release(ids, token)] as const)
      if (unique.length === 1) {
        const [text, params] = statement(unique)
        return tx.standalone((conn) =>
          Effect.map(tx.write(conn, text, params), (r) => (r.affectedRows === 1 ? new Set(unique) : new Set<string>()))
        )
      }
      // several ids: lock the rows this token holds, then settle exactly those
      return tx.transact(
        (conn) =>
          Effect.flatMap(
            select(operation, MysqlClaim.IdRows, conn, st.lockClaimed(unique.length), [
              ...unique,
              token.owner,
              token.version
            ]),
            (rows) => {
              const held = rows.map((row) => row.id)
              if (held.length === 0) return Effect.succeed(new Set<string>())
              const [text, params] = statement(held)
              return Effect.as(tx.write(conn, text, params), new Set(held))
            }
          ),
        connectionOnly
      )
    }

    // plain combinators, no generator: this runs once per settled batch
    const settle = (operation: "complete" | "release", ids: ReadonlyArray<string>, token: LeaseToken.LeaseTokenLike) =>
      Effect.flatMap(SqlClock.nowMillis, (now) => {
        const unique = SqlOutboxStatements.withoutRepeats(ids)
        return Effect.flatMap(
          settleIds(operation, unique, token, now),
          (done): Effect.Effect<void, StaleFencingToken> =>
            done.size === unique.length
              ? Effect.void
              : Effect.fail(
                  notClaimedBy(
                    operation,
                    token,
                    ids.filter((id) => !done.has(id))
                  )
                )
        )
      }).pipe(StoreUnavailable.refailTag("SqlError", operation))

    return makeStore(
      SqlServerBackend.make({
        name: "mysql",
        validate: MysqlOutboxSchema.textProblem,
        persist,
        claim,
        /**
         * Completes the ids claimed by the token (several ids: in one transaction that locks the matching
         * rows), then fails with `StaleFencingToken` naming the ids that were not: the matching ones stay
         * completed.
         */
        complete: (ids, token) => settle("complete", ids, token),
        /** Releases like {@link complete} completes: matching ids stay released when others mismatch. */
        release: (ids, token) => settle("release", ids, token),
        tx,
        statements: st,
        fence: (conn, operation, partitionKey, token) => MysqlClaim.fence(ctx, conn, operation, partitionKey, token),
        expireRows: (conn, params) => Effect.map(tx.write(conn, st.expire, params), (written) => written.affectedRows),
        records: (conn, text, params) => MysqlClaim.records(ctx, conn, text, params),
        select,
        countRows: CountRows
      })
    )
  })

/**
 * The MySQL outbox store with the given options (`database`, `tablePrefix`, `staleClaimAfter`,
 * `retention`, `sweepInterval`). Requires a `SqlClient` (a `MysqlClient`); runs the migrations when built.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: MysqlOutboxStoreOptions
): Layer.Layer<OutboxStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Layer.effect(OutboxStore, make(options))

/**
 * The MySQL outbox store with default options (the connection's database, no prefix, no stale reclaim,
 * 1 hour retention).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<OutboxStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> = layerWith(
  {}
)
