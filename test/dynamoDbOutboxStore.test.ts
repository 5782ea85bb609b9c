/**
 * DynamoDB-specific behaviour of the outbox store (SPEC §3.3) beyond the shared contract: item layout,
 * seq allocation, size limits, the schema preflight, transactional enqueue, id resolution, logging and
 * the client service's error mapping.
 */
import { TransactionCanceledException } from "@aws-sdk/client-dynamodb"
import { describe, expect, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import { afterAll, beforeAll } from "vitest"
import { InvalidConfiguration } from "../src/domain/OutboxError.js"
import * as OutboxRecord from "../src/domain/OutboxRecord.js"
import * as DynamoDbOutboxStore from "../src/layers/dynamodb/DynamoDbOutboxStore.js"
import * as OutboxTable from "../src/layers/dynamodb/OutboxTable.js"
import * as RecordItem from "../src/layers/dynamodb/RecordItem.js"
import * as DynamoDb from "../src/services/DynamoDb.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { makeTestClientConfig, randomTableName } from "./support/DynamoLocal.js"
import * as Faulty from "./support/FaultyDynamoDb.js"

const tableName = randomTableName("outbox-store")
const extraTables: Array<string> = []
const dynamoLayer = DynamoDb.layer(makeTestClientConfig())

const dropTable = (name: string) =>
  Effect.flatMap(DynamoDb.DynamoDb, (d) => d.deleteTable({ TableName: name })).pipe(
    Effect.catchAll(() => Effect.void),
    Effect.provide(dynamoLayer)
  )

beforeAll(() => Effect.runPromise(OutboxTable.ensureTable(tableName).pipe(Effect.provide(dynamoLayer))))
afterAll(() => Effect.runPromise(Effect.forEach([tableName, ...extraTables], dropTable, { discard: true })))

const storeLayer = (faults: Faulty.Faults, options: DynamoDbOutboxStore.DynamoDbOutboxStoreOptions = {}) =>
  DynamoDbOutboxStore.layerWith({ tableName, ensureTable: false, indexLagRetries: 0, ...options }).pipe(
    Layer.provideMerge(Faulty.layer(faults).pipe(Layer.provide(dynamoLayer)))
  )

let counter = 0
const partition = (name: string): string => `${name}-${++counter}-${Math.random().toString(36).slice(2, 8)}`

interface Spec {
  readonly envelopeId: string
  readonly bindingId?: string
  readonly orderingKey?: string
  readonly expiresAt?: DateTime.Utc
  readonly payload?: Uint8Array
  readonly headers?: Record<string, string>
  readonly id?: string
}

const record = (partitionKey: string, spec: Spec): OutboxRecord.NewOutboxRecord =>
  new OutboxRecord.NewOutboxRecord({
    partitionKey,
    envelopeId: spec.envelopeId,
    bindingId: spec.bindingId ?? "b",
    payload: spec.payload ?? new Uint8Array([1, 2, 3]),
    ...(spec.orderingKey !== undefined ? { orderingKey: spec.orderingKey } : {}),
    ...(spec.expiresAt !== undefined ? { expiresAt: spec.expiresAt } : {}),
    ...(spec.headers !== undefined ? { headers: spec.headers } : {}),
    ...(spec.id !== undefined ? { id: spec.id } : {})
  })

const rawItem = (key: RecordItem.Item) =>
  Effect.flatMap(DynamoDb.DynamoDb, (d) => d.getItem({ TableName: tableName, Key: key, ConsistentRead: true })).pipe(
    Effect.map((output) => output.Item)
  )

const token = (version: number, owner = "owner") => ({ owner, version })

describe("DynamoDB store layout (SPEC §3.3)", () => {
  it.effect("record items are keyed by escaped identity and carry claim_sort, ordering_key and has_expiry", () => {
    const faults = new Faulty.Faults()
    const pk = partition("layout")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* TestClock.setTime(1_700_000_000_123)
      yield* store.persist([
        record(pk, { envelopeId: "a#b%c", bindingId: "x#y", orderingKey: "K", expiresAt: DateTime.unsafeMake(2e12) })
      ])
      const item = yield* rawItem({ PK: { S: pk }, SK: { S: "OUTBOX#a%23b%25c#x%23y" } })
      expect(item?.["claim_sort"]?.S).toBe(`${"1700000000123".padStart(19, "0")}#${"1".padStart(20, "0")}`)
      expect(item?.["ordering_key"]?.S).toBe("K")
      expect(item?.["has_expiry"]?.S).toBe(pk)
      expect(item?.["expires_at"]?.N).toBe("2000000000000")
      expect(item?.["status"]?.S).toBe("pending")
      const fence = yield* rawItem(RecordItem.fenceKey(pk))
      expect(fence?.["seq_counter"]?.N).toBe("1")
      expect(fence?.["partitions_shard"]?.N).toBe(String(OutboxTable.partitionShard(pk)))
      expect(fence?.["max_claim_version"]).toBeUndefined()
    }).pipe(Effect.provide(storeLayer(faults)))
  })

  it.effect("claim raises max_claim_version; complete sets ttl and removes claim_sort and has_expiry", () => {
    const faults = new Faulty.Faults()
    const pk = partition("complete")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* TestClock.setTime(1_700_000_000_000)
      yield* store.persist([record(pk, { envelopeId: "e", expiresAt: DateTime.unsafeMake(2e12) })])
      const batch = yield* store.claim(pk, token(3), 1)
      expect((yield* rawItem(RecordItem.fenceKey(pk)))?.["max_claim_version"]?.N).toBe("3")
      const ids = batch.records.map((r) => r.id)
      expect(ids).toHaveLength(1)
      yield* TestClock.adjust("10 seconds")
      yield* store.complete(ids, token(3))
      const item = yield* rawItem(RecordItem.recordKey({ partitionKey: pk, envelopeId: "e", bindingId: "b" }))
      expect(item?.["status"]?.S).toBe("completed")
      expect(item?.["ttl"]?.N).toBe(String(1_700_000_010 + 7200))
      expect(item?.["claim_sort"]).toBeUndefined()
      expect(item?.["has_expiry"]).toBeUndefined()
      expect(item?.["completed_at"]?.N).toBe("1700000010000")
    }).pipe(Effect.provide(storeLayer(faults, { retention: "2 hours" })))
  })

  it.effect("R-PERSIST-4 seqs come from one ADD per partition per batch, in batch order", () => {
    const faults = new Faulty.Faults()
    const p1 = partition("seq-a")
    const p2 = partition("seq-b")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      faults.reset()
      yield* store.persist([
        record(p1, { envelopeId: "z" }),
        record(p2, { envelopeId: "y" }),
        record(p1, { envelopeId: "a" }),
        record(p2, { envelopeId: "b" }),
        record(p1, { envelopeId: "m" })
      ])
      yield* store.persist([record(p1, { envelopeId: "n" })])
      const seqs = (pk: string) =>
        Effect.map(store.queryPending(pk, 10), (rows) => rows.map((r) => [r.envelopeId, r.seq]))
      expect(yield* seqs(p1)).toEqual([
        ["z", 1],
        ["a", 2],
        ["m", 3],
        ["n", 4]
      ])
      expect(yield* seqs(p2)).toEqual([
        ["y", 1],
        ["b", 2]
      ])
      expect((yield* rawItem(RecordItem.fenceKey(p1)))?.["seq_counter"]?.N).toBe("4")
    }).pipe(Effect.provide(storeLayer(faults)))
  })

  it.effect("R-PERSIST-5 an item over 400 KB fails with InvalidRecord before any request is made", () => {
    const faults = new Faulty.Faults()
    const pk = partition("big")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      faults.reset()
      const tooBig = yield* Effect.flip(
        store.persist([
          record(pk, { envelopeId: "ok" }),
          record(pk, { envelopeId: "big", payload: new Uint8Array(RecordItem.MaxPayloadBytes + 1) })
        ])
      )
      expect(tooBig._tag).toBe("InvalidRecord")
      if (tooBig._tag === "InvalidRecord") expect(tooBig.index).toBe(1)
      // a payload under the limit whose headers push the item over 400 KB
      const heavyHeaders = yield* Effect.flip(
        store.persist([
          record(pk, {
            envelopeId: "headers",
            payload: new Uint8Array(RecordItem.MaxPayloadBytes - 1000),
            headers: { trace: "x".repeat(12_000) }
          })
        ])
      )
      expect(heavyHeaders._tag).toBe("InvalidRecord")
      expect(faults.requests).toBe(0)
      // the largest accepted payload really fits in an item
      const fits = yield* store.persist([
        record(pk, { envelopeId: "max", payload: new Uint8Array(RecordItem.MaxPayloadBytes) })
      ])
      expect(fits.persisted).toHaveLength(1)
      const claimed = yield* store.claim(pk, token(1), 1)
      expect(claimed.records.map((r) => r.payload.length)).toEqual([RecordItem.MaxPayloadBytes])
    }).pipe(Effect.provide(storeLayer(faults)))
  })

  it.effect("R-PERSIST-1 an id already used by another identity rejects the batch", () => {
    const faults = new Faulty.Faults()
    const pk = partition("id-reuse")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* store.persist([record(pk, { envelopeId: "first", id: `${pk}-id` })])
      const error = yield* Effect.flip(
        store.persist([record(pk, { envelopeId: "new" }), record(pk, { envelopeId: "second", id: `${pk}-id` })])
      )
      expect(error._tag).toBe("InvalidRecord")
      expect(yield* store.countPending(pk)).toBe(1)
    }).pipe(Effect.provide(storeLayer(faults)))
  })

  it.effect("store-generated ids cost no RecordIdIndex lookup; producer ids are each checked once", () => {
    const faults = new Faulty.Faults()
    const pk = partition("id-lookups")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      faults.reset()
      yield* store.persist([1, 2, 3, 4, 5].map((n) => record(pk, { envelopeId: `generated-${n}` })))
      expect(faults.queries).toBe(0)
      faults.reset()
      yield* store.persist([1, 2, 3].map((n) => record(pk, { envelopeId: `given-${n}`, id: `${pk}-given-${n}` })))
      expect(faults.queries).toBe(3)
      expect(yield* store.countPending(pk)).toBe(8)
    }).pipe(Effect.provide(storeLayer(faults)))
  })

  it.effect("R-READ-3 listPartitions lists partitions with records, not those only fenced by a claim", () => {
    const faults = new Faulty.Faults()
    const withWork = partition("list-work")
    const onlyClaimed = partition("list-empty")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* store.persist([record(withWork, { envelopeId: "e" })])
      yield* store.claim(onlyClaimed, token(1), 10)
      const listed = Chunk.toReadonlyArray(yield* Stream.runCollect(store.listPartitions))
      expect(listed).toContain(withWork)
      expect(listed).not.toContain(onlyClaimed)
      expect(faults.baseTableQueries).toBe(0)
    }).pipe(Effect.provide(storeLayer(faults)))
  })
})

