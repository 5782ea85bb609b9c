/**
 * The SQLite `WakeSignal` (SPEC §13): notices records other processes commit to the database file, so an
 * idle relay delivers them within a few milliseconds instead of after its idle back-off.
 *
 * It opens a connection of its own to the file (through `better-sqlite3`, the driver under
 * `@effect/sql-sqlite-node`, so that a tick costs one native call) and reads `PRAGMA data_version` there
 * every `pollInterval` (default 10 ms): a value that only changes when another connection committed, read
 * without touching a table or an index — no claim and no count per tick.
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
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { InvalidConfiguration } from "../../domain/OutboxError.js"
import { WakeHub } from "../../services/WakeHub.js"
import { WakeSignal } from "../../services/WakeSignal.js"
import { isMemory } from "./SqliteDatabase.js"
import { tableNames } from "./SqliteOutboxSchema.js"
import { driverRequire, tablePrefix } from "./SqliteSupport.js"

/**
 * Options of the SQLite wake signal.
 *
 * @since 0.1.0
 */
export interface SqliteWakeSignalOptions {
  /** The outbox store's `tablePrefix` (default none). */
  readonly tablePrefix?: string | undefined
  /**
   * Time between two reads of `PRAGMA data_version` (default 10 ms, at least 1 ms): the longest a commit
   * of another process waits to be noticed.
   */
  readonly pollInterval?: Duration.DurationInput | undefined
}

/**
 * The default time between two reads of `PRAGMA data_version`.
 *
 * @since 0.1.0
 */
export const defaultPollInterval: Duration.Duration = Duration.millis(10)

/** The part of a `better-sqlite3` statement used here. */
interface Statement {
  readonly all: (...params: ReadonlyArray<unknown>) => ReadonlyArray<unknown>
}

/** The part of a `better-sqlite3` connection used here. */
interface Connection {
  readonly prepare: (sql: string) => Statement
  readonly close: () => void
}

const isConnection = (u: unknown): u is Connection =>
  typeof u === "object" &&
  u !== null &&
  typeof Reflect.get(u, "prepare") === "function" &&
  typeof Reflect.get(u, "close") === "function"

/** Opens a `better-sqlite3` connection, the driver `@effect/sql-sqlite-node` loads (resolved from there). */
const open = (filename: string): Connection => {
  const driver: unknown = driverRequire()("better-sqlite3")
  if (typeof driver !== "function") throw new Error("better-sqlite3 did not load")
  const connection: unknown = Reflect.construct(driver, [filename, { fileMustExist: true }])
  if (!isConnection(connection)) throw new Error("better-sqlite3 returned no connection")
  return connection
}

const DataVersion = Schema.Array(Schema.Struct({ data_version: Schema.Number }))
const decodeVersion = Schema.decodeUnknownEither(DataVersion)
const PartitionRows = Schema.Array(Schema.Struct({ partition_key: Schema.String, seq_counter: Schema.Number }))
const decodePartitions = Schema.decodeUnknownEither(PartitionRows)

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

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
      awaitAnyWork: Effect.suspend(() => hub.awaitAnyWork(hub.mark())),
      awaitWorkWhere: (matches) => Effect.suspend(() => hub.awaitAnyWork(hub.mark(), matches)),
      signalsThrough: hub
    })
    if (isMemory(filename)) return service

    const opened = yield* Effect.acquireRelease(Effect.either(Effect.try(() => open(filename))), (connection) =>
      Either.isRight(connection) ? Effect.sync(() => connection.right.close()) : Effect.void
    )
    if (Either.isLeft(opened)) {
      yield* Effect.logWarning("SQLite wake-up disabled: its connection could not be opened").pipe(
        Effect.annotateLogs({ error: messageOf(opened.left.error) })
      )
      return service
    }
    const db = opened.right
    const runtime = yield* Effect.runtime<never>()
    const logSkipped = (error: unknown): void => {
      Runtime.runFork(runtime)(
        Effect.logDebug("SQLite wake-up read failed; the relay polls until the next one").pipe(
          Effect.annotateLogs({ error: messageOf(error) })
        )
      )
    }
    const versionStatement = db.prepare("PRAGMA data_version")
    const readVersion = (): number | undefined => {
      const decoded = decodeVersion(versionStatement.all())
      return Either.isRight(decoded) ? decoded.right[0]?.data_version : undefined
    }
    // prepared once the table exists: a statement on a missing table fails to prepare
    let fenceStatement: Statement | undefined
    const tableStatement = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?")
    const counters = new Map<string, number>()
    /**
     * Signals every partition whose counter rose since the last read; the read at start-up only records
     * them (the relay's first claims find those records anyway).
     */
    const scan = (first: boolean): void => {
      if (fenceStatement === undefined) {
        if (tableStatement.all(fence).length === 0) return
        fenceStatement = db.prepare(`SELECT partition_key, seq_counter FROM ${fence}`)
      }
      const rows = decodePartitions(fenceStatement.all())
      if (Either.isLeft(rows)) throw new Error(`unexpected ${fence} rows`)
      for (const row of rows.right) {
        if (counters.get(row.partition_key) === row.seq_counter) continue
        counters.set(row.partition_key, row.seq_counter)
        if (!first) hub.signal(row.partition_key)
      }
    }
    let last: number | undefined
    try {
      last = readVersion()
      scan(true)
    } catch (error) {
      logSkipped(error)
    }
    const tick = (): void => {
      try {
        const version = readVersion()
        if (version === last) return
        last = version
        scan(false)
      } catch (error) {
        logSkipped(error)
      }
    }
    yield* Effect.acquireRelease(
      Effect.sync(() => setInterval(tick, Duration.toMillis(interval))),
      (handle) => Effect.sync(() => clearInterval(handle))
    )
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
 * The wake signal for tables without a prefix, polling every 10 ms.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<WakeSignal, InvalidConfiguration, SqliteClient.SqliteClient> = layerWith({})
