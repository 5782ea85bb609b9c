/**
 * The PostgreSQL stores and probe of the CLI (loaded on demand by `Backends.layer`): a `PgClient` on the
 * configured URL (redacted: never printed), the three PostgreSQL stores in the configured schema, and a
 * probe reading the fence and dead-letter tables directly.
 *
 * @since 0.1.0
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { BigIntColumn } from "../../layers/postgres/PostgresOutboxSchema.js"
import * as PostgresDeadLetterStore from "../../layers/postgres/PostgresDeadLetterStore.js"
import * as PostgresLeaseStore from "../../layers/postgres/PostgresLeaseStore.js"
import * as PostgresOutboxStore from "../../layers/postgres/PostgresOutboxStore.js"
import { type DeadLetterCounts, Probe, type Stores, unavailable } from "./Backends.js"
import { CliFailure, type StoreSettings } from "./Settings.js"

const PartitionRow = Schema.Struct({ partition_key: Schema.String })
const VersionRow = Schema.Struct({ max_version: BigIntColumn })
const OldestRow = Schema.Struct({ oldest: Schema.NullOr(BigIntColumn) })
const CategoryRow = Schema.Struct({ category: Schema.String, n: BigIntColumn })

const probe = (schema: string): Layer.Layer<Probe, never, SqlClient.SqlClient> =>
  Layer.effect(
    Probe,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const rows = <A, I>(row: Schema.Schema<A, I>, operation: string, text: string, params: ReadonlyArray<unknown>) =>
        sql
          .unsafe(text, params)
          .pipe(Effect.flatMap(Schema.decodeUnknown(Schema.Array(row))), Effect.mapError(unavailable(operation)))
      return Probe.of({
        backend: "postgres",
        knownPartitions: Effect.map(
          rows(
            PartitionRow,
            "inspect.partitions",
            `SELECT partition_key FROM "${schema}".outbox_seq ORDER BY partition_key`,
            []
          ),
          (found) => found.map((r) => r.partition_key)
        ),
        fenceVersion: (partitionKey) =>
          Effect.map(
            rows(
              VersionRow,
              "inspect.fence",
              `SELECT max_version FROM "${schema}".outbox_fence WHERE partition_key = $1`,
              [partitionKey]
            ),
            (found) => found[0]?.max_version ?? 0
          ),
        oldestPendingAt: (partitionKey) =>
          Effect.map(
            rows(
              OldestRow,
              "inspect.oldest",
              `SELECT min(created_at) AS oldest FROM "${schema}".outbox WHERE partition_key = $1 AND status = 'pending'`,
              [partitionKey]
            ),
            (found) => Option.fromNullable(found[0]?.oldest)
          ),
        deadLetterCounts: Effect.map(
          rows(
            CategoryRow,
            "inspect.deadLetters",
            `SELECT category, count(*) AS n FROM "${schema}".outbox_dead_letter GROUP BY category`,
            []
          ),
          (found) => {
            const counts: DeadLetterCounts = { poison: 0, permanent: 0, expired: 0 }
            for (const row of found) {
              if (row.category === "poison" || row.category === "permanent" || row.category === "expired") {
                counts[row.category] = row.n
              }
            }
            return counts
          }
        ),
        notes: []
      })
    })
  )

/**
 * The PostgreSQL stores and probe for the settings (tables created when missing).
 *
 * @since 0.1.0
 */
export const layer = (settings: StoreSettings): Layer.Layer<Stores, unknown> => {
  if (Option.isNone(settings.postgresUrl)) {
    return Layer.fail(
      new CliFailure({ message: "the postgres backend needs --postgres-url (or OUTBOX_POSTGRES_URL)", exitCode: 2 })
    )
  }
  const schema = settings.postgresSchema
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(schema)) {
    return Layer.fail(new CliFailure({ message: `invalid --postgres-schema ${JSON.stringify(schema)}`, exitCode: 2 }))
  }
  const client = PgClient.layer({ url: settings.postgresUrl.value, applicationName: "effect-outbox-cli" })
  const outbox = PostgresOutboxStore.layerWith({ schema })
  const stores = Layer.mergeAll(
    Layer.provideMerge(PostgresDeadLetterStore.layerWith({ schema }), outbox),
    PostgresLeaseStore.layerWith({ schema }),
    probe(schema)
  )
  return stores.pipe(Layer.provide(client))
}