describe("listPartitions (R-READ-3)", () => {
  const listed = Effect.flatMap(OutboxStore, (store) =>
    Effect.map(Stream.runCollect(store.listPartitions), Chunk.toReadonlyArray)
  )

  it.effect("a keyed partition found empty by the consistent scan is de-listed, and listed again by a persist", () => {
    const faults = new Faulty.Faults()
    const pk = partition("delist-scan")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* store.persist([record(pk, { envelopeId: "e", orderingKey: "K" })])
      const batch = yield* store.claim(pk, token(1), 1)
      yield* store.complete(
        batch.records.map((r) => r.id),
        token(1)
      )
      expect(yield* listed).toContain(pk)
      expect((yield* store.claim(pk, token(1), 1)).records).toHaveLength(0)
      expect(yield* listed).not.toContain(pk)
      yield* store.persist([record(pk, { envelopeId: "f", orderingKey: "K" })])
      expect(yield* listed).toContain(pk)
    }).pipe(Effect.provide(storeLayer(faults)))
  })

  it.effect("a keyless partition empty in ClaimIndex is de-listed only after the listing grace", () => {
    const faults = new Faulty.Faults()
    const pk = partition("delist-index")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* store.persist([record(pk, { envelopeId: "e" })])
      const batch = yield* store.claim(pk, token(1), 1)
      yield* store.complete(
        batch.records.map((r) => r.id),
        token(1)
      )
      yield* TestClock.adjust("30 seconds")
      yield* store.claim(pk, token(1), 1)
      expect(yield* listed).toContain(pk)
      yield* TestClock.adjust(DynamoDbOutboxStore.ListingGrace)
      yield* store.claim(pk, token(1), 1)
      expect(yield* listed).not.toContain(pk)
    }).pipe(Effect.provide(storeLayer(faults)))
  })

  it.effect("a persist that lists the partition while a claim finds it empty keeps it listed", () => {
    const faults = new Faulty.Faults()
    const pk = partition("delist-race")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      const dynamo = yield* DynamoDb.DynamoDb
      yield* store.persist([record(pk, { envelopeId: "e" })])
      const batch = yield* store.claim(pk, token(1), 1)
      yield* store.complete(
        batch.records.map((r) => r.id),
        token(1)
      )
      yield* TestClock.adjust("2 minutes")
      // between the claim's fence read and its de-listing, "another producer" lists the partition again
      faults.beforeQuery = (input) =>
        input.ExpressionAttributeValues?.[":pk"]?.S === pk
          ? dynamo
              .updateItem({
                TableName: tableName,
                Key: RecordItem.fenceKey(pk),
                UpdateExpression: "ADD listing_epoch :one",
                ExpressionAttributeValues: { ":one": RecordItem.num(1) }
              })
              .pipe(Effect.orDie, Effect.asVoid)
          : Effect.void
      yield* store.claim(pk, token(1), 1)
      faults.clear()
      expect(yield* listed).toContain(pk)
    }).pipe(Effect.provide(storeLayer(faults)))
  })
  it.effect(
    "a persist whose listing update failed after its puts is listed again by the retry the caller makes",
    () => {
      const faults = new Faulty.Faults()
      const pk = partition("relist-retry")
      return Effect.gen(function* () {
        const store = yield* OutboxStore
        yield* store.persist([record(pk, { envelopeId: "e", orderingKey: "K" })])
        const batch = yield* store.claim(pk, token(1), 1)
        yield* store.complete(
          batch.records.map((r) => r.id),
          token(1)
        )
        expect((yield* store.claim(pk, token(1), 1)).records).toHaveLength(0)
        expect(yield* listed).not.toContain(pk)
        // the seq allocation passes, the put passes, the listing update is throttled
        faults.match = (operation) => operation === "UpdateItem"
        faults.after = 1
        faults.burst = 1
        faults.enabled = true
        const failed = yield* Effect.flip(store.persist([record(pk, { envelopeId: "f", orderingKey: "K" })]))
        faults.clear()
        expect(failed._tag).toBe("StoreUnavailable")
        expect(faults.injected).toBe(1)
        // the record is stored; the caller retries: everything is a duplicate, and the partition is listed
        const retry = yield* Effect.flip(store.persist([record(pk, { envelopeId: "f", orderingKey: "K" })]))
        expect(retry._tag).toBe("DuplicateRecord")
        expect(yield* listed).toContain(pk)
        expect((yield* store.claim(pk, token(1), 1)).records.map((r) => r.envelopeId)).toEqual(["f"])
      }).pipe(Effect.provide(storeLayer(faults)))
    }
  )
})

