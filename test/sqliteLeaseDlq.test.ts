/**
 * The lease and dead-letter contracts on SQLite (`:memory:` and a shared file), plus SQLite-specific
 * behaviour: several connections racing for one lease, state surviving a reopen, table prefixes,
 * query plans, stored representation, and redrive's single transaction.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"
import { DeadLetterEntry } from "../src/domain/DeadLetterEntry.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteDeadLetterStore from "../src/layers/sqlite/SqliteDeadLetterStore.js"
import * as SqliteLeaseStore from "../src/layers/sqlite/SqliteLeaseStore.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import { DeadLetterStore } from "../src/services/DeadLetterStore.js"
import { LeaseStore } from "../src/services/LeaseStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { deadLetterStoreContract } from "./contract/DeadLetterStoreContract.js"
import { leaseStoreContract } from "./contract/LeaseStoreContract.js"
import * as BusySqlClient from "./support/BusySqlClient.js"
import * as SqliteWriteLock from "./support/SqliteWriteLock.js"

const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-sqlite-lease-dlq-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))
let files = 0
const freshFile = (): string => path.join(directory, `db-${++files}`, "outbox.db")

const database = (filename = ":memory:") => SqliteDatabase.layer({ filename })

/** Dead-letter store, outbox store and the SqlClient of one database. */
const dlqOn = (filename: string, options: SqliteDeadLetterStore.SqliteDeadLetterStoreOptions = {}) =>
  SqliteDeadLetterStore.layerWith(options).pipe(
    Layer.provideMerge(SqliteOutboxStore.layer),
    Layer.provideMerge(database(filename))
  )

leaseStoreContract("sqlite", () => SqliteLeaseStore.layer.pipe(Layer.provide(database())))

// A small delete chunk so that deleteWhere/purge page through several statements.
deadLetterStoreContract("sqlite", () => dlqOn(":memory:", { deleteChunk: 64 }))

// One file shared by every test of the suite: the contract keeps to its own keys, routes and windows.
const sharedFile = freshFile()
leaseStoreContract("sqlite-file", () => SqliteLeaseStore.layer.pipe(Layer.provide(database(sharedFile))))
deadLetterStoreContract("sqlite-file", () => dlqOn(sharedFile))

const entry = (id: string, failedAt: number, fields: Partial<DeadLetterEntry> = {}): DeadLetterEntry =>
  new DeadLetterEntry({
    id,
    recordId: `rec-${id}`,
    partitionKey: `pk-${id}`,
    envelopeId: `env-${id}`,
    bindingId: "b",
    payload: new Uint8Array([1, 2, 3]),
    headers: { h: "v" },
    category: "permanent",
    reason: "rejected",
    errorCode: "E400",
    lastError: "400",
    attempts: 2,
    failedAt: DateTime.unsafeMake(failedAt),
    ...fields
  })

