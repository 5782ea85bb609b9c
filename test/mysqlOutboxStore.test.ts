/**
 * MySQL-specific behaviour of the outbox store (SPEC §3.5), on MariaDB: query plans at 100k records,
 * claims of different partitions never waiting on each other, deadlock and lock-wait-timeout retries, a
 * connection killed mid-claim or mid-persist, transactional enqueue, concurrent migrations, what the
 * store refuses to store.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { inject } from "vitest"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as MysqlDeadLetterStore from "../src/layers/mysql/MysqlDeadLetterStore.js"
import * as MysqlLeaseStore from "../src/layers/mysql/MysqlLeaseStore.js"
import * as MysqlOutboxSchema from "../src/layers/mysql/MysqlOutboxSchema.js"
import * as MysqlOutboxStore from "../src/layers/mysql/MysqlOutboxStore.js"
import { conflictRetries } from "../src/layers/sql/SqlTransaction.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { clientLayer, createDatabase } from "./support/MysqlServer.js"

const url = await createDatabase(inject("mysqlUrl"), "outbox_store")

const storeIn = (database: string, options: MysqlOutboxStore.MysqlOutboxStoreOptions = {}) =>
  MysqlOutboxStore.layerWith({ database, ...options }).pipe(Layer.provideMerge(clientLayer(url, 8)))

const namesOf = (database: string) => Either.getOrThrow(MysqlOutboxSchema.tableNames("test", database, ""))

const record = (pk: string, env: string, key?: string) =>
  new NewOutboxRecord({
    id: `${pk}.${env}`,
    partitionKey: pk,
    envelopeId: env,
    bindingId: "b",
    payload: new TextEncoder().encode(env),
    ...(key === undefined ? {} : { orderingKey: key })
  })

const token = (owner: string, version: number) => ({ owner, version })

const ExplainRows = Schema.Array(
  Schema.Struct({
    table: Schema.NullOr(Schema.String),
    type: Schema.NullOr(Schema.String),
    key: Schema.NullOr(Schema.String),
    Extra: Schema.NullOr(Schema.String)
  })
)

/** The rows of `EXPLAIN` of a statement with its parameters. */
const explain = (text: string, params: ReadonlyArray<unknown>) =>
  Effect.flatMap(
    Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`EXPLAIN ${text}`, params)),
    Schema.decodeUnknown(ExplainRows)
  )

/**
 * The thread id of a connection to this file's database waiting on a lock (polls until there is one).
 *
 * InnoDB serves `INNODB_TRX` from a buffer it refreshes only when the buffer has not been read for 0.1 s:
 * polled more often than that, the view stays frozen at the first read (before the wait began) for as
 * long as the polling goes on — a wait is then never seen, or a thread long gone from the wait is taken for
 * a waiting one. The polls are therefore spaced wider than that.
 */
const waitingConnection = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ id: number }>`SELECT t.trx_mysql_thread_id AS id FROM information_schema.INNODB_TRX AS t
    JOIN information_schema.PROCESSLIST AS p ON p.ID = t.trx_mysql_thread_id
    WHERE t.trx_state = 'LOCK WAIT' AND p.DB = DATABASE()`
  const id = rows[0]?.id
  return id === undefined ? yield* Effect.fail("no waiting connection yet") : id
}).pipe(Effect.retry(Schedule.spaced("150 millis")))

