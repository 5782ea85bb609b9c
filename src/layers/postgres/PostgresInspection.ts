/**
 * Inspection of a PostgreSQL outbox (`SqlInspection` over the PostgreSQL dialect). Table names come from
 * the stores' `schema` and `tablePrefix`, so it reads the tables the stores of that schema and prefix use.
 * Build it beside the outbox and dead-letter stores (their migrations create the tables it reads).
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
import { BigIntColumn, tableNames } from "./PostgresOutboxSchema.js"

/**
 * Options of the PostgreSQL inspection: the `schema` and `tablePrefix` the stores were built with.
 *
 * @since 0.1.0
 */
export interface PostgresInspectionOptions {
  readonly schema?: string | undefined
  readonly tablePrefix?: string | undefined
}

/**
 * Builds the inspection over the `SqlClient` and `OutboxStore` in context (the lease store is used when
 * present). Fails with `InvalidConfiguration` for a bad schema or prefix.
 *
 * @since 0.1.0
 */
export const make = (
  options: PostgresInspectionOptions = {}
): Effect.Effect<OutboxInspection.OutboxInspectionService, InvalidConfiguration, SqlClient.SqlClient | OutboxStore> =>
  Effect.flatMap(tableNames("PostgresInspection", options.schema ?? "public", options.tablePrefix ?? ""), (t) =>
    SqlInspection.make(
      SqlDialect.postgres,
      {
        outbox: t.outbox,
        fence: t.fence,
        partitions: t.seq,
        deadLetter: `"${t.schema}"."${t.prefix}outbox_dead_letter"`
      },
      BigIntColumn
    )
  )

/**
 * The PostgreSQL inspection layer with options.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: PostgresInspectionOptions
): Layer.Layer<OutboxInspection.OutboxInspection, InvalidConfiguration, SqlClient.SqlClient | OutboxStore> =>
  Layer.effect(OutboxInspection.OutboxInspection, make(options))

/**
 * The PostgreSQL inspection layer for the default schema and prefix.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<
  OutboxInspection.OutboxInspection,
  InvalidConfiguration,
  SqlClient.SqlClient | OutboxStore
> = layerWith({})