describe("SqliteLeaseStore", () => {
  it.live("§4 acquirers on two connections to one file (two processes): exactly one winner", () =>
    Effect.gen(function* () {
      const filename = freshFile()
      const connection = () =>
        SqliteLeaseStore.layer.pipe(Layer.provide(SqliteDatabase.layer({ filename, busyTimeout: "20 millis" })))
      // build the schema once, then open two independent connections
      yield* Effect.provide(Effect.void, connection())
      const [one, two] = yield* Effect.all([Layer.build(connection()), Layer.build(connection())])
      const attempt = (context: typeof one, owner: string) =>
        Effect.either(Effect.flatMap(LeaseStore, (leases) => leases.acquire("p", owner, "1 minute"))).pipe(
          Effect.provide(context)
        )
      const outcomes = yield* Effect.all(
        Array.from({ length: 10 }, (_, i) => attempt(i % 2 === 0 ? one : two, `node-${i}`)),
        { concurrency: "unbounded" }
      )
      const winners = outcomes.filter((outcome) => outcome._tag === "Right")
      expect(winners).toHaveLength(1)
      for (const outcome of outcomes) {
        if (outcome._tag === "Left") expect(outcome.left._tag).toBe("LeaseHeld")
      }
      const winner = winners[0]
      if (winner?._tag !== "Right") return
      for (const context of [one, two]) {
        const current = yield* Effect.provide(
          Effect.flatMap(LeaseStore, (leases) => leases.current("p")),
          context
        )
        expect(current.token.owner).toBe(winner.right.token.owner)
        expect(current.token.version).toBe(winner.right.token.version)
      }
    }).pipe(Effect.scoped)
  )

  it.effect("§4 leases and the version high-water mark survive reopening the file", () =>
    Effect.gen(function* () {
      const filename = freshFile()
      const layer = SqliteLeaseStore.layer.pipe(Layer.provide(database(filename)))
      const first = yield* Effect.provide(
        Effect.flatMap(LeaseStore, (leases) => leases.acquire("p", "node-a", "1 minute")),
        layer
      )
      const afterReopen = yield* Effect.provide(
        Effect.gen(function* () {
          const leases = yield* LeaseStore
          const current = yield* leases.current("p")
          expect(current.token.version).toBe(first.token.version)
          expect((yield* Effect.flip(leases.acquire("p", "node-b", "1 minute")))._tag).toBe("LeaseHeld")
          yield* leases.release("p", first.token)
        }),
        layer
      ).pipe(
        Effect.zipRight(
          Effect.provide(
            Effect.flatMap(LeaseStore, (l) => l.acquire("p", "node-b", "1 minute")),
            layer
          )
        )
      )
      expect(afterReopen.token.version).toBeGreaterThan(first.token.version)
    })
  )

  it.effect("tablePrefix keeps separate lease tables, and building a layer twice runs its migrations once", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const a = yield* Layer.build(SqliteLeaseStore.layerWith({ tablePrefix: "a_" }))
      const b = yield* Layer.build(SqliteLeaseStore.layerWith({ tablePrefix: "b_" }))
      yield* Layer.build(SqliteLeaseStore.layerWith({ tablePrefix: "a_" }))
      const leaseA = yield* Effect.provide(
        Effect.flatMap(LeaseStore, (l) => l.acquire("p", "node-a", "1 minute")),
        a
      )
      const leaseB = yield* Effect.provide(
        Effect.flatMap(LeaseStore, (l) => l.acquire("p", "node-b", "1 minute")),
        b
      )
      expect(leaseA.token.owner).toBe("node-a")
      expect(leaseB.token.owner).toBe("node-b")
      const tables = yield* sql<{
        readonly name: string
      }>`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`
      const names = tables.map((t) => t.name)
      expect(names).toEqual(
        expect.arrayContaining([
          "a_outbox_lease",
          "a_outbox_lease_migrations",
          "b_outbox_lease",
          "b_outbox_lease_migrations"
        ])
      )
      const migrations = yield* sql<{ readonly n: number }>`SELECT count(*) AS n FROM a_outbox_lease_migrations`
      expect(migrations[0]?.n).toBe(1)
    }).pipe(Effect.scoped, Effect.provide(database()))
  )

  it.effect("an invalid tablePrefix fails the layer with InvalidConfiguration", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(
        Effect.provide(LeaseStore, SqliteLeaseStore.layerWith({ tablePrefix: "x; DROP TABLE y" }))
      )
      expect(Exit.isFailure(exit)).toBe(true)
      if (Exit.isFailure(exit)) expect(JSON.stringify(exit.cause)).toContain("InvalidConfiguration")
    }).pipe(Effect.provide(database()))
  )

  /** A lease store whose lease-table reads are counted (and can be made to fail busy). */
  const countedReads = () => {
    const faults: BusySqlClient.BusyFaults = {
      ...BusySqlClient.makeFaults(),
      match: (sql) => /^\s*SELECT\b[\s\S]*outbox_lease\b/i.test(sql) && !/migrations/.test(sql)
    }
    const layer = SqliteLeaseStore.layer.pipe(
      Layer.provide(BusySqlClient.layer(faults, BusySqlClient.seededRandom(11))),
      Layer.provide(database())
    )
    return { faults, layer }
  }

  /** Leases of p0..p69 except p5 (never acquired) and p7 (released); the expected owner of each, or none. */
  const manyLeases = Effect.gen(function* () {
    const leases = yield* LeaseStore
    const owners = new Map<string, string | undefined>()
    for (let i = 0; i < 70; i++) {
      const partition = `p${i}`
      if (i === 5) {
        owners.set(partition, undefined)
        continue
      }
      const lease = yield* leases.acquire(partition, `owner-${i}`, "1 hour")
      if (i === 7) yield* leases.release(partition, lease.token)
      owners.set(partition, i === 7 ? undefined : `owner-${i}`)
    }
    return owners
  })

  it.effect(
    "current: concurrent reads outside a transaction share one statement per 64 partitions; each gets its own lease",
    () => {
      const { faults, layer } = countedReads()
      return Effect.gen(function* () {
        const leases = yield* LeaseStore
        const owners = yield* manyLeases
        const asked = [...owners.keys(), "p0", "p69"]
        faults.enabled = true
        const reads = yield* Effect.all(
          asked.map((partition) => Effect.either(leases.current(partition))),
          { concurrency: "unbounded" }
        )
        // 70 distinct partitions: one statement for 64 of them, one for the other 6
        expect(faults.statements).toBe(2)
        asked.forEach((partition, i) => {
          const read = reads[i]
          const owner = owners.get(partition)
          if (owner === undefined) {
            expect(read?._tag === "Left" ? read.left._tag : read?._tag).toBe("LeaseNotFound")
            return
          }
          expect(read?._tag === "Right" ? read.right.token.owner : read?._tag).toBe(owner)
          if (read?._tag === "Right") expect(read.right.partitionKey).toBe(partition)
        })
        // one read at a time: a statement each
        faults.statements = 0
        for (const partition of ["p1", "p2", "p3"]) yield* leases.current(partition)
        expect(faults.statements).toBe(3)
      }).pipe(Effect.provide(layer))
    }
  )

  /** A lease store whose `COMMIT`s are counted (and can be made to fail busy). */
  const countedCommits = () => {
    const faults: BusySqlClient.BusyFaults = {
      ...BusySqlClient.makeFaults(),
      enabled: true,
      control: true,
      match: (sql) => /^\s*COMMIT/i.test(sql)
    }
    const layer = SqliteLeaseStore.layer.pipe(
      Layer.provide(BusySqlClient.layer(faults, BusySqlClient.seededRandom(13))),
      Layer.provide(database())
    )
    return { faults, layer }
  }

  /**
   * Leases set up (`held` by x, `mine` by a, `theirs` by b), then five writes asked for in one turn; their
   * outcomes, and the `COMMIT`s the five ran.
   */
  const writesInOneTurn = (faults: BusySqlClient.BusyFaults, busyCommits = 0) =>
    Effect.gen(function* () {
      const leases = yield* LeaseStore
      // set up side by side too: a run of lone calls would let the next call skip its wait for the turn
      const [, mine, theirs] = yield* Effect.all(
        [
          leases.acquire("held", "x", "1 hour"),
          leases.acquire("mine", "a", "1 hour"),
          leases.acquire("theirs", "b", "1 hour")
        ],
        { concurrency: "unbounded" }
      )
      faults.burst = busyCommits
      const before = faults.statements
      const outcomes = yield* Effect.all(
        [
          Effect.either(leases.acquire("held", "y", "1 hour")),
          Effect.either(leases.acquire("free", "y", "1 hour")),
          Effect.either(leases.renew("mine", mine.token, "2 hours")),
          Effect.either(leases.release("theirs", theirs.token)),
          Effect.either(leases.release("mine", { owner: "a", version: mine.token.version + 1 }))
        ],
        { concurrency: "unbounded" }
      )
      const tags = outcomes.map((outcome) => (outcome._tag === "Left" ? outcome.left._tag : "ok"))
      return { tags, commits: faults.statements - before }
    })

  /** What the five writes of {@link writesInOneTurn} must have left, grouped or not. */
  const expectLeases = Effect.gen(function* () {
    const leases = yield* LeaseStore
    expect((yield* leases.current("held")).token).toEqual({ owner: "x", version: 1 })
    expect((yield* leases.current("free")).token).toEqual({ owner: "y", version: 1 })
    expect((yield* leases.current("mine")).token).toEqual({ owner: "a", version: 1 })
    expect((yield* Effect.flip(leases.current("theirs")))._tag).toBe("LeaseNotFound")
  })

  it.effect("writes of several partitions asked for in one turn share one COMMIT, each with its own outcome", () => {
    const { faults, layer } = countedCommits()
    return Effect.gen(function* () {
      const { tags, commits } = yield* writesInOneTurn(faults)
      expect(commits).toBe(1)
      // the held lease refuses its acquire, the wrong version its release; the others are written
      expect(tags).toEqual(["LeaseHeld", "ok", "ok", "ok", "StaleFencingToken"])
      yield* expectLeases
    }).pipe(Effect.provide(layer))
  })

  it.live("a busy COMMIT of a group of lease writes runs the group again: every write applied once", () => {
    const { faults, layer } = countedCommits()
    return Effect.gen(function* () {
      const { tags, commits } = yield* writesInOneTurn(faults, 1)
      expect(faults.busy + faults.locked).toBe(1)
      expect(commits).toBe(2)
      expect(tags).toEqual(["LeaseHeld", "ok", "ok", "ok", "StaleFencingToken"])
      // the acquire of "free" took version 1: its first attempt was rolled back, not counted
      yield* expectLeases
    }).pipe(Effect.provide(layer))
  })

  it.effect("current inside a caller's transaction reads on that connection and sees the transaction's writes", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const leases = yield* LeaseStore
      const inside = yield* sql
        .withTransaction(
          Effect.gen(function* () {
            yield* leases.acquire("p-tx", "owner-tx", "1 hour")
            const seen = yield* leases.current("p-tx")
            // roll the acquire back
            return yield* Effect.fail(seen.token.owner)
          })
        )
        .pipe(Effect.flip)
      expect(inside).toBe("owner-tx")
      const after = yield* Effect.flip(leases.current("p-tx"))
      expect(after._tag).toBe("LeaseNotFound")
    }).pipe(Effect.provide(SqliteLeaseStore.layer.pipe(Layer.provideMerge(database()))))
  )

  it.live("current: a busy grouped read is retried for every read of the group; a lasting failure fails each", () => {
    const { faults, layer } = countedReads()
    return Effect.gen(function* () {
      const leases = yield* LeaseStore
      const owners = yield* manyLeases
      const asked = ["p1", "p2", "p5", "p9"]
      faults.enabled = true
      faults.burst = 2
      const retried = yield* Effect.all(
        asked.map((partition) => Effect.either(leases.current(partition))),
        { concurrency: "unbounded" }
      )
      // two busy failures, then the statement that read all four
      expect(faults.busy + faults.locked).toBe(2)
      expect(faults.statements).toBe(3)
      expect(retried.map((r) => (r._tag === "Right" ? r.right.token.owner : r.left._tag))).toEqual([
        owners.get("p1"),
        owners.get("p2"),
        "LeaseNotFound",
        owners.get("p9")
      ])
      // more busy failures than the retry allows: every read of the group fails, none is left waiting
      faults.burst = 1000
      const failed = yield* Effect.all(
        asked.map((partition) => Effect.either(leases.current(partition))),
        { concurrency: "unbounded" }
      )
      expect(failed.map((r) => (r._tag === "Left" ? r.left._tag : "Right"))).toEqual(
        asked.map(() => "StoreUnavailable")
      )
      faults.burst = 0
      expect((yield* leases.current("p1")).token.owner).toBe(owners.get("p1"))
    }).pipe(Effect.provide(layer))
  })
})

