/**
 * Fault paths of the DynamoDB store that DynamoDB Local never takes by itself (SPEC §3.3): conflicts,
 * throttling, a fence lost mid-batch, a lagging ClaimIndex, deep scans, interruption and the bounded fold.
 */
import type { WriteRequest } from "@aws-sdk/client-dynamodb"
import { describe, expect, it } from "@effect/vitest"
import * as Array from "effect/Array"
import * as DateTime from "effect/DateTime"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import { afterAll, beforeAll } from "vitest"
import * as ClaimOrder from "../src/domain/ClaimOrder.js"
import * as OutboxRecord from "../src/domain/OutboxRecord.js"
import * as DynamoDbOutboxStore from "../src/layers/dynamodb/DynamoDbOutboxStore.js"
import * as OutboxTable from "../src/layers/dynamodb/OutboxTable.js"
import * as RecordItem from "../src/layers/dynamodb/RecordItem.js"
import * as DynamoDb from "../src/services/DynamoDb.js"
import * as OutboxMetrics from "../src/services/OutboxMetrics.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { makeTestClientConfig, randomTableName } from "./support/DynamoLocal.js"
import * as Faulty from "./support/FaultyDynamoDb.js"

const tableName = randomTableName("outbox-faults")
const dynamoLayer = DynamoDb.layer(makeTestClientConfig())

beforeAll(() => Effect.runPromise(OutboxTable.ensureTable(tableName).pipe(Effect.provide(dynamoLayer))))
afterAll(() =>
  Effect.runPromise(
    Effect.flatMap(DynamoDb.DynamoDb, (d) => d.deleteTable({ TableName: tableName })).pipe(Effect.provide(dynamoLayer))
  )
)

const storeLayer = (faults: Faulty.Faults, options: DynamoDbOutboxStore.DynamoDbOutboxStoreOptions = {}) =>
  DynamoDbOutboxStore.layerWith({ tableName, ensureTable: false, indexLagRetries: 0, ...options }).pipe(
    Layer.provideMerge(Faulty.layer(faults).pipe(Layer.provide(dynamoLayer)))
  )

let counter = 0
const partition = (name: string): string => `${name}-${++counter}-${Math.random().toString(36).slice(2, 8)}`

const record = (partitionKey: string, envelopeId: string, orderingKey?: string): OutboxRecord.NewOutboxRecord =>
  new OutboxRecord.NewOutboxRecord({
    partitionKey,
    envelopeId,
    bindingId: "b",
    payload: new Uint8Array([1]),
    ...(orderingKey !== undefined ? { orderingKey } : {})
  })

const envelope = (n: number): string => `e${String(n).padStart(4, "0")}`

/** Persists `n` records one batch at a time so that createdAt/seq order is e0000, e0001, … */
const seed = (partitionKey: string, n: number, orderingKey?: (i: number) => string | undefined) =>
  Effect.flatMap(OutboxStore, (store) =>
    Effect.forEach(
      Array.chunksOf(Array.range(0, n - 1), 25),
      (chunk) => store.persist(chunk.map((i) => record(partitionKey, envelope(i), orderingKey?.(i)))),
      { discard: true }
    )
  )

const counterValue = (metric: Metric.Metric.Counter<number>, partitionKey: string) =>
  Effect.map(Metric.value(OutboxMetrics.tagged(metric, partitionKey)), (state) => state.count)

const captureLogs = () => {
  const lines: Array<{ readonly level: LogLevel.LogLevel; readonly message: string }> = []
  const logger = Logger.make(({ logLevel, message }) => {
    lines.push({ level: logLevel, message: Array.isArray(message) ? message.join(" ") : String(message) })
  })
  return { lines, layer: Logger.replace(Logger.defaultLogger, logger) }
}

const token = (version: number, owner = "owner") => ({ owner, version })