describe("MysqlOutboxStore", () => {
  it.live(
    "claim, queryPending and counts use the indexes at 100k records: no full scan, no filesort (SPEC §3.5)",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const store = yield* OutboxStore
        const t = namesOf("plans")
        // 100k records in one partition and 100k in others: a third keyed over 500 keys, 1% claimed; 20k
        // completed records of the partition (kept for retention) are older than all of them
        yield* sql.unsafe(`INSERT INTO ${t.outbox} (id, partition_key, envelope_id, binding_id, route_id, address, payload,
            headers, ordering_key, created_at, seq, status, claimed_by, claim_version, claimed_at, terminal_at)
          SELECT CONCAT('r', i), IF(i <= 100000, 'hot', CONCAT('p', i % 50)), CONCAT('e', i), 'b', '', '', x'00', '{}',
            IF(i % 3 = 0, CONCAT('k', i % 500), NULL), 1700000000000 + i, i,
            IF(i % 100 = 0, 'claimed', 'pending'), IF(i % 100 = 0, 'old', NULL), IF(i % 100 = 0, 1, 0),
            IF(i % 100 = 0, 1700000000000, NULL), NULL
          FROM (SELECT seq AS i FROM seq_1_to_200000) AS s`).unprepared
        yield* sql.unsafe(`INSERT INTO ${t.outbox} (id, partition_key, envelope_id, binding_id, route_id, address, payload,
            headers, created_at, seq, status, completed_at, terminal_at)
          SELECT CONCAT('done', i), 'hot', CONCAT('d', i), 'b', '', '', x'00', '{}', 1600000000000 + i, 200000 + i,
            'completed', 1700000000000, 1700000000000
          FROM (SELECT seq AS i FROM seq_1_to_20000) AS s`).unprepared
        yield* sql.unsafe(`INSERT INTO ${t.seq} (partition_key, seq_counter) VALUES ('hot', 220000)`)
        yield* sql.unsafe(`ANALYZE TABLE ${t.outbox}`).unprepared
        for (const staleReclaim of [false, true]) {
          const st = MysqlOutboxSchema.statements(t, { staleReclaim })
          const stale = staleReclaim ? [1700000000000] : []
          const plans = [
            yield* explain(st.selectClaimable, ["hot", 1, ...stale, 1, ...stale, 100]),
            yield* explain(st.queryPending, ["hot", 100]),
            yield* explain(st.countPending, ["hot"]),
            yield* explain(st.countClaimed, ["hot"])
          ]
          for (const plan of plans) {
            // the rows reading the outbox (aliases o and b)
            const rows = plan.filter((row) => row.table === "o" || row.table === "b")
            expect(rows.length).toBeGreaterThan(0)
            for (const row of rows) {
              // ALL is a full table scan, index a full index scan
              expect(row.type).not.toBe("ALL")
              expect(row.type).not.toBe("index")
              expect(row.Extra ?? "").not.toContain("filesort")
              expect(row.Extra ?? "").not.toContain("temporary")
            }
          }
          const [claimPlan] = plans
          expect(claimPlan?.[0]?.key).toBe(t.claimIndex)
          // the head-of-line check reads the claimed records of one key
          expect(claimPlan?.slice(1).map((row) => row.key)).toEqual([t.keyIndex])
        }
        // the claim itself: the oldest claimable records in age order; r300 (key k300) is claimed at version 1,
        // so its younger sibling r1800 is held back while other keys and keyless records pass
        const batch = yield* store.claim("hot", token("w", 1), 2000)
        const ids = batch.records.map((r) => r.id)
        expect(ids.slice(0, 5)).toEqual(["r1", "r2", "r3", "r4", "r5"])
        expect(ids).toHaveLength(2000)
        expect(ids).not.toContain("r100")
        expect(ids).not.toContain("r1800")
        expect(ids).toContain("r1799")
        expect(yield* store.countPending("hot")).toBe(99000 - 2000)
      }).pipe(Effect.provide(storeIn("plans"))),
    180_000
  )

  it.live("a claim transaction held open on one partition never delays a claim of another; it does delay its own", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const store = yield* OutboxStore
      yield* store.persist([record("pa", "1"), record("pa", "2"), record("pb", "1")])
      const holding = yield* Deferred.make<void>()
      const finish = yield* Deferred.make<void>()
      // a caller's transaction: the store's claim joins it, so the fence row of `pa` stays locked until the end
      const holder = yield* Effect.fork(
        sql.withTransaction(
          Effect.gen(function* () {
            const held = yield* store.claim("pa", token("holder", 1), 1)
            expect(held.records.map((r) => r.id)).toEqual(["pa.1"])
            yield* Deferred.succeed(holding, undefined)
            yield* Deferred.await(finish)
          })
        )
      )
      yield* Deferred.await(holding)
      // a new partition (its fence row created now) and an existing one are both claimed while pa is held
      const other = yield* store.claim("pb", token("other", 1), 10)
      expect(other.records.map((r) => r.id)).toEqual(["pb.1"])
      yield* store.persist([record("pc", "1")])
      const fresh = yield* store.claim("pc", token("other", 1), 10)
      expect(fresh.records.map((r) => r.id)).toEqual(["pc.1"])
      // a claim of the held partition waits on the fence row ...
      const same = yield* Effect.fork(store.claim("pa", token("next", 2), 10))
      yield* waitingConnection
      expect(yield* Fiber.poll(same)).toEqual(expect.objectContaining({ _tag: "None" }))
      yield* Deferred.succeed(finish, undefined)
      yield* Fiber.join(holder)
      // ... and then pre-empts the committed claim with its higher version
      const after = yield* Fiber.join(same)
      expect(after.records.map((r) => r.id)).toEqual(["pa.1", "pa.2"])
    }).pipe(Effect.provide(storeIn("partitions")))
  )

  it.live("deadlocks (1213) are retried a bounded number of times, then TransactionConflict (R-CLAIM-10)", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const store = yield* OutboxStore
      const t = namesOf("conflicts")
      yield* store.persist([record("pc", "1"), record("pd", "1")])
      // every claim update of partition pc fails as a deadlock victim would; a MyISAM table (not rolled back
      // with the transaction) counts the attempts on pd, whose first two fail
      yield* sql.unsafe(`CREATE TABLE conflicts.attempts (n INT AUTO_INCREMENT PRIMARY KEY) ENGINE=MyISAM`).unprepared
      yield* sql.unsafe(`CREATE TRIGGER conflicts.fail BEFORE UPDATE ON ${t.outbox} FOR EACH ROW
        BEGIN
          IF NEW.status = 'claimed' AND NEW.partition_key = 'pd' THEN INSERT INTO conflicts.attempts VALUES (NULL); END IF;
          IF NEW.status = 'claimed' AND (NEW.partition_key = 'pc'
              OR (NEW.partition_key = 'pd' AND (SELECT count(*) FROM conflicts.attempts) <= 2)) THEN
            SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = 'injected', MYSQL_ERRNO = 1213;
          END IF;
        END`).unprepared
      const error = yield* Effect.flip(store.claim("pc", token("w", 1), 10))
      expect(error._tag).toBe("TransactionConflict")
      // nothing was claimed, and the fence raise was rolled back with each attempt
      expect(yield* store.countClaimed("pc")).toBe(0)
      const fence = yield* sql<{ n: number }>`SELECT count(*) AS n FROM conflicts.outbox_fence WHERE max_version > 0`
      expect(fence[0]?.n).toBe(0)
      // a conflict that clears within the retries is invisible to the caller
      const batch = yield* store.claim("pd", token("w", 1), 10)
      expect(batch.records.map((r) => r.id)).toEqual(["pd.1"])
      const attempts = yield* sql<{ n: number }>`SELECT count(*) AS n FROM conflicts.attempts`
      expect(attempts[0]?.n).toBe(3)
      expect(conflictRetries).toBeGreaterThanOrEqual(2)
    }).pipe(Effect.provide(storeIn("conflicts")))
  )

  it.live(
    "a claim failing as a deadlock victim every time runs exactly 1 + conflictRetries times, then TransactionConflict",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const store = yield* OutboxStore
        const t = namesOf("retrybound")
        yield* store.persist([record("pe", "1")])
        // a MyISAM table (not rolled back with the transaction) counts every attempt of the claim update
        yield* sql.unsafe(`CREATE TABLE retrybound.attempts (n INT AUTO_INCREMENT PRIMARY KEY) ENGINE=MyISAM`)
          .unprepared
        // every attempt of the claim update is counted, then fails with the given SQLSTATE and error number
        const failClaims = (sqlstate: string, errno: number) =>
          sql.unsafe(`CREATE TRIGGER retrybound.fail BEFORE UPDATE ON ${t.outbox} FOR EACH ROW
          BEGIN
            IF NEW.status = 'claimed' THEN
              INSERT INTO retrybound.attempts VALUES (NULL);
              SIGNAL SQLSTATE '${sqlstate}' SET MESSAGE_TEXT = 'injected', MYSQL_ERRNO = ${errno};
            END IF;
          END`).unprepared
        yield* failClaims("40001", 1213)
        const error = yield* Effect.flip(store.claim("pe", token("w", 1), 10))
        expect(error._tag).toBe("TransactionConflict")
        const attempts = yield* sql<{ n: number }>`SELECT count(*) AS n FROM retrybound.attempts`
        expect(attempts[0]?.n).toBe(1 + conflictRetries)
        // another failure than a conflict is not retried: one attempt, StoreUnavailable
        yield* sql.unsafe(`DROP TRIGGER retrybound.fail`).unprepared
        yield* sql.unsafe(`TRUNCATE TABLE retrybound.attempts`).unprepared
        yield* failClaims("45000", 1644)
        const other = yield* Effect.flip(store.claim("pe", token("w", 1), 10))
        expect(other._tag).toBe("StoreUnavailable")
        const once = yield* sql<{ n: number }>`SELECT count(*) AS n FROM retrybound.attempts`
        expect(once[0]?.n).toBe(1)
        expect(yield* store.countClaimed("pe")).toBe(0)
      }).pipe(Effect.provide(storeIn("retrybound")))
  )

  it.live("a real deadlock with another transaction is retried: the claim succeeds once the other one is gone", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const store = yield* OutboxStore
      const t = namesOf("deadlock")
      yield* store.persist([record("dl", "1"), record("dl", "2")])
      yield* store.claim("dl", token("first", 1), 0)
      yield* sql.unsafe(`CREATE TABLE deadlock.ballast (n INT PRIMARY KEY) ENGINE=InnoDB`).unprepared
      yield* sql.unsafe(`INSERT INTO deadlock.ballast SELECT seq FROM seq_1_to_200`).unprepared
      const locked = yield* Deferred.make<void>()
      const claimWaits = yield* Deferred.make<void>()
      // the other transaction is the heavier one (200 rows changed), so InnoDB picks the claim as the victim:
      // it locks dl.2, lets the claim lock the fence and wait on dl.2, then asks for the fence row
      const other = yield* Effect.fork(
        sql.withTransaction(
          Effect.gen(function* () {
            yield* sql.unsafe(`UPDATE deadlock.ballast SET n = n + 1000`)
            yield* sql.unsafe(`SELECT id FROM ${t.outbox} WHERE id = 'dl.2' FOR UPDATE`)
            yield* Deferred.succeed(locked, undefined)
            yield* Deferred.await(claimWaits)
            yield* sql.unsafe(`SELECT max_version FROM ${t.fence} WHERE partition_key = 'dl' FOR UPDATE`)
          })
        )
      )
      yield* Deferred.await(locked)
      const claiming = yield* Effect.fork(store.claim("dl", token("second", 2), 10))
      yield* waitingConnection
      yield* Deferred.succeed(claimWaits, undefined)
      yield* Fiber.join(other)
      const batch = yield* Fiber.join(claiming)
      expect(batch.records.map((r) => r.id)).toEqual(["dl.1", "dl.2"])
      const deadlocks = yield* sql<{ Value: string }>`SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'`
      expect(Number(deadlocks[0]?.Value)).toBeGreaterThan(0)
    }).pipe(Effect.provide(storeIn("deadlock")))
  )

  it.live(
    "lock-wait timeouts (1205) are retried a bounded number of times, then TransactionConflict",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const store = yield* OutboxStore
        const t = namesOf("lockwait")
        // the store's one connection waits at most 1 s for a lock
        yield* sql.unsafe("SET SESSION innodb_lock_wait_timeout = 1").unprepared
        yield* store.persist([record("lw", "1")])
        yield* store.claim("lw", token("first", 1), 0)
        const locked = yield* Deferred.make<void>()
        const finish = yield* Deferred.make<void>()
        // another client holds the fence row of lw
        const holder = yield* Effect.fork(
          Effect.flatMap(SqlClient.SqlClient, (other) =>
            other.withTransaction(
              Effect.gen(function* () {
                yield* other.unsafe(`SELECT max_version FROM ${t.fence} WHERE partition_key = 'lw' FOR UPDATE`)
                yield* Deferred.succeed(locked, undefined)
                yield* Deferred.await(finish)
              })
            )
          ).pipe(Effect.provide(clientLayer(url, 1)))
        )
        yield* Deferred.await(locked)
        const error = yield* Effect.flip(store.claim("lw", token("second", 2), 10))
        expect(error._tag).toBe("TransactionConflict")
        yield* Deferred.succeed(finish, undefined)
        yield* Fiber.join(holder)
        expect(yield* store.countClaimed("lw")).toBe(0)
        const fence = yield* sql<{
          v: number
        }>`SELECT max_version AS v FROM lockwait.outbox_fence WHERE partition_key = 'lw'`
        expect(fence[0]?.v).toBe(1)
        const batch = yield* store.claim("lw", token("second", 2), 10)
        expect(batch.records.map((r) => r.id)).toEqual(["lw.1"])
      }).pipe(
        Effect.provide(
          MysqlOutboxStore.layerWith({ database: "lockwait" }).pipe(Layer.provideMerge(clientLayer(url, 1)))
        )
      ),
    60_000
  )

  it.live("concurrent claims never share a record", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* store.persist(Array.from({ length: 40 }, (_, i) => record("cc", String(i).padStart(2, "0"))))
      const batches = yield* Effect.forEach(
        Array.from({ length: 8 }, (_, i) => i + 1),
        (version) => store.claim("cc", token(`w${version}`, version), 5).pipe(Effect.either),
        { concurrency: "unbounded" }
      )
      const claimed = batches.flatMap((b) => (Either.isRight(b) ? b.right.records : []))
      const holders = new Map<string, number>()
      for (const r of claimed) holders.set(r.id, Math.max(holders.get(r.id) ?? 0, r.claimVersion))
      // a record may be pre-empted by a higher version (R-CLAIM-9); its stored holder is the highest that got it
      const sql = yield* SqlClient.SqlClient
      const stored = yield* sql<{ id: string; v: number }>`SELECT id, claim_version AS v FROM concurrent.outbox
        WHERE status = 'claimed'`
      expect(new Map(stored.map((r) => [r.id, r.v]))).toEqual(holders)
      expect(holders.size).toBeGreaterThan(0)
      for (const b of batches)
        if (Either.isLeft(b)) expect(b.left._tag).toMatch(/StaleFencingToken|TransactionConflict/)
    }).pipe(Effect.provide(storeIn("concurrent")))
  )

  it.live("a connection killed mid-claim is StoreUnavailable and leaves nothing applied (fence, records)", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const store = yield* OutboxStore
      const t = namesOf("killed")
      yield* store.persist([record("pk", "1"), record("pk", "2")])
      yield* store.claim("pk", token("first", 1), 0)
      const locked = yield* Deferred.make<void>()
      const finish = yield* Deferred.make<void>()
      // another transaction holds the row lock of pk.2: the claim raises the fence, then waits in its update
      const holder = yield* Effect.fork(
        sql.withTransaction(
          Effect.gen(function* () {
            yield* sql.unsafe(`SELECT id FROM ${t.outbox} WHERE id = 'pk.2' FOR UPDATE`)
            yield* Deferred.succeed(locked, undefined)
            yield* Deferred.await(finish)
          })
        )
      )
      yield* Deferred.await(locked)
      const claiming = yield* Effect.fork(Effect.flip(store.claim("pk", token("second", 5), 10)))
      const id = yield* waitingConnection
      yield* sql.unsafe(`KILL CONNECTION ${String(id)}`).unprepared
      const error = yield* Fiber.join(claiming)
      expect(error._tag).toBe("StoreUnavailable")
      yield* Deferred.succeed(finish, undefined)
      yield* Fiber.join(holder)
      const fence = yield* sql<{
        v: number
      }>`SELECT max_version AS v FROM killed.outbox_fence WHERE partition_key = 'pk'`
      expect(fence[0]?.v).toBe(1)
      expect(yield* store.countClaimed("pk")).toBe(0)
      expect(yield* store.countPending("pk")).toBe(2)
      // the pool replaced the dead connection
      const again = yield* store.claim("pk", token("second", 5), 10)
      expect(again.records.map((r) => r.id)).toEqual(["pk.1", "pk.2"])
    }).pipe(Effect.provide(storeIn("killed")))
  )

  it.live("a connection killed mid-persist is StoreUnavailable and stores nothing of the batch (records, seq)", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const store = yield* OutboxStore
      const t = namesOf("killedpersist")
      yield* store.persist([record("pp", "0")])
      const inserted = yield* Deferred.make<void>()
      const finish = yield* Deferred.make<void>()
      // an uncommitted row holds the identity (pp, 2, b): the persist allocates its seqs, inserts pp.1, then
      // waits on it
      const holder = yield* Effect.fork(
        sql
          .withTransaction(
            Effect.gen(function* () {
              yield* sql.unsafe(`INSERT INTO ${t.outbox} (id, partition_key, envelope_id, binding_id, route_id, address,
              payload, headers, created_at, seq, status) VALUES ('other', 'pp', '2', 'b', '', '', x'00', '{}', 0, 0, 'pending')`)
              yield* Deferred.succeed(inserted, undefined)
              yield* Deferred.await(finish)
              return yield* Effect.fail("roll back")
            })
          )
          .pipe(Effect.either)
      )
      yield* Deferred.await(inserted)
      const persisting = yield* Effect.fork(Effect.flip(store.persist([record("pp", "1"), record("pp", "2")])))
      const id = yield* waitingConnection
      yield* sql.unsafe(`KILL CONNECTION ${String(id)}`).unprepared
      const error = yield* Fiber.join(persisting)
      expect(error._tag).toBe("StoreUnavailable")
      yield* Deferred.succeed(finish, undefined)
      yield* Fiber.join(holder)
      expect(yield* store.countPending("pp")).toBe(1)
      const seq = yield* sql<{
        n: number
      }>`SELECT seq_counter AS n FROM killedpersist.outbox_seq WHERE partition_key = 'pp'`
      expect(seq[0]?.n).toBe(1)
      const report = yield* store.persist([record("pp", "1"), record("pp", "2")])
      expect(report.persisted).toEqual(["pp.1", "pp.2"])
    }).pipe(Effect.provide(storeIn("killedpersist")))
  )

  it.live(
    "persist joins the caller's sql.withTransaction: business rows and records commit or roll back together",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const store = yield* OutboxStore
        yield* sql`CREATE TABLE joined.orders (id VARCHAR(20) PRIMARY KEY)`
        const failed = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              yield* sql`INSERT INTO joined.orders (id) VALUES ('o1')`
              yield* store.persist([record("tx", "1")])
              return yield* Effect.fail("business rule failed")
            })
          )
          .pipe(Effect.flip)
        expect(failed).toBe("business rule failed")
        expect(yield* store.countPending("tx")).toBe(0)
        expect(yield* sql`SELECT id FROM joined.orders`).toEqual([])
        yield* sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`INSERT INTO joined.orders (id) VALUES ('o2')`
            yield* store.persist([record("tx", "2")])
          })
        )
        expect(yield* store.countPending("tx")).toBe(1)
        expect(yield* sql`SELECT id FROM joined.orders`).toEqual([{ id: "o2" }])
        // a failing persist (every record a duplicate) inside the transaction leaves the caller's work usable
        yield* sql.withTransaction(
          Effect.gen(function* () {
            const duplicate = yield* Effect.flip(store.persist([record("tx", "2")]))
            expect(duplicate._tag).toBe("DuplicateRecord")
            yield* sql`INSERT INTO joined.orders (id) VALUES ('o3')`
          })
        )
        expect(yield* sql`SELECT id FROM joined.orders ORDER BY id`).toEqual([{ id: "o2" }, { id: "o3" }])
      }).pipe(Effect.provide(storeIn("joined")))
  )

  it.live("several layers migrating one database at once all start (also different stores creating one database)", () =>
    Effect.gen(function* () {
      yield* Effect.forEach(
        Array.from({ length: 4 }, (_, i) => i),
        () =>
          Effect.provide(
            Effect.flatMap(OutboxStore, (s) => s.countPending("x")),
            storeIn("racing")
          ),
        { concurrency: "unbounded", discard: true }
      )
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ name: string }>`SELECT name FROM racing.outbox_migrations`
      expect(rows.map((r) => r.name)).toEqual(["0001_create_outbox"])
      // the three stores of one fresh database built at once (each creates the database)
      yield* Effect.flatMap(OutboxStore, (s) => s.countPending("x")).pipe(
        Effect.provide(
          Layer.mergeAll(
            MysqlDeadLetterStore.layerWith({ database: "racing_all" }),
            MysqlLeaseStore.layerWith({ database: "racing_all" })
          ).pipe(
            Layer.provideMerge(MysqlOutboxStore.layerWith({ database: "racing_all" })),
            Layer.provide(clientLayer(url))
          )
        )
      )
      const tables = yield* sql<{ n: number }>`SELECT count(*) AS n FROM information_schema.TABLES
        WHERE TABLE_SCHEMA = 'racing_all'`
      expect(tables[0]?.n).toBe(8)
    }).pipe(Effect.provide(clientLayer(url)))
  )

  it.live("keys compare byte for byte: case and trailing spaces make different partitions and identities", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* store.persist([record("k", "e"), record("K", "e"), record("k ", "e")])
      const report = yield* store.persist([
        new NewOutboxRecord({
          id: "k.E",
          partitionKey: "k",
          envelopeId: "E",
          bindingId: "b",
          payload: new Uint8Array()
        }),
        new NewOutboxRecord({
          id: "k.e ",
          partitionKey: "k",
          envelopeId: "e ",
          bindingId: "b",
          payload: new Uint8Array()
        })
      ])
      expect(report.persisted).toEqual(["k.E", "k.e "])
      expect(yield* store.countPending("k")).toBe(3)
      expect(yield* store.countPending("K")).toBe(1)
      expect(yield* store.countPending("k ")).toBe(1)
    }).pipe(Effect.provide(storeIn("bytes")))
  )

  it.live("a key over 255 characters or text with a lone surrogate is an InvalidRecord, nothing stored", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const long = yield* Effect.flip(store.persist([record("inv", "1"), record("inv", "x".repeat(256))]))
      expect(long._tag).toBe("InvalidRecord")
      if (long._tag === "InvalidRecord") expect(long.reason).toContain("255")
      const surrogate = yield* Effect.flip(store.persist([record("inv", "1"), record("inv", "a\uD800b")]))
      expect(surrogate._tag).toBe("InvalidRecord")
      expect(yield* store.countPending("inv")).toBe(0)
      // a key of exactly 255 characters, and a payload with every byte value, are stored as given
      const payload = Uint8Array.from({ length: 256 }, (_, i) => i)
      yield* store.persist([
        new NewOutboxRecord({
          id: "y".repeat(255),
          partitionKey: "inv",
          envelopeId: "z".repeat(255),
          bindingId: "b",
          payload
        })
      ])
      const [stored] = yield* store.queryPending("inv", 10)
      expect(stored?.payload).toEqual(payload)
      expect(stored?.envelopeId).toHaveLength(255)
    }).pipe(Effect.provide(storeIn("invalid")))
  )
})
