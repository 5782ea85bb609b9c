/**
 * SQLite-specific behaviour of the outbox store beyond the shared contract: transactional enqueue
 * (R-PERSIST-6), crash recovery, query plans, corrupt rows, retention, table prefixes and the
 * database layer.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { describe, expect, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as DateTime from "effect/DateTime"
import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteOutboxRows from "../src/layers/sqlite/SqliteOutboxRows.js"
import * as SqliteOutboxSchema from "../src/layers/sqlite/SqliteOutboxSchema.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import type { SqliteOutboxStoreOptions } from "../src/layers/sqlite/SqliteOutboxStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import * as BusySqlClient from "./support/BusySqlClient.js"
import * as SqliteWriteLock from "./support/SqliteWriteLock.js"

const START = 1_700_000_000_000

const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-sqlite-test-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))
let files = 0
const freshFile = (): string => path.join(directory, `db-${++files}`, "outbox.db")

const record = (
  pk: string,
  env: string,
  options: { readonly key?: string; readonly id?: string; readonly createdAt?: number } = {}
): NewOutboxRecord =>
  new NewOutboxRecord({
    id: options.id ?? `${pk}.${env}`,
    partitionKey: pk,
    envelopeId: env,
    bindingId: "b",
    payload: new TextEncoder().encode(`payload ${env}`),
    ...(options.key !== undefined ? { orderingKey: options.key } : {}),
    ...(options.createdAt !== undefined ? { createdAt: DateTime.unsafeMake(options.createdAt) } : {})
  })

/** The store and the SqlClient of one database. */
const storeAndSql = (filename: string, options: SqliteOutboxStore.SqliteOutboxStoreOptions = {}) =>
  Layer.provideMerge(SqliteOutboxStore.layerWith(options), SqliteDatabase.layer({ filename }))

const memory = storeAndSql(":memory:")

const token = (owner: string, version: number) => ({ owner, version })

const Business = Schema.Struct({ n: Schema.Number })

