/**
 * WAL checkpoints off the process's thread, for a file database opened by `SqliteDatabase.layer` with
 * `checkpoint: "background"` (the CLI's relay opens its database so).
 *
 * SQLite checkpoints a WAL database on the commit that takes the log past 1000 pages: that commit copies the log
 * into the database file and syncs it before it returns, and with `better-sqlite3` it does so on the process's one
 * thread. Every fiber of the process waits meanwhile. With an application's process writing to the same file, the
 * log grows with both processes' commits, and a relay's many small commits are the ones that pay.
 *
 * Here the connection's own checkpoints wait for a log ten times as long (`PRAGMA wal_autocheckpoint`, 10000 pages
 * by default: a bound should the worker fall behind) and a worker thread with a connection of its own checkpoints
 * instead. The worker starts once the log file first reaches {@link defaultStartAtWalBytes} (a database whose log
 * stays shorter never starts a thread), then takes a turn every `interval` when another connection committed since
 * its last look (`PRAGMA data_version`):
 *
 * - a passive checkpoint (`PRAGMA wal_checkpoint(PASSIVE)`) copies what it can without waiting for any lock and
 *   without holding up a reader or a writer;
 * - when the log is as long as the connection's own threshold (its `wal_autocheckpoint`, 1000 pages by default),
 *   a restarting checkpoint (`RESTART`) copies what the passive one could not, so that the next commit starts the
 *   log again from its beginning. It waits, at most 10 ms, for the writer of the moment, then holds writers off
 *   while it copies and while it waits for the connections still reading the log; their fibers wait asleep (the
 *   stores take the write lock without blocking the thread). Otherwise the log would start again only when a
 *   commit happened to begin right after a complete copy, and under steady writes from two processes it grew to
 *   more than 150 MB in a few seconds (bench/drain.ts).
 *
 * When the worker cannot start, or fails, it is stopped, a warning is logged and the connection checkpoints on its
 * commits again (its previous `wal_autocheckpoint`), so the log never grows without bound. Closing the database
 * checkpoints what is left, as SQLite does when its last connection closes.
 *
 * @since 0.2.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as fs from "node:fs"
import { Worker } from "node:worker_threads"
import { InvalidConfiguration } from "../../domain/OutboxError.js"
import { driverRequire } from "./SqliteSupport.js"

/**
 * Options of {@link run}.
 *
 * @since 0.2.0
 */
export interface BackgroundCheckpointOptions {
  /** The database file: a path (not `":memory:"` or a `file:` URI). */
  readonly filename: string
  /** The time between two turns of the running worker (default {@link defaultInterval}). */
  readonly interval?: Duration.DurationInput | undefined
  /** The size of the WAL file at which the worker is started (default {@link defaultStartAtWalBytes}). */
  readonly startAtWalBytes?: number | undefined
  /**
   * The `better-sqlite3` module the worker opens its connection with (default: the one `@effect/sql-sqlite-node`
   * loads). A module that does not load stops background checkpoints as a failing worker does.
   */
  readonly driver?: string | undefined
}

/**
 * The time between two turns of the worker: 100 milliseconds.
 *
 * @since 0.2.0
 */
export const defaultInterval: Duration.Duration = Duration.millis(100)

/**
 * The size of the WAL file at which the worker starts: 4 MiB, SQLite's own 1000 pages of 4 KiB. A database whose
 * log never grows that far never starts a thread.
 *
 * @since 0.2.0
 */
export const defaultStartAtWalBytes = 4 * 1024 * 1024

/**
 * The worker could not start, or failed.
 *
 * @since 0.2.0
 */
export class CheckpointFailure extends Data.TaggedError("CheckpointFailure")<{ readonly message: string }> {}

/**
 * The worker's code (a CommonJS script): opens the file, says `ready`, then takes a turn every `intervalMillis`
 * (see the module doc: a passive checkpoint, and a restarting one when the log is `restartFrames` long). A turn
 * that left the log that long looks again at the next turn even without a new commit. A busy or locked error
 * (another connection checkpointing) waits for the next turn; any other error is reported and ends the worker.
 */
