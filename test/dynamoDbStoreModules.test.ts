/**
 * The parts of the DynamoDB outbox store, each on its own against DynamoDB Local (SPEC §3.3): seq
 * allocation, partition listing, the fence, one claim transaction, persist planning and its error
 * mapping, settle, expire, reads; and their pure helpers.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { afterAll, beforeAll } from "vitest"
import * as OutboxRecord from "../src/domain/OutboxRecord.js"
import { finishClaim, KeyedHint } from "../src/layers/dynamodb/Claim.js"
import { claimLocal, claimScan } from "../src/layers/dynamodb/ClaimPaths.js"
import * as ClaimTransaction from "../src/layers/dynamodb/ClaimTransaction.js"
import { expireOne } from "../src/layers/dynamodb/Expire.js"
import * as FenceItem from "../src/layers/dynamodb/FenceItem.js"
import * as OutboxTable from "../src/layers/dynamodb/OutboxTable.js"
import * as PartitionListing from "../src/layers/dynamodb/PartitionListing.js"
import * as Persist from "../src/layers/dynamodb/Persist.js"
import * as Reads from "../src/layers/dynamodb/Reads.js"
import * as RecordItem from "../src/layers/dynamodb/RecordItem.js"
import * as SeqAllocation from "../src/layers/dynamodb/SeqAllocation.js"
import * as Settle from "../src/layers/dynamodb/Settle.js"
import * as StoreContext from "../src/layers/dynamodb/StoreContext.js"
import * as DynamoDb from "../src/services/DynamoDb.js"
import { makeTestClientConfig, randomTableName } from "./support/DynamoLocal.js"

const tableName = randomTableName("outbox-modules")
const dynamoLayer = DynamoDb.layer(makeTestClientConfig())

beforeAll(() =>
  Effect.runPromise(OutboxTable.ensureTable(tableName, { localClaimIndex: true }).pipe(Effect.provide(dynamoLayer)))
)
afterAll(() =>
  Effect.runPromise(
    Effect.flatMap(DynamoDb.DynamoDb, (d) => d.deleteTable({ TableName: tableName })).pipe(
      Effect.ignore,
      Effect.provide(dynamoLayer)
    )
  )
)

const context = (options: StoreContext.DynamoDbOutboxStoreOptions = {}) =>
  Effect.map(DynamoDb.DynamoDb, (dynamo): StoreContext.StoreContext => ({
    dynamo,
    options: StoreContext.resolve({ tableName, indexLagRetries: 0, ...options })
  }))

let counter = 0
const partition = (name: string): string => `${name}-${++counter}-${Math.random().toString(36).slice(2, 8)}`

const prepared = (
  partitionKey: string,
  envelopeId: string,
  extra: Partial<OutboxRecord.PreparedRecord> = {}
): OutboxRecord.PreparedRecord => ({
  id: `${partitionKey}-${envelopeId}`,
  partitionKey,
  envelopeId,
  bindingId: "b",
  routeId: "",
  address: "",
  payload: new Uint8Array([1]),
  headers: {},
  orderingKey: Option.none(),
  createdAt: DateTime.unsafeMake(1_000),
  expiresAt: Option.none(),
  generatedId: false,
  ...extra
})

const token = (version: number) => ({ owner: "o", version })
const rule = (version: number) => ({ version, nowMillis: 10_000, staleClaimAfterMillis: 30_000 })

const persistAll = (ctx: StoreContext.StoreContext, records: ReadonlyArray<OutboxRecord.PreparedRecord>) =>
  Persist.persist(ctx, () => {})(records, { replaceTerminal: false })

const stored = (ctx: StoreContext.StoreContext, record: OutboxRecord.PreparedRecord) =>
  ctx.dynamo
    .getItem({ TableName: tableName, Key: RecordItem.recordKey(record), ConsistentRead: true })
    .pipe(Effect.map((output) => output.Item))

describe("SeqAllocation", () => {
  it("countByPartition and assignSeqs hand out each partition's block in batch order", () => {
    const records = [{ partitionKey: "a" }, { partitionKey: "b" }, { partitionKey: "a" }]
    expect([...SeqAllocation.countByPartition(records)]).toEqual([
      ["a", 2],
      ["b", 1]
    ])
    expect(
      SeqAllocation.assignSeqs(
        records,
        new Map([
          ["a", 7],
          ["b", 1]
        ])
      )
    ).toEqual([7, 1, 8])
  })

  it.effect("reserve returns contiguous, non-overlapping blocks and lists the partition", () =>
    Effect.gen(function* () {
      const ctx = yield* context()
      const pk = partition("seq")
      expect(yield* SeqAllocation.reserve(ctx, pk, 3, 5)).toBe(1)
      expect(yield* SeqAllocation.reserve(ctx, pk, 2, 6)).toBe(4)
      expect(yield* SeqAllocation.allocateSeqs(ctx, [{ partitionKey: pk }, { partitionKey: pk }])).toEqual([6, 7])
      const fence = yield* FenceItem.readFence(ctx, pk, "test")
      expect(fence.seqCounter).toBe(7)
      expect(fence.listed).toBe(true)
    }).pipe(Effect.provide(dynamoLayer))
  )
})

describe("PartitionListing", () => {
  const fence = (listedAt: number | undefined): RecordItem.Fence => ({
    highWaterMark: 0,
    seqCounter: 1,
    listed: true,
    listingEpoch: 1,
    listedAt
  })

  it("mayDelist trusts a consistent read at once and ClaimIndex only after the grace", () => {
    const now = 10 * 60_000
    expect(PartitionListing.mayDelist(fence(now), { consistentNonTerminal: 0, indexScanned: 0, nowMillis: now })).toBe(
      true
    )
    expect(PartitionListing.mayDelist(fence(now), { consistentNonTerminal: 2, indexScanned: 0, nowMillis: now })).toBe(
      false
    )
    const index = { consistentNonTerminal: undefined, indexScanned: 0, nowMillis: now }
    expect(PartitionListing.mayDelist(fence(now - 1000), index)).toBe(false)
    expect(PartitionListing.mayDelist(fence(now - 2 * 60_000), index)).toBe(true)
    expect(PartitionListing.mayDelist(fence(now - 2 * 60_000), { ...index, indexScanned: 1 })).toBe(false)
    expect(PartitionListing.mayDelist({ ...fence(undefined), listed: false }, { ...index })).toBe(false)
  })

  it.effect("delist removes the listing only when no persist listed the partition since the fence was read", () =>
    Effect.gen(function* () {
      const ctx = yield* context()
      const pk = partition("list")
      const listed = () =>
        Effect.map(Stream.runCollect(PartitionListing.listPartitions(ctx)), (all) =>
          Chunk.toReadonlyArray(all).includes(pk)
        )
      yield* ctx.dynamo.updateItem(PartitionListing.listingUpdate(tableName, pk, 1))
      const before = yield* FenceItem.readFence(ctx, pk, "test")
      expect(yield* listed()).toBe(true)
      yield* ctx.dynamo.updateItem(PartitionListing.listingUpdate(tableName, pk, 2))
      yield* PartitionListing.delist(ctx, pk, before)
      expect(yield* listed()).toBe(true)
      yield* PartitionListing.delist(ctx, pk, yield* FenceItem.readFence(ctx, pk, "test"))
      expect(yield* listed()).toBe(false)
    }).pipe(Effect.provide(dynamoLayer))
  )
})

describe("FenceItem", () => {
  it.effect("raiseFence raises above, keeps at and rejects below the high-water mark", () =>
    Effect.gen(function* () {
      const ctx = yield* context()
      const pk = partition("fence")
      yield* FenceItem.raiseFence(ctx, pk, token(3), "claim")
      expect((yield* FenceItem.readFence(ctx, pk, "test")).highWaterMark).toBe(3)
      yield* FenceItem.raiseFence(ctx, pk, token(3), "claim")
      const stale = yield* Effect.flip(FenceItem.raiseFence(ctx, pk, token(2), "expire"))
      expect(stale._tag).toBe("StaleFencingToken")
      if (stale._tag === "StaleFencingToken") {
        expect(stale.highWaterMark).toBe(3)
        expect(stale.operation).toBe("expire")
      }
      expect((yield* FenceItem.readFence(ctx, pk, "test")).highWaterMark).toBe(3)
    }).pipe(Effect.provide(dynamoLayer))
  )

  it.effect("a malformed fence item is StoreUnavailable naming the partition", () =>
    Effect.gen(function* () {
      const ctx = yield* context()
      const pk = partition("bad-fence")
      yield* ctx.dynamo.putItem({
        TableName: tableName,
        Item: { ...RecordItem.fenceKey(pk), max_claim_version: RecordItem.str("x") }
      })
      const error = yield* Effect.flip(FenceItem.readFence(ctx, pk, "claim"))
      expect(error._tag === "StoreUnavailable" ? error.partitionKey : error._tag).toBe(pk)
    }).pipe(Effect.provide(dynamoLayer))
  )
})

describe("ClaimTransaction", () => {
  const canceled = (reasons: ReadonlyArray<string>) =>
    new DynamoDb.DynamoDbError({
      kind: "TransactionCanceled",
      operation: "TransactWriteItems",
      errorName: "TransactionCanceledException",
      detail: "",
      cancellationReasons: reasons
    })

  it("claimOutcome reads the cancellation reasons in item order", () => {
    expect(ClaimTransaction.claimOutcome(canceled(["ConditionalCheckFailed", "None"]))._tag).toBe("FenceLost")
    expect(ClaimTransaction.claimOutcome(canceled(["None", "ConditionalCheckFailed"]))._tag).toBe("Lost")
    expect(ClaimTransaction.claimOutcome(canceled(["None", "TransactionConflict"]))._tag).toBe("Conflict")
    expect(ClaimTransaction.claimOutcome(canceled(["None", "ThrottlingError"]))._tag).toBe("Transient")
  })

  it("recordOutcome skips the key of a lost record and stops on a lost fence", () => {
    const state = ClaimTransaction.emptyClaimState()
    const keyed = OutboxRecord.fromPrepared(prepared("p", "e", { orderingKey: Option.some("K") }), 1)
    ClaimTransaction.recordOutcome(state, keyed, { _tag: "Lost" })
    expect(state.lost).toBe(1)
    expect([...state.skippedKeys]).toEqual(["K"])
    ClaimTransaction.recordOutcome(state, keyed, { _tag: "FenceLost" })
    expect(state.stop?._tag).toBe("FenceLost")
  })

  it.effect("claimOne stamps the record as stored; a second claim at the same version loses it", () =>
    Effect.gen(function* () {
      const ctx = yield* context()
      const pk = partition("claim-one")
      const record = prepared(pk, "e")
      yield* persistAll(ctx, [record])
      const [pending] = yield* Reads.queryPending(ctx)(pk, 1)
      if (pending === undefined) return expect.unreachable()
      yield* FenceItem.raiseFence(ctx, pk, token(2), "claim")
      const outcome = yield* ClaimTransaction.claimOne(ctx, pending, token(2), rule(2))
      expect(outcome._tag).toBe("Claimed")
      if (outcome._tag !== "Claimed") return
      expect(outcome.record.replayCount).toBe(1)
      expect(Option.map(outcome.record.claimedAt, DateTime.toEpochMillis)).toEqual(Option.some(10_000))
      const item = yield* stored(ctx, record)
      expect(item?.["claimed_by"]?.S).toBe("o")
      expect(item?.["first_attempted_at"]?.N).toBe("10000")
      expect((yield* ClaimTransaction.claimOne(ctx, pending, token(2), rule(2)))._tag).toBe("Lost")
      yield* FenceItem.raiseFence(ctx, pk, token(4), "claim")
      expect((yield* ClaimTransaction.claimOne(ctx, outcome.record, token(3), rule(3)))._tag).toBe("FenceLost")
    }).pipe(Effect.provide(dynamoLayer))
  )
})

describe("ClaimPaths and Claim", () => {
  it.effect("the scan and local paths select the same head-of-line batch and report what they read", () =>
    Effect.gen(function* () {
      const scans: Array<StoreContext.ScanFoldReport> = []
      const walks: Array<StoreContext.LocalWalkReport> = []
      const ctx = yield* context({ pageSize: 2, onScanFold: (r) => scans.push(r), onLocalWalk: (r) => walks.push(r) })
      const pk = partition("paths")
      const records = ["a", "b", "c", "d", "e"].map((e, i) =>
        prepared(pk, e, { orderingKey: i < 3 ? Option.some("K") : Option.none() })
      )
      yield* persistAll(ctx, records)
      const keyed: Array<[string, boolean]> = []
      const hooks = { remember: () => {}, keyed: (p: string, k: boolean) => void keyed.push([p, k]) }
      const local = {
        partitionKey: pk,
        token: token(1),
        rule: rule(1),
        limit: 2,
        state: ClaimTransaction.emptyClaimState()
      }
      yield* FenceItem.raiseFence(ctx, pk, token(1), "claim")
      yield* claimLocal(ctx, hooks, local)
      expect(local.state.claimed.map((r) => r.envelopeId)).toEqual(["a", "b"])
      expect(walks[0]?.exhausted).toBe(false)
      const scan = {
        partitionKey: pk,
        token: token(1),
        rule: rule(1),
        limit: 5,
        state: ClaimTransaction.emptyClaimState()
      }
      yield* claimScan(ctx, hooks, scan)
      // a and b are claimed at version 1 (not claimable at 1), so K is blocked; d and e are free
      expect(scan.state.claimed.map((r) => r.envelopeId)).toEqual(["d", "e"])
      expect(scans[0]?.pages).toBeGreaterThan(1)
      expect(keyed).toEqual([[pk, true]])
      const batch = yield* finishClaim(ctx, scan)
      expect(batch.records).toHaveLength(2)
      expect(Option.isNone(batch.truncated)).toBe(true)
    }).pipe(Effect.provide(dynamoLayer))
  )

  it.effect("finishClaim: a transient stop is a truncated batch, or StoreUnavailable with nothing claimed", () =>
    Effect.gen(function* () {
      const ctx = yield* context()
      const pk = partition("finish")
      const run = {
        partitionKey: pk,
        token: token(1),
        rule: rule(1),
        limit: 3,
        state: ClaimTransaction.emptyClaimState()
      }
      run.state.stop = { _tag: "Transient", cause: "throttled" }
      expect((yield* Effect.flip(finishClaim(ctx, run)))._tag).toBe("StoreUnavailable")
      run.state.claimed.push(OutboxRecord.fromPrepared(prepared(pk, "x"), 1))
      const batch = yield* finishClaim(ctx, run)
      expect(Option.map(batch.truncated, (t) => [t.claimed, t.requested])).toEqual(Option.some([1, 3]))
      const conflicted = { ...run, state: { ...ClaimTransaction.emptyClaimState(), conflicts: 2 } }
      expect((yield* Effect.flip(finishClaim(ctx, conflicted)))._tag).toBe("TransactionConflict")
    }).pipe(Effect.provide(dynamoLayer))
  )

  it("KeyedHint forgets a partition whose scan saw no key and evicts the oldest beyond capacity", () => {
    const hint = new KeyedHint(2)
    hint.set("a", true)
    hint.set("b", true)
    hint.set("a", false)
    expect(hint.has("a")).toBe(false)
    hint.set("c", true)
    hint.set("d", true)
    expect([hint.has("b"), hint.has("c"), hint.has("d")]).toEqual([false, true, true])
  })
})

describe("Persist", () => {
  it("planBatch writes the first record of each identity and checks each id once per identity", () => {
    const a = prepared("p", "a")
    const again = { ...a }
    const b = prepared("p", "b")
    const plan = Persist.planBatch([a, b, again])
    expect(plan.unique.map((r) => r.envelopeId)).toEqual(["a", "b"])
    expect(plan.uniqueIndex).toEqual([0, 1])
    expect(plan.positions).toEqual([0, 1])
    const report = Persist.reportOf([a, b, again], plan, [{ stored: true }, { stored: false, existingId: "old-b" }])
    expect(report).toEqual({ persisted: [a.id], skipped: [b.id, a.id], existingIds: ["old-b", a.id] })
  })

  it.effect("a request DynamoDB rejects as invalid is InvalidRecord for that record, not StoreUnavailable", () =>
    Effect.gen(function* () {
      const ctx = yield* context()
      const pk = partition("reject")
      // bypasses the core's checks: DynamoDB itself rejects the 1100-byte sort key
      const tooLong = prepared(pk, "e".repeat(1100))
      const error = yield* Effect.flip(Persist.putOne(ctx, tooLong, 4, 1, false))
      expect(error._tag).toBe("InvalidRecord")
      if (error._tag === "InvalidRecord") {
        expect(error.index).toBe(4)
        expect(error.recordId).toBe(tooLong.id)
        expect(error.reason).toContain("DynamoDB rejected the record")
      }
      const seqError = yield* Effect.flip(persistAll(ctx, [prepared("p".repeat(1100), "e")]))
      expect(seqError._tag).toBe("InvalidRecord")
    }).pipe(Effect.provide(dynamoLayer))
  )

  it.effect("putOne skips an existing identity with the holder's id and replaces a terminal one when asked", () =>
    Effect.gen(function* () {
      const ctx = yield* context()
      const pk = partition("put")
      const first = prepared(pk, "e", { id: `${pk}-1` })
      expect(yield* Persist.putOne(ctx, first, 0, 1, false)).toEqual({ stored: true })
      const second = prepared(pk, "e", { id: `${pk}-2` })
      expect(yield* Persist.putOne(ctx, second, 0, 2, false)).toEqual({ stored: false, existingId: first.id })
      yield* ctx.dynamo.updateItem({
        TableName: tableName,
        Key: RecordItem.recordKey(first),
        UpdateExpression: "SET #s = :c",
        ExpressionAttributeNames: { "#s": "status" },
        ExpressionAttributeValues: { ":c": RecordItem.str("completed") }
      })
      expect(yield* Persist.putOne(ctx, second, 0, 2, true)).toEqual({ stored: true })
      expect((yield* stored(ctx, second))?.["record_id"]?.S).toBe(second.id)
    }).pipe(Effect.provide(dynamoLayer))
  )
})

describe("Settle", () => {
  it("KeyCache evicts the oldest insertion beyond capacity", () => {
    const cache = new Settle.KeyCache(2)
    cache.set("a", "p", "s1")
    cache.set("b", "p", "s2")
    cache.set("a", "p", "s1")
    cache.set("c", "p", "s3")
    expect([cache.get("a"), cache.get("b"), cache.size]).toEqual([{ partitionKey: "p", sortKey: "s1" }, undefined, 2])
  })

  it("settleUpdate: complete sets the ttl from retention, release returns to pending", () => {
    const complete = Settle.settleUpdate("complete", 1_700_000_000_500, 60)
    expect(complete.values[":ttl"]).toEqual({ N: "1700000060" })
    expect(complete.expression).toContain("REMOVE claim_sort, has_expiry")
    expect(Settle.settleUpdate("release", 0, 60).values).toEqual({ ":pending": { S: "pending" } })
  })

  it.effect("settle resolves ids through RecordIdIndex and names every id not claimed by the token", () =>
    Effect.gen(function* () {
      const ctx = yield* context()
      const pk = partition("settle")
      const record = prepared(pk, "e")
      yield* persistAll(ctx, [record])
      const cache = new Settle.KeyCache()
      const notClaimed = yield* Effect.flip(Settle.settle(ctx, cache, "complete")([record.id, "unknown"], token(1)))
      expect(notClaimed._tag === "StaleFencingToken" ? notClaimed.recordIds : []).toEqual([record.id, "unknown"])
      const [pending] = yield* Reads.queryPending(ctx)(pk, 1)
      if (pending === undefined) return expect.unreachable()
      yield* FenceItem.raiseFence(ctx, pk, token(1), "claim")
      yield* ClaimTransaction.claimOne(ctx, pending, token(1), rule(1))
      yield* Settle.settle(ctx, cache, "complete")([record.id, record.id], token(1))
      expect((yield* stored(ctx, record))?.["status"]?.S).toBe("completed")
    }).pipe(Effect.provide(dynamoLayer))
  )
})

describe("StoreContext.requestFailure", () => {
  it.effect("a ValidationException of a settle request is InvalidArgument, not StoreUnavailable", () =>
    Effect.gen(function* () {
      const ctx = yield* context()
      const cache = new Settle.KeyCache()
      // a cached key DynamoDB rejects: a sort key over 1024 bytes
      cache.set("id", partition("bad-key"), "S".repeat(2000))
      const error = yield* Effect.flip(Settle.settle(ctx, cache, "release")(["id"], token(1)))
      expect(error._tag).toBe("InvalidArgument")
      if (error._tag === "InvalidArgument") expect(error.reason).toContain("DynamoDB rejected the request")
    }).pipe(Effect.provide(dynamoLayer))
  )
})

describe("Expire and Reads", () => {
  it.effect("expireOne expires a due pending record once; the second attempt is skipped", () =>
    Effect.gen(function* () {
      const ctx = yield* context()
      const pk = partition("expire")
      const record = prepared(pk, "e", { expiresAt: Option.some(DateTime.unsafeMake(5_000)) })
      yield* persistAll(ctx, [record])
      const key = RecordItem.recordKey(record)
      yield* FenceItem.raiseFence(ctx, pk, token(1), "expire")
      expect((yield* expireOne(ctx, key, pk, token(1), 6_000, 7_000))._tag).toBe("Expired")
      expect((yield* expireOne(ctx, key, pk, token(1), 6_000, 7_000))._tag).toBe("Skipped")
      expect((yield* stored(ctx, record))?.["status"]?.S).toBe("expired")
      yield* FenceItem.raiseFence(ctx, pk, token(5), "claim")
      expect((yield* expireOne(ctx, key, pk, token(1), 6_000, 7_000))._tag).toBe("FenceLost")
    }).pipe(Effect.provide(dynamoLayer))
  )

  it.effect("counts and previews read ClaimLocalIndex consistently when the store has it", () =>
    Effect.gen(function* () {
      const ctx = yield* context({ localClaimIndex: true })
      expect(Reads.depthIndex(ctx)).toEqual({ IndexName: OutboxTable.ClaimLocalIndex, ConsistentRead: true })
      const pk = partition("reads")
      yield* persistAll(ctx, [prepared(pk, "b", { createdAt: DateTime.unsafeMake(2_000) }), prepared(pk, "a")])
      expect(yield* Reads.countStatus(ctx, "pending", "countPending")(pk)).toBe(2)
      expect(yield* Reads.countStatus(ctx, "claimed", "countClaimed")(pk)).toBe(0)
      expect((yield* Reads.queryPending(ctx)(pk, 5)).map((r) => r.envelopeId)).toEqual(["a", "b"])
      expect(Reads.depthIndex(yield* context())).toEqual({ IndexName: OutboxTable.ClaimIndex })
    }).pipe(Effect.provide(dynamoLayer))
  )

  it("resolve applies the defaults", () => {
    const resolved = StoreContext.resolve({})
    expect([resolved.tableName, resolved.staleClaimAfterMillis, resolved.retentionSeconds]).toEqual([
      StoreContext.DefaultTableName,
      30_000,
      3600
    ])
  })
})
