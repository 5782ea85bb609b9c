/**
 * The DynamoDB store's local claim index (`localClaimIndex: true`, `ClaimLocalIndex (PK, claim_sort)`):
 * the preflight detects whether the table has the index, and claims walk it consistently from the
 * oldest record, stopping after `limit` selections — O(limit) items read on keyed partitions, with
 * head-of-line order held (R-CLAIM-4, R-CLAIM-5).
 */
import type { QueryCommandOutput, WriteRequest } from "@aws-sdk/client-dynamodb"
import { describe, expect, it } from "@effect/vitest"
import * as Array from "effect/Array"
import * as Cause from "effect/Cause"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import { afterAll, beforeAll } from "vitest"
import * as ClaimOrder from "../src/domain/ClaimOrder.js"
import { InvalidConfiguration } from "../src/domain/OutboxError.js"
import type * as OutboxRecord from "../src/domain/OutboxRecord.js"
import * as DynamoDbOutboxStore from "../src/layers/dynamodb/DynamoDbOutboxStore.js"
import * as OutboxTable from "../src/layers/dynamodb/OutboxTable.js"
import * as RecordItem from "../src/layers/dynamodb/RecordItem.js"
import * as DynamoDb from "../src/services/DynamoDb.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { makeTestClientConfig, randomTableName } from "./support/DynamoLocal.js"
import * as Faulty from "./support/FaultyDynamoDb.js"

const lsiTable = randomTableName("outbox-lsi")
const plainTable = randomTableName("outbox-no-lsi")
const dynamoLayer = DynamoDb.layer(makeTestClientConfig())

const dropTable = (name: string) =>
  Effect.flatMap(DynamoDb.DynamoDb, (d) => d.deleteTable({ TableName: name })).pipe(
    Effect.catchAll(() => Effect.void),
    Effect.provide(dynamoLayer)
  )

beforeAll(() =>
  Effect.runPromise(
    Effect.zipRight(
      OutboxTable.ensureTable(lsiTable, { localClaimIndex: true }),
      OutboxTable.ensureTable(plainTable)
    ).pipe(Effect.provide(dynamoLayer))
  )
)
afterAll(() => Effect.runPromise(Effect.forEach([lsiTable, plainTable], dropTable, { discard: true })))

const storeLayer = (faults: Faulty.Faults, options: DynamoDbOutboxStore.DynamoDbOutboxStoreOptions = {}) =>
  DynamoDbOutboxStore.layerWith({
    tableName: lsiTable,
    ensureTable: false,
    indexLagRetries: 0,
    localClaimIndex: true,
    ...options
  }).pipe(Layer.provideMerge(Faulty.layer(faults).pipe(Layer.provide(dynamoLayer))))

let counter = 0
const partition = (name: string): string => `${name}-${++counter}-${Math.random().toString(36).slice(2, 8)}`

const token = (version: number, owner = "owner") => ({ owner, version })

const Now = 1_700_000_100_000
const rule = (version: number): ClaimOrder.ClaimRule => ({
  version,
  nowMillis: Now,
  staleClaimAfterMillis: 30_000
})

/**
 * Writes `n` pending records with BatchWriteItem: record i (1-based) is `createdAt = base + i`, seq i, and
 * envelope ids that sort unrelated to age.
 */
const seed = (partitionKey: string, n: number, orderingKey: (i: number) => string | undefined) =>
  Effect.gen(function* () {
    const dynamo = yield* DynamoDb.DynamoDb
    const requests: Array<WriteRequest> = Array.range(1, n).map((i) => ({
      PutRequest: {
        Item: RecordItem.encodeNew(
          {
            id: `${partitionKey}-${i}`,
            partitionKey,
            envelopeId: `env-${(i * 7919) % 100_003}`,
            bindingId: "b",
            routeId: "",
            address: "",
            payload: new Uint8Array([1, 2, 3]),
            headers: {},
            orderingKey: Option.fromNullable(orderingKey(i)),
            createdAt: DateTime.unsafeMake(1_700_000_000_000 + i),
            expiresAt: Option.none()
          },
          i
        )
      }
    }))
    yield* Effect.forEach(
      Array.chunksOf(requests, 25),
      (chunk) => dynamo.batchWriteItem({ RequestItems: { [lsiTable]: [...chunk] } }),
      { concurrency: 4, discard: true }
    )
    yield* dynamo.updateItem({
      TableName: lsiTable,
      Key: RecordItem.fenceKey(partitionKey),
      UpdateExpression: "SET seq_counter = :n",
      ExpressionAttributeValues: { ":n": RecordItem.num(n) }
    })
  })