describe("schema preflight", () => {
  const createRaw = (name: string, definition: Parameters<DynamoDb.DynamoDbService["createTable"]>[0]) =>
    Effect.flatMap(DynamoDb.DynamoDb, (d) => d.createTable({ ...definition, TableName: name }))

  const buildStore = (name: string, ensureTable: boolean) =>
    Effect.exit(
      Layer.build(DynamoDbOutboxStore.layerWith({ tableName: name, ensureTable }).pipe(Layer.provide(dynamoLayer)))
    ).pipe(Effect.scoped)

  const problemsOf = (exit: Exit.Exit<unknown, unknown>): ReadonlyArray<string> => {
    if (Exit.isSuccess(exit)) return []
    const failure = Cause.failureOption(exit.cause)
    return Option.isSome(failure) && failure.value instanceof InvalidConfiguration ? failure.value.problems : []
  }

  it.effect("a table with a wrong key schema fails the layer with InvalidConfiguration naming every mismatch", () =>
    Effect.gen(function* () {
      const name = randomTableName("outbox-wrong-keys")
      extraTables.push(name)
      yield* createRaw(name, {
        TableName: name,
        BillingMode: "PAY_PER_REQUEST",
        AttributeDefinitions: [{ AttributeName: "pk", AttributeType: "S" }],
        KeySchema: [{ AttributeName: "pk", KeyType: "HASH" }]
      })
      const exit = yield* buildStore(name, false)
      expect(Exit.isFailure(exit)).toBe(true)
      const problems = problemsOf(exit)
      expect(problems.some((p) => p.includes("key schema is [pk HASH]"))).toBe(true)
      for (const index of ["ClaimIndex", "RecordIdIndex", "ExpiryIndex", "PartitionIndex"]) {
        expect(problems.some((p) => p.includes(`${index} is missing`))).toBe(true)
      }
      expect(problems.some((p) => p.includes("time to live"))).toBe(true)
      // ensureTable never "fixes" an existing table's keys or indexes
      const ensured = problemsOf(yield* buildStore(name, true))
      expect(ensured.some((p) => p.includes("key schema is [pk HASH]"))).toBe(true)
    }).pipe(Effect.provide(dynamoLayer))
  )

  it.effect("a missing index and a wrong projection are both reported; a missing table too", () =>
    Effect.gen(function* () {
      const name = randomTableName("outbox-missing-index")
      extraTables.push(name)
      const definition = OutboxTable.tableDefinition(name)
      yield* createRaw(name, {
        ...definition,
        AttributeDefinitions: (definition.AttributeDefinitions ?? []).filter(
          (a) => a.AttributeName !== "has_expiry" && a.AttributeName !== "expires_at"
        ),
        GlobalSecondaryIndexes: (definition.GlobalSecondaryIndexes ?? [])
          .filter((index) => index.IndexName !== "ExpiryIndex")
          .map((index) =>
            index.IndexName === "ClaimIndex" ? { ...index, Projection: { ProjectionType: "KEYS_ONLY" } } : index
          )
      })
      const problems = problemsOf(yield* buildStore(name, false))
      expect(problems.some((p) => p.includes("ExpiryIndex is missing"))).toBe(true)
      expect(problems.some((p) => p.includes("ClaimIndex has projection KEYS_ONLY"))).toBe(true)
      const absent = problemsOf(yield* buildStore(randomTableName("outbox-absent"), false))
      expect(absent.some((p) => p.includes("does not exist"))).toBe(true)
    }).pipe(Effect.provide(dynamoLayer))
  )
})