const workerCode = `
const { parentPort, workerData } = require("node:worker_threads")
;(() => {
  let db
  try {
    const Sqlite = require(workerData.driver)
    db = new Sqlite(workerData.filename, { fileMustExist: true })
  } catch (error) {
    parentPort.postMessage({ type: "failed", message: String((error && error.message) || error) })
    return
  }
  const dataVersion = db.prepare("PRAGMA data_version").pluck()
  const passive = db.prepare("PRAGMA wal_checkpoint(PASSIVE)")
  const restart = db.prepare("PRAGMA wal_checkpoint(RESTART)")
  // a restarting checkpoint waits this long at most for the writer and the readers of the moment
  db.pragma("busy_timeout = " + workerData.restartWaitMillis)
  let seen = undefined
  const long = (row) => row.log >= workerData.restartFrames
  const turn = () => {
    try {
      const version = dataVersion.get()
      if (version !== seen) {
        seen = version
        let row = passive.get()
        // the log long: copy the rest, holding writers off a moment, so that the next commit starts it again
        if (row.busy === 0 && long(row)) row = restart.get()
        // still long: look again next turn even without a new commit
        if (row.busy !== 0 || long(row)) seen = undefined
      }
    } catch (error) {
      const code = error && error.code
      if (code !== "SQLITE_BUSY" && code !== "SQLITE_LOCKED") {
        parentPort.postMessage({ type: "failed", message: String((error && error.message) || error) })
        return
      }
      seen = undefined
    }
    setTimeout(turn, workerData.intervalMillis)
  }
  parentPort.postMessage({ type: "ready" })
  setTimeout(turn, 0)
})()
`

/** How many times longer than its own threshold the connection lets the log grow before it checkpoints inline. */
const safetyFactor = 10

/** The driver `@effect/sql-sqlite-node` loads (as `SqliteWakeSignal` opens it). */
const defaultDriver = (): string => driverRequire().resolve("better-sqlite3")

/** The size of the WAL file, 0 when there is none. */
const walBytes = (walFile: string): number => {
  try {
    return fs.statSync(walFile).size
  } catch {
    return 0
  }
}

const messageOf = (u: unknown): string => (u instanceof Error ? u.message : String(u))

/** The connection's `wal_autocheckpoint` as SQLite reports it; SQLite's default, 1000, when it reports none. */
const autocheckpointOf = (rows: ReadonlyArray<unknown>): number => {
  const value = field(rows[0], "wal_autocheckpoint")
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : 1000
}

/** A field of an object (a message from the worker, a row SQLite returned); `undefined` for anything else. */
const field = (message: unknown, name: string): unknown =>
  typeof message === "object" && message !== null ? Reflect.get(message, name) : undefined

/** What the worker is started with. */
interface WorkerData {
  readonly driver: string
  readonly filename: string
  /** Milliseconds between two turns of the worker. */
  readonly intervalMillis: number
  /** The log's length in frames from which the worker checkpoints again at once (see `workerCode`). */
  readonly restartFrames: number
  /** How long a restarting checkpoint waits for the connections using the log (its busy timeout). */
  readonly restartWaitMillis: number
}

/** How long a restarting checkpoint waits for the connections using the log: its writers wait meanwhile. */
const restartWaitMillis = 10

/**
 * Starts the worker (terminated when the scope closes), waits for it to open its connection, and returns what
 * waits for its failure: an error it reports, an uncaught error, or its exit.
 */
