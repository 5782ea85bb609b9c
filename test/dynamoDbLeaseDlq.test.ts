import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { afterAll, beforeAll } from "vitest"
import { DeadLetterEntry } from "../src/domain/DeadLetterEntry.js"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as DeadLetterTable from "../src/layers/dynamodb/DeadLetterTable.js"
import * as DynamoDbDeadLetterStore from "../src/layers/dynamodb/DynamoDbDeadLetterStore.js"
import * as DynamoDbLeaseStore from "../src/layers/dynamodb/DynamoDbLeaseStore.js"
import * as DynamoDbOutboxStore from "../src/layers/dynamodb/DynamoDbOutboxStore.js"
import * as OutboxTable from "../src/layers/dynamodb/OutboxTable.js"
import { DeadLetterStore } from "../src/services/DeadLetterStore.js"
import * as DynamoDb from "../src/services/DynamoDb.js"
import { LeaseStore } from "../src/services/LeaseStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { deadLetterStoreContract } from "./contract/DeadLetterStoreContract.js"
import { leaseStoreContract } from "./contract/LeaseStoreContract.js"
import { makeTestClientConfig, randomTableName } from "./support/DynamoLocal.js"

const outboxTable = randomTableName("lease-dlq-outbox")
const deadLetterTable = randomTableName("lease-dlq-dead-letter")
// The purge contract test assumes it is the only one purging its table: each suite gets a table.
const deadLetterTableLargePages = randomTableName("lease-dlq-dead-letter-1mb")
const tables = [outboxTable, deadLetterTable, deadLetterTableLargePages]
const dynamoLayer = DynamoDb.layer(makeTestClientConfig())

beforeAll(() =>
  Effect.runPromise(
    Effect.all(
      [
        OutboxTable.ensureTable(outboxTable),
        DeadLetterTable.ensureTable(deadLetterTable),
        DeadLetterTable.ensureTable(deadLetterTableLargePages)
      ],
      { concurrency: 3, discard: true }
    ).pipe(Effect.provide(dynamoLayer))
  )
)
afterAll(() =>
  Effect.runPromise(
    Effect.flatMap(DynamoDb.DynamoDb, (d) =>
      Effect.forEach(tables, (TableName) => d.deleteTable({ TableName }), { concurrency: tables.length, discard: true })
    ).pipe(Effect.provide(dynamoLayer))
  )
)

const leaseLayer = () =>
  DynamoDbLeaseStore.layerWith({ tableName: outboxTable, ensureTable: false }).pipe(Layer.provide(dynamoLayer))

const outboxLayer = DynamoDbOutboxStore.layerWith({ tableName: outboxTable, ensureTable: false, indexLagRetries: 0 })

/** A small page size so that lists and deletes page through several Query pages per shard. */
const deadLetterLayer = (options: Partial<DynamoDbDeadLetterStore.DynamoDbDeadLetterStoreOptions> = {}) =>
  DynamoDbDeadLetterStore.layerWith({ tableName: deadLetterTable, ensureTable: false, pageSize: 16, ...options }).pipe(
    Layer.provideMerge(outboxLayer),
    Layer.provide(dynamoLayer)
  )

leaseStoreContract("dynamodb", leaseLayer)

deadLetterStoreContract("dynamodb", () => deadLetterLayer())

deadLetterStoreContract("dynamodb (1 MB pages)", () =>
  deadLetterLayer({ tableName: deadLetterTableLargePages, pageSize: undefined })
)

/** Every request the stores make, by operation and index (a recording decorator of the client service). */
interface Recorded {
  readonly operation: string
  readonly index?: string | undefined
  readonly table?: string | undefined
}