describe("transactional enqueue (R-PERSIST-6)", () => {
  it.effect("outbox entries commit with a business item in one TransactWriteItems", () => {
    const faults = new Faulty.Faults()
    const pk = partition("tx-commit")
    return Effect.gen(function* () {
      const dynamo = yield* DynamoDb.DynamoDb
      const store = yield* OutboxStore
      const entries = yield* DynamoDbOutboxStore.transactItems(
        [record(pk, { envelopeId: "order-created" }), record(pk, { envelopeId: "order-audit" })],
        { tableName }
      )
      yield* dynamo.transactWriteItems({
        TransactItems: [
          {
            Put: {
              TableName: tableName,
              Item: { PK: { S: `business-${pk}` }, SK: { S: "ORDER#1" }, total: { N: "42" } },
              ConditionExpression: "attribute_not_exists(PK)"
            }
          },
          ...entries
        ]
      })
      expect((yield* rawItem({ PK: { S: `business-${pk}` }, SK: { S: "ORDER#1" } }))?.["total"]?.N).toBe("42")
      expect(Chunk.toReadonlyArray(yield* Stream.runCollect(store.listPartitions))).toContain(pk)
      const batch = yield* store.claim(pk, token(1), 10)
      expect(batch.records.map((r) => [r.envelopeId, r.seq])).toEqual([
        ["order-created", 1],
        ["order-audit", 2]
      ])
      // resolved through RecordIdIndex: this store instance never saw the ids
      yield* store.complete(
        batch.records.map((r) => r.id),
        token(1)
      )
      expect(yield* store.countClaimed(pk)).toBe(0)
    }).pipe(Effect.provide(storeLayer(faults)))
  })

  it.effect("a failing business condition rolls the outbox entries back too", () => {
    const faults = new Faulty.Faults()
    const pk = partition("tx-rollback")
    return Effect.gen(function* () {
      const dynamo = yield* DynamoDb.DynamoDb
      const store = yield* OutboxStore
      const entries = yield* DynamoDbOutboxStore.transactItems([record(pk, { envelopeId: "order-created" })], {
        tableName
      })
      const error = yield* Effect.flip(
        dynamo.transactWriteItems({
          TransactItems: [
            {
              Update: {
                TableName: tableName,
                Key: { PK: { S: `business-${pk}` }, SK: { S: "ACCOUNT" } },
                UpdateExpression: "SET balance = :b",
                ConditionExpression: "attribute_exists(PK)",
                ExpressionAttributeValues: { ":b": { N: "1" } }
              }
            },
            ...entries
          ]
        })
      )
      expect(error.kind).toBe("TransactionCanceled")
      // the business update, the outbox put, the partition's listing update
      expect(error.cancellationReasons).toEqual(["ConditionalCheckFailed", "None", "None"])
      expect(yield* store.countPending(pk)).toBe(0)
      const none = yield* store.claim(pk, token(1), 10)
      expect(none.records).toHaveLength(0)
    }).pipe(Effect.provide(storeLayer(faults)))
  })

  it.effect("a batch holding one identity twice is rejected (one transaction cannot write an item twice)", () =>
    Effect.gen(function* () {
      const pk = partition("tx-dup")
      const error = yield* Effect.flip(
        DynamoDbOutboxStore.transactItems([record(pk, { envelopeId: "e" }), record(pk, { envelopeId: "e" })], {
          tableName
        })
      )
      expect(error._tag).toBe("InvalidRecord")
    }).pipe(Effect.provide(dynamoLayer))
  )
})

