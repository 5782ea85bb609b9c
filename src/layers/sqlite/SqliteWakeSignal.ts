/**
 * The SQLite `WakeSignal` (SPEC §13): notices records other processes commit to the database file, so an
 * idle relay delivers them within a few milliseconds instead of after its idle back-off.
 *
 * It opens a connection of its own to the file and reads `PRAGMA data_version` there every
 * `pollInterval` (default 5 ms): a value that only changes when another connection committed, read from
 * SQLite's shared memory without touching a table, a lock or an index — no claim and no count per tick.
 * When it changed, one read of the outbox's partition rows (`<prefix>outbox_fence`, one row per partition;
 * every persist raises its partition's `seq_counter`) tells which partitions received records, and those
 * are signalled through the process's `WakeHub`, which the drainers and the relay of the process wait on.
 * The relay's own completes change `data_version` too; they cost that one read and signal nothing.
 *
 * A signal is a hint: a read that fails is logged at DEBUG and skipped, and the drainers' idle back-off
 * stays the fallback. On a `:memory:` database (private to its connection) nothing is polled: only
 * persists of this process can reach it, and they wake the relay through the `WakeHub` anyway.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { InvalidConfiguration } from "../../domain/OutboxError.js"
import { WakeHub } from "../../services/WakeHub.js"
import { WakeSignal } from "../../services/WakeSignal.js"
import { isMemory } from "./SqliteDatabase.js"
import { tableNames } from "./SqliteOutboxSchema.js"
import { tablePrefix } from "./SqliteSupport.js"

/**
 * Options of the SQLite wake signal.
 *
 * @since 0.1.0
 */
export interface SqliteWakeSignalOptions {
  /** The outbox store's `tablePrefix` (default none). */
  readonly tablePrefix?: string | undefined
  /**
   * Time between two reads of `PRAGMA data_version` (default 5 ms, at least 1 ms): the longest a commit
   * of another process waits to be noticed.
   */
  readonly pollInterval?: Duration.DurationInput | undefined
}

/**
 * The default time between two reads of `PRAGMA data_version`.
 *
 * @since 0.1.0
 */
export const defaultPollInterval: Duration.Duration = Duration.millis(5)

const DataVersion = Schema.Struct({ data_version: Schema.Number })
const decodeVersion = Schema.decodeUnknown(Schema.Array(DataVersion))
const PartitionRow = Schema.Struct({ partition_key: Schema.String, seq_counter: Schema.Number })
const decodePartitions = Schema.decodeUnknown(Schema.Array(PartitionRow))

/**
 * Builds the wake signal for the database of the `SqliteClient` in the context (e.g. `SqliteDatabase.layer`):
 * opens its own connection to the same file and polls it for the life of the scope.
 *
 * @since 0.1.0
 */
export const make = (
  options: SqliteWakeSignalOptions = {}
): Effect.Effect<WakeSignal["Type"], InvalidConfiguration, SqliteClient.SqliteClient | Scope.Scope> =>
  Effect.gen(function* () {
    const problems: Array<string> = []
    const prefix = tablePrefix("SqliteWakeSignal", options.tablePrefix)
    if (Either.isLeft(prefix)) problems.push(...prefix.left.problems)
    const interval = Duration.decode(options.pollInterval ?? defaultPollInterval)
    if (!Duration.isFinite(interval) || Duration.toMillis(interval) < 1) {
      problems.push("pollInterval must be a finite duration of at least 1 millisecond")
    }
    const names = Either.isRight(prefix) ? tableNames(prefix.right) : undefined
    if (problems.length > 0 || names === undefined || Either.isLeft(names)) {
      return yield* new InvalidConfiguration({ component: "SqliteWakeSignal", problems })
    }
    const fence = names.right.fence
    const hub = yield* WakeHub
    const filename = (yield* SqliteClient.SqliteClient).config.filename
    const service = WakeSignal.of({
      awaitWork: (partitionKey) => Effect.suspend(() => hub.awaitWork(partitionKey, hub.mark())),
      awaitAnyWork: Effect.suspend(() => hub.awaitAnyWork(hub.mark()))
    })
    if (isMemory(filename)) return service

    // the connection of the signal: WAL is the stores' choice, not changed from here
    const own = yield* Layer.build(SqliteClient.layer({ filename, disableWAL: true })).pipe(
      Effect.map((context) => Context.get(context, SqlClient.SqlClient)),
      Effect.either
    )
    if (Either.isLeft(own)) {
      yield* Effect.logWarning("SQLite wake-up disabled: its connection could not be opened").pipe(
        Effect.annotateLogs({ error: own.left.message })
      )
      return service
    }
    const sql = own.right
    const readVersion = Effect.flatMap(sql.unsafe("PRAGMA data_version"), decodeVersion).pipe(
      Effect.map((rows) => rows[0]?.data_version)
    )
    const readPartitions = Effect.flatMap(
      sql.unsafe(`SELECT partition_key, seq_counter FROM ${fence}`),
      decodePartitions
    )
    // the client caches a statement that failed to prepare, so the table is looked up first until it exists
    const fenceExists = Effect.map(
      sql`SELECT name FROM sqlite_master WHERE type = 'table' AND name = ${fence}`,
      (rows) => rows.length > 0
    )
    let fenceSeen = false
    const counters = new Map<string, number>()
    /**
     * Signals every partition whose counter rose since the last read; the read at start-up only records
     * them (the relay's first claims find those records anyway).
     */
    const scan = (first: boolean) =>
      Effect.gen(function* () {
        if (!fenceSeen) {
          if (!(yield* fenceExists)) return
          fenceSeen = true
        }
        const rows = yield* readPartitions
        for (const row of rows) {
          const before = counters.get(row.partition_key)
          if (before === row.seq_counter) continue
          counters.set(row.partition_key, row.seq_counter)
          if (!first) hub.signal(row.partition_key)
        }
      })
    const logSkipped = (error: unknown) =>
      Effect.logDebug("SQLite wake-up read failed; the relay polls until the next one").pipe(
        Effect.annotateLogs({ error: error instanceof Error ? error.message : String(error) })
      )
    let last = yield* Effect.orElseSucceed(readVersion, () => undefined)
    yield* Effect.catchAll(scan(true), logSkipped)
    yield* Effect.gen(function* () {
      for (;;) {
        yield* Effect.sleep(interval)
        const version = yield* Effect.either(readVersion)
        if (Either.isLeft(version)) {
          yield* logSkipped(version.left)
          continue
        }
        if (version.right === last) continue
        last = version.right
        yield* Effect.catchAll(scan(false), logSkipped)
      }
    }).pipe(Effect.withTracerEnabled(false), Effect.forkScoped)
    return service
  })

/**
 * The wake signal with the given options. Requires the `SqliteClient` of the stores' database.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: SqliteWakeSignalOptions
): Layer.Layer<WakeSignal, InvalidConfiguration, SqliteClient.SqliteClient> => Layer.scoped(WakeSignal, make(options))

/**
 * The wake signal for tables without a prefix, polling every 5 ms.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<WakeSignal, InvalidConfiguration, SqliteClient.SqliteClient> = layerWith({})