/** Marks record i as claimed by someone else at `version`, claimed now (not stale): a stranded head. */
const strand = (partitionKey: string, i: number, version: number) =>
  Effect.flatMap(DynamoDb.DynamoDb, (dynamo) =>
    dynamo.updateItem({
      TableName: lsiTable,
      Key: RecordItem.recordKey({ partitionKey, envelopeId: `env-${(i * 7919) % 100_003}`, bindingId: "b" }),
      UpdateExpression: "SET #status = :claimed, claimed_by = :owner, claim_version = :v, claimed_at = :now",
      ExpressionAttributeNames: { "#status": "status" },
      ExpressionAttributeValues: {
        ":claimed": RecordItem.str("claimed"),
        ":owner": RecordItem.str("stranded-owner"),
        ":v": RecordItem.num(version),
        ":now": RecordItem.num(Now)
      }
    })
  )

/** Every record of the partition, read consistently from the base table (not through the store). */
const allRecords = (partitionKey: string) =>
  Effect.gen(function* () {
    const dynamo = yield* DynamoDb.DynamoDb
    const records: Array<OutboxRecord.OutboxRecord> = []
    let cursor: RecordItem.Item | undefined = undefined
    for (;;) {
      const output: QueryCommandOutput = yield* dynamo.query({
        TableName: lsiTable,
        KeyConditionExpression: "PK = :pk AND begins_with(SK, :prefix)",
        ExpressionAttributeValues: { ":pk": RecordItem.str(partitionKey), ":prefix": RecordItem.str("OUTBOX#") },
        ConsistentRead: true,
        ...(cursor !== undefined ? { ExclusiveStartKey: cursor } : {})
      })
      for (const item of output.Items ?? []) {
        const decoded = RecordItem.decode(item)
        if (Either.isRight(decoded)) records.push(decoded.right)
      }
      if (output.LastEvaluatedKey === undefined) return records
      cursor = output.LastEvaluatedKey
    }
  })

const ids = (records: ReadonlyArray<{ readonly id: string }>): Array<string> => records.map((r) => r.id)