describe("complete and release by id", () => {
  it.live("ids unknown to this instance are resolved through RecordIdIndex, retrying while it lags", () => {
    const faults = new Faulty.Faults()
    const pk = partition("lag-id")
    const writer = storeLayer(faults)
    const reader = storeLayer(faults, { indexLagRetries: 3, indexLagDelay: "5 millis" })
    return Effect.gen(function* () {
      const ids = yield* Effect.flatMap(OutboxStore, (store) =>
        Effect.zipRight(
          store.persist([record(pk, { envelopeId: "a" }), record(pk, { envelopeId: "b" })]),
          Effect.map(store.claim(pk, token(1), 2), (batch) => batch.records.map((r) => r.id))
        )
      ).pipe(Effect.provide(writer))
      yield* Effect.flatMap(OutboxStore, (store) =>
        Effect.gen(function* () {
          faults.recordIdIndexMisses = 2
          yield* store.release(ids.slice(0, 1), token(1))
          expect(faults.recordIdIndexMisses).toBe(0)
          faults.recordIdIndexMisses = 4
          const error = yield* Effect.flip(store.complete(ids.slice(1), token(1)))
          expect(error._tag).toBe("StaleFencingToken")
          expect(yield* store.countPending(pk)).toBe(1)
          expect(yield* store.countClaimed(pk)).toBe(1)
        })
      ).pipe(Effect.provide(reader))
    })
  })
})

