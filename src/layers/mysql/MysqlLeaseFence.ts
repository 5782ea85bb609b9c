/**
 * The MySQL / MariaDB `LeaseFence` (SPEC §6 step 5, §13): the drainer's end-of-batch complete and its lease
 * check in one statement (`SqlLeaseFence.fencedComplete` over `SqlDialect.mysql`) over the outbox table of
 * a `MysqlOutboxStore` and the lease table of a `MysqlLeaseStore` in the same database. Give it the options
 * both stores were given; it creates nothing (the stores' layers run the migrations).
 *
 * MySQL has no `UPDATE … RETURNING`, so the statement runs on its own (autocommit, no `BEGIN`/`COMMIT`) and
 * its affected-row count decides: every id → `Held` with all of them; none → `Unconfirmed`; some → one
 * read-back on the same connection of the ids now completed by this token at this clock reading, which
 * are `Held`. The guarded complete (R-DONE-2: status `claimed`, owner, version) and the lease condition
 * (owner, version, not released, `expires_at` after the clock's now) are one statement, so nothing is
 * completed under a lease that no longer carries the token. A deadlock or lock-wait timeout rolls back
 * the statement alone and it is run again a bounded number of times (not inside a caller's transaction).
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlClock from "../sql/SqlClock.js"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import { type InvalidConfiguration, StoreUnavailable } from "../../domain/OutboxError.js"
import { type FencedComplete, LeaseFence } from "../../services/LeaseFence.js"
import * as SqlDialect from "../sql/SqlDialect.js"
import * as SqlLeaseFence from "../sql/SqlLeaseFence.js"
import { bySize, withoutRepeats } from "../sql/SqlOutboxStatements.js"
import { conflictRetries } from "../sql/SqlTransaction.js"
import * as MysqlClaim from "./MysqlClaim.js"
import * as MysqlOutboxSchema from "./MysqlOutboxSchema.js"
import * as MysqlTransaction from "./MysqlTransaction.js"

/**
 * Options of the MySQL lease fence: the database and table prefix of the outbox store, and the table
 * prefix of the lease store (same database).
 *
 * @since 0.1.0
 */
export interface MysqlLeaseFenceOptions {
  /** Database of the outbox and lease tables. Default: the connection's current database. */
  readonly database?: string | undefined
  /** Table prefix of the outbox store. Default none. */
  readonly tablePrefix?: string | undefined
  /** Table prefix of the lease store. Default: `tablePrefix`. */
  readonly leaseTablePrefix?: string | undefined
}

/**
 * Runs an autocommit statement again after a deadlock or lock-wait timeout (InnoDB rolled back that
 * statement alone), a bounded number of times; inside a caller's transaction the failure is returned (a
 * deadlock rolled back the caller's whole transaction).
 */
const retryConflicts = <A, E>(self: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) =>
    Option.isSome(outer)
      ? self
      : Effect.retry(self, { schedule: Schedule.recurs(conflictRetries), while: MysqlOutboxSchema.isConflict })
  )

/**
 * Builds the fence on the `SqlClient` (a `MysqlClient`) in context.
 *
 * @since 0.1.0
 */
export const make = (
  options: MysqlLeaseFenceOptions = {}
): Effect.Effect<LeaseFence["Type"], InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const d = SqlDialect.mysql
    const names = yield* MysqlOutboxSchema.tableNames("MysqlLeaseFence", options.database, options.tablePrefix ?? "")
    const lease = yield* MysqlOutboxSchema.storeTableNames(
      "MysqlLeaseFence",
      { database: options.database, tablePrefix: options.leaseTablePrefix ?? options.tablePrefix },
      "outbox_lease"
    )
    const tx = MysqlTransaction.make(sql)
    const statement = SqlLeaseFence.fencedComplete(d, names.outbox, lease.table)
    // the ids this token completed at this clock reading: a record is completed once, so only this
    // statement (or an earlier complete by the same token in the same millisecond) can have written them
    const completedBack = bySize(
      (n) => `SELECT id FROM ${names.outbox}
WHERE ${d.placeholders().inIds("id", n)} AND status = 'completed' AND claimed_by = ? AND claim_version = ?
  AND completed_at = ?`
    )
    return LeaseFence.of({
      complete: (partitionKey, ids, token) =>
        Effect.gen(function* () {
          const unique = withoutRepeats(ids)
          if (unique.length === 0) return { _tag: "Held", completed: new Set<string>() } satisfies FencedComplete
          const now = yield* SqlClock.nowMillis
          const params = SqlLeaseFence.fencedCompleteBinds(d, partitionKey, unique, token, now)
          const result: FencedComplete = yield* tx.standalone((conn) =>
            Effect.gen(function* () {
              const written = yield* tx.write(conn, statement(unique.length), params)
              if (written.affectedRows === 0) return { _tag: "Unconfirmed" } satisfies FencedComplete
              if (written.affectedRows >= unique.length) {
                return { _tag: "Held", completed: new Set(unique) } satisfies FencedComplete
              }
              const rows = yield* Effect.flatMap(
                tx.run(conn, completedBack(unique.length), [...unique, token.owner, token.version, now]),
                MysqlClaim.decodeRows("complete", MysqlClaim.IdRows)
              )
              return { _tag: "Held", completed: new Set(rows.map((r) => r.id)) } satisfies FencedComplete
            })
          )
          return result
        }).pipe(retryConflicts, StoreUnavailable.refailTag("SqlError", "complete", partitionKey))
    })
  })

/**
 * The MySQL lease fence layer with the given options.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: MysqlLeaseFenceOptions = {}
): Layer.Layer<LeaseFence, InvalidConfiguration, SqlClient.SqlClient> => Layer.effect(LeaseFence, make(options))

/**
 * The MySQL lease fence layer with default names (the connection's database, no prefix).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<LeaseFence, InvalidConfiguration, SqlClient.SqlClient> = layerWith()
