/**
 * Inspection of a MySQL outbox (`SqlInspection` over the MySQL dialect). Table names come from the
 * stores' `database` and `tablePrefix`, so it reads the tables the stores of that database and prefix
 * use. Build it beside the outbox and dead-letter stores (their migrations create the tables it reads).
 *
 * @since 0.1.0
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { InvalidConfiguration } from "../../domain/OutboxError.js"
import * as OutboxInspection from "../../services/OutboxInspection.js"
import type { OutboxStore } from "../../services/OutboxStore.js"
import * as SqlDialect from "../sql/SqlDialect.js"
import * as SqlInspection from "../sql/SqlInspection.js"
import { BigIntColumn } from "../sql/SqlOutboxRow.js"
import { storeTableNames, tableNames } from "./MysqlOutboxSchema.js"

/**
 * Options of the MySQL inspection: the `database` and `tablePrefix` the stores were built with.
 *
 * @since 0.1.0
 */
export interface MysqlInspectionOptions {
  readonly database?: string | undefined
  readonly tablePrefix?: string | undefined
}

/**
 * Builds the inspection over the `SqlClient` and `OutboxStore` in context (the lease store is used when
 * present). Fails with `InvalidConfiguration` for a bad database name or prefix.
 *
 * @since 0.1.0
 */
export const make = (
  options: MysqlInspectionOptions = {}
): Effect.Effect<OutboxInspection.OutboxInspectionService, InvalidConfiguration, SqlClient.SqlClient | OutboxStore> =>
  Effect.flatMap(tableNames("MysqlInspection", options.database, options.tablePrefix ?? ""), (t) =>
    Effect.flatMap(storeTableNames("MysqlInspection", options, "outbox_dead_letter"), (deadLetter) =>
      SqlInspection.make(
        SqlDialect.mysql,
        { outbox: t.outbox, fence: t.fence, partitions: t.seq, deadLetter: deadLetter.table },
        BigIntColumn
      )
    )
  )

/**
 * The MySQL inspection layer with options.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: MysqlInspectionOptions
): Layer.Layer<OutboxInspection.OutboxInspection, InvalidConfiguration, SqlClient.SqlClient | OutboxStore> =>
  Layer.effect(OutboxInspection.OutboxInspection, make(options))

/**
 * The MySQL inspection layer for the connection's database and no prefix.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<
  OutboxInspection.OutboxInspection,
  InvalidConfiguration,
  SqlClient.SqlClient | OutboxStore
> = layerWith({})
