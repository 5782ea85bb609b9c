/**
 * The PostgreSQL `LeaseFence` (SPEC §6 step 5, §13): the drainer's end-of-batch complete and its lease
 * check in one statement (`SqlLeaseFence.fencedComplete`) over the outbox table of a
 * `PostgresOutboxStore` and the lease table of a `PostgresLeaseStore` in the same database. Give it the
 * options both stores were given; it creates nothing (the stores' layers run the migrations).
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlClock from "../sql/SqlClock.js"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { type InvalidConfiguration, StoreUnavailable } from "../../domain/OutboxError.js"
import { type FencedComplete, LeaseFence } from "../../services/LeaseFence.js"
import * as SqlDialect from "../sql/SqlDialect.js"
import * as SqlLeaseFence from "../sql/SqlLeaseFence.js"
import * as PostgresClaim from "./PostgresClaim.js"
import * as PostgresOutboxSchema from "./PostgresOutboxSchema.js"
import * as PostgresTransaction from "./PostgresTransaction.js"

/**
 * Options of the PostgreSQL lease fence: the schema and table prefix of the outbox store, and the table
 * prefix of the lease store (same schema).
 *
 * @since 0.1.0
 */
export interface PostgresLeaseFenceOptions {
  /** Schema of the outbox and lease tables. Default `public`. */
  readonly schema?: string | undefined
  /** Table prefix of the outbox store. Default none. */
  readonly tablePrefix?: string | undefined
  /** Table prefix of the lease store. Default: `tablePrefix`. */
  readonly leaseTablePrefix?: string | undefined
}

/**
 * Builds the fence on the `SqlClient` in context.
 *
 * @since 0.1.0
 */
export const make = (
  options: PostgresLeaseFenceOptions = {}
): Effect.Effect<LeaseFence["Type"], InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const schema = options.schema ?? "public"
    const names = yield* PostgresOutboxSchema.tableNames("PostgresLeaseFence", schema, options.tablePrefix ?? "")
    const lease = yield* PostgresOutboxSchema.storeTableNames(
      "PostgresLeaseFence",
      { schema, tablePrefix: options.leaseTablePrefix ?? options.tablePrefix },
      "outbox_lease"
    )
    const tx = PostgresTransaction.make(sql)
    const statement = SqlLeaseFence.fencedComplete(SqlDialect.postgres, names.outbox, lease.table)
    return LeaseFence.of({
      complete: (partitionKey, ids, token) =>
        Effect.gen(function* () {
          const unique = Array.from(new Set(ids))
          if (unique.length === 0) return { _tag: "Held", completed: new Set<string>() } satisfies FencedComplete
          const now = yield* SqlClock.nowMillis
          const rows = yield* tx.standalone((conn) =>
            Effect.flatMap(
              tx.run(
                conn,
                statement(unique.length),
                SqlLeaseFence.fencedCompleteBinds(SqlDialect.postgres, partitionKey, unique, token, now)
              ),
              PostgresClaim.decodeRows("complete", PostgresClaim.IdRows)
            )
          )
          const result: FencedComplete =
            rows.length === 0 ? { _tag: "Unconfirmed" } : { _tag: "Held", completed: new Set(rows.map((r) => r.id)) }
          return result
        }).pipe(StoreUnavailable.refailTag("SqlError", "complete", partitionKey))
    })
  })

/**
 * The PostgreSQL lease fence layer with the given options.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: PostgresLeaseFenceOptions = {}
): Layer.Layer<LeaseFence, InvalidConfiguration, SqlClient.SqlClient> => Layer.effect(LeaseFence, make(options))

/**
 * The PostgreSQL lease fence layer with default names (schema `public`, no prefix).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<LeaseFence, InvalidConfiguration, SqlClient.SqlClient> = layerWith()