describe("logging", () => {
  it.effect("the ClaimIndex bypass is logged once per store instance", () => {
    const faults = new Faulty.Faults()
    const lines: Array<string> = []
    const logger = Logger.make(({ message }) => {
      lines.push(Array.isArray(message) ? message.join(" ") : String(message))
    })
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      for (const name of ["bypass-a", "bypass-b"]) {
        const pk = partition(name)
        yield* store.persist([record(pk, { envelopeId: "e", orderingKey: "K" })])
        yield* store.claim(pk, token(1), 1)
        yield* store.claim(pk, token(2), 1)
      }
      expect(lines.filter((line) => line.includes("bypass ClaimIndex"))).toHaveLength(1)
    }).pipe(Effect.provide(Layer.merge(storeLayer(faults), Logger.replace(Logger.defaultLogger, logger))))
  })
})

describe("DynamoDb service", () => {
  it.effect("maps SDK errors to typed kinds and never carries credentials", () =>
    Effect.gen(function* () {
      const dynamo = yield* DynamoDb.DynamoDb
      const missing = yield* Effect.flip(dynamo.describeTable({ TableName: randomTableName("nope") }))
      expect(missing.kind).toBe("ResourceNotFound")
      const pk = partition("err")
      yield* dynamo.putItem({ TableName: tableName, Item: { PK: { S: pk }, SK: { S: "X" } } })
      const conditional = yield* Effect.flip(
        dynamo.putItem({
          TableName: tableName,
          Item: { PK: { S: pk }, SK: { S: "X" } },
          ConditionExpression: "attribute_not_exists(PK)"
        })
      )
      expect(conditional.kind).toBe("ConditionalCheckFailed")
      const invalid = yield* Effect.flip(dynamo.putItem({ TableName: tableName, Item: { PK: { S: pk } } }))
      expect(invalid.kind).toBe("Validation")
      for (const error of [missing, conditional, invalid]) {
        expect(JSON.stringify(error)).not.toContain("super-secret-value")
        expect(JSON.stringify(error)).not.toContain("AKIDLOCALTEST")
      }
    }).pipe(
      Effect.provide(
        DynamoDb.layer({
          ...makeTestClientConfig(),
          credentials: { accessKeyId: "AKIDLOCALTEST", secretAccessKey: Redacted.make("super-secret-value") }
        })
      )
    )
  )

  it.effect("layerConfig reads endpoint, region and a redacted secret from Config", () => {
    const local = makeTestClientConfig()
    const config = Config.all({
      region: Config.string("REGION"),
      endpoint: Config.string("ENDPOINT"),
      credentials: Config.all({
        accessKeyId: Config.string("KEY_ID"),
        secretAccessKey: Config.redacted("SECRET")
      })
    })
    const provider = ConfigProvider.fromMap(
      new Map([
        ["REGION", local.region],
        ["ENDPOINT", local.endpoint],
        ["KEY_ID", "local"],
        ["SECRET", "local"]
      ])
    )
    return Effect.gen(function* () {
      const dynamo = yield* DynamoDb.DynamoDb
      const described = yield* dynamo.describeTable({ TableName: tableName })
      expect(described.Table?.TableName).toBe(tableName)
    }).pipe(Effect.provide(DynamoDb.layerConfig(config)), Effect.withConfigProvider(provider))
  })

  it("keeps the cancellation reason codes of a cancelled transaction, in item order", () => {
    const error = DynamoDb.fromSdkError(
      "TransactWriteItems",
      new TransactionCanceledException({
        message: "cancelled",
        $metadata: { httpStatusCode: 400 },
        CancellationReasons: [{ Code: "None" }, { Code: "TransactionConflict" }, {}]
      })
    )
    expect(error.kind).toBe("TransactionCanceled")
    expect(error.cancellationReasons).toEqual(["None", "TransactionConflict", "None"])
    expect(error.isTransient).toBe(false)
    expect(DynamoDb.fromSdkError("Query", { name: "ThrottlingException", message: "slow down" }).kind).toBe(
      "Throttling"
    )
    expect(DynamoDb.fromSdkError("Query", new Error("socket hang up")).kind).toBe("Other")
  })
})
