/**
 * The SQLite `OutboxStore` (SPEC §3.2), the embedded default backend, on `@effect/sql` (provide a
 * `SqlClient`, e.g. with `SqliteDatabase.layer({ filename })`). Runs its own migrations and shares the
 * database with other tables.
 *
 * - Persist joins an enclosing `sql.withTransaction` (R-PERSIST-6).
 * - Claim and expire are one transaction each, fenced by the partition's fence row (R-CLAIM-2, R-EXP-1);
 *   claims select through `ClaimOrder` (R-CLAIM-4/5/6).
 * - Complete/release with several ids apply the matching ones and fail naming the rest (R-DONE-3: not
 *   all-or-nothing); claims, expiry sweeps, completes and releases made outside a caller's transaction in
 *   one event-loop turn share a commit unless `groupCommit` is false (`SqliteGroupCommit`).
 * - Busy failures are retried briefly outside a caller's transaction; any other SQL failure is
 *   `StoreUnavailable`; an undecodable row fails the operation with `CorruptRecord` (never skipped).
 * - Terminal records are swept after `retention`, at most once per `sweepInterval`.
 * - Stale reclaim (R-CLAIM-6) only when `staleClaimAfter` is given, against this process's clock.
 *
 * Design notes: docs/design/sqlite.md.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as SqlClock from "../sql/SqlClock.js"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import { type InvalidConfiguration, StoreUnavailable } from "../../domain/OutboxError.js"
import {
  type Backend,
  make as makeStore,
  OutboxStore,
  partitionPage as keysetPage,
  type StoreOptions,
  validateStoreOptions
} from "../../services/OutboxStore.js"
import * as SqlDialect from "../sql/SqlDialect.js"
import * as SqlOutboxStatements from "../sql/SqlOutboxStatements.js"
import * as SqlSweep from "../sql/SqlSweep.js"
import * as SqliteClaim from "./SqliteClaim.js"
import * as SqliteGroupCommit from "./SqliteGroupCommit.js"
import * as SqliteOutboxSchema from "./SqliteOutboxSchema.js"
import * as SqlitePersist from "./SqlitePersist.js"
import * as SqliteSettle from "./SqliteSettle.js"
import { countOf, partitionsOf, records, run, select } from "./SqliteStatement.js"
import { busyRetry, isBusy } from "./SqliteSupport.js"
import * as SqliteTransaction from "./SqliteTransaction.js"

/**
 * Options of the SQLite outbox store.
 *
 * @since 0.1.0
 */
export interface SqliteOutboxStoreOptions extends StoreOptions, SqlSweep.SweepOptions {
  /** Prefix of every table and index name (letters, digits, `_`). Default none. */
  readonly tablePrefix?: string | undefined
  /**
   * Group commit of `claim`, `expire`, `complete` and `release` (default true): calls made outside a
   * caller's transaction in one turn of the event loop share one transaction, so drainers of several
   * partitions pay one commit (one `fsync` with `synchronous = FULL`) between them instead of one each, and
   * a batch's completes may share a commit with the next claims. Every call still gets its own outcome: a
   * claim or expiry sweep its own (in its own savepoint), a complete or release its matching ids applied and
   * the others named in its `StaleFencingToken`; a call's result is returned once the shared `COMMIT`
   * succeeded. Persists are never grouped. A lone caller's calls stop waiting for the turn (see
   * `EventLoop.groupPerTurn`). False runs each call as its own statement or transaction.
   */
  readonly groupCommit?: boolean | undefined
}

/** Partition keys per `listPartitions` page. */
const partitionPage = 100

/**
 * Lock-failure recognition and retry, shared by the SQLite stores (defined in `SqliteSupport`).
 *
 * @since 0.1.0
 */
export { isBusy, retryBusy } from "./SqliteSupport.js"

/**
 * Builds the SQLite outbox store on the `SqlClient` in context, running the migrations first.
 *
 * @since 0.1.0
 */