describe("SqliteOutboxStore", () => {
  describe("R-PERSIST-6 transactional enqueue", () => {
    it.effect("R-PERSIST-6 business rows and outbox records commit together", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const store = yield* OutboxStore
        yield* sql`CREATE TABLE orders (id TEXT PRIMARY KEY)`
        yield* sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`INSERT INTO orders (id) VALUES (${"order-1"})`
            yield* store.persist([record("tx", "e1"), record("tx", "e2")])
          })
        )
        const orders = yield* sql`SELECT count(*) AS n FROM orders`.pipe(
          Effect.flatMap(Schema.decodeUnknown(Schema.Array(Business)))
        )
        expect(orders[0]?.n).toBe(1)
        expect(yield* store.countPending("tx")).toBe(2)
      }).pipe(Effect.provide(memory))
    )

    it.effect("R-PERSIST-6 a failure after persist rolls back the business row and the records", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const store = yield* OutboxStore
        yield* sql`CREATE TABLE orders (id TEXT PRIMARY KEY)`
        const exit = yield* Effect.exit(
          sql.withTransaction(
            Effect.gen(function* () {
              yield* sql`INSERT INTO orders (id) VALUES (${"order-1"})`
              const report = yield* store.persist([record("tx", "e1"), record("tx", "e2")])
              expect(report.persisted).toHaveLength(2)
              // visible inside the transaction
              expect(yield* store.countPending("tx")).toBe(2)
              return yield* Effect.fail("business rule violated" as const)
            })
          )
        )
        expect(Exit.isFailure(exit)).toBe(true)
        const orders = yield* sql`SELECT count(*) AS n FROM orders`.pipe(
          Effect.flatMap(Schema.decodeUnknown(Schema.Array(Business)))
        )
        expect(orders[0]?.n).toBe(0)
        expect(yield* store.countPending("tx")).toBe(0)
        // the identities were not consumed: the same records persist afterwards
        const again = yield* store.persist([record("tx", "e1"), record("tx", "e2")])
        expect(again.persisted).toEqual(["tx.e1", "tx.e2"])
      }).pipe(Effect.provide(memory))
    )

    it.effect("R-PERSIST-6 an InvalidRecord inside a caller's transaction leaves the caller's earlier work", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const store = yield* OutboxStore
        yield* store.persist([record("tx", "e1", { id: "taken" })])
        yield* sql`CREATE TABLE orders (id TEXT PRIMARY KEY)`
        const error = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              yield* sql`INSERT INTO orders (id) VALUES (${"order-1"})`
              // id "taken" already belongs to another identity: the whole batch is rejected
              const failed = yield* Effect.flip(
                store.persist([record("tx", "e2"), record("tx", "e3", { id: "taken" })])
              )
              expect(failed._tag).toBe("InvalidRecord")
              return failed
            })
          )
          .pipe(Effect.orDie)
        expect(error._tag).toBe("InvalidRecord")
        if (error._tag === "InvalidRecord") {
          expect(error.recordId).toBe("taken")
          expect(error.index).toBe(1)
        }
        const orders = yield* sql`SELECT count(*) AS n FROM orders`.pipe(
          Effect.flatMap(Schema.decodeUnknown(Schema.Array(Business)))
        )
        expect(orders[0]?.n).toBe(1)
        // nothing of the rejected batch was stored
        expect((yield* store.queryPending("tx", 10)).map((r) => r.id)).toEqual(["taken"])
      }).pipe(Effect.provide(memory))
    )
  })

  describe("persist", () => {
    it.effect("R-PERSIST-5 an id used by a different identity fails the batch with InvalidRecord; nothing stored", () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        yield* store.persist([record("p", "e1", { id: "x" })])
        const error = yield* Effect.flip(store.persist([record("p", "e2"), record("q", "e9", { id: "x" })]))
        expect(error._tag).toBe("InvalidRecord")
        expect(yield* store.countPending("p")).toBe(1)
        expect(yield* store.countPending("q")).toBe(0)
      }).pipe(Effect.provide(memory))
    )

    it.effect("R-PERSIST-4 seq comes from the fence row's counter across partitions of one batch", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const store = yield* OutboxStore
        yield* store.persist([record("a", "1"), record("b", "1"), record("a", "2"), record("a", "3")])
        yield* store.persist([record("b", "2")])
        const a = yield* store.queryPending("a", 10)
        const b = yield* store.queryPending("b", 10)
        expect(a.map((r) => r.seq)).toEqual([1, 2, 3])
        expect(b.map((r) => r.seq)).toEqual([1, 2])
        const fence = yield* sql`SELECT partition_key, seq_counter FROM outbox_fence ORDER BY partition_key`
        expect(fence).toEqual([
          { partition_key: "a", seq_counter: 3 },
          { partition_key: "b", seq_counter: 2 }
        ])
      }).pipe(Effect.provide(memory))
    )

    it.effect(
      "R-PERSIST-4 a batch over several partitions continues each partition's counter, in one statement",
      () => {
        const faults: BusySqlClient.BusyFaults = {
          ...BusySqlClient.makeFaults(),
          enabled: true,
          control: true,
          match: (sql) => /seq_counter = seq_counter \+/.test(sql)
        }
        return Effect.gen(function* () {
          const store = yield* OutboxStore
          yield* store.persist([record("a", "1"), record("a", "2")])
          yield* store.persist([record("c", "1")])
          const before = faults.statements
          yield* store.persist([
            record("b", "1"),
            record("a", "3"),
            record("c", "2"),
            record("b", "2"),
            record("a", "4")
          ])
          // one seq-allocation statement for the three partitions of the batch
          expect(faults.statements - before).toBe(1)
          const seqs = (pk: string) =>
            Effect.map(store.queryPending(pk, 10), (rs) => rs.map((r) => [r.envelopeId, r.seq] as const))
          expect(yield* seqs("a")).toEqual([
            ["1", 1],
            ["2", 2],
            ["3", 3],
            ["4", 4]
          ])
          expect(yield* seqs("b")).toEqual([
            ["1", 1],
            ["2", 2]
          ])
          expect(yield* seqs("c")).toEqual([
            ["1", 1],
            ["2", 2]
          ])
        }).pipe(
          Effect.provide(
            Layer.provideMerge(
              SqliteOutboxStore.layer,
              BusySqlClient.layer(faults, BusySqlClient.seededRandom(3)).pipe(
                Layer.provideMerge(SqliteDatabase.layer({ filename: ":memory:" }))
              )
            )
          )
        )
      }
    )

    it.effect("replaceTerminal replaces a completed holder of the identity and skips a pending one", () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        yield* store.persist([record("r", "done"), record("r", "live")])
        const t = token("o", 1)
        const batch = yield* store.claim("r", t, 1)
        yield* store.complete(
          batch.records.map((x) => x.id),
          t
        )
        const report = yield* store.persist(
          [record("r", "done", { id: "redriven" }), record("r", "live", { id: "dup" })],
          {
            replaceTerminal: true
          }
        )
        expect(report.persisted).toEqual(["redriven"])
        expect(report.skipped).toEqual(["dup"])
        expect(report.existingIds).toEqual(["r.live"])
        expect((yield* store.queryPending("r", 10)).map((x) => x.id)).toEqual(["r.live", "redriven"])
      }).pipe(Effect.provide(memory))
    )
  })

  describe("complete, release and failures", () => {
    it.effect("R-DONE-3 with several ids the matching ones stay completed and the call names the others", () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        yield* store.persist([record("multi", "a"), record("multi", "b"), record("multi", "c")])
        const t = token("o", 1)
        yield* store.claim("multi", t, 2)
        const error = yield* Effect.flip(store.complete(["multi.a", "multi.c", "multi.b"], t))
        expect(error._tag).toBe("StaleFencingToken")
        if (error._tag === "StaleFencingToken") expect(error.recordIds).toEqual(["multi.c"])
        expect(yield* store.countClaimed("multi")).toBe(0)
        expect((yield* store.queryPending("multi", 10)).map((r) => r.id)).toEqual(["multi.c"])
        const releaseError = yield* Effect.flip(store.release(["multi.a"], t))
        expect(releaseError._tag).toBe("StaleFencingToken")
      }).pipe(Effect.provide(memory))
    )

    it.effect("SQL failures are StoreUnavailable with the cause, never defects", () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const sql = yield* SqlClient.SqlClient
        yield* sql`DROP TABLE outbox`
        const failures = [
          yield* Effect.flip(store.countPending("p")),
          yield* Effect.flip(store.claim("p", token("o", 1), 10)),
          yield* Effect.flip(store.persist([record("p", "e")])),
          yield* Effect.flip(store.complete(["x"], token("o", 1))),
          yield* Effect.flip(store.queryPending("p", 10)),
          yield* Effect.flip(Stream.runCollect(store.listPartitions))
        ]
        for (const failure of failures) {
          expect(failure._tag).toBe("StoreUnavailable")
          if (failure._tag === "StoreUnavailable") expect(failure.cause).toBeInstanceOf(SqlError)
        }
      }).pipe(Effect.provide(memory))
    )
  })

  describe("group commit", () => {
    /** The store over a fault decorator that only counts `COMMIT`s (no faults unless a burst is set). */
    const counted = (options: SqliteOutboxStoreOptions, faults: BusySqlClient.BusyFaults) =>
      Layer.provideMerge(
        SqliteOutboxStore.layerWith(options),
        BusySqlClient.layer(faults, BusySqlClient.seededRandom(7)).pipe(
          Layer.provideMerge(SqliteDatabase.layer({ filename: ":memory:" }))
        )
      )
    const commits = (): BusySqlClient.BusyFaults => ({
      ...BusySqlClient.makeFaults(),
      enabled: true,
      control: true,
      match: (sql) => /^\s*COMMIT/i.test(sql)
    })

    /**
     * Four partitions with two claimed records each (version 1), then four concurrent calls on them (the
     * first `busyCommits` COMMITs of the calls failing busy); returns their results and the `COMMIT`s the
     * calls ran.
     */
    const setUp = (faults: BusySqlClient.BusyFaults, busyCommits = 0) =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        for (const pk of ["g1", "g2", "g3", "g4"]) {
          yield* store.persist([record(pk, "a"), record(pk, "b")])
          yield* store.claim(pk, token("o", 1), 10)
        }
        faults.burst = busyCommits
        const before = faults.statements
        const results = yield* Effect.all(
          [
            Effect.either(store.complete(["g1.a", "g1.b"], token("o", 1))),
            Effect.either(store.complete(["g2.a", "g2.b"], token("o", 2))),
            Effect.either(store.release(["g3.a", "g3.b"], token("o", 1))),
            Effect.either(store.complete(["g4.a", "g4.missing"], token("o", 1)))
          ],
          { concurrency: "unbounded" }
        )
        return { results, commits: faults.statements - before }
      })

    /** What every call must have done, grouped or not. */
    const expectOutcomes = (results: Effect.Effect.Success<ReturnType<typeof setUp>>["results"]) =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const [g1, g2, g3, g4] = results
        expect(g1 !== undefined && Either.isRight(g1)).toBe(true)
        // a stale token fails its own call only, naming its ids; the records stay claimed
        const stale = g2 !== undefined && Either.isLeft(g2) ? g2.left : undefined
        expect(stale?._tag).toBe("StaleFencingToken")
        if (stale?._tag === "StaleFencingToken") expect(stale.recordIds).toEqual(["g2.a", "g2.b"])
        expect(g3 !== undefined && Either.isRight(g3)).toBe(true)
        // R-DONE-3 inside a group: the matching id stays completed, the other is named
        const partial = g4 !== undefined && Either.isLeft(g4) ? g4.left : undefined
        if (partial?._tag !== "StaleFencingToken")
          return expect.fail(`expected StaleFencingToken, got ${partial?._tag}`)
        expect(partial.recordIds).toEqual(["g4.missing"])
        expect([
          yield* store.countClaimed("g1"),
          yield* store.countPending("g1"),
          yield* store.countClaimed("g2"),
          yield* store.countPending("g3"),
          yield* store.countClaimed("g4"),
          yield* store.countPending("g4")
        ]).toEqual([0, 0, 2, 2, 1, 0])
      })

    it.effect(
      "concurrent completes and releases of several partitions share one transaction, each with its own result",
      () => {
        const faults = commits()
        return Effect.gen(function* () {
          const { commits, results } = yield* setUp(faults)
          // every call was made outside a transaction, so the four share one COMMIT
          expect(commits).toBe(1)
          yield* expectOutcomes(results)
        }).pipe(Effect.provide(counted({}, faults)))
      }
    )

    it.effect(
      "claims of several partitions in one turn share one COMMIT; a stale token fails its own claim only",
      () => {
        const faults = commits()
        return Effect.gen(function* () {
          const store = yield* OutboxStore
          for (const pk of ["c1", "c2", "c3"]) yield* store.persist([record(pk, "a"), record(pk, "b")])
          // c3's fence is raised to 5 first, so a version-2 claim of it is stale (R-CLAIM-2)
          yield* store.claim("c3", token("o", 5), 0)
          const before = faults.statements
          const [c1, c2, c3] = yield* Effect.all(
            [
              store.claim("c1", token("o", 1), 10),
              store.claim("c2", token("o", 1), 1),
              Effect.flip(store.claim("c3", token("o", 2), 10))
            ],
            { concurrency: "unbounded" }
          )
          expect(faults.statements - before).toBe(1)
          expect(c1.records.map((r) => r.id)).toEqual(["c1.a", "c1.b"])
          expect(c2.records.map((r) => r.id)).toEqual(["c2.a"])
          expect(c3._tag).toBe("StaleFencingToken")
          expect([
            yield* store.countClaimed("c1"),
            yield* store.countClaimed("c2"),
            yield* store.countClaimed("c3"),
            yield* store.countPending("c3")
          ]).toEqual([2, 1, 0, 2])
        }).pipe(Effect.provide(counted({}, faults)))
      }
    )

    it.effect(
      "expiry sweeps of several partitions share one COMMIT with the claims of their turn, and run before them",
      () => {
        const faults = commits()
        return Effect.gen(function* () {
          const store = yield* OutboxStore
          const expiring = (pk: string) =>
            new NewOutboxRecord({
              id: `${pk}.old`,
              partitionKey: pk,
              envelopeId: "old",
              bindingId: "b",
              payload: new TextEncoder().encode("old"),
              createdAt: DateTime.unsafeMake(START),
              expiresAt: DateTime.unsafeMake(START + 10)
            })
          for (const pk of ["x1", "x2", "x3"]) yield* store.persist([expiring(pk), record(pk, "fresh")])
          // x3's fence is raised to 5 first, so a version-2 sweep of it is stale (R-EXP-1)
          yield* store.claim("x3", token("o", 5), 0)
          const before = faults.statements
          const sweptBefore = DateTime.unsafeMake(START + 20)
          const [claimed, x1, x2, x3] = yield* Effect.all(
            [
              // asked for first in the turn, the claim still runs after x1's sweep: the expired record stays out
              store.claim("x1", token("o", 1), 10),
              store.expire(sweptBefore, "x1", token("o", 1)),
              store.expire(sweptBefore, "x2", token("o", 1)),
              Effect.flip(store.expire(sweptBefore, "x3", token("o", 2)))
            ],
            { concurrency: "unbounded" }
          )
          expect(faults.statements - before).toBe(1)
          expect([x1, x2]).toEqual([1, 1])
          expect(x3._tag).toBe("StaleFencingToken")
          expect(claimed.records.map((r) => r.id)).toEqual(["x1.fresh"])
          expect([
            yield* store.countPending("x1"),
            yield* store.countPending("x2"),
            yield* store.countPending("x3")
          ]).toEqual([0, 1, 2])
        }).pipe(Effect.provide(counted({}, faults)))
      }
    )

    it.effect("a claim failing half-way in a shared group undoes only its own writes (its fence stays low)", () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const sql = yield* SqlClient.SqlClient
        yield* store.persist([record("bad", "a"), record("bad", "b")])
        yield* store.persist([record("ok", "a")])
        yield* sql`UPDATE outbox SET status = 'sent' WHERE id = ${"bad.a"}`
        const [bad, ok] = yield* Effect.all(
          [Effect.flip(store.claim("bad", token("o", 5), 10)), store.claim("ok", token("o", 5), 10)],
          { concurrency: "unbounded" }
        )
        expect(bad._tag).toBe("CorruptRecord")
        expect(ok.records.map((r) => r.id)).toEqual(["ok.a"])
        // the failed claim's fence raise was rolled back with it: version 3 is still admitted
        yield* sql`UPDATE outbox SET status = 'pending' WHERE id = ${"bad.a"}`
        const batch = yield* store.claim("bad", token("o", 3), 10)
        expect(batch.records.map((r) => r.id)).toEqual(["bad.a", "bad.b"])
        expect(yield* store.countClaimed("ok")).toBe(1)
      }).pipe(Effect.provide(memory))
    )

    it.effect(
      "a complete and a claim in one turn share a COMMIT; the complete runs first (R-CLAIM-5 head done)",
      () => {
        const faults = commits()
        return Effect.gen(function* () {
          const store = yield* OutboxStore
          yield* store.persist([
            record("hk", "a", { key: "k", createdAt: START }),
            record("hk", "b", { key: "k", createdAt: START + 1 })
          ])
          const head = yield* store.claim("hk", token("o", 1), 1)
          expect(head.records.map((r) => r.id)).toEqual(["hk.a"])
          const before = faults.statements
          // the claim is made first, yet it sees the head completed: completes of a group run before its claims
          const [next] = yield* Effect.all(
            [store.claim("hk", token("o", 1), 10), store.complete(["hk.a"], token("o", 1))],
            {
              concurrency: "unbounded"
            }
          )
          expect(faults.statements - before).toBe(1)
          expect(next.records.map((r) => r.id)).toEqual(["hk.b"])
        }).pipe(Effect.provide(counted({}, faults)))
      }
    )

    it.effect("without group commit every claim is its own transaction", () => {
      const faults = commits()
      return Effect.gen(function* () {
        const store = yield* OutboxStore
        for (const pk of ["n1", "n2"]) yield* store.persist([record(pk, "a")])
        const before = faults.statements
        const batches = yield* Effect.all(
          [store.claim("n1", token("o", 1), 10), store.claim("n2", token("o", 1), 10)],
          {
            concurrency: "unbounded"
          }
        )
        expect(faults.statements - before).toBe(2)
        expect(batches.map((b) => b.records.length)).toEqual([1, 1])
      }).pipe(Effect.provide(counted({ groupCommit: false }, faults)))
    })

    it.effect("without group commit every call is its own statement (no transaction)", () => {
      const faults = commits()
      return Effect.gen(function* () {
        const { commits, results } = yield* setUp(faults)
        expect(commits).toBe(0)
        yield* expectOutcomes(results)
      }).pipe(Effect.provide(counted({ groupCommit: false }, faults)))
    })

    it.live("a busy COMMIT rolls the group back and runs it again: every call applied once", () => {
      const faults = commits()
      return Effect.gen(function* () {
        const { commits: seen, results } = yield* setUp(faults, 1)
        expect(faults.busy + faults.locked).toBe(1)
        // the failed COMMIT and the one of the rerun
        expect(seen).toBe(2)
        yield* expectOutcomes(results)
      }).pipe(Effect.provide(counted({}, faults)))
    })

    it.live("an interrupted caller leaves the group working: the others get their results, later calls run", () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        for (const pk of ["i1", "i2"]) {
          yield* store.persist([record(pk, "a")])
          yield* store.claim(pk, token("o", 1), 10)
        }
        // the leader (first caller) is interrupted while the group waits for its turn of the event loop
        const leader = yield* Effect.fork(store.complete(["i1.a"], token("o", 1)))
        const follower = yield* Effect.fork(store.complete(["i2.a"], token("o", 1)))
        // both calls are queued; the leader waits for the event loop's turn
        yield* Effect.yieldNow()
        yield* Fiber.interrupt(leader)
        yield* Fiber.join(follower)
        expect(yield* store.countClaimed("i2")).toBe(0)
        // the leader's call ran or not, but nothing waits on a group that will not run
        yield* Effect.either(store.complete(["i1.a"], token("o", 1)))
        expect(yield* store.countClaimed("i1")).toBe(0)
        yield* store.persist([record("i1", "b")])
        yield* store.claim("i1", token("o", 1), 10)
        yield* store.complete(["i1.b"], token("o", 1))
        expect(yield* store.countPending("i1")).toBe(0)
      }).pipe(Effect.timeout("10 seconds"), Effect.provide(memory))
    )

    it.effect("inside a caller's transaction complete joins that transaction and rolls back with it", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const store = yield* OutboxStore
        yield* store.persist([record("tx", "a")])
        yield* store.claim("tx", token("o", 1), 10)
        const exit = yield* Effect.exit(
          sql.withTransaction(Effect.zipRight(store.complete(["tx.a"], token("o", 1)), Effect.fail("abort")))
        )
        expect(Exit.isFailure(exit)).toBe(true)
        expect(yield* store.countClaimed("tx")).toBe(1)
        yield* sql.withTransaction(store.complete(["tx.a"], token("o", 1)))
        expect(yield* store.countClaimed("tx")).toBe(0)
      }).pipe(Effect.provide(memory))
    )
  })

  describe("the write lock", () => {
    /** The store and the SqlClient of `filename`, with the given busy timeout. */
    const storeWithBusyTimeout = (filename: string, busyTimeout: Duration.DurationInput) =>
      Layer.provideMerge(SqliteOutboxStore.layer, SqliteDatabase.layer({ filename, busyTimeout }))

    /**
     * A write of the store's (`write`, after `setUp` ran unhindered) waits for another connection's write lock
     * without blocking the thread, and is applied once the lock is free (`check`).
     */
    const waitsAsleep = (
      setUp: (store: OutboxStore["Type"]) => Effect.Effect<void, unknown, SqlClient.SqlClient>,
      write: (store: OutboxStore["Type"]) => Effect.Effect<unknown, unknown, SqlClient.SqlClient>,
      check: (store: OutboxStore["Type"]) => Effect.Effect<void, unknown, SqlClient.SqlClient>
    ) => {
      const filename = freshFile()
      return Effect.gen(function* () {
        const store = yield* OutboxStore
        const sql = yield* SqlClient.SqlClient
        yield* setUp(store)
        const locked = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const holder = yield* Effect.fork(SqliteWriteLock.holdWriteLock(filename, locked, release))
        yield* Deferred.await(locked)
        const waiting = yield* Effect.fork(write(store))
        // SQLite's own busy handler would hold this thread for the busy timeout (two minutes)
        expect(yield* SqliteWriteLock.ticks).toBe(10)
        expect(Option.isNone(yield* Fiber.poll(waiting))).toBe(true)
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(holder)
        yield* Fiber.join(waiting)
        yield* check(store)
        // the connection's own busy timeout is back once the lock was taken
        expect(yield* sql`PRAGMA busy_timeout`).toEqual([{ timeout: 120_000 }])
      }).pipe(Effect.provide(storeWithBusyTimeout(filename, "2 minutes")))
    }

    it.live("a persist waits for another connection's write lock without blocking the thread", () =>
      waitsAsleep(
        () => Effect.void,
        (store) => store.persist([record("p", "e1")]),
        (store) => Effect.map(store.countPending("p"), (pending) => expect(pending).toBe(1))
      )
    )

    it.live("a claim waits for another connection's write lock without blocking the thread", () =>
      waitsAsleep(
        (store) => store.persist([record("p", "e1")]),
        (store) => store.claim("p", token("o", 1), 10),
        (store) => Effect.map(store.countClaimed("p"), (claimed) => expect(claimed).toBe(1))
      )
    )

    it.live("a lone complete (no transaction of its own asked) waits for the write lock without blocking", () =>
      waitsAsleep(
        (store) => Effect.zipRight(store.persist([record("p", "e1")]), store.claim("p", token("o", 1), 10)),
        (store) => store.complete(["p.e1"], token("o", 1)),
        (store) =>
          Effect.map(Effect.all([store.countPending("p"), store.countClaimed("p")]), ([pending, claimed]) =>
            expect([pending, claimed]).toEqual([0, 0])
          )
      )
    )

    /** The number of rows of the test's `orders` table. */
    const orderCount = Effect.flatMap(SqlClient.SqlClient, (sql) =>
      Effect.map(
        Effect.flatMap(sql`SELECT count(*) AS n FROM orders`, Schema.decodeUnknown(Schema.Array(Business))),
        (rows) => rows[0]?.n
      )
    )
    const createOrders = Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE orders (id TEXT PRIMARY KEY)`)
    const insertOrder = (id: string) =>
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql`INSERT INTO orders (id) VALUES (${id})`)

    it.live("SqliteDatabase.withWriteTransaction: the application's transaction waits for the lock asleep", () =>
      waitsAsleep(
        () => createOrders,
        (store) =>
          SqliteDatabase.withWriteTransaction(
            Effect.zipRight(insertOrder("order-1"), store.persist([record("tx", "e1"), record("tx", "e2")]))
          ),
        (store) =>
          Effect.gen(function* () {
            // the business row and the records committed together
            expect(yield* orderCount).toBe(1)
            expect(yield* store.countPending("tx")).toBe(2)
          })
      )
    )

    it.effect("SqliteDatabase.withWriteTransaction rolls back the business row and the records on failure", () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        yield* createOrders
        const exit = yield* Effect.exit(
          SqliteDatabase.withWriteTransaction(
            Effect.gen(function* () {
              yield* insertOrder("order-1")
              yield* store.persist([record("tx", "e1")])
              return yield* Effect.fail("business rule broken")
            })
          )
        )
        expect(exit).toEqual(Exit.fail("business rule broken"))
        expect(yield* orderCount).toBe(0)
        expect(yield* store.countPending("tx")).toBe(0)
        // and the connection takes a transaction again
        yield* SqliteDatabase.withWriteTransaction(insertOrder("order-2"))
        expect(yield* orderCount).toBe(1)
      }).pipe(Effect.provide(storeAndSql(freshFile())))
    )

    it.effect("SqliteDatabase.withWriteTransaction nests as a savepoint, both ways round", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const store = yield* OutboxStore
        yield* createOrders
        // inside sql.withTransaction: a savepoint; its failure undoes its own writes only
        yield* sql.withTransaction(
          Effect.gen(function* () {
            yield* insertOrder("order-1")
            const inner = yield* Effect.exit(
              SqliteDatabase.withWriteTransaction(Effect.zipRight(insertOrder("order-2"), Effect.fail("inner")))
            )
            expect(Exit.isFailure(inner)).toBe(true)
            yield* store.persist([record("tx", "e1")])
          })
        )
        expect(yield* orderCount).toBe(1)
        expect(yield* store.countPending("tx")).toBe(1)
        // a sql.withTransaction inside it: a savepoint of it, rolled back with it
        const outer = yield* Effect.exit(
          SqliteDatabase.withWriteTransaction(
            Effect.gen(function* () {
              yield* sql.withTransaction(Effect.zipRight(insertOrder("order-3"), store.persist([record("tx", "e2")])))
              return yield* Effect.fail("outer")
            })
          )
        )
        expect(Exit.isFailure(outer)).toBe(true)
        expect(yield* orderCount).toBe(1)
        expect(yield* store.countPending("tx")).toBe(1)
      }).pipe(Effect.provide(storeAndSql(freshFile())))
    )

    it.live("a write lock held past the busy timeout fails the call StoreUnavailable and writes nothing", () => {
      const filename = freshFile()
      return Effect.gen(function* () {
        const store = yield* OutboxStore
        const sql = yield* SqlClient.SqlClient
        const locked = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const holder = yield* Effect.fork(SqliteWriteLock.holdWriteLock(filename, locked, release))
        yield* Deferred.await(locked)
        const error = yield* Effect.flip(store.persist([record("p", "e1")]))
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(holder)
        expect(error._tag).toBe("StoreUnavailable")
        expect(error.message).toMatch(/persist/)
        expect(yield* store.countPending("p")).toBe(0)
        expect(yield* sql`PRAGMA busy_timeout`).toEqual([{ timeout: 20 }])
        // and the store writes again once the lock is free
        yield* store.persist([record("p", "e2")])
        expect(yield* store.countPending("p")).toBe(1)
      }).pipe(Effect.provide(storeWithBusyTimeout(filename, "20 millis")))
    })
  })

  describe("crash recovery", () => {
    it.effect("R-CLAIM-6 a claim survives closing the database and is reclaimable only after staleClaimAfter", () =>
      Effect.gen(function* () {
        const filename = freshFile()
        const layer = storeAndSql(filename, { staleClaimAfter: "30 seconds" })
        yield* TestClock.setTime(START)
        // first process: persist and claim, then the connection closes (scope ends)
        const claimed = yield* Effect.gen(function* () {
          const store = yield* OutboxStore
          yield* store.persist([record("crash", "a", { key: "k" }), record("crash", "b", { key: "k" })])
          return yield* store.claim("crash", token("first", 1), 1)
        }).pipe(Effect.provide(layer))
        expect(claimed.records.map((r) => r.id)).toEqual(["crash.a"])
        yield* TestClock.adjust("10 seconds")
        // second process: reopen the same file
        yield* Effect.gen(function* () {
          const store = yield* OutboxStore
          const successor = token("second", 1)
          expect(yield* store.countClaimed("crash")).toBe(1)
          // fresh claim at the same version: the head stays claimed and blocks its sibling
          expect((yield* store.claim("crash", successor, 10)).records).toEqual([])
          yield* TestClock.adjust("21 seconds")
          const reclaimed = yield* store.claim("crash", successor, 10)
          expect(reclaimed.records.map((r) => r.id)).toEqual(["crash.a", "crash.b"])
          expect(reclaimed.records[0]?.replayCount).toBe(2)
          expect(Option.getOrUndefined(reclaimed.records[0]?.claimedBy ?? Option.none())).toBe("second")
        }).pipe(Effect.provide(layer))
      })
    )

    it.effect("the fence high-water mark survives reopening the file", () =>
      Effect.gen(function* () {
        const filename = freshFile()
        const layer = storeAndSql(filename)
        yield* Effect.flatMap(OutboxStore, (store) => store.claim("fenced", token("new", 7), 0)).pipe(
          Effect.provide(layer)
        )
        const error = yield* Effect.flatMap(OutboxStore, (store) =>
          Effect.flip(store.claim("fenced", token("old", 6), 10))
        ).pipe(Effect.provide(layer))
        expect(error._tag).toBe("StaleFencingToken")
        if (error._tag === "StaleFencingToken") expect(error.highWaterMark).toBe(7)
      })
    )
  })

  describe("query plans", () => {
    const planOf = (text: string, params: ReadonlyArray<unknown>) =>
      Effect.flatMap(SqlClient.SqlClient, (sql) =>
        Effect.map(sql.unsafe<{ readonly detail: string }>(`EXPLAIN QUERY PLAN ${text}`, params), (rows) =>
          rows.map((row) => row.detail)
        )
      )

    const assertIndexed = (label: string, plan: ReadonlyArray<string>) => {
      for (const line of plan) {
        expect(line, `${label}: ${plan.join(" | ")}`).not.toMatch(/\bSCAN\b/)
        expect(line, `${label}: ${plan.join(" | ")}`).not.toMatch(/TEMP B-TREE/)
      }
    }

    const checkPlans = Effect.gen(function* () {
      const names = yield* SqliteOutboxSchema.tableNames("")
      for (const staleReclaim of [false, true]) {
        const st = SqliteOutboxSchema.statements(names, { staleReclaim })
        const stale = staleReclaim ? [START] : []
        const claimPlan = yield* planOf(st.selectClaimable, ["p", 3, ...stale, 3, ...stale, 100])
        assertIndexed("claim selection", claimPlan)
        expect(claimPlan.join(" | ")).toContain("USING INDEX outbox_claim (partition_key=?)")
        // the head-of-line check reads the index of claimed keyed records alone
        expect(claimPlan.join(" | ")).toContain(
          "USING COVERING INDEX outbox_claimed_key (partition_key=? AND ordering_key=? AND"
        )
        const ids = ["a", "b", "c"]
        assertIndexed(
          "claim update",
          yield* planOf(st.claimUpdate(3), ["o", 3, START, START, ...ids, "p", 3, ...stale])
        )
        assertIndexed("complete", yield* planOf(st.complete(3), [START, START, ...ids, "o", 3]))
        assertIndexed("release", yield* planOf(st.release(3), [...ids, "o", 3]))
        assertIndexed("expire", yield* planOf(st.expire, [START, "p", START]))
        assertIndexed("queryPending", yield* planOf(st.queryPending, ["p", 10]))
        assertIndexed("countPending", yield* planOf(st.countPending, ["p"]))
        assertIndexed("countClaimed", yield* planOf(st.countClaimed, ["p"]))
        // the listing is a skip scan: one seek of the live-record index per partition; the only SCANs
        // are of the recursion's own one-row steps, never of a table (R-READ-3)
        const listPlan = yield* planOf(st.listPartitions, ["", 100])
        assertIndexed(
          "listPartitions",
          listPlan.filter((line) => line !== "SCAN CONSTANT ROW" && line !== "SCAN k")
        )
        expect(listPlan.filter((line) => line.startsWith("SEARCH o USING COVERING INDEX outbox_claim"))).toHaveLength(2)
        expect(listPlan.join(" | ")).not.toContain("outbox_fence")
        assertIndexed("sweep", yield* planOf(st.sweep, [START, 500]))
        assertIndexed("findIdentity", yield* planOf(st.findIdentity, ["p", "e", "b"]))
      }
    })

    it.effect("the claim statements use the indexes: no full scan, no temp B-tree (empty database)", () =>
      checkPlans.pipe(Effect.provide(memory))
    )

    it.effect("the claim statements use the indexes on a populated, analysed database", () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const sql = yield* SqlClient.SqlClient
        yield* TestClock.setTime(START)
        for (let p = 0; p < 4; p++) {
          const batch = Array.from({ length: 500 }, (_, i) =>
            record(`p${p}`, `e${i}`, i % 3 === 0 ? {} : { key: `k${i % 7}` })
          )
          yield* store.persist(batch)
          const claimed = yield* store.claim(`p${p}`, token("o", 1), 200)
          yield* store.complete(
            claimed.records.slice(0, 150).map((r) => r.id),
            token("o", 1)
          )
        }
        yield* sql`ANALYZE`
        yield* checkPlans
      }).pipe(Effect.provide(memory))
    )
  })

  describe("corrupt rows", () => {
    it.effect("an unknown status fails the claim with CorruptRecord naming the row; claimable once repaired", () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const sql = yield* SqlClient.SqlClient
        yield* store.persist([record("bad", "a"), record("bad", "b"), record("bad", "c")])
        yield* sql`UPDATE outbox SET status = 'sent' WHERE id = ${"bad.a"}`
        const error = yield* Effect.flip(store.claim("bad", token("o", 1), 10))
        expect(error._tag).toBe("CorruptRecord")
        if (error._tag === "CorruptRecord") {
          expect(error.recordId).toBe("bad.a")
          expect(error.partitionKey).toBe("bad")
          expect(error.reason).toContain("sent")
        }
        // nothing was claimed by the failed attempt
        expect(yield* store.countClaimed("bad")).toBe(0)
        yield* sql`UPDATE outbox SET status = 'pending' WHERE id = ${"bad.a"}`
        const batch = yield* store.claim("bad", token("o", 1), 10)
        expect(batch.records.map((r) => r.id)).toEqual(["bad.a", "bad.b", "bad.c"])
      }).pipe(Effect.provide(memory))
    )

    it.effect("malformed headers fail claim and queryPending with CorruptRecord; others claimable once removed", () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const sql = yield* SqlClient.SqlClient
        yield* store.persist([record("hdr", "a"), record("hdr", "b", { key: "k" }), record("hdr", "c")])
        yield* sql`UPDATE outbox SET headers = ${"{not json"} WHERE id = ${"hdr.a"}`
        const claimError = yield* Effect.flip(store.claim("hdr", token("o", 1), 10))
        expect(claimError._tag).toBe("CorruptRecord")
        if (claimError._tag === "CorruptRecord") expect(claimError.recordId).toBe("hdr.a")
        const queryError = yield* Effect.flip(store.queryPending("hdr", 10))
        expect(queryError._tag).toBe("CorruptRecord")
        // headers that are JSON but not a string map are corrupt too
        yield* sql`UPDATE outbox SET headers = ${'{"n":1}'} WHERE id = ${"hdr.a"}`
        const typed = yield* Effect.flip(store.claim("hdr", token("o", 1), 10))
        expect(typed._tag).toBe("CorruptRecord")
        yield* sql`DELETE FROM outbox WHERE id = ${"hdr.a"}`
        const batch = yield* store.claim("hdr", token("o", 1), 10)
        expect(batch.records.map((r) => r.id)).toEqual(["hdr.b", "hdr.c"])
      }).pipe(Effect.provide(memory))
    )

    it.effect("a corrupt row behind the batch does not stop a claim that never reaches it", () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const sql = yield* SqlClient.SqlClient
        yield* store.persist([record("late", "a"), record("late", "b"), record("late", "c")])
        yield* sql`UPDATE outbox SET headers = ${"["} WHERE id = ${"late.c"}`
        const batch = yield* store.claim("late", token("o", 1), 2)
        expect(batch.records.map((r) => r.id)).toEqual(["late.a", "late.b"])
        const error = yield* Effect.flip(store.claim("late", token("o", 1), 2))
        expect(error._tag).toBe("CorruptRecord")
      }).pipe(Effect.provide(memory))
    )
  })

  describe("retention", () => {
    it.effect("terminal records older than the retention are swept at most once per interval", () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const sql = yield* SqlClient.SqlClient
        const t = token("o", 1)
        yield* TestClock.setTime(START)
        // let the first (due) sweep happen on an empty table
        yield* store.claim("other", t, 0)
        yield* store.persist(Array.from({ length: 25 }, (_, i) => record("ret", `e${i}`)))
        const claimed = yield* store.claim("ret", t, 20)
        yield* store.complete(
          claimed.records.map((r) => r.id),
          t
        )
        const rows = Effect.map(sql`SELECT count(*) AS n FROM outbox`, (r) => r[0])
        yield* TestClock.adjust("2 hours")
        // the retention and the sweep interval have both passed: the 20 completed rows go, in chunks of 3
        yield* store.claim("other", t, 0)
        expect(yield* rows).toEqual({ n: 5 })
        // the freed identities may be persisted again
        const again = yield* store.persist([record("ret", "e0", { id: "ret.e0.again" })])
        expect(again.persisted).toEqual(["ret.e0.again"])
        // remaining pending records are untouched
        expect(yield* store.countPending("ret")).toBe(6)
      }).pipe(
        Effect.provide(storeAndSql(":memory:", { retention: "1 hour", sweepInterval: "1 minute", sweepChunk: 3 }))
      )
    )

    it.effect("the sweep does not run again before its interval has passed", () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const sql = yield* SqlClient.SqlClient
        const t = token("o", 1)
        yield* TestClock.setTime(START)
        yield* store.claim("other", t, 0) // sweep at START
        yield* store.persist([record("ret", "a")])
        yield* store.complete(
          (yield* store.claim("ret", t, 1)).records.map((r) => r.id),
          t
        )
        yield* TestClock.adjust("9 minutes")
        yield* store.claim("other", t, 0) // within the 10 minute interval: no sweep
        expect(yield* sql`SELECT count(*) AS n FROM outbox`).toEqual([{ n: 1 }])
        yield* TestClock.adjust("1 minute")
        yield* store.claim("other", t, 0) // interval passed, record older than 5 minutes
        expect(yield* sql`SELECT count(*) AS n FROM outbox`).toEqual([{ n: 0 }])
        // the fence state outlives the records
        expect(yield* sql`SELECT max_version FROM outbox_fence WHERE partition_key = ${"ret"}`).toEqual([
          { max_version: 1 }
        ])
      }).pipe(Effect.provide(storeAndSql(":memory:", { retention: "5 minutes", sweepInterval: "10 minutes" })))
    )
  })

  describe("tables and layers", () => {
    it.effect("two table prefixes in one database are independent stores with their own migrations", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const a = yield* Effect.provideService(SqliteOutboxStore.make({ tablePrefix: "a_" }), SqlClient.SqlClient, sql)
        const b = yield* Effect.provideService(SqliteOutboxStore.make({ tablePrefix: "b_" }), SqlClient.SqlClient, sql)
        yield* a.persist([record("p", "e1")])
        expect(yield* a.countPending("p")).toBe(1)
        expect(yield* b.countPending("p")).toBe(0)
        const tables = yield* sql<{
          readonly name: string
        }>`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`
        expect(tables.map((t) => t.name)).toEqual([
          "a_outbox",
          "a_outbox_fence",
          "a_outbox_migrations",
          "b_outbox",
          "b_outbox_fence",
          "b_outbox_migrations"
        ])
        // building again runs no migration twice
        yield* Effect.provideService(SqliteOutboxStore.make({ tablePrefix: "a_" }), SqlClient.SqlClient, sql)
        expect(yield* sql`SELECT count(*) AS n FROM a_outbox_migrations`).toEqual([{ n: 2 }])
      }).pipe(Effect.provide(SqliteDatabase.layer({ filename: ":memory:" })))
    )

    it.effect(
      "a database of the first schema is migrated: the head-of-line index is rebuilt over its claimed keyed records",
      () =>
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const names = yield* SqliteOutboxSchema.tableNames("")
          // the first schema: the same tables, a head-of-line index over every live keyed record, and
          // migration 0001 recorded as the Migrator records it
          for (const statement of SqliteOutboxSchema.createStatements(names)) {
            if (!statement.includes(names.keyIndex)) yield* sql.unsafe(statement)
          }
          yield* sql.unsafe(`CREATE INDEX outbox_key ON outbox (partition_key, ordering_key, created_at, seq)
            WHERE ordering_key IS NOT NULL AND status NOT IN ('completed', 'expired')`)
          yield* sql.unsafe(`CREATE TABLE outbox_migrations (migration_id integer PRIMARY KEY NOT NULL,
            created_at datetime NOT NULL DEFAULT current_timestamp, name VARCHAR(255) NOT NULL)`)
          yield* sql.unsafe(`INSERT INTO outbox_migrations (migration_id, name) VALUES (1, 'create_outbox')`)
          // k1 claimed at version 1 (in flight when the process stopped), k2 of the same key and x pending
          const row = (id: string, key: string | null, seq: number, claimed: boolean) =>
            sql.unsafe(
              `INSERT INTO outbox (id, partition_key, envelope_id, binding_id, payload, ordering_key, created_at,
                 seq, status, claimed_by, claim_version, claimed_at, first_attempted_at, replay_count)
               VALUES (?, 'p', ?, 'b', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
              [
                id,
                id,
                new Uint8Array([1]),
                key,
                START + seq,
                seq,
                claimed ? "claimed" : "pending",
                claimed ? "o" : null,
                claimed ? 1 : 0,
                claimed ? START : null,
                claimed ? START : null,
                claimed ? 1 : 0
              ]
            )
          yield* row("k1", "K", 1, true)
          yield* row("k2", "K", 2, false)
          yield* row("x", null, 3, false)
          yield* sql.unsafe(`INSERT INTO outbox_fence (partition_key, max_version, seq_counter) VALUES ('p', 1, 3)`)

          const store = yield* SqliteOutboxStore.make()
          const indexes = yield* sql<{
            readonly name: string
          }>`SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'outbox_%' ORDER BY name`
          expect(indexes.map((i) => i.name)).toContain("outbox_claimed_key")
          expect(indexes.map((i) => i.name)).not.toContain("outbox_key")
          expect(yield* sql`SELECT count(*) AS n FROM outbox_migrations`).toEqual([{ n: 2 }])
          // k1, claimed at version 1, still blocks k2 for version 1; a new epoch reclaims everything, in age order
          const first = yield* store.claim("p", token("o", 1), 10)
          expect(first.records.map((r) => r.id)).toEqual(["x"])
          const next = yield* store.claim("p", token("o", 2), 10)
          expect(next.records.map((r) => r.id)).toEqual(["k1", "k2", "x"])
        }).pipe(Effect.provide(SqliteDatabase.layer({ filename: ":memory:" })))
    )

    it.effect("invalid staleClaimAfter and retention fail the layer with InvalidConfiguration naming both", () =>
      Effect.gen(function* () {
        const invalid: ReadonlyArray<SqliteOutboxStore.SqliteOutboxStoreOptions> = [
          { staleClaimAfter: 0, retention: 0 },
          { staleClaimAfter: "-5 seconds", retention: Number.POSITIVE_INFINITY },
          { staleClaimAfter: Number.NaN, retention: -1 }
        ]
        for (const options of invalid) {
          const error = yield* Effect.flip(SqliteOutboxStore.make(options))
          expect(error._tag).toBe("InvalidConfiguration")
          if (error._tag === "InvalidConfiguration") {
            expect(error.component).toBe("SqliteOutboxStore")
            expect(error.problems).toHaveLength(2)
          }
        }
        // nothing was migrated: the options are checked before the database is touched
        const sql = yield* SqlClient.SqlClient
        expect(yield* sql`SELECT name FROM sqlite_master WHERE name = 'outbox'`).toEqual([])
      }).pipe(Effect.provide(SqliteDatabase.layer({ filename: ":memory:" })))
    )

    it.effect("an invalid table prefix fails the layer with InvalidConfiguration", () =>
      Effect.gen(function* () {
        const error = yield* Effect.flip(SqliteOutboxStore.make({ tablePrefix: "x; DROP TABLE y" }))
        expect(error._tag).toBe("InvalidConfiguration")
      }).pipe(Effect.provide(SqliteDatabase.layer({ filename: ":memory:" })))
    )

    it.effect("SqliteDatabase creates the parent directory and opens files in WAL with synchronous FULL", () =>
      Effect.gen(function* () {
        const filename = path.join(directory, "nested", "deeper", "outbox.db")
        const pragmas = yield* Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          return {
            journal: yield* sql`PRAGMA journal_mode`,
            synchronous: yield* sql`PRAGMA synchronous`,
            busy: yield* sql`PRAGMA busy_timeout`,
            foreignKeys: yield* sql`PRAGMA foreign_keys`
          }
        }).pipe(Effect.provide(SqliteDatabase.layer({ filename, busyTimeout: "2 seconds" })))
        expect(fs.existsSync(filename)).toBe(true)
        expect(pragmas.journal).toEqual([{ journal_mode: "wal" }])
        expect(pragmas.synchronous).toEqual([{ synchronous: 2 }])
        expect(pragmas.busy).toEqual([{ timeout: 2000 }])
        expect(pragmas.foreignKeys).toEqual([{ foreign_keys: 1 }])
      })
    )

    it.effect("listPartitions pages through many partitions and omits ones without non-terminal records", () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const keys = Array.from({ length: 230 }, (_, i) => `part-${String(i).padStart(3, "0")}`)
        yield* store.persist(keys.map((k) => record(k, "e")))
        const t = token("o", 1)
        const done = yield* store.claim("part-007", t, 1)
        yield* store.complete(
          done.records.map((r) => r.id),
          t
        )
        yield* store.claim("part-008", t, 1) // claimed is still non-terminal
        const listed = Chunk.toReadonlyArray(yield* Stream.runCollect(store.listPartitions))
        expect(listed).toEqual(keys.filter((k) => k !== "part-007"))
      }).pipe(Effect.provide(memory))
    )

    it.effect("claims larger than one guarded update chunk return every record in age order", () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        yield* store.persist(Array.from({ length: 2500 }, (_, i) => record("big", `e${String(i).padStart(4, "0")}`)))
        const batch = yield* store.claim("big", token("o", 1), 2400)
        expect(batch.records).toHaveLength(2400)
        expect(batch.records.map((r) => r.seq)).toEqual(Array.from({ length: 2400 }, (_, i) => i + 1))
        yield* store.complete(
          batch.records.map((r) => r.id),
          token("o", 1)
        )
        expect(yield* store.countPending("big")).toBe(100)
        expect(yield* store.countClaimed("big")).toBe(0)
      }).pipe(Effect.provide(memory))
    )

    it.effect(
      "a complete of more ids than one guarded update chunk applies the claimed ones and names the others",
      () =>
        Effect.gen(function* () {
          const store = yield* OutboxStore
          yield* store.persist(
            Array.from({ length: 2500 }, (_, i) => record("bigmix", `e${String(i).padStart(4, "0")}`))
          )
          const claimed = (yield* store.claim("bigmix", token("o", 1), 2400)).records.map((r) => r.id)
          const pending = (yield* store.queryPending("bigmix", 3)).map((r) => r.id)
          // the unclaimed ids sit in the second and third chunks
          const ids = [...claimed.slice(0, 1500), pending[0] ?? "", ...claimed.slice(1500), ...pending.slice(1)]
          const exit = yield* Effect.exit(store.complete(ids, token("o", 1)))
          expect(Exit.isFailure(exit)).toBe(true)
          if (Exit.isFailure(exit)) {
            const failure = Option.getOrUndefined(Cause.failureOption(exit.cause))
            expect(failure?._tag).toBe("StaleFencingToken")
            if (failure?._tag === "StaleFencingToken") expect(failure.recordIds).toEqual(pending)
          }
          expect(yield* store.countClaimed("bigmix")).toBe(0)
          expect(yield* store.countPending("bigmix")).toBe(100)
        }).pipe(Effect.provide(memory))
    )

    it("isBusy recognises lock failures only", () => {
      const busy = new SqlError({ cause: Object.assign(new Error("database is locked"), { code: "SQLITE_BUSY" }) })
      const snapshot = new SqlError({ cause: Object.assign(new Error("x"), { code: "SQLITE_BUSY_SNAPSHOT" }) })
      const other = new SqlError({ cause: Object.assign(new Error("x"), { code: "SQLITE_CONSTRAINT" }) })
      expect(SqliteOutboxStore.isBusy(busy)).toBe(true)
      expect(SqliteOutboxStore.isBusy(snapshot)).toBe(true)
      expect(SqliteOutboxStore.isBusy(other)).toBe(false)
      expect(SqliteOutboxStore.isBusy(new Error("SQLITE_BUSY"))).toBe(false)
    })

    it("decodeRow turns a row with a wrong column type into CorruptRecord naming the id", () => {
      const decoded = SqliteOutboxRows.decodeRow({ id: "r1", partition_key: "p", created_at: "yesterday" })
      expect(Either.isLeft(decoded)).toBe(true)
      if (Either.isLeft(decoded)) expect(decoded.left.recordId).toBe("r1")
    })
  })
})
