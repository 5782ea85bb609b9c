/**
 * WAL checkpoints on a worker thread (`SqliteCheckpoint`, `SqliteDatabase.layer`'s `checkpoint: "background"`): the
 * connection of the process checkpoints by itself only past ten times its threshold, the worker copies the log
 * into the database file once the log has grown past its threshold and the next commit then starts the log again,
 * a worker that cannot start gives the checkpoints back to the connection, and closing the database still leaves
 * no log behind. Real files and a real worker thread; the waits are bounded polls.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as SqliteCheckpoint from "../src/layers/sqlite/SqliteCheckpoint.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteBackend from "../src/programs/cli/SqliteBackend.js"

const root = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-checkpoint-"))
afterAll(() => fs.rmSync(root, { recursive: true, force: true }))
let files = 0
const freshFile = (): string => path.join(root, `db-${++files}.sqlite`)

const MiB = 1024 * 1024

const autocheckpoint = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.map(
    sql.unsafe<{ readonly wal_autocheckpoint: number }>("PRAGMA wal_autocheckpoint"),
    (rows) => rows[0]?.wal_autocheckpoint
  )
)

/** Writes about `mebibytes` MiB of random 4 KiB blobs, 100 rows a commit. */
const write = (mebibytes: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql.unsafe("CREATE TABLE IF NOT EXISTS t (x BLOB)")
    for (let i = 0; i < Math.ceil((mebibytes * MiB) / (100 * 4096)); i++) {
      yield* sql.unsafe(
        "INSERT INTO t SELECT randomblob(4096) FROM " +
          "(WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 100) SELECT n FROM c)"
      )
    }
  })

const sizeOf = (file: string): number => (fs.existsSync(file) ? fs.statSync(file).size : 0)

/** Polls `condition` every 20 ms for up to 15 seconds; fails with `what` when it never holds. */
const eventually = (what: string, condition: () => boolean) =>
  Effect.gen(function* () {
    for (let i = 0; i < 750; i++) {
      if (condition()) return
      yield* Effect.sleep("20 millis")
    }
    return yield* Effect.dieMessage(`never happened: ${what}`)
  })

describe("SqliteCheckpoint", { timeout: 60_000 }, () => {
  it.live("the connection leaves checkpoints to the worker, which copies the log once it passed 4 MiB", () => {
    const filename = freshFile()
    return Effect.gen(function* () {
      expect(yield* autocheckpoint).toBe(10_000)
      // below the threshold: no worker, and nothing checkpoints the log
      yield* write(1)
      yield* Effect.sleep("400 millis")
      expect(sizeOf(filename)).toBeLessThan(MiB / 2)
      expect(sizeOf(`${filename}-wal`)).toBeGreaterThan(MiB)
      // past it: the worker starts and the pages reach the database file
      yield* write(5)
      yield* eventually("the database file holds the written pages", () => sizeOf(filename) > 5 * MiB)
      expect(yield* autocheckpoint).toBe(10_000)
    }).pipe(Effect.provide(SqliteDatabase.layer({ filename, checkpoint: "background" })))
  })

  it.live("by default (inline) the connection keeps SQLite's own checkpoints", () =>
    Effect.gen(function* () {
      expect(yield* autocheckpoint).toBe(1000)
    }).pipe(Effect.provide(SqliteDatabase.layer({ filename: freshFile() })))
  )

  it.live("an in-memory database keeps SQLite's own checkpoints (there is no log to move)", () =>
    Effect.gen(function* () {
      expect(yield* autocheckpoint).toBe(1000)
    }).pipe(Effect.provide(SqliteDatabase.layer({ filename: ":memory:", checkpoint: "background" })))
  )

  it.live("a worker that cannot start gives the checkpoints back to the connection, with a warning", () => {
    const filename = freshFile()
    const warnings: Array<string> = []
    const logger = Logger.make(({ logLevel, message }) => {
      if (logLevel._tag === "Warning") warnings.push(String(message))
    })
    return Effect.gen(function* () {
      yield* SqliteCheckpoint.run({
        filename,
        interval: "10 millis",
        startAtWalBytes: 64 * 1024,
        driver: path.join(root, "no-such-driver.js")
      })
      expect(yield* autocheckpoint).toBe(10_000)
      yield* write(1)
      yield* eventually("the connection's own checkpoints are back", () => warnings.length > 0)
      expect(yield* autocheckpoint).toBe(1000)
      expect(warnings.join("\n")).toContain("background checkpoints stopped")
      // and the connection checkpoints on its commits again: the log's pages reach the database file
      yield* write(6)
      expect(sizeOf(filename)).toBeGreaterThan(2 * MiB)
    }).pipe(
      Effect.scoped,
      Effect.provide(
        Layer.merge(
          SqliteDatabase.layer({ filename, checkpoint: "inline" }),
          Logger.replace(Logger.defaultLogger, logger)
        )
      )
    )
  })

  it.live("once the worker copied a long log, the next commit starts the log again from its beginning", () => {
    const filename = freshFile()
    return Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* SqliteCheckpoint.run({ filename, interval: "10 millis", startAtWalBytes: 0 })
      // about 12 MiB of pages, copied by the worker while nothing writes
      yield* write(6)
      yield* eventually("the database file holds the written pages", () => sizeOf(filename) > 6 * MiB)
      yield* Effect.sleep("100 millis")
      const longest = sizeOf(`${filename}-wal`)
      // one more commit of 200 pages: written at the log's beginning, the file does not grow
      yield* write(0.4)
      const [row] = yield* sql.unsafe<{ readonly log: number }>("PRAGMA wal_checkpoint(PASSIVE)")
      expect(row?.log).toBeLessThan(400)
      expect(sizeOf(`${filename}-wal`)).toBe(longest)
    }).pipe(Effect.scoped, Effect.provide(SqliteDatabase.layer({ filename, checkpoint: "inline" })))
  })

  it.live("bad options are refused, each named, before the connection is touched", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        SqliteCheckpoint.run({ filename: freshFile(), interval: "0 millis", startAtWalBytes: -1 })
      )
      expect(error._tag).toBe("InvalidConfiguration")
      if (error._tag === "InvalidConfiguration") {
        expect(error.problems).toEqual([
          "interval must be a finite duration of at least 1 millisecond",
          "startAtWalBytes must be a non-negative integer"
        ])
      }
      expect(yield* autocheckpoint).toBe(1000)
    }).pipe(Effect.scoped, Effect.provide(SqliteDatabase.layer({ filename: freshFile() })))
  )

  it("the CLI's relay checkpoints its database in the background; its other commands inline", () => {
    const settings = { sqliteFile: "outbox.db", sqliteSynchronous: "FULL" } as const
    expect(SqliteBackend.databaseOptions(settings, { relay: true }).checkpoint).toBe("background")
    expect(SqliteBackend.databaseOptions(settings, { relay: false }).checkpoint).toBe("inline")
    expect(SqliteBackend.databaseOptions(settings, {}).checkpoint).toBe("inline")
  })

  it.live("closing the database checkpoints what is left and removes the log", () => {
    const filename = freshFile()
    return Effect.gen(function* () {
      yield* write(6).pipe(Effect.provide(SqliteDatabase.layer({ filename, checkpoint: "background" })))
      expect(sizeOf(`${filename}-wal`)).toBe(0)
      expect(sizeOf(filename)).toBeGreaterThan(6 * MiB)
    })
  })
})