describe("SqliteDeadLetterStore", () => {
  it.live("a dead-letter write waits for another connection's write lock with the thread free", () => {
    const filename = freshFile()
    return Effect.gen(function* () {
      const dlq = yield* DeadLetterStore
      const locked = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(SqliteWriteLock.holdWriteLock(filename, locked, release))
      yield* Deferred.await(locked)
      const writing = yield* Effect.fork(dlq.write(entry("d1", 1_000)))
      // SQLite's busy handler would hold this thread for the two-minute busy timeout
      expect(yield* SqliteWriteLock.ticks).toBe(10)
      expect(Option.isNone(yield* Fiber.poll(writing))).toBe(true)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      yield* Fiber.join(writing)
      expect((yield* dlq.get("d1")).id).toBe("d1")
    }).pipe(
      Effect.provide(
        SqliteDeadLetterStore.layer.pipe(
          Layer.provideMerge(SqliteOutboxStore.layer),
          Layer.provideMerge(SqliteDatabase.layer({ filename, busyTimeout: "2 minutes" }))
        )
      )
    )
  })

  it.effect("list, deleteWhere and purge use the indexes: no full scan, no temp B-tree for the order", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const plan = (text: string, params: ReadonlyArray<unknown>) =>
        Effect.map(sql.unsafe<{ readonly detail: string }>(`EXPLAIN QUERY PLAN ${text}`, params), (rows) =>
          rows.map((row) => row.detail)
        )
      const select = "SELECT * FROM outbox_dead_letter WHERE"
      const order = "ORDER BY failed_at, id LIMIT ?"
      const cases: ReadonlyArray<readonly [string, string, ReadonlyArray<unknown>]> = [
        ["by route", `${select} (route_id = ?) ${order}`, ["r", 10]],
        ["by category", `${select} (category = ?) ${order}`, ["poison", 10]],
        ["by time", `${select} (failed_at >= ? AND failed_at < ?) ${order}`, [1, 2, 10]],
        [
          "by route and time",
          `${select} (route_id = ? AND failed_at >= ? AND failed_at < ?) ${order}`,
          ["r", 1, 2, 10]
        ],
        [
          "purge chunk",
          `DELETE FROM outbox_dead_letter WHERE id IN (SELECT id FROM outbox_dead_letter WHERE (failed_at < ?) ${order})`,
          [1, 10]
        ]
      ]
      for (const [label, text, params] of cases) {
        const lines = yield* plan(text, params)
        for (const line of lines) {
          expect(line, `${label}: ${lines.join(" | ")}`).not.toMatch(/\bSCAN\b/)
          expect(line, `${label}: ${lines.join(" | ")}`).not.toMatch(/TEMP B-TREE/)
        }
      }
    }).pipe(Effect.provide(dlqOn(":memory:")))
  )

  it.effect("§5 stored form: payload as BLOB, headers as JSON text, failed_at as integer ms, absent fields NULL", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const dlq = yield* DeadLetterStore
      yield* dlq.write(entry("e1", 1_700_000_000_123, { headers: { a: "1", "b c": "2" } }))
      const rows = yield* sql`SELECT typeof(payload) AS p, headers, typeof(failed_at) AS f, failed_at,
        ordering_key, route_id, address FROM outbox_dead_letter WHERE id = ${"e1"}`
      expect(rows).toEqual([
        {
          p: "blob",
          headers: JSON.stringify({ a: "1", "b c": "2" }),
          f: "integer",
          failed_at: 1_700_000_000_123,
          ordering_key: null,
          route_id: null,
          address: null
        }
      ])
    }).pipe(Effect.provide(dlqOn(":memory:")))
  )

  it.effect("§5 a corrupt stored row fails reads with StoreUnavailable, not a defect", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const dlq = yield* DeadLetterStore
      yield* dlq.write(entry("bad", 1_000, { routeId: "r" }))
      yield* sql`UPDATE outbox_dead_letter SET headers = ${"{not json"} WHERE id = ${"bad"}`
      expect((yield* Effect.flip(dlq.get("bad")))._tag).toBe("StoreUnavailable")
      expect((yield* Effect.flip(dlq.list({ routeId: "r" })))._tag).toBe("StoreUnavailable")
      yield* sql`UPDATE outbox_dead_letter SET headers = '{}', category = ${"unknown"} WHERE id = ${"bad"}`
      expect((yield* Effect.flip(dlq.get("bad")))._tag).toBe("StoreUnavailable")
      expect(yield* dlq.delete(["bad"])).toBe(1)
    }).pipe(Effect.provide(dlqOn(":memory:")))
  )

  it.effect("§5 redrive is one transaction: a persist failure on a later entry redrives and deletes nothing", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const dlq = yield* DeadLetterStore
      const outbox = yield* OutboxStore
      yield* dlq.write(entry("good", 1_000, { partitionKey: "p" }))
      yield* dlq.write(entry("bad", 2_000, { partitionKey: "p" }))
      // Only a row written behind the store's back can hold what persist rejects (an empty envelope id).
      yield* sql`UPDATE outbox_dead_letter SET envelope_id = '' WHERE id = ${"bad"}`
      const error = yield* Effect.flip(dlq.redrive(["good", "bad"]))
      expect(error._tag).toBe("InvalidRecord")
      expect(yield* outbox.countPending("p")).toBe(0)
      expect((yield* dlq.get("good")).id).toBe("good")
      expect((yield* dlq.get("bad")).id).toBe("bad")
    }).pipe(Effect.provide(dlqOn(":memory:")))
  )

  it.live("§5 a lock failure inside a redrive retries the whole transaction: each entry is redriven once", () => {
    const faults: BusySqlClient.BusyFaults = {
      ...BusySqlClient.makeFaults(),
      match: (sql) => /^\s*DELETE\b[\s\S]*outbox_dead_letter\b/i.test(sql)
    }
    const layer = SqliteDeadLetterStore.layer.pipe(
      Layer.provideMerge(SqliteOutboxStore.layer),
      Layer.provideMerge(BusySqlClient.layer(faults, BusySqlClient.seededRandom(5))),
      Layer.provide(database())
    )
    return Effect.gen(function* () {
      const dlq = yield* DeadLetterStore
      const outbox = yield* OutboxStore
      yield* dlq.write(entry("r1", 1_000, { partitionKey: "p" }))
      yield* dlq.write(entry("r2", 2_000, { partitionKey: "p" }))
      faults.enabled = true
      faults.burst = 2
      const ids = yield* dlq.redrive(["r1", "r2"])
      faults.enabled = false
      expect(faults.busy + faults.locked).toBe(2)
      expect(ids).toHaveLength(2)
      expect(yield* outbox.countPending("p")).toBe(2)
      expect(yield* dlq.list({})).toEqual([])
    }).pipe(Effect.provide(layer))
  })

  it.effect("§5 redrive joins the caller's transaction: a rollback keeps the entries and persists nothing", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const dlq = yield* DeadLetterStore
      const outbox = yield* OutboxStore
      yield* dlq.write(entry("e1", 1_000, { partitionKey: "p" }))
      const exit = yield* Effect.exit(
        sql.withTransaction(
          Effect.gen(function* () {
            const ids = yield* dlq.redrive(["e1"])
            expect(ids).toHaveLength(1)
            expect(yield* outbox.countPending("p")).toBe(1)
            return yield* Effect.fail("abort")
          })
        )
      )
      expect(Exit.isFailure(exit)).toBe(true)
      expect(yield* outbox.countPending("p")).toBe(0)
      expect((yield* dlq.get("e1")).id).toBe("e1")
      const ids = yield* dlq.redrive(["e1"])
      expect(ids).toHaveLength(1)
      expect(yield* outbox.countPending("p")).toBe(1)
    }).pipe(Effect.provide(dlqOn(":memory:")))
  )

  it.effect("§5 entries survive reopening the file", () =>
    Effect.gen(function* () {
      const filename = freshFile()
      const written = entry("kept", 5_000, { orderingKey: "k", routeId: "r", address: "a" })
      yield* Effect.provide(
        Effect.flatMap(DeadLetterStore, (dlq) => dlq.write(written)),
        dlqOn(filename)
      )
      const read = yield* Effect.provide(
        Effect.flatMap(DeadLetterStore, (dlq) => dlq.get("kept")),
        dlqOn(filename)
      )
      expect(read.orderingKey).toBe("k")
      expect(Array.from(read.payload)).toEqual([1, 2, 3])
      expect(Schema.is(DeadLetterEntry)(read)).toBe(true)
      expect(DateTime.toEpochMillis(read.failedAt)).toBe(5_000)
    })
  )
})