describe("ClaimLocalIndex: table definition and preflight", () => {
  const buildStore = (tableName: string, options: DynamoDbOutboxStore.DynamoDbOutboxStoreOptions) =>
    Effect.exit(
      Layer.build(DynamoDbOutboxStore.layerWith({ tableName, ...options }).pipe(Layer.provide(dynamoLayer)))
    ).pipe(Effect.scoped)

  const problemsOf = (exit: Exit.Exit<unknown, unknown>): ReadonlyArray<string> => {
    if (Exit.isSuccess(exit)) return []
    const failure = Cause.failureOption(exit.cause)
    return Option.isSome(failure) && failure.value instanceof InvalidConfiguration ? failure.value.problems : []
  }

  it("the table definition carries the LSI (PK, claim_sort) projection ALL only when asked", () => {
    const withIndex = OutboxTable.tableDefinition("t", { localClaimIndex: true })
    expect(withIndex.LocalSecondaryIndexes).toEqual([
      {
        IndexName: "ClaimLocalIndex",
        KeySchema: [
          { AttributeName: "PK", KeyType: "HASH" },
          { AttributeName: "claim_sort", KeyType: "RANGE" }
        ],
        Projection: { ProjectionType: "ALL" }
      }
    ])
    expect(OutboxTable.tableDefinition("t").LocalSecondaryIndexes).toBeUndefined()
  })

  it.effect("ensureTable creates the LSI and the preflight sees it; the store builds with localClaimIndex", () =>
    Effect.gen(function* () {
      const dynamo = yield* DynamoDb.DynamoDb
      const described = yield* dynamo.describeTable({ TableName: lsiTable })
      const table = described.Table
      expect(table !== undefined && OutboxTable.hasLocalClaimIndex(table)).toBe(true)
      const plain = (yield* dynamo.describeTable({ TableName: plainTable })).Table
      expect(plain !== undefined && OutboxTable.hasLocalClaimIndex(plain)).toBe(false)
      expect(Exit.isSuccess(yield* buildStore(lsiTable, { ensureTable: false, localClaimIndex: true }))).toBe(true)
      // a table with the index also serves a store that does not use it
      expect(Exit.isSuccess(yield* buildStore(lsiTable, { ensureTable: false }))).toBe(true)
    }).pipe(Effect.provide(dynamoLayer))
  )

  it.effect("asking for the LSI on a table without it fails the layer: an LSI only comes with a new table", () =>
    Effect.gen(function* () {
      for (const ensureTable of [false, true]) {
        const exit = yield* buildStore(plainTable, { ensureTable, localClaimIndex: true })
        expect(Exit.isFailure(exit)).toBe(true)
        const problems = problemsOf(exit)
        expect(problems).toHaveLength(1)
        expect(problems[0]).toContain("local secondary index ClaimLocalIndex (PK, claim_sort) is missing")
        expect(problems[0]).toContain("can only be created together with the table")
        expect(problems[0]).toContain("new table")
        expect(problems[0]).toContain("data migration")
      }
      // ensureTable never adds the index to the existing table
      const table = (yield* Effect.flatMap(DynamoDb.DynamoDb, (d) => d.describeTable({ TableName: plainTable }))).Table
      expect(table?.LocalSecondaryIndexes).toBeUndefined()
    }).pipe(Effect.provide(dynamoLayer))
  )

  it("schemaProblems reports a ClaimLocalIndex with other keys or projection", () => {
    const definition = OutboxTable.tableDefinition("t", { localClaimIndex: true })
    const problems = OutboxTable.schemaProblems(
      {
        TableName: "t",
        KeySchema: definition.KeySchema,
        AttributeDefinitions: definition.AttributeDefinitions,
        GlobalSecondaryIndexes: (definition.GlobalSecondaryIndexes ?? []).map((g) => ({
          IndexName: g.IndexName,
          KeySchema: g.KeySchema,
          Projection: g.Projection
        })),
        LocalSecondaryIndexes: [
          {
            IndexName: "ClaimLocalIndex",
            KeySchema: [
              { AttributeName: "PK", KeyType: "HASH" },
              { AttributeName: "created_at", KeyType: "RANGE" }
            ],
            Projection: { ProjectionType: "KEYS_ONLY" }
          }
        ]
      },
      { status: "ENABLED", attribute: "ttl" },
      { localClaimIndex: true }
    )
    expect(problems).toEqual([
      "table t: index ClaimLocalIndex has key schema [PK HASH, created_at RANGE], expected [PK HASH, claim_sort RANGE]",
      "table t: index ClaimLocalIndex has projection KEYS_ONLY, expected ALL"
    ])
  })
})