const recordingLayer = (log: Array<Recorded>) =>
  Layer.effect(
    DynamoDb.DynamoDb,
    Effect.map(DynamoDb.DynamoDb, (inner) =>
      DynamoDb.DynamoDb.of({
        ...inner,
        getItem: (input) => {
          log.push({ operation: "GetItem", table: input.TableName })
          return inner.getItem(input)
        },
        putItem: (input) => {
          log.push({ operation: "PutItem", table: input.TableName })
          return inner.putItem(input)
        },
        updateItem: (input) => {
          log.push({ operation: "UpdateItem", table: input.TableName })
          return inner.updateItem(input)
        },
        deleteItem: (input) => {
          log.push({ operation: "DeleteItem", table: input.TableName })
          return inner.deleteItem(input)
        },
        query: (input) => {
          log.push({ operation: "Query", index: input.IndexName, table: input.TableName })
          return inner.query(input)
        }
      })
    )
  ).pipe(Layer.provide(dynamoLayer))

const recordedLayer = (log: Array<Recorded>, pageSize: number | undefined) =>
  DynamoDbDeadLetterStore.layerWith({ tableName: deadLetterTable, ensureTable: false, pageSize }).pipe(
    Layer.provideMerge(outboxLayer),
    Layer.provide(recordingLayer(log))
  )

let counter = 0
const unique = (label: string) => `${label}-${++counter}-${Math.random().toString(36).slice(2, 10)}`

const deadLetter = (spec: {
  readonly id?: string
  readonly routeId?: string
  readonly category?: "poison" | "permanent" | "expired"
  readonly failedAt: number
  readonly payload?: Uint8Array
}) =>
  new DeadLetterEntry({
    id: spec.id ?? unique("dlq"),
    recordId: unique("rec"),
    partitionKey: unique("pk"),
    envelopeId: unique("env"),
    bindingId: "b",
    payload: spec.payload ?? new Uint8Array([1, 2, 3]),
    headers: {},
    routeId: spec.routeId,
    category: spec.category ?? "permanent",
    reason: "r",
    errorCode: "E",
    lastError: "e",
    attempts: 1,
    failedAt: DateTime.unsafeMake(spec.failedAt)
  })

/** A window of time of its own (far from the contract suites' windows and the purge region). */
const windowStart = () => 2_000_000_000_000 + Math.floor(Math.random() * 2 ** 28) * 60_000

const byAge = (a: DeadLetterEntry, b: DeadLetterEntry): number =>
  DateTime.toEpochMillis(a.failedAt) - DateTime.toEpochMillis(b.failedAt) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

