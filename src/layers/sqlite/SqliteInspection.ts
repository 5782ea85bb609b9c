/**
 * Inspection of a SQLite outbox (see `OutboxInspection`). Table names come from the stores' `tablePrefix`
 * (`SqliteOutboxSchema.tableNames`), so it reads the tables the stores of that prefix use. Known partitions
 * are the fence rows (a partition keeps its row after it empties); depths come from the outbox store's
 * counts; oldest pending and oldest claim, the fence high-water mark (R-CLAIM-4) and dead-letter counts are
 * single indexed statements. Build it beside the outbox and dead-letter stores (their migrations create the
 * tables it reads). Nothing is written.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { type InvalidConfiguration, StoreUnavailable } from "../../domain/OutboxError.js"
import { LeaseStore } from "../../services/LeaseStore.js"
import * as OutboxInspection from "../../services/OutboxInspection.js"
import { OutboxStore } from "../../services/OutboxStore.js"
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

const PartitionRow = Schema.Struct({ partition_key: Schema.String })
const VersionRow = Schema.Struct({ max_version: Schema.Number })
const AtRow = Schema.Struct({ at: Schema.NullOr(Schema.DateTimeUtcFromNumber) })
const CategoryRow = Schema.Struct({ category: Schema.String, n: Schema.Number })

/**
 * Builds the inspection over the `SqlClient` and `OutboxStore` in context (the lease store is used when
 * present). Fails with `InvalidConfiguration` for a bad prefix.
 *
 * @since 0.1.0
 */
export const make = (
  options: SqliteInspectionOptions = {}
): Effect.Effect<OutboxInspection.OutboxInspectionService, InvalidConfiguration, SqlClient.SqlClient | OutboxStore> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const store = yield* OutboxStore
    const leases = yield* Effect.serviceOption(LeaseStore)
    const prefix = options.tablePrefix ?? ""
    const names = yield* SqliteOutboxSchema.tableNames(prefix)
    const outbox = sql(names.outbox)
    const fence = sql(names.fence)
    const deadLetter = sql(`${prefix}outbox_dead_letter`)

    const rows = <A, I>(
      schema: Schema.Schema<A, I>,
      operation: string,
      partitionKey: string | undefined,
      query: Effect.Effect<ReadonlyArray<unknown>, unknown>
    ): Effect.Effect<ReadonlyArray<A>, StoreUnavailable> =>
      query.pipe(
        Effect.flatMap(Schema.decodeUnknown(Schema.Array(schema))),
        Effect.mapError(
          (cause) =>
            new StoreUnavailable({
              operation: `inspect.${operation}`,
              ...(partitionKey !== undefined ? { partitionKey } : {}),
              cause
            })
        )
      )

    const firstAt = (found: ReadonlyArray<typeof AtRow.Type>) => Option.fromNullable(found[0]?.at ?? null)

    return OutboxInspection.make(
      {
        name: "sqlite",
        notes: [],
        partitions: Effect.map(
          rows(PartitionRow, "partitions", undefined, sql`SELECT partition_key FROM ${fence}`),
          (found) => found.map((row) => row.partition_key)
        ),
        facts: (partitionKey) =>
          Effect.gen(function* () {
            const pending = yield* OutboxInspection.fact(store.countPending(partitionKey))
            const claimed = yield* OutboxInspection.fact(store.countClaimed(partitionKey))
            const oldestPending = yield* rows(
              AtRow,
              "oldestPending",
              partitionKey,
              sql`SELECT created_at AS at FROM ${outbox}
                  WHERE partition_key = ${partitionKey} AND status NOT IN ('completed', 'expired') AND status = 'pending'
                  ORDER BY created_at LIMIT 1`
            )
            const oldestClaimed = yield* rows(
              AtRow,
              "oldestClaimed",
              partitionKey,
              sql`SELECT min(claimed_at) AS at FROM ${outbox}
                  WHERE partition_key = ${partitionKey} AND status NOT IN ('completed', 'expired') AND status = 'claimed'`
            )
            const version = yield* rows(
              VersionRow,
              "fence",
              partitionKey,
              sql`SELECT max_version FROM ${fence} WHERE partition_key = ${partitionKey}`
            )
            return {
              pending,
              claimed,
              oldestPendingAt: OutboxInspection.known(firstAt(oldestPending)),
              oldestClaimedAt: OutboxInspection.known(firstAt(oldestClaimed)),
              fence: OutboxInspection.known(version[0]?.max_version ?? 0)
            }
          }),
        deadLetters: Effect.map(
          rows(
            CategoryRow,
            "deadLetters",
            undefined,
            sql`SELECT category, count(*) AS n FROM ${deadLetter} GROUP BY category`
          ),
          OutboxInspection.deadLetterCounts
        )
      },
      leases
    )
  })

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