describe("DynamoDB store under injected faults", () => {
  it.effect("R-CLAIM-10 a TransactionConflict is counted in OutboxClaimConflicts and the record skipped", () => {
    const faults = new Faulty.Faults()
    const pk = partition("conflict")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* seed(pk, 5)
      faults.conflictFor = (key) =>
        key["SK"]?.S === RecordItem.recordSortKey({ envelopeId: envelope(1), bindingId: "b" })
      const batch = yield* store.claim(pk, token(1), 5)
      expect(batch.records.map((r) => r.envelopeId)).toEqual([envelope(0), envelope(2), envelope(3), envelope(4)])
      expect(Option.isNone(batch.truncated)).toBe(true)
      expect(yield* counterValue(OutboxMetrics.OutboxClaimConflicts, pk)).toBe(1)
      // nothing else left but the conflicting record: the claim fails with TransactionConflict
      const error = yield* Effect.flip(store.claim(pk, token(1), 5))
      expect(error._tag).toBe("TransactionConflict")
      expect(yield* counterValue(OutboxMetrics.OutboxClaimConflicts, pk)).toBe(2)
      faults.clear()
      const retried = yield* store.claim(pk, token(1), 5)
      expect(retried.records.map((r) => r.envelopeId)).toEqual([envelope(1)])
    }).pipe(Effect.provide(storeLayer(faults)))
  })

  it.effect("R-CLAIM-8 a conflict on a keyed record skips the rest of its key for the batch", () => {
    const faults = new Faulty.Faults()
    const pk = partition("conflict-key")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* seed(pk, 4, (i) => (i < 3 ? "K" : undefined))
      faults.conflictFor = (key) =>
        key["SK"]?.S === RecordItem.recordSortKey({ envelopeId: envelope(0), bindingId: "b" })
      const batch = yield* store.claim(pk, token(1), 4)
      expect(batch.records.map((r) => r.envelopeId)).toEqual([envelope(3)])
    }).pipe(Effect.provide(storeLayer(faults)))
  })

  it.effect(
    "R-CLAIM-8 throttling at the 60th of 100 transactions returns the 59 claimed, truncated, counted once",
    () => {
      const faults = new Faulty.Faults()
      const pk = partition("throttle")
      return Effect.gen(function* () {
        const store = yield* OutboxStore
        yield* seed(pk, 100)
        faults.reset()
        faults.throttleTransactionAt = 60
        const batch = yield* store.claim(pk, token(1), 100)
        expect(batch.records).toHaveLength(59)
        expect(batch.records.map((r) => r.envelopeId)).toEqual(Array.range(0, 58).map(envelope))
        expect(Option.map(batch.truncated, (t) => [t.claimed, t.requested])).toEqual(Option.some([59, 100]))
        expect(yield* counterValue(OutboxMetrics.DynamoDBOutboxClaimTruncated, pk)).toBe(1)
        expect(yield* store.countClaimed(pk)).toBe(59)
        // the first transaction throttled: nothing claimed → StoreUnavailable, not a short batch
        faults.reset()
        faults.throttleTransactionAt = 1
        const error = yield* Effect.flip(store.claim(pk, token(1), 10))
        expect(error._tag).toBe("StoreUnavailable")
        expect(yield* counterValue(OutboxMetrics.DynamoDBOutboxClaimTruncated, pk)).toBe(1)
      }).pipe(Effect.provide(storeLayer(faults)))
    }
  )

  it.effect("R-CLAIM-8 a ClaimIndex page failing after some claims returns them as a truncated batch", () => {
    const faults = new Faulty.Faults()
    const pk = partition("page-fail")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* seed(pk, 6)
      faults.reset()
      // pages [e0 e1] [e2 e3] are read before claiming; e1 conflicts, so a third page is needed and fails
      faults.conflictFor = (key) =>
        key["SK"]?.S === RecordItem.recordSortKey({ envelopeId: envelope(1), bindingId: "b" })
      faults.failQueryAt = 3
      const batch = yield* store.claim(pk, token(1), 4)
      expect(batch.records.map((r) => r.envelopeId)).toEqual([envelope(0), envelope(2), envelope(3)])
      expect(Option.map(batch.truncated, (t) => t.claimed)).toEqual(Option.some(3))
      expect(yield* counterValue(OutboxMetrics.DynamoDBOutboxClaimTruncated, pk)).toBe(1)
    }).pipe(Effect.provide(storeLayer(faults, { pageSize: 2 })))
  })

  it.effect("R-CLAIM-5 an ordering key on any page read before claiming sends the claim to the scan path", () => {
    const faults = new Faulty.Faults()
    const pk = partition("late-key")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* seed(pk, 5, (i) => (i === 3 ? "K" : undefined))
      faults.reset()
      const batch = yield* store.claim(pk, token(1), 5)
      expect(batch.records.map((r) => r.envelopeId)).toEqual(Array.range(0, 4).map(envelope))
      expect(faults.baseTableQueries).toBeGreaterThan(0)
      // nothing was claimed from the index before the key showed up
      expect(faults.transactions).toBe(5)
    }).pipe(Effect.provide(storeLayer(faults, { pageSize: 2 })))
  })

  it.effect("R-CLAIM-8 a fence lost mid-batch fails with StaleFencingToken and returns nothing", () => {
    const faults = new Faulty.Faults()
    const pk = partition("fence")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* seed(pk, 10)
      faults.reset()
      faults.raiseFenceAfter = { transactions: 3, partitionKey: pk, version: 5 }
      const error = yield* Effect.flip(store.claim(pk, token(1), 10))
      expect(error._tag).toBe("StaleFencingToken")
      if (error._tag === "StaleFencingToken") expect(error.highWaterMark).toBe(5)
      expect(faults.transactions).toBe(4)
    }).pipe(Effect.provide(storeLayer(faults)))
  })

  it.effect(
    "R-CLAIM-8 a fence lost mid-batch is StaleFencingToken even when the fence cannot be read afterwards (fault history seed -119907404)",
    () => {
      const faults = new Faulty.Faults()
      const pk = partition("fence-lost-unreadable")
      return Effect.gen(function* () {
        const store = yield* OutboxStore
        yield* seed(pk, 5, (i) => (i === 0 ? "K" : undefined))
        faults.reset()
        faults.raiseFenceAfter = { transactions: 1, partitionKey: pk, version: 5 }
        // the claim's own fence read passes; the read made to describe the lost fence is throttled
        faults.match = (operation) => operation === "GetItem"
        faults.after = 1
        faults.burst = 1
        faults.enabled = true
        const error = yield* Effect.flip(store.claim(pk, token(1), 3))
        faults.clear()
        expect(faults.injected).toBe(1)
        expect(error._tag).toBe("StaleFencingToken")
        if (error._tag === "StaleFencingToken") expect(error.reason).toContain("above version 1")
      }).pipe(Effect.provide(storeLayer(faults)))
    }
  )

  // real time: the store backs off between retries (tens of milliseconds)
  it.live(
    "persist retries a seq allocation rejected with TransactionConflict (the fence was in a claim's transaction)",
    () => {
      const faults = new Faulty.Faults()
      const pk = partition("seq-conflict")
      return Effect.gen(function* () {
        const store = yield* OutboxStore
        yield* seed(pk, 2)
        faults.reset()
        faults.match = (operation) => operation === "UpdateItem"
        faults.updateConflictShare = 1
        faults.burst = 3
        faults.enabled = true
        const report = yield* store.persist([record(pk, envelope(2)), record(pk, envelope(3))])
        faults.clear()
        expect(faults.injectedConflicts).toBe(3)
        expect(report.persisted).toHaveLength(2)
        const batch = yield* store.claim(pk, token(1), 10)
        expect(batch.records.map((r) => r.envelopeId)).toEqual([0, 1, 2, 3].map(envelope))
      }).pipe(Effect.provide(storeLayer(faults)))
    }
  )

  it.effect("R-CLAIM-5 a ClaimIndex lagging behind a keyed head still yields the true oldest, in order", () => {
    const faults = new Faulty.Faults()
    const pk = partition("lag")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* seed(pk, 4, (i) => (i < 2 ? "K" : undefined))
      const headKey = RecordItem.recordSortKey({ envelopeId: envelope(0), bindingId: "b" })
      faults.hideFromClaimIndex = (item) => item["SK"]?.S === headKey
      faults.reset()
      const batch = yield* store.claim(pk, token(1), 2)
      expect(batch.records.map((r) => r.envelopeId)).toEqual([envelope(0), envelope(1)])
      expect(faults.baseTableQueries).toBeGreaterThan(0)
      // the keyless records behind are still served in age order
      const rest = yield* store.claim(pk, token(1), 5)
      expect(rest.records.map((r) => r.envelopeId)).toEqual([envelope(2), envelope(3)])
    }).pipe(Effect.provide(storeLayer(faults)))
  })

  it.effect("a keyless partition is claimed from ClaimIndex with O(limit) reads", () => {
    const faults = new Faulty.Faults()
    const pk = partition("fast")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* seed(pk, 50)
      faults.reset()
      const batch = yield* store.claim(pk, token(1), 10)
      expect(batch.records.map((r) => r.envelopeId)).toEqual(Array.range(0, 9).map(envelope))
      expect(faults.baseTableQueries).toBe(0)
      // 10 index items + the fence
      expect(faults.itemsRead).toBeLessThanOrEqual(11)
    }).pipe(Effect.provide(storeLayer(faults)))
  })

  it.effect(
    "R-EXP-3 an expire sweep throttled after one transition fails with ExpireIncomplete carrying the count",
    () => {
      const faults = new Faulty.Faults()
      const pk = partition("expire-cut")
      return Effect.gen(function* () {
        const store = yield* OutboxStore
        yield* store.persist(
          Array.range(0, 2).map(
            (i) =>
              new OutboxRecord.NewOutboxRecord({
                partitionKey: pk,
                envelopeId: envelope(i),
                bindingId: "b",
                payload: new Uint8Array([1]),
                expiresAt: DateTime.unsafeMake(1_000 + i)
              })
          )
        )
        faults.reset()
        faults.throttleTransactionAt = 2
        const error = yield* Effect.flip(store.expire(DateTime.unsafeMake(10_000), pk, token(1)))
        expect(error._tag).toBe("ExpireIncomplete")
        if (error._tag === "ExpireIncomplete") expect(error.expired).toBe(1)
        faults.clear()
        expect(yield* store.expire(DateTime.unsafeMake(10_000), pk, token(1))).toBe(2)
        expect(yield* store.countPending(pk)).toBe(0)
      }).pipe(Effect.provide(storeLayer(faults)))
    }
  )

  it.effect(
    "R-EXP-1 an expire sweep whose fence is raised mid-sweep stops: ExpireIncomplete, or stale with nothing done",
    () => {
      const faults = new Faulty.Faults()
      const pk = partition("expire-fence")
      return Effect.gen(function* () {
        const store = yield* OutboxStore
        yield* store.persist(
          Array.range(0, 2).map(
            (i) =>
              new OutboxRecord.NewOutboxRecord({
                partitionKey: pk,
                envelopeId: envelope(i),
                bindingId: "b",
                payload: new Uint8Array([1]),
                expiresAt: DateTime.unsafeMake(1_000 + i)
              })
          )
        )
        faults.reset()
        faults.raiseFenceAfter = { transactions: 1, partitionKey: pk, version: 7 }
        const cut = yield* Effect.flip(store.expire(DateTime.unsafeMake(10_000), pk, token(1)))
        expect(cut._tag).toBe("ExpireIncomplete")
        if (cut._tag === "ExpireIncomplete") expect(cut.expired).toBe(1)
        faults.clear()
        const stale = yield* Effect.flip(store.expire(DateTime.unsafeMake(10_000), pk, token(1)))
        expect(stale._tag).toBe("StaleFencingToken")
        expect(yield* store.countPending(pk)).toBe(2)
      }).pipe(Effect.provide(storeLayer(faults)))
    }
  )

  it.effect("R-CLAIM-9 two store instances claiming one partition at once never share a record", () => {
    const faults = new Faulty.Faults()
    const pk = partition("two-instances")
    return Effect.gen(function* () {
      yield* Effect.provide(seed(pk, 30), storeLayer(faults))
      const claimWith = (owner: string) =>
        Effect.flatMap(OutboxStore, (store) => store.claim(pk, token(1, owner), 30)).pipe(
          Effect.provide(storeLayer(faults))
        )
      const [left, right] = yield* Effect.all([claimWith("left"), claimWith("right")], { concurrency: 2 })
      const leftIds = left.records.map((r) => r.id)
      const rightIds = right.records.map((r) => r.id)
      expect(leftIds.filter((id) => rightIds.includes(id))).toEqual([])
      expect(leftIds.length + rightIds.length).toBe(30)
    })
  })

  it.effect("a partition whose last scan saw ordering keys skips ClaimIndex until a scan sees none", () => {
    const faults = new Faulty.Faults()
    const pk = partition("hint")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* seed(pk, 4, (i) => (i < 2 ? "K" : undefined))
      const first = yield* store.claim(pk, token(1), 2)
      expect(first.records.map((r) => r.envelopeId)).toEqual([envelope(0), envelope(1)])
      yield* store.complete(
        first.records.map((r) => r.id),
        token(1)
      )
      faults.reset()
      // the hint sends this claim straight to the scan path, which now sees no key
      const second = yield* store.claim(pk, token(1), 1)
      expect(second.records.map((r) => r.envelopeId)).toEqual([envelope(2)])
      expect([faults.claimIndexQueries, faults.baseTableQueries]).toEqual([0, 1])
      faults.reset()
      const third = yield* store.claim(pk, token(1), 1)
      expect(third.records.map((r) => r.envelopeId)).toEqual([envelope(3)])
      expect(faults.baseTableQueries).toBe(0)
      expect(faults.claimIndexQueries).toBeGreaterThan(0)
    }).pipe(Effect.provide(storeLayer(faults)))
  })

  it.effect("a scan of 12 pages logs one WARN naming the partition and adds 12 to the scan-pages metric", () => {
    const faults = new Faulty.Faults()
    const pk = partition("deep")
    const logs = captureLogs()
    const reports: Array<DynamoDbOutboxStore.ScanFoldReport> = []
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* seed(pk, 11, () => "K")
      const batch = yield* store.claim(pk, token(1), 1)
      expect(batch.records.map((r) => r.envelopeId)).toEqual([envelope(0)])
      expect(reports.map((r) => r.pages)).toEqual([12])
      const warnings = logs.lines.filter((line) => line.level === LogLevel.Warning)
      expect(warnings).toHaveLength(1)
      expect(warnings[0]?.message).toContain(pk)
      expect(yield* counterValue(OutboxMetrics.DynamoDBOutboxClaimScanPages, pk)).toBe(12)
    }).pipe(
      Effect.provide(Layer.merge(storeLayer(faults, { pageSize: 1, onScanFold: (r) => reports.push(r) }), logs.layer))
    )
  })

  it.effect("a scan of 3 pages logs no WARN and leaves the scan-pages metric alone", () => {
    const faults = new Faulty.Faults()
    const pk = partition("shallow")
    const logs = captureLogs()
    const reports: Array<DynamoDbOutboxStore.ScanFoldReport> = []
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* seed(pk, 4, () => "K")
      yield* store.claim(pk, token(1), 2)
      expect(reports.map((r) => r.pages)).toEqual([3])
      expect(logs.lines.filter((line) => line.level === LogLevel.Warning)).toHaveLength(0)
      expect(yield* counterValue(OutboxMetrics.DynamoDBOutboxClaimScanPages, pk)).toBe(0)
    }).pipe(
      Effect.provide(Layer.merge(storeLayer(faults, { pageSize: 2, onScanFold: (r) => reports.push(r) }), logs.layer))
    )
  })

  it.live("a claim interrupted between scan pages ends with nothing claimed", () => {
    const faults = new Faulty.Faults()
    const pk = partition("interrupt")
    return Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* seed(pk, 6, () => "K")
      const secondPage = yield* Deferred.make<void>()
      let basePages = 0
      faults.beforeQuery = (input) =>
        input.IndexName === undefined && ++basePages === 2
          ? Effect.zipRight(Deferred.succeed(secondPage, undefined), Effect.never)
          : Effect.void
      faults.reset()
      const fiber = yield* Effect.fork(store.claim(pk, token(1), 3))
      yield* Deferred.await(secondPage)
      const exit = yield* Fiber.interrupt(fiber)
      expect(exit._tag).toBe("Failure")
      expect(faults.transactions).toBe(0)
      faults.clear()
      expect(yield* store.countClaimed(pk)).toBe(0)
      expect(yield* store.countPending(pk)).toBe(6)
    }).pipe(Effect.provide(storeLayer(faults, { pageSize: 2 })))
  })

  it.live(
    "the fold over 5,000 keyed records never holds more than 60 candidates for limit 10 and returns the true oldest 10",
    () => {
      const faults = new Faulty.Faults()
      const pk = partition("fold")
      const reports: Array<DynamoDbOutboxStore.ScanFoldReport> = []
      return Effect.gen(function* () {
        const dynamo = yield* DynamoDb.DynamoDb
        const store = yield* OutboxStore
        // createdAt is a shuffled permutation (envelope ids sort unrelated to age); 50 keys
        const n = 5000
        const order = Array.range(0, n - 1).map((i) => (i * 7919) % n)
        const prepared = order.map((age, i) => ({
          id: `fold-${i}`,
          partitionKey: pk,
          envelopeId: envelope(i),
          bindingId: "b",
          routeId: "",
          address: "",
          payload: new Uint8Array([1]),
          headers: {},
          orderingKey: Option.some(`K${i % 50}`),
          createdAt: DateTime.unsafeMake(1_000_000 + age),
          expiresAt: Option.none()
        }))
        const requests: Array<WriteRequest> = prepared.map((p, i) => ({
          PutRequest: { Item: RecordItem.encodeNew(p, i + 1) }
        }))
        yield* Effect.forEach(
          Array.chunksOf(requests, 25),
          (chunk) => dynamo.batchWriteItem({ RequestItems: { [tableName]: [...chunk] } }),
          { concurrency: 4, discard: true }
        )
        const expected = ClaimOrder.selectFrom(
          prepared.map((p, i) => OutboxRecord.fromPrepared(p, i + 1)),
          10,
          { version: 1, nowMillis: 2_000_000, staleClaimAfterMillis: 30_000 }
        ).map((r) => r.id)
        const batch = yield* store.claim(pk, token(1), 10)
        expect(batch.records.map((r) => r.id)).toEqual(expected)
        expect(reports).toHaveLength(1)
        expect(reports[0]?.maxCandidates).toBeLessThanOrEqual(60)
        expect(reports[0]?.scanned).toBe(n)
      }).pipe(Effect.provide(storeLayer(faults, { pageSize: 1000, onScanFold: (r) => reports.push(r) })))
    },
    120_000
  )
})