describe("DynamoDbDeadLetterStore", () => {
  it.effect(
    "list and deleteWhere over 250 entries of one route page every shard to the end; only index Queries",
    () => {
      const log: Array<Recorded> = []
      return Effect.gen(function* () {
        const dlq = yield* DeadLetterStore
        const routeId = unique("route")
        const t = windowStart()
        const entries = Array.from({ length: 250 }, (_, i) =>
          deadLetter({ routeId, category: i % 5 === 0 ? "poison" : "permanent", failedAt: t + (i % 41) })
        )
        yield* Effect.forEach(entries, (e) => dlq.write(e), { concurrency: 16, discard: true })
        const sorted = [...entries].sort(byAge)

        log.length = 0
        const all = yield* dlq.list({ routeId })
        expect(all.map((e) => e.id)).toEqual(sorted.map((e) => e.id))
        const queries = log.filter((r) => r.operation === "Query")
        expect(log.every((r) => r.operation === "Query")).toBe(true)
        expect(queries.every((r) => r.index === DeadLetterTable.RouteIndex)).toBe(true)
        // 250 entries in pages of 16 over 4 shards: every shard needed several pages.
        expect(queries.length).toBeGreaterThanOrEqual(250 / 16)

        const poison = yield* dlq.list({ routeId, category: "poison", limit: 1000 })
        expect(poison.map((e) => e.id)).toEqual(sorted.filter((e) => e.category === "poison").map((e) => e.id))

        const window = { since: DateTime.unsafeMake(t + 10), before: DateTime.unsafeMake(t + 20) }
        const inWindow = sorted.filter((e) => {
          const ms = DateTime.toEpochMillis(e.failedAt)
          return ms >= t + 10 && ms < t + 20
        })
        expect((yield* dlq.list({ routeId, ...window })).map((e) => e.id)).toEqual(inWindow.map((e) => e.id))
        expect((yield* dlq.list({ routeId, ...window, limit: 7 })).map((e) => e.id)).toEqual(
          inWindow.slice(0, 7).map((e) => e.id)
        )

        log.length = 0
        expect(yield* dlq.deleteWhere({ routeId, category: "poison" })).toBe(50)
        expect(log.filter((r) => r.operation === "Query").every((r) => r.index === DeadLetterTable.RouteIndex)).toBe(
          true
        )
        expect(log.filter((r) => r.operation === "DeleteItem")).toHaveLength(50)
        expect(yield* dlq.deleteWhere({ routeId, limit: 30 })).toBe(30)
        expect((yield* dlq.list({ routeId })).map((e) => e.id)).toEqual(
          sorted
            .filter((e) => e.category !== "poison")
            .slice(30)
            .map((e) => e.id)
        )
        expect(yield* dlq.deleteWhere({ routeId })).toBe(170)
        expect(yield* dlq.list({ routeId })).toEqual([])
      }).pipe(Effect.provide(recordedLayer(log, 16)))
    }
  )

  it.effect("a limited list settles ties of one millisecond by id across shards, as the other backends do", () =>
    Effect.gen(function* () {
      const dlq = yield* DeadLetterStore
      const routeId = unique("route")
      const t = windowStart()
      // Ids whose UTF-8 byte order differs from their UTF-16 order (astral vs. U+FFxx characters).
      const tag = unique("tie")
      const ids = Array.from({ length: 24 }, (_, i) => `${tag}-${i % 2 === 0 ? "\u{1F600}" : "\uFF21"}-${i}`)
      const entries = ids.map((id, i) => deadLetter({ id, routeId, failedAt: t + (i < 20 ? 0 : 1) }))
      yield* Effect.forEach(entries, (e) => dlq.write(e), { concurrency: 8, discard: true })
      const sorted = [...entries].sort(byAge)
      for (const limit of [1, 5, 10, 19, 20, 21, 24]) {
        const listed = yield* dlq.list({ routeId, limit })
        expect(listed.map((e) => e.id)).toEqual(sorted.slice(0, limit).map((e) => e.id))
      }
      expect(yield* dlq.deleteWhere({ routeId, limit: 11 })).toBe(11)
      expect((yield* dlq.list({ routeId })).map((e) => e.id)).toEqual(sorted.slice(11).map((e) => e.id))
    }).pipe(Effect.provide(deadLetterLayer({ pageSize: 3 })))
  )

  it.effect("purge queries AgeIndex for the window before the cut only and deletes exactly what it saw", () => {
    const log: Array<Recorded> = []
    return Effect.gen(function* () {
      const dlq = yield* DeadLetterStore
      // Below the contract suites' windows and above their purge region: nothing else lives here.
      const t = 500_000_000_000 + Math.floor(Math.random() * 1000) * 100_000
      const old = Array.from({ length: 20 }, (_, i) => deadLetter({ failedAt: t + i, routeId: unique("r") }))
      const young = deadLetter({ failedAt: t + 50 })
      yield* Effect.forEach([...old, young], (e) => dlq.write(e), { concurrency: 8, discard: true })
      log.length = 0
      expect(yield* dlq.purge(DateTime.unsafeMake(t + 50))).toBeGreaterThanOrEqual(20)
      const queries = log.filter((r) => r.operation === "Query")
      expect(queries.length).toBeGreaterThanOrEqual(DeadLetterTable.Shards)
      expect(queries.every((r) => r.index === DeadLetterTable.AgeIndex)).toBe(true)
      expect((yield* dlq.get(young.id)).id).toBe(young.id)
      for (const e of old) expect((yield* Effect.flip(dlq.get(e.id)))._tag).toBe("NotFound")
    }).pipe(Effect.provide(recordedLayer(log, undefined)))
  })

  it.effect("requests per call with 1 MB pages: one Query per shard for list/deleteWhere, one request per id", () => {
    const log: Array<Recorded> = []
    const count = (operation: string, index?: string) =>
      log.filter((r) => r.operation === operation && (index === undefined || r.index === index)).length
    return Effect.gen(function* () {
      const dlq = yield* DeadLetterStore
      const routeId = unique("route")
      const t = windowStart()
      const entries = Array.from({ length: 40 }, (_, i) =>
        deadLetter({ routeId, category: i % 2 === 0 ? "poison" : "expired", failedAt: t + i })
      )
      yield* Effect.forEach(entries, (e) => dlq.write(e), { concurrency: 8, discard: true })
      expect(count("PutItem")).toBe(40)

      log.length = 0
      expect(yield* dlq.list({ routeId })).toHaveLength(40)
      expect(log).toHaveLength(DeadLetterTable.Shards)
      expect(count("Query", DeadLetterTable.RouteIndex)).toBe(DeadLetterTable.Shards)

      log.length = 0
      expect((yield* dlq.list({ routeId, limit: 5 })).map((e) => e.id)).toEqual(entries.slice(0, 5).map((e) => e.id))
      expect(log).toHaveLength(DeadLetterTable.Shards)

      log.length = 0
      const window = { since: DateTime.unsafeMake(t), before: DateTime.unsafeMake(t + 40) }
      expect(yield* dlq.list({ category: "expired", ...window })).toHaveLength(20)
      expect(count("Query", DeadLetterTable.CategoryIndex)).toBe(DeadLetterTable.Shards)
      expect(log).toHaveLength(DeadLetterTable.Shards)

      log.length = 0
      yield* dlq.get(entries[0]?.id ?? "")
      expect(log).toEqual([{ operation: "GetItem", table: deadLetterTable }])

      log.length = 0
      expect(yield* dlq.delete([entries[0]?.id ?? "", entries[1]?.id ?? "", unique("missing")])).toBe(2)
      expect(log).toHaveLength(3)
      expect(count("DeleteItem")).toBe(3)

      log.length = 0
      expect(yield* dlq.deleteWhere({ routeId })).toBe(38)
      expect(count("Query", DeadLetterTable.RouteIndex)).toBe(DeadLetterTable.Shards)
      expect(count("DeleteItem")).toBe(38)
      expect(log).toHaveLength(DeadLetterTable.Shards + 38)
    }).pipe(Effect.provide(recordedLayer(log, undefined)))
  })

  it.effect("an entry over DynamoDB's 400 KB item limit fails with InvalidRecord and stores nothing", () =>
    Effect.gen(function* () {
      const dlq = yield* DeadLetterStore
      const big = deadLetter({ failedAt: windowStart(), payload: new Uint8Array(450 * 1024) })
      const error = yield* Effect.flip(dlq.write(big))
      expect(error._tag).toBe("InvalidRecord")
      expect((yield* Effect.flip(dlq.get(big.id)))._tag).toBe("NotFound")
    }).pipe(Effect.provide(deadLetterLayer()))
  )

  it.effect(
    "key limits: an id over the age index's 1024-byte range key fails with InvalidRecord naming id, nothing stored",
    () =>
      Effect.gen(function* () {
        const dlq = yield* DeadLetterStore
        const failedAt = windowStart()
        const longId = deadLetter({ id: `dlq-${"i".repeat(1100)}`, failedAt })
        const error = yield* Effect.flip(dlq.write(longId))
        expect(error._tag).toBe("InvalidRecord")
        expect(error.message).toContain("id is 1104 bytes")
        expect(
          yield* dlq.list({ since: DateTime.unsafeMake(failedAt), before: DateTime.unsafeMake(failedAt + 1) })
        ).toEqual([])
        const longRoute = deadLetter({ routeId: "r".repeat(2100), failedAt })
        expect((yield* Effect.flip(dlq.write(longRoute))).message).toContain("routeId is 2100 bytes")
        expect((yield* Effect.flip(dlq.get(longRoute.id)))._tag).toBe("NotFound")
        // the largest id that fits is stored and read back
        const fits = deadLetter({ id: "f".repeat(1004), failedAt })
        yield* dlq.write(fits)
        expect((yield* dlq.get(fits.id)).id).toBe(fits.id)
      }).pipe(Effect.provide(deadLetterLayer()))
  )

  it.effect("the layer's preflight rejects a table of another layout, naming the problems", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        Effect.provide(
          DeadLetterStore,
          DynamoDbDeadLetterStore.layerWith({ tableName: outboxTable, ensureTable: false }).pipe(
            Layer.provide(outboxLayer),
            Layer.provide(dynamoLayer)
          )
        )
      )
      expect(error._tag).toBe("InvalidConfiguration")
      if (error._tag === "InvalidConfiguration") {
        expect(error.problems.some((p) => p.includes("key schema"))).toBe(true)
        expect(error.problems.some((p) => p.includes(DeadLetterTable.AgeIndex))).toBe(true)
      }
      const missing = yield* Effect.flip(
        Effect.provide(
          DeadLetterStore,
          DynamoDbDeadLetterStore.layerWith({ tableName: unique("missing"), ensureTable: false }).pipe(
            Layer.provide(outboxLayer),
            Layer.provide(dynamoLayer)
          )
        )
      )
      expect(missing._tag).toBe("InvalidConfiguration")
    })
  )
})

