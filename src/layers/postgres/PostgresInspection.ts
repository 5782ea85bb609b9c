/**
 * Inspection of a PostgreSQL outbox (see `OutboxInspection`). Table names come from the stores' `schema`
 * and `tablePrefix`, so it reads the tables the stores of that schema and prefix use. Known partitions are
 * those with a seq or fence row (a partition keeps them after it empties); depths come from the outbox
 * store's counts; oldest pending and oldest claim, the fence high-water mark and dead-letter counts are
 * single indexed statements. Build it beside the outbox and dead-letter stores (their migrations create
 * the tables it reads). Nothing is written.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { type InvalidConfiguration, StoreUnavailable } from "../../domain/OutboxError.js"
import { LeaseStore } from "../../services/LeaseStore.js"
import * as OutboxInspection from "../../services/OutboxInspection.js"
import { OutboxStore } from "../../services/OutboxStore.js"
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

const PartitionRow = Schema.Struct({ partition_key: Schema.String })
const VersionRow = Schema.Struct({ max_version: BigIntColumn })
const AtRow = Schema.Struct({ at: Schema.NullOr(BigIntColumn) })
const CategoryRow = Schema.Struct({ category: Schema.String, n: BigIntColumn })

/**
 * Builds the inspection over the `SqlClient` and `OutboxStore` in context (the lease store is used when
 * present). Fails with `InvalidConfiguration` for a bad schema or prefix.
 *
 * @since 0.1.0
 */
export const make = (
  options: PostgresInspectionOptions = {}
): Effect.Effect<OutboxInspection.OutboxInspectionService, InvalidConfiguration, SqlClient.SqlClient | OutboxStore> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const store = yield* OutboxStore
    const leases = yield* Effect.serviceOption(LeaseStore)
    const prefix = options.tablePrefix ?? ""
    const t = yield* tableNames("PostgresInspection", options.schema ?? "public", prefix)
    const deadLetter = `"${t.schema}"."${prefix}outbox_dead_letter"`

    const rows = <A, I>(
      schema: Schema.Schema<A, I>,
      operation: string,
      partitionKey: string | undefined,
      text: string,
      params: ReadonlyArray<unknown>
    ): Effect.Effect<ReadonlyArray<A>, StoreUnavailable> =>
      sql.unsafe(text, params).pipe(
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

    const firstAt = (found: ReadonlyArray<typeof AtRow.Type>) =>
      Option.map(Option.fromNullable(found[0]?.at ?? null), (millis) => DateTime.unsafeMake(millis))

    return OutboxInspection.make(
      {
        name: "postgres",
        notes: [],
        partitions: Effect.map(
          rows(
            PartitionRow,
            "partitions",
            undefined,
            `SELECT partition_key FROM ${t.seq} UNION SELECT partition_key FROM ${t.fence} ORDER BY partition_key`,
            []
          ),
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
              `SELECT created_at AS at FROM ${t.outbox}
               WHERE partition_key = $1 AND status IN ('pending', 'claimed') AND status = 'pending'
               ORDER BY created_at, seq LIMIT 1`,
              [partitionKey]
            )
            const oldestClaimed = yield* rows(
              AtRow,
              "oldestClaimed",
              partitionKey,
              `SELECT min(claimed_at) AS at FROM ${t.outbox}
               WHERE partition_key = $1 AND status IN ('pending', 'claimed') AND status = 'claimed'`,
              [partitionKey]
            )
            const version = yield* rows(
              VersionRow,
              "fence",
              partitionKey,
              `SELECT max_version FROM ${t.fence} WHERE partition_key = $1`,
              [partitionKey]
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
            `SELECT category, count(*) AS n FROM ${deadLetter} GROUP BY category`,
            []
          ),
          OutboxInspection.deadLetterCounts
        )
      },
      leases
    )
  })

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
