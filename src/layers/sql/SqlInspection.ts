/**
 * The inspection of a SQL outbox (see `OutboxInspection`), shared by SQLite, PostgreSQL and MySQL: known
 * partitions are those with a seq or fence row (a partition keeps them after it empties); depths come
 * from the outbox store's counts (R-READ-2); oldest pending and oldest claim, the fence high-water mark
 * (R-CLAIM-4) and dead-letter counts are single indexed statements. Nothing is written.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { StoreUnavailable } from "../../domain/OutboxError.js"
import { LeaseStore } from "../../services/LeaseStore.js"
import * as OutboxInspection from "../../services/OutboxInspection.js"
import { OutboxStore } from "../../services/OutboxStore.js"
import type { SqlDialect } from "./SqlDialect.js"

/**
 * The validated, quoted names the inspection reads.
 *
 * @since 0.1.0
 */
export interface Names {
  readonly outbox: string
  readonly fence: string
  /** The table of seq counters (the fence table where both live in one). */
  readonly partitions: string
  readonly deadLetter: string
}

/**
 * Builds the inspection over the `SqlClient` and `OutboxStore` in context (the lease store is used when
 * present); `integer` is how the driver returns integer columns.
 *
 * @since 0.1.0
 */
export const make = <I>(
  d: SqlDialect,
  t: Names,
  integer: Schema.Schema<number, I>
): Effect.Effect<OutboxInspection.OutboxInspectionService, never, SqlClient.SqlClient | OutboxStore> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const store = yield* OutboxStore
    const leases = yield* Effect.serviceOption(LeaseStore)
    const PartitionRow = Schema.Struct({ partition_key: Schema.String })
    const VersionRow = Schema.Struct({ max_version: integer })
    const AtRow = Schema.Struct({ at: Schema.NullOr(integer) })
    const CategoryRow = Schema.Struct({ category: Schema.String, n: integer })

    const rows = <A, J>(
      schema: Schema.Schema<A, J>,
      operation: string,
      partitionKey: string | undefined,
      text: string,
      params: ReadonlyArray<unknown>
    ): Effect.Effect<ReadonlyArray<A>, StoreUnavailable> =>
      sql
        .unsafe(text, params)
        .pipe(
          Effect.flatMap(Schema.decodeUnknown(Schema.Array(schema))),
          StoreUnavailable.refail(`inspect.${operation}`, partitionKey)
        )

    const firstAt = (found: ReadonlyArray<typeof AtRow.Type>) =>
      Option.flatMap(Option.fromNullable(found[0]?.at ?? null), (millis) => DateTime.make(millis))

    const p = () => d.placeholders().next()
    const live = d.live("o")
    const oldestPending = `SELECT o.created_at AS at FROM ${t.outbox} AS o
WHERE o.partition_key = ${p()} AND ${live} AND o.status = 'pending'
ORDER BY o.created_at, o.seq LIMIT 1`
    const oldestClaimed = `SELECT min(o.claimed_at) AS at FROM ${t.outbox} AS o
WHERE o.partition_key = ${p()} AND ${live} AND o.status = 'claimed'`
    const fence = `SELECT max_version FROM ${t.fence} WHERE partition_key = ${p()}`

    return OutboxInspection.make(
      {
        name: d.name,
        notes: [],
        partitions: Effect.map(
          rows(
            PartitionRow,
            "partitions",
            undefined,
            `SELECT partition_key FROM ${t.partitions} UNION SELECT partition_key FROM ${t.fence} ORDER BY partition_key`,
            []
          ),
          (found) => found.map((row) => row.partition_key)
        ),
        facts: (partitionKey) =>
          Effect.gen(function* () {
            const pending = yield* OutboxInspection.fact(store.countPending(partitionKey))
            const claimed = yield* OutboxInspection.fact(store.countClaimed(partitionKey))
            const pendingAt = yield* rows(AtRow, "oldestPending", partitionKey, oldestPending, [partitionKey])
            const claimedAt = yield* rows(AtRow, "oldestClaimed", partitionKey, oldestClaimed, [partitionKey])
            const version = yield* rows(VersionRow, "fence", partitionKey, fence, [partitionKey])
            return {
              pending,
              claimed,
              oldestPendingAt: OutboxInspection.known(firstAt(pendingAt)),
              oldestClaimedAt: OutboxInspection.known(firstAt(claimedAt)),
              fence: OutboxInspection.known(version[0]?.max_version ?? 0)
            }
          }),
        deadLetters: Effect.map(
          rows(
            CategoryRow,
            "deadLetters",
            undefined,
            `SELECT category, count(*) AS n FROM ${t.deadLetter} GROUP BY category`,
            []
          ),
          OutboxInspection.deadLetterCounts
        )
      },
      leases
    )
  })
