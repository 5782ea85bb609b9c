/**
 * DynamoDB size limits (issue 18 item 1, R-PERSIST-5): every key limit is checked before anything is
 * written, so a batch with one record over a limit stores nothing, and a request DynamoDB rejects as
 * invalid is a typed non-retryable error (`InvalidRecord`, `InvalidArgument`), never `StoreUnavailable`.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { afterAll, beforeAll } from "vitest"
import * as OutboxRecord from "../src/domain/OutboxRecord.js"
import * as DynamoDbLeaseStore from "../src/layers/dynamodb/DynamoDbLeaseStore.js"
import * as DynamoDbOutboxStore from "../src/layers/dynamodb/DynamoDbOutboxStore.js"
import * as OutboxTable from "../src/layers/dynamodb/OutboxTable.js"
import * as RecordItem from "../src/layers/dynamodb/RecordItem.js"
import * as DynamoDb from "../src/services/DynamoDb.js"
import * as LeaseStore from "../src/services/LeaseStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { makeTestClientConfig, randomTableName } from "./support/DynamoLocal.js"

const tableName = randomTableName("outbox-limits")
const dynamoLayer = DynamoDb.layer(makeTestClientConfig())

beforeAll(() => Effect.runPromise(OutboxTable.ensureTable(tableName).pipe(Effect.provide(dynamoLayer))))
afterAll(() =>
  Effect.runPromise(
    Effect.flatMap(DynamoDb.DynamoDb, (d) => d.deleteTable({ TableName: tableName })).pipe(
      Effect.ignore,
      Effect.provide(dynamoLayer)
    )
  )
)

const storeLayer = DynamoDbOutboxStore.layerWith({ tableName, ensureTable: false, indexLagRetries: 0 }).pipe(
  Layer.provideMerge(dynamoLayer)
)

let counter = 0
const partition = (name: string): string => `${name}-${++counter}-${Math.random().toString(36).slice(2, 8)}`

const record = (
  partitionKey: string,
  envelopeId: string,
  extra: { readonly id?: string; readonly bindingId?: string } = {}
): OutboxRecord.NewOutboxRecord =>
  new OutboxRecord.NewOutboxRecord({
    partitionKey,
    envelopeId,
    bindingId: extra.bindingId ?? "b",
    payload: new Uint8Array([1]),
    ...(extra.id !== undefined ? { id: extra.id } : {})
  })

const partitionItems = (pk: string) =>
  Effect.flatMap(DynamoDb.DynamoDb, (d) =>
    d.query({
      TableName: tableName,
      KeyConditionExpression: "PK = :pk",
      ExpressionAttributeValues: { ":pk": RecordItem.str(pk) },
      ConsistentRead: true
    })
  ).pipe(Effect.map((output) => output.Items ?? []))

/** The sort key `OUTBOX#` + envelopeId + `#b` is exactly `bytes` long for an ASCII envelope id. */
const envelopeForSortKey = (bytes: number): string => "e".repeat(bytes - "OUTBOX#".length - "#b".length)