const start = (
  workerData: WorkerData
): Effect.Effect<Effect.Effect<never, CheckpointFailure>, CheckpointFailure, Scope.Scope> =>
  Effect.gen(function* () {
    const worker = yield* Effect.acquireRelease(
      Effect.try({
        try: () => new Worker(workerCode, { eval: true, workerData }),
        catch: (error) => new CheckpointFailure({ message: messageOf(error) })
      }),
      (w) => Effect.promise(() => w.terminate())
    )
    // the worker never keeps the process alive on its own
    worker.unref()
    const ready = yield* Deferred.make<void, CheckpointFailure>()
    const failed = yield* Deferred.make<never, CheckpointFailure>()
    const fail = (message: string): void => {
      const failure = Effect.fail(new CheckpointFailure({ message }))
      Deferred.unsafeDone(ready, failure)
      Deferred.unsafeDone(failed, failure)
    }
    worker.on("message", (message: unknown) => {
      if (field(message, "type") === "ready") Deferred.unsafeDone(ready, Effect.void)
      else fail(String(field(message, "message") ?? "unexpected message"))
    })
    worker.on("error", (error: unknown) => fail(messageOf(error)))
    worker.on("exit", (code: number) => fail(`the checkpoint worker exited (code ${code})`))
    yield* Deferred.await(ready)
    return Deferred.await(failed)
  })

/**
 * Leaves the connection's checkpoints to a worker thread for the life of the scope (see the module doc). Fails
 * `InvalidConfiguration` naming each bad option, and `SqlError` when the connection's `wal_autocheckpoint` cannot
 * be read or set. Everything after that runs in a fiber of the scope; when it stops on a failure, a warning is
 * logged and the connection's previous `wal_autocheckpoint` is restored.
 *
 * @since 0.2.0
 */
export const run = (
  options: BackgroundCheckpointOptions
): Effect.Effect<void, SqlError | InvalidConfiguration, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function* () {
    const interval = Duration.decode(options.interval ?? defaultInterval)
    const startAt = options.startAtWalBytes ?? defaultStartAtWalBytes
    const problems: Array<string> = []
    if (!Duration.isFinite(interval) || Duration.toMillis(interval) < 1) {
      problems.push("interval must be a finite duration of at least 1 millisecond")
    }
    if (!Number.isSafeInteger(startAt) || startAt < 0) problems.push("startAtWalBytes must be a non-negative integer")
    if (problems.length > 0) return yield* new InvalidConfiguration({ component: "SqliteCheckpoint", problems })
    const sql = yield* SqlClient.SqlClient
    const walFile = `${options.filename}-wal`
    const previous = autocheckpointOf(yield* sql.unsafe("PRAGMA wal_autocheckpoint"))
    // the log's length past which the worker checkpoints at once: the connection's own checkpoint threshold
    const restartFrames = previous > 0 ? previous : 1000
    // the connection's own checkpoints only as a bound, should the worker fall behind (writes that never pause)
    yield* sql.unsafe(`PRAGMA wal_autocheckpoint = ${safetyFactor * restartFrames}`)
    // the pragma's value cannot be bound; this is the integer the connection reported
    const restore = Effect.catchAll(sql.unsafe(`PRAGMA wal_autocheckpoint = ${previous}`), (error) =>
      Effect.logWarning("SQLite automatic checkpoints could not be turned back on").pipe(
        Effect.annotateLogs({ error: error.message })
      )
    )
    const scope = yield* Effect.scope
    // the worker lives in the loop's own scope: stopped with the loop, whether it failed or was interrupted
    const loop = Effect.scoped(
      Effect.gen(function* () {
        // no thread until the log first grows as long as SQLite itself would checkpoint it
        while (walBytes(walFile) < startAt) yield* Effect.sleep(interval)
        const driver = yield* Effect.try({
          try: () => options.driver ?? defaultDriver(),
          catch: (error) => new CheckpointFailure({ message: messageOf(error) })
        })
        const failed = yield* start({
          driver,
          filename: options.filename,
          intervalMillis: Math.max(1, Math.round(Duration.toMillis(interval))),
          restartFrames,
          restartWaitMillis
        })
        return yield* failed
      })
    )
    yield* Effect.forkIn(
      Effect.catchAll(loop, (failure) =>
        Effect.zipRight(
          Effect.logWarning(
            "SQLite background checkpoints stopped; the connection checkpoints on its own commits again"
          ).pipe(Effect.annotateLogs({ error: failure.message })),
          restore
        )
      ),
      scope
    )
  })
