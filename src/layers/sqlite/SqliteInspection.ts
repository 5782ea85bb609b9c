/**
 * Inspection of a SQLite outbox (`SqlInspection` over the SQLite dialect). Table names come from the
 * stores' `tablePrefix`, so it reads the tables the stores of that prefix use. Build it beside the outbox
 * and dead-letter stores (their migrations create the tables it reads).
 *
 * @since 0.1.0
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type { InvalidConfiguration } from "../../domain/OutboxError.js"
import * as OutboxInspection from "../../services/OutboxInspection.js"
import type { OutboxStore } from "../../services/OutboxStore.js"
import * as SqlDialect from "../sql/SqlDialect.js"
import * as SqlInspection from "../sql/SqlInspection.js"
import * as SqliteOutboxSchema from "./SqliteOutboxSchema.js"

/**
 * Options of the SQLite inspection.
 *
 * @since 0.1.0
 */
export interface SqliteInspectionOptions {
  /** The `tablePrefix` the stores were built with (default `""`). */
  readonly tablePrefix?: string | undefined
}

/**
 * Builds the inspection over the `SqlClient` and `OutboxStore` in context (the lease store is used when
 * present). Fails with `InvalidConfiguration` for a bad prefix.
 *
 * @since 0.1.0
 */
export const make = (
  options: SqliteInspectionOptions = {}
): Effect.Effect<OutboxInspection.OutboxInspectionService, InvalidConfiguration, SqlClient.SqlClient | OutboxStore> =>
  Effect.flatMap(SqliteOutboxSchema.tableNames(options.tablePrefix ?? ""), (names) =>
    SqlInspection.make(
      SqlDialect.sqlite,
      {
        outbox: names.outbox,
        fence: names.fence,
        partitions: names.fence,
        deadLetter: `${options.tablePrefix ?? ""}outbox_dead_letter`
      },
      Schema.Number
    )
  )

/**
 * The SQLite inspection layer with options.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: SqliteInspectionOptions
): Layer.Layer<OutboxInspection.OutboxInspection, InvalidConfiguration, SqlClient.SqlClient | OutboxStore> =>
  Layer.effect(OutboxInspection.OutboxInspection, make(options))

/**
 * The SQLite inspection layer for the default table names.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<
  OutboxInspection.OutboxInspection,
  InvalidConfiguration,
  SqlClient.SqlClient | OutboxStore
> = layerWith({})