describe("ClaimLocalIndex: claims read O(limit)", () => {
  it.effect(
    "R-CLAIM-4/R-CLAIM-5 a keyed backlog of 1,000 with limit 10 reads O(limit) items and returns the true oldest with head-of-line held",
    () => {
      const faults = new Faulty.Faults()
      const walks: Array<DynamoDbOutboxStore.LocalWalkReport> = []
      const pk = partition("keyed-1000")
      return Effect.gen(function* () {
        const store = yield* OutboxStore
        yield* TestClock.setTime(Now)
        yield* seed(pk, 1000, (i) => `key-${i % 20}`)
        // the heads of keys 1..5 are stranded (claimed by another owner at the current version)
        for (const i of [1, 2, 3, 4, 5]) yield* strand(pk, i, 7)
        const before = yield* allRecords(pk)
        expect(before).toHaveLength(1000)
        const expected = ClaimOrder.selectFrom(before, 10, rule(7))
        faults.reset()
        const batch = yield* store.claim(pk, token(7), 10)
        expect(ids(batch.records)).toEqual(ids(expected))
        expect(ids(batch.records)).toEqual([6, 7, 8, 9, 10, 11, 12, 13, 14, 15].map((i) => `${pk}-${i}`))
        expect(ClaimOrder.headOfLineViolation(before, batch.records)).toBeUndefined()
        // O(limit): the fence read plus at most 3 × limit + one page of slack, far from the 1,000 of a scan
        expect(faults.itemsRead).toBeLessThanOrEqual(3 * 10 + 16 + 1)
        expect(faults.baseTableQueries).toBe(0)
        expect(faults.claimIndexQueries).toBe(0)
        expect(walks).toHaveLength(1)
        expect(walks[0]?.exhausted).toBe(false)
        expect(walks[0]?.selected).toBe(10)
        expect(walks[0]?.blockingHeads).toBe(5)
        expect(walks[0]?.scanned).toBeLessThanOrEqual(3 * 10 + 16)
        // the next claim goes on in age order: keys 1..5 stay blocked behind their stranded heads and keys
        // 6..15 behind the records the first claim holds (not completed), so only keys 16..19 and 0 move
        const middle = yield* allRecords(pk)
        const second = yield* store.claim(pk, token(7), 10)
        expect(ids(second.records)).toEqual(ids(ClaimOrder.selectFrom(middle, 10, rule(7))))
        expect(ids(second.records)).toEqual([16, 17, 18, 19, 20, 36, 37, 38, 39, 40].map((i) => `${pk}-${i}`))
        expect(ClaimOrder.headOfLineViolation(middle, second.records)).toBeUndefined()
      }).pipe(Effect.provide(storeLayer(faults, { onLocalWalk: (r) => walks.push(r) })))
    },
    60_000
  )

  it.effect("R-CLAIM-5 a stranded claimed head blocks its key but not other keys or keyless records", () => {
    const faults = new Faulty.Faults()
    const pk = partition("stranded")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* TestClock.setTime(Now)
      // 1 A (stranded), 2 B, 3 A, 4 keyless, 5 B, 6 A, 7 keyless
      const keys: Record<number, string | undefined> = { 1: "A", 2: "B", 3: "A", 5: "B", 6: "A" }
      yield* seed(pk, 7, (i) => keys[i])
      yield* strand(pk, 1, 3)
      const blocked = yield* store.claim(pk, token(3), 10)
      expect(ids(blocked.records)).toEqual([2, 4, 5, 7].map((i) => `${pk}-${i}`))
      // a newer owner pre-empts the stranded head (claim_version < token version): A comes in order
      const taken = yield* store.claim(pk, token(4), 10)
      expect(ids(taken.records)).toEqual([1, 2, 3, 4, 5, 6, 7].map((i) => `${pk}-${i}`))
      expect(taken.records.every((r) => r.status === "claimed" && r.claimVersion === 4)).toBe(true)
    }).pipe(Effect.provide(storeLayer(faults)))
  })

  it.effect("R-CLAIM-5 a deep run of blocked siblings is walked past, and the result matches ClaimOrder.select", () => {
    const faults = new Faulty.Faults()
    const walks: Array<DynamoDbOutboxStore.LocalWalkReport> = []
    const pk = partition("deep-blocked")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* TestClock.setTime(Now)
      // the oldest 60 records share key K behind a stranded head; then keyless and keyed records mix
      yield* seed(pk, 200, (i) => (i <= 60 ? "K" : i % 3 === 0 ? undefined : `k${i % 7}`))
      yield* strand(pk, 1, 2)
      const before = yield* allRecords(pk)
      const batch = yield* store.claim(pk, token(2), 25)
      expect(ids(batch.records)).toEqual(ids(ClaimOrder.selectFrom(before, 25, rule(2))))
      expect(batch.records.every((r) => Option.getOrUndefined(r.orderingKey) !== "K")).toBe(true)
      // the walk reads the 60 blocked records plus about limit more, not the 200
      expect(walks[0]?.exhausted).toBe(false)
      expect(walks[0]?.scanned).toBeLessThanOrEqual(60 + 25 + 16)
    }).pipe(Effect.provide(storeLayer(faults, { onLocalWalk: (r) => walks.push(r) })))
  })

  it.effect("the walk stops pulling pages once limit records are selected", () => {
    const faults = new Faulty.Faults()
    const walks: Array<DynamoDbOutboxStore.LocalWalkReport> = []
    const pk = partition("paged")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* TestClock.setTime(Now)
      yield* seed(pk, 20, (i) => `key-${i % 2}`)
      faults.reset()
      const batch = yield* store.claim(pk, token(1), 3)
      expect(ids(batch.records)).toEqual([1, 2, 3].map((i) => `${pk}-${i}`))
      expect(faults.queries).toBe(3)
      expect(walks).toEqual([
        { partitionKey: pk, pages: 3, scanned: 3, selected: 3, blockingHeads: 0, exhausted: false }
      ])
    }).pipe(Effect.provide(storeLayer(faults, { pageSize: 1, onLocalWalk: (r) => walks.push(r) })))
  })

  it.effect("a keyless partition takes the local path too and claims the oldest in order", () => {
    const faults = new Faulty.Faults()
    const pk = partition("keyless")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* TestClock.setTime(Now)
      yield* seed(pk, 300, () => undefined)
      faults.reset()
      const batch = yield* store.claim(pk, token(1), 50)
      expect(ids(batch.records)).toEqual(Array.range(1, 50).map((i) => `${pk}-${i}`))
      expect(faults.claimIndexQueries).toBe(0)
      expect(faults.itemsRead).toBeLessThanOrEqual(50 + 1)
    }).pipe(Effect.provide(storeLayer(faults)))
  })

  it.effect("a record lost to a conflict skips the rest of its key for the batch; other keys are claimed", () => {
    const faults = new Faulty.Faults()
    const pk = partition("conflict")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* TestClock.setTime(Now)
      // 1 A, 2 B, 3 A, 4 B
      yield* seed(pk, 4, (i) => (i % 2 === 1 ? "A" : "B"))
      const firstA = RecordItem.recordSortKey({ envelopeId: `env-${7919 % 100_003}`, bindingId: "b" })
      faults.conflictFor = (key) => key["SK"]?.S === firstA
      const batch = yield* store.claim(pk, token(1), 10)
      expect(ids(batch.records)).toEqual([2, 4].map((i) => `${pk}-${i}`))
      faults.clear()
      const next = yield* store.claim(pk, token(1), 10)
      expect(ids(next.records)).toEqual([1, 3].map((i) => `${pk}-${i}`))
    }).pipe(Effect.provide(storeLayer(faults)))
  })

  it.effect(
    "depth counts and the pending preview read ClaimLocalIndex consistently, not the lagging ClaimIndex",
    () => {
      const faults = new Faulty.Faults()
      const pk = partition("depth")
      return Effect.gen(function* () {
        const store = yield* OutboxStore
        yield* TestClock.setTime(Now)
        yield* seed(pk, 30, (i) => (i % 2 === 0 ? "K" : undefined))
        yield* store.claim(pk, token(1), 12)
        // a ClaimIndex that has not caught up would show nothing; the local index is read consistently
        faults.hideFromClaimIndex = () => true
        faults.reset()
        expect(yield* store.countPending(pk)).toBe(18)
        expect(yield* store.countClaimed(pk)).toBe(12)
        const preview = yield* store.queryPending(pk, 5)
        expect(ids(preview)).toEqual([13, 14, 15, 16, 17].map((i) => `${pk}-${i}`))
        expect(faults.claimIndexQueries).toBe(0)
      }).pipe(Effect.provide(storeLayer(faults)))
    }
  )

  it.effect("R-READ-3 a claim that finds the partition empty through the consistent index de-lists it", () => {
    const faults = new Faulty.Faults()
    const pk = partition("delist")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* TestClock.setTime(Now)
      yield* seed(pk, 2, () => undefined)
      yield* Effect.flatMap(DynamoDb.DynamoDb, (dynamo) =>
        dynamo.updateItem({
          TableName: lsiTable,
          Key: RecordItem.fenceKey(pk),
          UpdateExpression: "SET partitions_shard = :s, listed_at = :now",
          ExpressionAttributeValues: {
            ":s": RecordItem.num(OutboxTable.partitionShard(pk)),
            ":now": RecordItem.num(Now)
          }
        })
      )
      const batch = yield* store.claim(pk, token(1), 10)
      yield* store.complete(ids(batch.records), token(1))
      const empty = yield* store.claim(pk, token(1), 10)
      expect(empty.records).toHaveLength(0)
      const fence = yield* Effect.flatMap(DynamoDb.DynamoDb, (dynamo) =>
        dynamo.getItem({ TableName: lsiTable, Key: RecordItem.fenceKey(pk), ConsistentRead: true })
      )
      expect(fence.Item?.["partitions_shard"]).toBeUndefined()
    }).pipe(Effect.provide(storeLayer(faults)))
  })
})
