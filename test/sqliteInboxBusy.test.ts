/**
 * The shared SQL inbox's unit (`SqlInbox.make` → `atomically`) on a real SQLite file with a second connection
 * holding the write lock (busy timeout 0, so every lock conflict is an immediate `SQLITE_BUSY`): a busy failure
 * is retried at most 20 more times while the unit has not recorded the id, never once the id was recorded (a
 * handler may have run), never inside a caller's transaction, and any other failure is not retried (SPEC §12).
 * Those rules are the shared unit's, tested with the client's own `sql.withTransaction` (a deferred `BEGIN`:
 * the body's first write meets the lock). The SQLite dialect's unit begins with the lock taken
 * (`SqliteDatabase.writeTransactionOn`): no body runs while another connection holds it, and the wait does not
 * block the thread (the last tests).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"
import * as SqlInbox from "../src/layers/sql/SqlInbox.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteInboxStore from "../src/layers/sqlite/SqliteInboxStore.js"
import { isBusy } from "../src/layers/sqlite/SqliteSupport.js"
import * as Inbox from "../src/programs/Inbox.js"
import * as InboxStore from "../src/services/InboxStore.js"
import * as SqliteWriteLock from "./support/SqliteWriteLock.js"

const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-sqlite-inbox-busy-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))

let files = 0

/** The SQLite dialect with the client's own `sql.withTransaction` for a unit (a deferred `BEGIN`). */
const deferredDialect: SqlInbox.SqlInboxDialect = { ...SqliteInboxStore.dialect(""), transaction: undefined }

/**
 * Two connections to a fresh file and the inbox backend on the first, with `dialect`; the first waits on a lock
 * for `busyTimeout`, the second never.
 */
const connections = (dialect: SqlInbox.SqlInboxDialect, busyTimeout: Duration.Duration) =>
  Effect.gen(function* () {
    const filename = path.join(directory, `busy-${++files}.db`)
    const main = yield* Layer.build(SqliteDatabase.layer({ filename, busyTimeout }))
    const other = yield* Layer.build(SqliteDatabase.layer({ filename, busyTimeout: Duration.zero }))
    const sql = Context.get(main, SqlClient.SqlClient)
    const otherSql = Context.get(other, SqlClient.SqlClient)
    yield* Effect.provide(SqliteInboxStore.migrate(), main)
    yield* sql.unsafe("CREATE TABLE orders_seen (order_id TEXT PRIMARY KEY)")
    const backend = yield* Effect.provide(SqlInbox.make(dialect), main)
    return { sql, otherSql, backend }
  })

const twoConnections = connections(deferredDialect, Duration.zero)

const entry: InboxStore.ProcessedEntry = {
  consumer: "c",
  messageId: "m1",
  partitionKey: "p",
  processedAtMillis: 0,
  expiresAtMillis: 1
}

/**
 * Runs a statement of the other connection from inside a unit: without the unit's transaction in context (the
 * client would otherwise run it on the unit's own connection).
 */
const onOther = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.mapInputContext(effect, (context: Context.Context<never>) =>
    Context.omit(SqlClient.TransactionConnection)(context)
  )

const Count = Schema.Array(Schema.Struct({ n: Schema.Number }))

const ordersSeen = (sql: SqlClient.SqlClient) =>
  Effect.map(
    Effect.flatMap(sql.unsafe("SELECT count(*) AS n FROM orders_seen"), Schema.decodeUnknown(Count)),
    (rows) => rows[0]?.n
  )

/**
 * A unit of `dialect`'s backend (busy timeout none) whose body runs `statement`, while another connection holds
 * the write lock when `locked`: how many times its body ran, and the failure it ended with. Nothing of it is
 * stored.
 */
const failingUnit = (dialect: SqlInbox.SqlInboxDialect, statement: string, locked: boolean) =>
  Effect.gen(function* () {
    const { backend, otherSql, sql } = yield* connections(dialect, Duration.zero)
    if (locked) yield* otherSql.unsafe("BEGIN IMMEDIATE")
    let attempts = 0
    const error = yield* Effect.flip(
      backend.atomically(() =>
        Effect.zipRight(
          Effect.sync(() => void (attempts += 1)),
          sql.unsafe(statement)
        )
      )
    )
    if (locked) yield* otherSql.unsafe("ROLLBACK")
    expect(yield* ordersSeen(sql)).toBe(0)
    return { attempts, error }
  })

/** {@link failingUnit} inserting an order while another connection holds the lock. */
const underOthersLock = (dialect: SqlInbox.SqlInboxDialect) =>
  failingUnit(dialect, "INSERT INTO orders_seen (order_id) VALUES ('o1')", true)