describe("DynamoDbLeaseStore", () => {
  it.effect(
    "the LEASE item lives beside the partition's records without showing up in claims, counts or listings",
    () =>
      Effect.gen(function* () {
        const leases = yield* LeaseStore
        const outbox = yield* OutboxStore
        const pk = unique("leased")
        const lease = yield* leases.acquire(pk, "node-a", Duration.seconds(30))
        const records = ["k1", "k2", "x"].map(
          (envelopeId) =>
            new NewOutboxRecord({
              partitionKey: pk,
              envelopeId,
              bindingId: "b",
              payload: new Uint8Array([1]),
              ...(envelopeId.startsWith("k") ? { orderingKey: "K" } : {})
            })
        )
        yield* outbox.persist(records)
        expect(yield* outbox.countPending(pk)).toBe(3)
        expect((yield* outbox.queryPending(pk, 10)).map((r) => r.envelopeId)).toEqual(["k1", "k2", "x"])
        const batch = yield* outbox.claim(pk, lease.token, 10)
        expect(batch.records.map((r) => r.envelopeId)).toEqual(["k1", "k2", "x"])
        expect(yield* outbox.countClaimed(pk)).toBe(3)
        const partitions = Chunk.toReadonlyArray(yield* Stream.runCollect(outbox.listPartitions))
        expect(partitions.filter((p) => p === pk)).toHaveLength(1)
        const current = yield* leases.current(pk)
        expect(current.token.version).toBe(lease.token.version)
      }).pipe(Effect.provide(Layer.mergeAll(leaseLayer(), outboxLayer.pipe(Layer.provide(dynamoLayer)))))
  )

  it.effect("requests per call: one conditional write (or one read); a refusal adds one consistent read", () => {
    const log: Array<Recorded> = []
    const ops = () => log.map((r) => r.operation)
    return Effect.gen(function* () {
      const leases = yield* LeaseStore
      const pk = unique("requests")
      const ttl = Duration.seconds(30)
      log.length = 0
      const lease = yield* leases.acquire(pk, "node-a", ttl)
      expect(ops()).toEqual(["UpdateItem"])
      log.length = 0
      expect((yield* Effect.flip(leases.acquire(pk, "node-b", ttl)))._tag).toBe("LeaseHeld")
      expect(ops()).toEqual(["UpdateItem", "GetItem"])
      log.length = 0
      yield* leases.renew(pk, lease.token, ttl)
      expect(ops()).toEqual(["UpdateItem"])
      log.length = 0
      const stale = yield* Effect.flip(leases.renew(pk, { owner: "node-b", version: lease.token.version }, ttl))
      expect(stale._tag).toBe("StaleFencingToken")
      expect(ops()).toEqual(["UpdateItem", "GetItem"])
      log.length = 0
      yield* leases.current(pk)
      expect(ops()).toEqual(["GetItem"])
      log.length = 0
      yield* leases.release(pk, lease.token)
      expect(ops()).toEqual(["UpdateItem"])
      expect(log.every((r) => r.table === outboxTable)).toBe(true)
    }).pipe(
      Effect.provide(
        DynamoDbLeaseStore.layerWith({ tableName: outboxTable, ensureTable: false }).pipe(
          Layer.provide(recordingLayer(log))
        )
      )
    )
  })

  it.effect("two store instances (two clients) racing for one partition: exactly one wins", () =>
    Effect.gen(function* () {
      const pk = unique("race")
      const one = yield* Effect.provide(LeaseStore, leaseLayer())
      const two = yield* Effect.provide(LeaseStore, leaseLayer())
      const outcomes = yield* Effect.all(
        Array.from({ length: 10 }, (_, i) =>
          Effect.either((i % 2 === 0 ? one : two).acquire(pk, `node-${i}`, Duration.seconds(30)))
        ),
        { concurrency: "unbounded" }
      )
      const winners = outcomes.filter((o) => o._tag === "Right")
      expect(winners).toHaveLength(1)
      expect(outcomes.filter((o) => o._tag === "Left" && o.left._tag === "LeaseHeld")).toHaveLength(9)
    })
  )

  it.effect("the version high-water mark is kept on the item across release", () =>
    Effect.gen(function* () {
      const leases = yield* LeaseStore
      const dynamo = yield* DynamoDb.DynamoDb
      const pk = unique("hwm")
      const first = yield* leases.acquire(pk, "node-a", Duration.seconds(30))
      yield* leases.release(pk, first.token)
      const item = yield* dynamo.getItem({
        TableName: outboxTable,
        Key: DynamoDbLeaseStore.leaseKey(pk),
        ConsistentRead: true
      })
      expect(item.Item?.["lease_version"]?.N).toBe(String(first.token.version))
      expect(item.Item?.["lease_released"]?.BOOL).toBe(true)
      expect(item.Item?.["ttl"]).toBeUndefined()
      const second = yield* leases.acquire(pk, "node-b", Duration.seconds(30))
      expect(second.token.version).toBe(first.token.version + 1)
    }).pipe(Effect.provide(Layer.merge(leaseLayer(), dynamoLayer)))
  )

  it.effect("the layer rejects a missing table or one keyed otherwise", () =>
    Effect.gen(function* () {
      const missing = yield* Effect.flip(
        Effect.provide(
          LeaseStore,
          DynamoDbLeaseStore.layerWith({ tableName: unique("missing"), ensureTable: false }).pipe(
            Layer.provide(dynamoLayer)
          )
        )
      )
      expect(missing._tag).toBe("InvalidConfiguration")
      const wrong = yield* Effect.flip(
        Effect.provide(
          LeaseStore,
          DynamoDbLeaseStore.layerWith({ tableName: deadLetterTable, ensureTable: false }).pipe(
            Layer.provide(dynamoLayer)
          )
        )
      )
      expect(wrong._tag).toBe("InvalidConfiguration")
      if (wrong._tag === "InvalidConfiguration") expect(wrong.problems.join("\n")).toContain("key schema")
    })
  )
})
