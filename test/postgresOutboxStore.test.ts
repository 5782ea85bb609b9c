/**
 * PostgreSQL-specific behaviour of the outbox store (SPEC §3.4): query plans at 100k records, claims of
 * different partitions never waiting on each other, conflict retries, a connection killed mid-claim or
 * mid-persist, transactional enqueue, concurrent migrations.
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
import * as PostgresDeadLetterStore from "../src/layers/postgres/PostgresDeadLetterStore.js"
import * as PostgresLeaseStore from "../src/layers/postgres/PostgresLeaseStore.js"
import * as PostgresOutboxSchema from "../src/layers/postgres/PostgresOutboxSchema.js"
import * as PostgresOutboxStore from "../src/layers/postgres/PostgresOutboxStore.js"
import { conflictRetries } from "../src/layers/postgres/PostgresTransaction.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { clientLayer, createDatabase } from "./support/PostgresServer.js"

const url = await createDatabase(inject("postgresUrl"), "outbox_store")

/** The store on a schema of its own, with the client it runs on (a pool of `connections`). */
const storeIn = (schema: string, options: PostgresOutboxStore.PostgresOutboxStoreOptions = {}, connections = 8) =>
  PostgresOutboxStore.layerWith({ schema, ...options }).pipe(Layer.provideMerge(clientLayer(url, connections)))

const namesOf = (schema: string) => Either.getOrThrow(PostgresOutboxSchema.tableNames("test", schema, ""))

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

interface PlanNode {
  readonly "Node Type": string
  readonly "Index Name"?: string | undefined
  readonly "Relation Name"?: string | undefined
  readonly Plans?: ReadonlyArray<PlanNode> | undefined
}
const PlanNode: Schema.Schema<PlanNode> = Schema.Struct({
  "Node Type": Schema.String,
  "Index Name": Schema.optional(Schema.String),
  "Relation Name": Schema.optional(Schema.String),
  Plans: Schema.optional(Schema.Array(Schema.suspend(() => PlanNode)))
})
const ExplainRows = Schema.Array(Schema.Struct({ "QUERY PLAN": Schema.Tuple(Schema.Struct({ Plan: PlanNode })) }))

const nodesOf = (plan: PlanNode): Array<PlanNode> => [plan, ...(plan.Plans ?? []).flatMap(nodesOf)]

/** The plan nodes of a statement with its parameters. */
const explain = (text: string, params: ReadonlyArray<unknown>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql.unsafe(`EXPLAIN (FORMAT JSON) ${text}`, params)
    const decoded = yield* Schema.decodeUnknown(ExplainRows)(rows)
    const root = decoded[0]?.["QUERY PLAN"][0].Plan
    expect(root).toBeDefined()
    return root === undefined ? [] : nodesOf(root)
  })

/** The pid of a backend of this database waiting on a lock (polls until there is one). */
const waitingBackend = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ pid: number }>`SELECT pid FROM pg_stat_activity
    WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`
  const pid = rows[0]?.pid
  return pid === undefined ? yield* Effect.fail("no waiting backend yet") : pid
}).pipe(Effect.retry(Schedule.spaced("20 millis")))

