/**
 * Opens the stores the CLI works on (outbox, leases, dead letters) for the configured backend, plus a
 * read-only {@link Probe} for facts the ports do not expose (fence version, oldest pending record,
 * dead-letter counts) — answered where the backend can answer them cheaply, reported as unsupported
 * otherwise.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { DeadLetterCategory } from "../../domain/DeadLetterEntry.js"
import { StoreUnavailable } from "../../domain/OutboxError.js"
import * as MemoryDeadLetterStore from "../../layers/memory/MemoryDeadLetterStore.js"
import * as MemoryLeaseStore from "../../layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../../layers/memory/MemoryOutboxStore.js"
import * as SqliteDatabase from "../../layers/sqlite/SqliteDatabase.js"
import * as SqliteDeadLetterStore from "../../layers/sqlite/SqliteDeadLetterStore.js"
import * as SqliteLeaseStore from "../../layers/sqlite/SqliteLeaseStore.js"
import * as SqliteOutboxStore from "../../layers/sqlite/SqliteOutboxStore.js"
import { DeadLetterStore, type DeadLetterStoreService } from "../../services/DeadLetterStore.js"
import type { LeaseStore } from "../../services/LeaseStore.js"
import { OutboxStore, type OutboxStoreService } from "../../services/OutboxStore.js"
import { CliFailure, errorText, type StoreSettings } from "./Settings.js"

/**
 * Dead-letter entry counts per category.
 *
 * @since 0.1.0
 */
export type DeadLetterCounts = Record<DeadLetterCategory, number>

/**
 * Read-only facts for `inspect`. A property left `undefined` is not supported by the backend.
 *
 * @since 0.1.0
 */
export interface ProbeService {
  readonly backend: StoreSettings["backend"]
  /** Partitions the backend knows of beyond `listPartitions` (e.g. ones that emptied). */
  readonly knownPartitions: Effect.Effect<ReadonlyArray<string>, StoreUnavailable>
  /** The partition's fence high-water mark (0 when never raised). */
  readonly fenceVersion: ((partitionKey: string) => Effect.Effect<number, StoreUnavailable>) | undefined
  /** `createdAt` (epoch ms) of the oldest pending record of the partition. */
  readonly oldestPendingAt:
    ((partitionKey: string) => Effect.Effect<Option.Option<number>, StoreUnavailable>) | undefined
  /** Dead-letter entries per category. */
  readonly deadLetterCounts: Effect.Effect<DeadLetterCounts, StoreUnavailable>
  /** Human notes on what this backend cannot answer. */
  readonly notes: ReadonlyArray<string>
}

/**
 * The probe's tag.
 *
 * @since 0.1.0
 */
export class Probe extends Context.Tag("effect-outbox/cli/Probe")<Probe, ProbeService>() {}

/**
 * Everything a CLI command may use.
 *
 * @since 0.1.0
 */
export type Stores = OutboxStore | LeaseStore | DeadLetterStore | Probe

const categories: ReadonlyArray<DeadLetterCategory> = DeadLetterCategory.literals

/**
 * Counts through the port: lists every entry of each category (fine for an operator command).
 *
 * @since 0.1.0
 */
export const countsThroughPort = (dlq: DeadLetterStoreService): Effect.Effect<DeadLetterCounts, StoreUnavailable> =>
  Effect.gen(function* () {
    const counts: DeadLetterCounts = { poison: 0, permanent: 0, expired: 0 }
    for (const category of categories) {
      const entries = yield* dlq.list({ category }).pipe(Effect.catchTag("InvalidArgument", Effect.die))
      counts[category] = entries.length
    }
    return counts
  })

/**
 * The partitions `listPartitions` reports.
 *
 * @since 0.1.0
 */
export const listed = (store: OutboxStoreService): Effect.Effect<ReadonlyArray<string>, StoreUnavailable> =>
  Effect.map(Stream.runCollect(store.listPartitions), (chunk) => Array.from(chunk))

/**
 * Wraps a cause as `StoreUnavailable` for an operation.
 *
 * @since 0.1.0
 */
export const unavailable =
  (operation: string) =>
  (cause: unknown): StoreUnavailable =>
    new StoreUnavailable({ operation, cause })