describe("SqlInbox unit on SQLite: busy failures", () => {
  it.scoped("a busy failure before the id is recorded is retried, at most 20 more times", () =>
    Effect.gen(function* () {
      const { attempts, error } = yield* underOthersLock(deferredDialect)
      expect(attempts).toBe(21)
      expect(error._tag).toBe("StoreUnavailable")
      if (error._tag === "StoreUnavailable") expect(isBusy(error.cause)).toBe(true)
    })
  )

  it.scoped("a unit that was busy succeeds once the lock is released, and commits its writes once", () =>
    Effect.gen(function* () {
      const { backend, otherSql, sql } = yield* twoConnections
      yield* otherSql.unsafe("BEGIN IMMEDIATE")
      let attempts = 0
      const value = yield* backend.atomically((unit) =>
        Effect.gen(function* () {
          attempts += 1
          // the lock holder lets go before the third attempt
          if (attempts === 3) yield* onOther(otherSql.unsafe("COMMIT"))
          const fresh = yield* unit.record(entry)
          yield* sql.unsafe("INSERT INTO orders_seen (order_id) VALUES ('o1')")
          return fresh
        })
      )
      expect(value).toBe(true)
      expect(attempts).toBe(3)
      expect(yield* backend.isProcessed("c", "m1")).toBe(true)
      expect(yield* ordersSeen(sql)).toBe(1)
    })
  )

  it.scoped("a busy failure after the id was recorded is not retried, and nothing of the unit commits", () =>
    Effect.gen(function* () {
      const { backend, otherSql, sql } = yield* twoConnections
      let attempts = 0
      const error = yield* Effect.flip(
        backend.atomically((unit) =>
          Effect.gen(function* () {
            attempts += 1
            expect(yield* unit.record(entry)).toBe(true)
            yield* sql.unsafe("INSERT INTO orders_seen (order_id) VALUES ('o1')")
            // the unit holds the write lock now: the other connection's write is refused as busy
            yield* onOther(otherSql.unsafe("INSERT INTO orders_seen (order_id) VALUES ('o2')"))
          })
        )
      )
      expect(attempts).toBe(1)
      expect(error._tag).toBe("StoreUnavailable")
      if (error._tag === "StoreUnavailable") expect(isBusy(error.cause)).toBe(true)
      expect(yield* backend.isProcessed("c", "m1")).toBe(false)
      expect(yield* ordersSeen(sql)).toBe(0)
    })
  )

  it.scoped("inside a caller's transaction a busy failure is not retried: only the caller may retry", () =>
    Effect.gen(function* () {
      const { backend, otherSql, sql } = yield* twoConnections
      yield* otherSql.unsafe("BEGIN IMMEDIATE")
      let attempts = 0
      const error = yield* Effect.flip(
        sql.withTransaction(
          backend.atomically(() =>
            Effect.zipRight(
              Effect.sync(() => void (attempts += 1)),
              sql.unsafe("INSERT INTO orders_seen (order_id) VALUES ('o1')")
            )
          )
        )
      )
      expect(attempts).toBe(1)
      expect(error._tag).toBe("StoreUnavailable")
      yield* otherSql.unsafe("ROLLBACK")
      expect(yield* ordersSeen(sql)).toBe(0)
    })
  )

  it.scoped("a failure other than busy is not retried", () =>
    Effect.gen(function* () {
      const { attempts, error } = yield* failingUnit(deferredDialect, "INSERT INTO no_such_table (x) VALUES (1)", false)
      expect(attempts).toBe(1)
      expect(error._tag).toBe("StoreUnavailable")
      if (error._tag === "StoreUnavailable") expect(isBusy(error.cause)).toBe(false)
    })
  )

  it.scoped(
    "Inbox.process while another connection holds the lock: a retryable failure, no handler run, then Processed",
    () =>
      Effect.gen(function* () {
        const { backend, otherSql, sql } = yield* twoConnections
        const store = InboxStore.make(backend, yield* InboxStore.validateOptions("test", {}))
        const message = { messageId: "m1", partitionKey: "p", orderingKey: "k", seq: 1 }
        let runs = 0
        const handler = Effect.zipRight(
          Effect.sync(() => void (runs += 1)),
          sql.unsafe("INSERT INTO orders_seen (order_id) VALUES ('o1')")
        )
        yield* otherSql.unsafe("BEGIN IMMEDIATE")
        const exit = yield* Effect.exit(store.process("c", message, handler))
        expect(Inbox.disposition(exit)._tag).toBe("Retry")
        expect(runs).toBe(0)
        yield* otherSql.unsafe("ROLLBACK")
        expect(yield* store.isProcessed("c", "m1")).toBe(false)
        expect((yield* store.process("c", message, handler))._tag).toBe("Processed")
        expect(runs).toBe(1)
        expect(yield* ordersSeen(sql)).toBe(1)
        expect((yield* store.process("c", message, handler))._tag).toBe("Duplicate")
        expect(runs).toBe(1)
      })
  )
  it.scoped(
    "the SQLite dialect's unit begins with the write lock: no body runs while another connection holds it",
    () =>
      Effect.gen(function* () {
        const { attempts, error } = yield* underOthersLock(SqliteInboxStore.dialect(""))
        // every try failed at its BEGIN (and was retried: nothing was recorded)
        expect(attempts).toBe(0)
        expect(error._tag).toBe("StoreUnavailable")
        if (error._tag === "StoreUnavailable") expect(isBusy(error.cause)).toBe(true)
      })
  )

  it.live("the SQLite dialect's unit waits for the lock with the thread free, and runs once it is released", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { backend, otherSql, sql } = yield* connections(SqliteInboxStore.dialect(""), Duration.minutes(2))
        yield* otherSql.unsafe("BEGIN IMMEDIATE")
        let attempts = 0
        const unit = yield* Effect.fork(
          backend.atomically((inbox) =>
            Effect.gen(function* () {
              attempts += 1
              const fresh = yield* inbox.record(entry)
              yield* sql.unsafe("INSERT INTO orders_seen (order_id) VALUES ('o1')")
              return fresh
            })
          )
        )
        // SQLite's busy handler would hold this thread for the two-minute busy timeout
        expect(yield* SqliteWriteLock.ticks).toBe(10)
        expect(attempts).toBe(0)
        yield* otherSql.unsafe("COMMIT")
        expect(yield* Fiber.join(unit)).toBe(true)
        expect(attempts).toBe(1)
        expect(yield* backend.isProcessed("c", "m1")).toBe(true)
        expect(yield* ordersSeen(sql)).toBe(1)
      })
    )
  )
})