export const make = (
  options: SqliteOutboxStoreOptions = {}
): Effect.Effect<OutboxStore["Type"], StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const names = yield* SqliteOutboxSchema.tableNames(options.tablePrefix ?? "")
    const { retentionMillis, staleClaimAfterMillis: staleMillis } = yield* validateStoreOptions(
      "SqliteOutboxStore",
      options
    )
    yield* SqliteOutboxSchema.migrate(names).pipe(
      Effect.retry({ schedule: busyRetry, while: isBusy }),
      StoreUnavailable.refail("migrate")
    )

    const st = SqliteOutboxSchema.statements(names, { staleReclaim: staleMillis !== undefined })
    const bind = SqlOutboxStatements.binds(SqlDialect.sqlite)
    const tx = SqliteTransaction.make(sql)
    const { standalone, transact } = tx
    const persistPath = SqlitePersist.make(st)
    const claimIn = SqliteClaim.make({ st, bind, staleMillis })
    const group = (options.groupCommit ?? true) ? SqliteGroupCommit.make(tx) : undefined
    const settle = SqliteSettle.make(st, bind, tx, group)
    /**
     * A fenced transaction (claim, expire): outside a caller's transaction it joins the group commit (its own
     * savepoint in a shared group; a sweep with the completes and releases, before the claims, and its caller
     * may leave while it waits: the records expire all the same); else it is a transaction of its own, or a
     * savepoint in the caller's.
     */
    const fenced = <A, E extends { readonly _tag: string }>(
      operation: "claim" | "expire",
      partitionKey: string,
      body: (conn: Connection) => Effect.Effect<A, E | SqlError>
    ) =>
      Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) =>
        group !== undefined && Option.isNone(outer)
          ? group(operation === "claim" ? 1 : 0, true, body).pipe(
              StoreUnavailable.refailTag("SqlError", operation, partitionKey)
            )
          : transact(operation, partitionKey, body)
      )
    // a chunk's DELETE in a transaction of the store's own (a savepoint in a caller's): its wait for the write
    // lock is then the non-blocking `BEGIN IMMEDIATE`'s (see SqliteTransaction), not SQLite's busy handler's
    const maybeSweep = yield* SqlSweep.make("sqlite", retentionMillis, options, (cutoff, chunk) =>
      transact("sweep", undefined, (conn) => Effect.map(run(conn, st.sweep, [cutoff, chunk]), (rows) => rows.length))
    )

    const count = (operation: "countPending" | "countClaimed", text: string) => (partitionKey: string) =>
      standalone(operation, partitionKey, (conn) =>
        Effect.map(select(countOf, operation, conn, text, [partitionKey]), (rows) => rows[0] ?? 0)
      )

    const backend: Backend = {
      name: "sqlite",
      // a persist stays its own transaction, without waiting for a group: it has no asynchronous step, so
      // an interrupted persist has not committed (a group's wait would let it commit after its caller left)
      persist: (batch, { replaceTerminal }) =>
        transact("persist", batch[0]?.partitionKey, (conn) => persistPath.persistIn(conn, batch, replaceTerminal)),
      claim: (partitionKey, token, limit) =>
        Effect.zipLeft(
          fenced("claim", partitionKey, (conn) => claimIn(conn, partitionKey, token, limit)),
          maybeSweep
        ),
      /**
       * Completes the ids that are claimed by the token, in one transaction, and then fails with
       * `StaleFencingToken` naming the ids that were not: with several ids the matching ones stay completed.
       */
      complete: (ids, token) => settle("complete", ids, token),
      /** Releases like {@link complete} completes: matching ids stay released when others mismatch. */
      release: (ids, token) => settle("release", ids, token),
      expire: (before, partitionKey, token) =>
        fenced("expire", partitionKey, (conn) =>
          Effect.gen(function* () {
            yield* SqliteClaim.raiseFence(st, conn, "expire", partitionKey, token)
            const now = yield* SqlClock.nowMillis
            const rows = yield* run(conn, st.expire, [now, partitionKey, DateTime.toEpochMillis(before)])
            return rows.length
          })
        ),
      queryPending: (partitionKey, limit) =>
        standalone("queryPending", partitionKey, (conn) => records(conn, st.queryPending, [partitionKey, limit])),
      countPending: count("countPending", st.countPending),
      countClaimed: count("countClaimed", st.countClaimed),
      listPartitions: Stream.paginateChunkEffect("", (after: string) =>
        standalone("listPartitions", undefined, (conn) =>
          select(partitionsOf, "listPartitions", conn, st.listPartitions, [after, partitionPage])
        ).pipe(Effect.map((keys) => keysetPage(keys, partitionPage)))
      )
    }
    return makeStore(backend)
  })

/**
 * The SQLite outbox store with the given options (`staleClaimAfter`, `retention`, `tablePrefix`,
 * `sweepInterval`). Requires a `SqlClient`; runs the migrations when built.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: SqliteOutboxStoreOptions
): Layer.Layer<OutboxStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Layer.effect(OutboxStore, make(options))

/**
 * The SQLite outbox store with default options (no stale reclaim, 1 hour retention, no table prefix).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<OutboxStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> = layerWith(
  {}
)