describe("PostgresOutboxStore", () => {
  it.live(
    "claim, queryPending and counts use the indexes at 100k records: no sequential scan, no sort (SPEC §3.4)",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const store = yield* OutboxStore
        const t = namesOf("plans")
        // 100k records in one partition and 100k in others: a third keyed over 500 keys, 1% claimed
        yield* sql.unsafe(`INSERT INTO ${t.outbox} (id, partition_key, envelope_id, binding_id, payload, ordering_key,
            created_at, seq, status, claimed_by, claim_version, claimed_at)
          SELECT 'r' || i, CASE WHEN i <= 100000 THEN 'hot' ELSE 'p' || (i % 50) END, 'e' || i, 'b', '\\x00',
            CASE WHEN i % 3 = 0 THEN 'k' || (i % 500) END, 1700000000000 + i, i,
            CASE WHEN i % 100 = 0 THEN 'claimed' ELSE 'pending' END,
            CASE WHEN i % 100 = 0 THEN 'old' END, CASE WHEN i % 100 = 0 THEN 1 ELSE 0 END,
            CASE WHEN i % 100 = 0 THEN 1700000000000 END
          FROM generate_series(1, 200000) AS i`)
        yield* sql.unsafe(`INSERT INTO ${t.seq} (partition_key, seq_counter) VALUES ('hot', 100000)`)
        yield* sql.unsafe(`VACUUM ANALYZE ${t.outbox}`)
        for (const staleReclaim of [false, true]) {
          const st = PostgresOutboxSchema.statements(t, { staleReclaim })
          const stale = staleReclaim ? [1700000000000] : []
          const plans = [
            yield* explain(st.selectClaimable, ["hot", 1, ...stale, 1, ...stale, 100]),
            yield* explain(st.queryPending, ["hot", 100]),
            yield* explain(st.countPending, ["hot"])
          ]
          for (const nodes of plans) {
            const types = nodes.map((n) => n["Node Type"])
            expect(types).not.toContain("Seq Scan")
            expect(types).not.toContain("Sort")
            expect(types).not.toContain("Incremental Sort")
          }
          const claimIndexUsed = plans[0]?.some((n) => n["Index Name"] === t.claimIndex)
          expect(claimIndexUsed).toBe(true)
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
    120_000
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
      const other = yield* store.claim("pb", token("other", 1), 10)
      expect(other.records.map((r) => r.id)).toEqual(["pb.1"])
      // a claim of the held partition waits on the fence row ...
      const same = yield* Effect.fork(store.claim("pa", token("next", 2), 10))
      yield* waitingBackend
      expect(yield* Fiber.poll(same)).toEqual(expect.objectContaining({ _tag: "None" }))
      yield* Deferred.succeed(finish, undefined)
      yield* Fiber.join(holder)
      // ... and then pre-empts the committed claim with its higher version
      const after = yield* Fiber.join(same)
      expect(after.records.map((r) => r.id)).toEqual(["pa.1", "pa.2"])
    }).pipe(Effect.provide(storeIn("partitions")))
  )

  it.live(
    "serialization failures and deadlocks are retried a bounded number of times, then TransactionConflict (R-CLAIM-10)",
    () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const store = yield* OutboxStore
        const t = namesOf("conflicts")
        yield* store.persist([record("pc", "1"), record("pd", "1")])
        // every claim update of partition pc fails as a serialization failure would; the first two of pd as a
        // deadlock's victim would (a new owner's claim and the old owner's complete locking shared rows in
        // different orders, see docs/design/postgres.md); a sequence counts attempts
        yield* sql.unsafe(`CREATE SEQUENCE conflicts.attempts`)
        yield* sql.unsafe(`CREATE FUNCTION conflicts.fail() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.partition_key = 'pc' THEN
            RAISE EXCEPTION 'injected' USING ERRCODE = 'serialization_failure';
          END IF;
          IF NEW.partition_key = 'pd' AND nextval('conflicts.attempts') <= 2 THEN
            RAISE EXCEPTION 'injected' USING ERRCODE = 'deadlock_detected';
          END IF;
          RETURN NEW;
        END $$`)
        yield* sql.unsafe(`CREATE TRIGGER fail BEFORE UPDATE ON ${t.outbox} FOR EACH ROW
        WHEN (NEW.status = 'claimed') EXECUTE FUNCTION conflicts.fail()`)
        const error = yield* Effect.flip(store.claim("pc", token("w", 1), 10))
        expect(error._tag).toBe("TransactionConflict")
        // nothing was claimed, and the fence raise was rolled back with each attempt
        expect(yield* store.countClaimed("pc")).toBe(0)
        const fence = yield* sql<{
          n: number
        }>`SELECT count(*)::int AS n FROM conflicts.outbox_fence WHERE max_version > 0`
        expect(fence[0]?.n).toBe(0)
        // a conflict that clears within the retries is invisible to the caller
        const batch = yield* store.claim("pd", token("w", 1), 10)
        expect(batch.records.map((r) => r.id)).toEqual(["pd.1"])
        const attempts = yield* sql<{ n: number }>`SELECT last_value::int AS n FROM conflicts.attempts`
        expect(attempts[0]?.n).toBe(3)
        expect(conflictRetries).toBeGreaterThanOrEqual(2)
      }).pipe(Effect.provide(storeIn("conflicts")))
  )

  it.live("concurrent claims under REPEATABLE READ retry their serialization failures and never share a record", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* store.persist(Array.from({ length: 40 }, (_, i) => record("rr", String(i).padStart(2, "0"))))
      const batches = yield* Effect.forEach(
        Array.from({ length: 8 }, (_, i) => i + 1),
        (version) => store.claim("rr", token(`w${version}`, version), 5).pipe(Effect.either),
        { concurrency: "unbounded" }
      )
      const claimed = batches.flatMap((b) => (Either.isRight(b) ? b.right.records : []))
      const holders = new Map<string, number>()
      for (const r of claimed) holders.set(r.id, Math.max(holders.get(r.id) ?? 0, r.claimVersion))
      // a record may be pre-empted by a higher version (R-CLAIM-9); its stored holder is the highest that got it
      const sql = yield* SqlClient.SqlClient
      const stored = yield* sql<{ id: string; v: number }>`SELECT id, claim_version::int AS v FROM repeatable.outbox
        WHERE status = 'claimed'`
      expect(new Map(stored.map((r) => [r.id, r.v]))).toEqual(holders)
      expect(holders.size).toBeGreaterThan(0)
      for (const b of batches)
        if (Either.isLeft(b)) expect(b.left._tag).toMatch(/StaleFencingToken|TransactionConflict/)
    }).pipe(
      Effect.provide(
        PostgresOutboxStore.layerWith({ schema: "repeatable" }).pipe(
          Layer.provideMerge(
            clientLayer(`${url}?options=${encodeURIComponent("-c default_transaction_isolation=repeatable\\ read")}`, 8)
          )
        )
      )
    )
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
      const pid = yield* waitingBackend
      yield* sql`SELECT pg_terminate_backend(${pid})`
      const error = yield* Fiber.join(claiming)
      expect(error._tag).toBe("StoreUnavailable")
      yield* Deferred.succeed(finish, undefined)
      yield* Fiber.join(holder)
      const fence = yield* sql<{
        v: number
      }>`SELECT max_version::int AS v FROM killed.outbox_fence WHERE partition_key = 'pk'`
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
      // an uncommitted row holds the identity (pp, 2, b): the persist inserts pp.1, then waits on it
      const holder = yield* Effect.fork(
        sql
          .withTransaction(
            Effect.gen(function* () {
              yield* sql.unsafe(`INSERT INTO ${t.outbox} (id, partition_key, envelope_id, binding_id, payload, created_at,
              seq, status) VALUES ('other', 'pp', '2', 'b', '\\x00', 0, 0, 'pending')`)
              yield* Deferred.succeed(inserted, undefined)
              yield* Deferred.await(finish)
              return yield* Effect.fail("roll back")
            })
          )
          .pipe(Effect.either)
      )
      yield* Deferred.await(inserted)
      const persisting = yield* Effect.fork(Effect.flip(store.persist([record("pp", "1"), record("pp", "2")])))
      const pid = yield* waitingBackend
      yield* sql`SELECT pg_terminate_backend(${pid})`
      const error = yield* Fiber.join(persisting)
      expect(error._tag).toBe("StoreUnavailable")
      yield* Deferred.succeed(finish, undefined)
      yield* Fiber.join(holder)
      expect(yield* store.countPending("pp")).toBe(1)
      const seq = yield* sql<{
        n: number
      }>`SELECT seq_counter::int AS n FROM killedpersist.outbox_seq WHERE partition_key = 'pp'`
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
        yield* sql`CREATE TABLE joined_orders (id text PRIMARY KEY)`
        const failed = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              yield* sql`INSERT INTO joined_orders (id) VALUES ('o1')`
              yield* store.persist([record("tx", "1")])
              return yield* Effect.fail("business rule failed")
            })
          )
          .pipe(Effect.flip)
        expect(failed).toBe("business rule failed")
        expect(yield* store.countPending("tx")).toBe(0)
        expect(yield* sql`SELECT id FROM joined_orders`).toEqual([])
        yield* sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`INSERT INTO joined_orders (id) VALUES ('o2')`
            yield* store.persist([record("tx", "2")])
          })
        )
        expect(yield* store.countPending("tx")).toBe(1)
        expect(yield* sql`SELECT id FROM joined_orders`).toEqual([{ id: "o2" }])
        // a failing persist (every record a duplicate) inside the transaction leaves the caller's work usable
        yield* sql.withTransaction(
          Effect.gen(function* () {
            const duplicate = yield* Effect.flip(store.persist([record("tx", "2")]))
            expect(duplicate._tag).toBe("DuplicateRecord")
            yield* sql`INSERT INTO joined_orders (id) VALUES ('o3')`
          })
        )
        expect(yield* sql`SELECT id FROM joined_orders ORDER BY id`).toEqual([{ id: "o2" }, { id: "o3" }])
      }).pipe(Effect.provide(storeIn("joined")))
  )

  it.live("several layers migrating one schema at once all start (also different stores creating one schema)", () =>
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
      // the three stores of one fresh schema built at once (each creates the schema)
      yield* Effect.flatMap(OutboxStore, (s) => s.countPending("x")).pipe(
        Effect.provide(
          Layer.mergeAll(
            PostgresDeadLetterStore.layerWith({ schema: "racing_all" }),
            PostgresLeaseStore.layerWith({ schema: "racing_all" })
          ).pipe(
            Layer.provideMerge(PostgresOutboxStore.layerWith({ schema: "racing_all" })),
            Layer.provide(clientLayer(url))
          )
        )
      )
      yield* Effect.flatMap(OutboxStore, (s) => s.countPending("x")).pipe(
        Effect.provide(
          Layer.mergeAll(
            PostgresOutboxStore.layerWith({ schema: "racing_two" }),
            PostgresLeaseStore.layerWith({ schema: "racing_two" })
          ).pipe(Layer.provide(clientLayer(url)))
        )
      )
    }).pipe(Effect.provide(clientLayer(url)))
  )

  it.live("an operation interrupted while it waits for a pooled connection leaves the connection in the pool", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const store = yield* OutboxStore
      yield* store.persist([record("pooled", "1")])
      // the pool's one connection, held by a transaction until `release`
      const holding = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(
        sql.withTransaction(Effect.zipRight(Deferred.succeed(holding, undefined), Deferred.await(release)))
      )
      yield* Deferred.await(holding)
      // operations that wait for that connection (a claim, a count), interrupted while they wait
      const waiters = yield* Effect.forEach(
        [Effect.ignore(store.claim("pooled", token("o", 1), 10)), Effect.ignore(store.countPending("pooled"))],
        (operation) => Effect.fork(operation)
      )
      yield* Effect.sleep("200 millis")
      yield* Effect.forEach(waiters, Fiber.interruptFork, { discard: true })
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      yield* Effect.forEach(waiters, Fiber.await, { discard: true })
      // the connection went back to the pool each time: the next operations get it
      for (let i = 0; i < 3; i++) {
        const pending = yield* store
          .countPending("pooled")
          .pipe(Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => "the pool's connection was lost" }))
        expect(pending).toBe(1)
      }
    }).pipe(Effect.provide(storeIn("pooled", {}, 1)))
  )

  it.live("text with a NUL character is an InvalidRecord, nothing stored", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const error = yield* Effect.flip(store.persist([record("nul", "1"), record("nul", "a\u0000b")]))
      expect(error._tag).toBe("InvalidRecord")
      expect(yield* store.countPending("nul")).toBe(0)
    }).pipe(Effect.provide(storeIn("nul")))
  )
})