const PartitionRow = Schema.Struct({ partition_key: Schema.String })
const VersionRow = Schema.Struct({ max_version: Schema.Number })
const OldestRow = Schema.Struct({ oldest: Schema.NullOr(Schema.Number) })
const CategoryRow = Schema.Struct({ category: Schema.String, n: Schema.Number })

const sqliteProbe: Layer.Layer<Probe, never, SqlClient.SqlClient> = Layer.effect(
  Probe,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = <A, I>(
      schema: Schema.Schema<A, I>,
      operation: string,
      query: Effect.Effect<ReadonlyArray<unknown>, unknown>
    ) => query.pipe(Effect.flatMap(Schema.decodeUnknown(Schema.Array(schema))), Effect.mapError(unavailable(operation)))
    return Probe.of({
      backend: "sqlite",
      knownPartitions: Effect.map(
        rows(PartitionRow, "inspect.partitions", sql`SELECT partition_key FROM outbox_fence ORDER BY partition_key`),
        (found) => found.map((row) => row.partition_key)
      ),
      fenceVersion: (partitionKey) =>
        Effect.map(
          rows(
            VersionRow,
            "inspect.fence",
            sql`SELECT max_version FROM outbox_fence WHERE partition_key = ${partitionKey}`
          ),
          (found) => found[0]?.max_version ?? 0
        ),
      oldestPendingAt: (partitionKey) =>
        Effect.map(
          rows(
            OldestRow,
            "inspect.oldest",
            sql`SELECT min(created_at) AS oldest FROM outbox
                WHERE partition_key = ${partitionKey} AND status = 'pending'`
          ),
          (found) => Option.fromNullable(found[0]?.oldest)
        ),
      deadLetterCounts: Effect.map(
        rows(
          CategoryRow,
          "inspect.deadLetters",
          sql`SELECT category, count(*) AS n FROM outbox_dead_letter GROUP BY category`
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

const memoryProbe: Layer.Layer<Probe, never, OutboxStore | DeadLetterStore> = Layer.effect(
  Probe,
  Effect.gen(function* () {
    const store = yield* OutboxStore
    const dlq = yield* DeadLetterStore
    return Probe.of({
      backend: "memory",
      knownPartitions: listed(store),
      fenceVersion: undefined,
      oldestPendingAt: undefined,
      deadLetterCounts: countsThroughPort(dlq),
      notes: [
        "the memory backend lives only as long as this process; fence version and oldest pending age are not exposed"
      ]
    })
  })
)

const buildFailure =
  (backend: string) =>
  (error: { readonly message: string } | unknown): CliFailure =>
    new CliFailure({ message: `cannot open the ${backend} backend: ${errorText(error)}`, exitCode: 1 })

/**
 * The stores (and probe) for the settings. Building the layer runs the backend's migrations or table
 * checks; failures become a {@link CliFailure}.
 *
 * @since 0.1.0
 */
export const layer = (settings: StoreSettings): Layer.Layer<Stores, CliFailure> => {
  switch (settings.backend) {
    case "memory": {
      const outbox = MemoryOutboxStore.layer
      const dlq = Layer.provideMerge(MemoryDeadLetterStore.layer, outbox)
      return Layer.provideMerge(memoryProbe, Layer.merge(dlq, MemoryLeaseStore.layer))
    }
    case "sqlite": {
      const database = SqliteDatabase.layer({ filename: settings.sqliteFile, synchronous: settings.sqliteSynchronous })
      const outbox = SqliteOutboxStore.layer
      const stores = Layer.mergeAll(
        Layer.provideMerge(SqliteDeadLetterStore.layer, outbox),
        SqliteLeaseStore.layer,
        sqliteProbe
      )
      return stores.pipe(Layer.provide(database), Layer.mapError(buildFailure(`sqlite (${settings.sqliteFile})`)))
    }
    case "dynamodb":
      // loaded on demand: the AWS SDK is the heaviest import of the CLI
      return Layer.unwrapEffect(
        Effect.map(
          Effect.promise(() => import("./DynamoBackend.js")),
          (backend) => backend.layer(settings)
        )
      ).pipe(Layer.mapError(buildFailure(`dynamodb (${settings.dynamodbTable})`)))
  }
}