describe("DynamoDB size limits (issue 18 item 1, R-PERSIST-5)", () => {
  it.effect("a batch of one good record and one over-long envelope id stores nothing (InvalidRecord)", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const pk = partition("half")
      const error = yield* Effect.flip(
        store.persist([record(pk, "good"), record(pk, envelopeForSortKey(RecordItem.MaxSortKeyBytes + 1))])
      )
      expect(error._tag).toBe("InvalidRecord")
      if (error._tag !== "InvalidRecord") return
      expect(error.index).toBe(1)
      expect(error.reason).toContain("sort key")
      expect(error.reason).toContain("1024")
      expect(yield* partitionItems(pk)).toEqual([])
      expect(yield* store.countPending(pk)).toBe(0)
      const listed = yield* Stream.runCollect(store.listPartitions)
      expect(Chunk.toReadonlyArray(listed)).not.toContain(pk)
    }).pipe(Effect.provide(storeLayer))
  )

  it.effect("the sort key is measured after escaping and in UTF-8 bytes", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const pk = partition("escaped")
      // 400 '#' are 400 bytes raw but 1200 bytes escaped (%23)
      const escaped = yield* Effect.flip(store.persist([record(pk, "#".repeat(400))]))
      expect(escaped._tag).toBe("InvalidRecord")
      // 400 'é' are 800 bytes in UTF-8 plus a 300-byte binding id
      const multibyte = yield* Effect.flip(store.persist([record(pk, "é".repeat(400), { bindingId: "x".repeat(300) })]))
      expect(multibyte._tag).toBe("InvalidRecord")
      if (multibyte._tag === "InvalidRecord") expect(multibyte.reason).toContain("sort key")
      expect(yield* partitionItems(pk)).toEqual([])
    }).pipe(Effect.provide(storeLayer))
  )

  it.effect("a sort key of exactly 1024 bytes is stored and claimable", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const pk = partition("edge-sk")
      const envelopeId = envelopeForSortKey(RecordItem.MaxSortKeyBytes)
      expect(RecordItem.recordSortKey({ envelopeId, bindingId: "b" })).toHaveLength(RecordItem.MaxSortKeyBytes)
      const report = yield* store.persist([record(pk, envelopeId)])
      expect(report.persisted).toHaveLength(1)
      const batch = yield* store.claim(pk, { owner: "o", version: 1 }, 5)
      expect(batch.records.map((r) => r.envelopeId)).toEqual([envelopeId])
      yield* store.complete([batch.records[0]?.id ?? ""], { owner: "o", version: 1 })
    }).pipe(Effect.provide(storeLayer))
  )

  it.effect("a partition key over 1024 bytes (PartitionIndex range key) is InvalidRecord; 1024 bytes is stored", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const tooLong = `${partition("pk")}-`.padEnd(RecordItem.MaxPartitionKeyBytes + 1, "p")
      const error = yield* Effect.flip(store.persist([record(tooLong, "e")]))
      expect(error._tag).toBe("InvalidRecord")
      if (error._tag === "InvalidRecord") {
        expect(error.reason).toContain("partitionKey")
        expect(error.reason).toContain("1024")
      }
      const edge = `${partition("pk")}-`.padEnd(RecordItem.MaxPartitionKeyBytes, "p")
      const report = yield* store.persist([record(edge, "e")])
      expect(report.persisted).toHaveLength(1)
      const batch = yield* store.claim(edge, { owner: "o", version: 1 }, 5)
      expect(batch.records).toHaveLength(1)
    }).pipe(Effect.provide(storeLayer))
  )

  it.effect("a record id over 2048 bytes (the RecordIdIndex key) is InvalidRecord naming id, nothing stored", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const pk = partition("id")
      const error = yield* Effect.flip(
        store.persist([record(pk, "a"), record(pk, "b", { id: "i".repeat(RecordItem.MaxRecordIdBytes + 1) })])
      )
      expect(error._tag).toBe("InvalidRecord")
      if (error._tag === "InvalidRecord") {
        expect(error.index).toBe(1)
        expect(error.reason).toContain("id is")
        expect(error.reason).toContain("2048")
      }
      expect(yield* partitionItems(pk)).toEqual([])
      const edge = yield* store.persist([record(pk, "c", { id: "j".repeat(RecordItem.MaxRecordIdBytes) })])
      expect(edge.persisted).toHaveLength(1)
    }).pipe(Effect.provide(storeLayer))
  )

  it.effect(
    "an empty header name (DynamoDB rejects empty map keys) is InvalidRecord naming headers, nothing stored",
    () =>
      Effect.gen(function* () {
        const store = yield* OutboxStore
        const pk = partition("header")
        const bad = new OutboxRecord.NewOutboxRecord({
          partitionKey: pk,
          envelopeId: "h",
          bindingId: "b",
          payload: new Uint8Array([1]),
          headers: { "": "x" }
        })
        const error = yield* Effect.flip(store.persist([record(pk, "good"), bad]))
        expect(error._tag).toBe("InvalidRecord")
        if (error._tag === "InvalidRecord") {
          expect(error.index).toBe(1)
          expect(error.reason).toContain("header name")
        }
        expect(yield* partitionItems(pk)).toEqual([])
      }).pipe(Effect.provide(storeLayer))
  )

  it.effect("complete and release of an id over 2048 bytes are StaleFencingToken naming it (R-DONE-2)", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const long = "i".repeat(RecordItem.MaxRecordIdBytes + 1)
      const completed = yield* Effect.flip(store.complete([long], { owner: "o", version: 1 }))
      expect(completed._tag === "StaleFencingToken" ? completed.recordIds : completed._tag).toEqual([long])
      const released = yield* Effect.flip(store.release([long], { owner: "o", version: 1 }))
      expect(released._tag).toBe("StaleFencingToken")
      const empty = yield* Effect.flip(store.complete([""], { owner: "o", version: 1 }))
      expect(empty._tag === "InvalidArgument" ? empty.argument : empty._tag).toBe("ids")
    }).pipe(Effect.provide(storeLayer))
  )

  it.effect("claim, expire and reads of a partition key over 1024 bytes are InvalidArgument, nothing written", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const pk = `${partition("long")}-`.padEnd(2100, "p")
      const now = DateTime.unsafeMake(1_000)
      const failures = [
        yield* Effect.flip(store.claim(pk, { owner: "o", version: 1 }, 5)),
        yield* Effect.flip(store.expire(now, pk, { owner: "o", version: 1 })),
        yield* Effect.flip(store.queryPending(pk, 5)),
        yield* Effect.flip(store.countPending(pk)),
        yield* Effect.flip(store.countClaimed(pk))
      ]
      expect(failures.map((e) => (e._tag === "InvalidArgument" ? e.argument : e._tag))).toEqual(
        Array(5).fill("partitionKey")
      )
    }).pipe(Effect.provide(storeLayer))
  )

  it.effect(
    "LeaseStore acquire, renew, release and current with a partition key over 1024 bytes are InvalidArgument; 1024 bytes is leased",
    () =>
      Effect.gen(function* () {
        const leases = yield* LeaseStore.LeaseStore
        const pk = `${partition("lease")}-`.padEnd(1025, "p")
        const token = { owner: "o", version: 1 }
        const failures = [
          yield* Effect.flip(leases.acquire(pk, "o", "30 seconds")),
          yield* Effect.flip(leases.renew(pk, token, "30 seconds")),
          yield* Effect.flip(leases.release(pk, token)),
          yield* Effect.flip(leases.current(pk))
        ]
        for (const failure of failures) {
          expect(failure).toMatchObject({ _tag: "InvalidArgument", argument: "partitionKey" })
          expect(failure.message).toContain("1025 bytes")
        }
        const fits = pk.slice(0, 1024)
        const lease = yield* leases.acquire(fits, "o", "30 seconds")
        expect(lease.partitionKey).toBe(fits)
      }).pipe(
        Effect.provide(DynamoDbLeaseStore.layerWith({ tableName, ensureTable: false }).pipe(Layer.provide(dynamoLayer)))
      )
  )

  it.effect("a negative staleClaimAfter or zero retention fails the layer with InvalidConfiguration", () =>
    Effect.gen(function* () {
      const negative = yield* Effect.flip(
        DynamoDbOutboxStore.make({ tableName, ensureTable: false, staleClaimAfter: Duration.millis(-5) })
      )
      expect(negative._tag).toBe("InvalidConfiguration")
      const zero = yield* Effect.flip(DynamoDbOutboxStore.make({ tableName, ensureTable: false, retention: 0 }))
      expect(zero._tag).toBe("InvalidConfiguration")
    }).pipe(Effect.provide(dynamoLayer))
  )

  it.effect("transactItems rejects an over-long key before allocating seqs", () =>
    Effect.gen(function* () {
      const pk = partition("tx")
      const error = yield* Effect.flip(
        DynamoDbOutboxStore.transactItems([record(pk, "ok"), record(pk, envelopeForSortKey(2000))], { tableName })
      )
      expect(error._tag).toBe("InvalidRecord")
      expect(yield* partitionItems(pk)).toEqual([])
    }).pipe(Effect.provide(dynamoLayer))
  )
})
