/**
 * Persist on DynamoDB (R-PERSIST-1..6): ids are checked unused through `RecordIdIndex` before anything
 * is written, seqs are allocated per partition, each record is one conditional put
 * (`attribute_not_exists(SK)`) whose failed condition is settled by a consistent read (same identity →
 * skipped with the holder's id), and the partitions written are listed. `transactItems` returns the same
 * writes for a caller's own transaction. A request DynamoDB rejects as invalid is `InvalidRecord`.
 *
 * @since 0.1.0
 */
import type { AttributeValue, TransactWriteItem } from "@aws-sdk/client-dynamodb"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { InvalidRecord, StoreUnavailable } from "../../domain/OutboxError.js"
import * as OutboxRecord from "../../domain/OutboxRecord.js"
import { DynamoDb, type DynamoDbError } from "../../services/DynamoDb.js"
import * as OutboxStore from "../../services/OutboxStore.js"
import * as OutboxTable from "./OutboxTable.js"
import { listingUpdate } from "./PartitionListing.js"
import * as RecordItem from "./RecordItem.js"
import { allocateSeqs } from "./SeqAllocation.js"
import {
  DefaultTableName,
  isConditionFailure,
  resolve,
  retryFenceConflicts,
  type StoreContext
} from "./StoreContext.js"
import * as Traced from "../../services/Traced.js"

/**
 * Maps a failed persist request: DynamoDB's `ValidationException` (the request can never succeed) is
 * `InvalidRecord` for the record at `index`; anything else is `StoreUnavailable`.
 *
 * @since 0.1.0
 */
export const persistFailure =
  (index: number, record: Pick<OutboxRecord.PreparedRecord, "id" | "partitionKey">) =>
  (error: DynamoDbError): InvalidRecord | StoreUnavailable =>
    error.kind === "Validation"
      ? new InvalidRecord({
          index,
          recordId: record.id,
          partitionKey: record.partitionKey,
          reason: `DynamoDB rejected the record: ${error.detail}`
        })
      : StoreUnavailable.wrap("persist", record.partitionKey)(error)

/**
 * Fails with `InvalidRecord` when an id of the batch is already used by a stored record of another
 * identity. Ids the core generated are fresh by construction and cost no lookup.
 *
 * @since 0.1.0
 */
export const checkIdsUnused = (
  ctx: StoreContext,
  records: ReadonlyArray<OutboxRecord.PreparedRecord>,
  batchIndex: (position: number) => number = (position) => position
): Effect.Effect<void, InvalidRecord | StoreUnavailable> =>
  Effect.forEach(
    records,
    (record, position) =>
      record.generatedId === true
        ? Effect.void
        : ctx.dynamo
            .query({
              TableName: ctx.options.tableName,
              IndexName: OutboxTable.RecordIdIndex,
              KeyConditionExpression: "record_id = :id",
              ExpressionAttributeValues: { ":id": RecordItem.str(record.id) }
            })
            .pipe(
              Effect.mapError(persistFailure(batchIndex(position), record)),
              Effect.flatMap((output) => {
                const sortKey = RecordItem.recordSortKey(record)
                const other = (output.Items ?? []).find(
                  (item) => item["PK"]?.S !== record.partitionKey || item["SK"]?.S !== sortKey
                )
                return other === undefined
                  ? Effect.void
                  : Effect.fail(
                      new InvalidRecord({
                        index: batchIndex(position),
                        recordId: record.id,
                        partitionKey: record.partitionKey,
                        reason: `id ${record.id} is already used by a different record (partition ${other["PK"]?.S ?? "?"}, key ${other["SK"]?.S ?? "?"})`
                      })
                    )
              })
            ),
    { concurrency: 8, discard: true }
  )

/**
 * The outcome of writing one record.
 *
 * @since 0.1.0
 */
export type PutOutcome = { readonly stored: true } | { readonly stored: false; readonly existingId: string }

/**
 * Writes one new record (`index` is its batch position). An existing identity is skipped, or replaced
 * when it is terminal and `replaceTerminal` is set.
 *
 * @since 0.1.0
 */
export const putOne = (
  ctx: StoreContext,
  record: OutboxRecord.PreparedRecord,
  index: number,
  seq: number,
  replaceTerminal: boolean
): Effect.Effect<PutOutcome, InvalidRecord | StoreUnavailable> => {
  const { tableName } = ctx.options
  const failure = persistFailure(index, record)
  const put = (condition: string, values?: Record<string, AttributeValue>) =>
    ctx.dynamo.putItem({
      TableName: tableName,
      Item: RecordItem.encodeNew(record, seq),
      ConditionExpression: condition,
      ...(values !== undefined
        ? { ExpressionAttributeValues: values, ExpressionAttributeNames: { "#status": "status" } }
        : {})
    })
  const settleExisting = Effect.gen(function* () {
    const existing = yield* ctx.dynamo
      .getItem({ TableName: tableName, Key: RecordItem.recordKey(record), ConsistentRead: true })
      .pipe(Effect.mapError(failure))
    const holderId = existing.Item?.["record_id"]?.S
    const holderStatus = existing.Item?.["status"]?.S
    if (holderId === undefined) {
      return yield* new StoreUnavailable({
        operation: "persist",
        partitionKey: record.partitionKey,
        cause: new Error(`record ${record.id}: the item holding its identity vanished during the write; retry`)
      })
    }
    const terminal = holderStatus === "completed" || holderStatus === "expired"
    if (!replaceTerminal || !terminal) return { stored: false, existingId: holderId } as const
    return yield* put("record_id = :old AND #status IN (:completed, :expired)", {
      ":old": RecordItem.str(holderId),
      ":completed": RecordItem.str("completed"),
      ":expired": RecordItem.str("expired")
    }).pipe(Effect.as({ stored: true } as const), Effect.mapError(failure))
  })
  return put("attribute_not_exists(SK)").pipe(
    Effect.as({ stored: true } as const),
    Effect.catchIf(isConditionFailure, () => settleExisting),
    Effect.mapError((error) => (error._tag === "DynamoDbError" ? failure(error) : error))
  )
}

/**
 * How a batch is written: the first record of each identity (`unique`, with `firstIndex` by identity),
 * and the records whose id must be checked unused (one per id and identity, with batch `positions`).
 *
 * @since 0.1.0
 */
export interface BatchPlan {
  readonly unique: ReadonlyArray<OutboxRecord.PreparedRecord>
  readonly uniqueIndex: ReadonlyArray<number>
  readonly firstIndex: ReadonlyMap<string, number>
  readonly toCheck: ReadonlyArray<OutboxRecord.PreparedRecord>
  readonly positions: ReadonlyArray<number>
}

/**
 * Plans a batch: in-batch duplicates of an identity are skipped after the first, and every id (skipped
 * duplicates included) is checked once per identity.
 *
 * @since 0.1.0
 */
export const planBatch = (records: ReadonlyArray<OutboxRecord.PreparedRecord>): BatchPlan => {
  const firstIndex = new Map<string, number>()
  const unique: Array<OutboxRecord.PreparedRecord> = []
  const uniqueIndex: Array<number> = []
  const checked = new Set<string>()
  const toCheck: Array<OutboxRecord.PreparedRecord> = []
  const positions: Array<number> = []
  records.forEach((record, index) => {
    const identity = OutboxRecord.identityKey(record)
    if (!firstIndex.has(identity)) {
      firstIndex.set(identity, index)
      unique.push(record)
      uniqueIndex.push(index)
    }
    const pair = `${record.id}\u0000${identity}`
    if (checked.has(pair)) return
    checked.add(pair)
    toCheck.push(record)
    positions.push(index)
  })
  return { unique, uniqueIndex, firstIndex, toCheck, positions }
}

/**
 * The persist report in batch order: a record is persisted when it was its identity's first occurrence
 * and its put stored it; otherwise skipped, with the id of the record holding its identity.
 *
 * @since 0.1.0
 */
export const reportOf = (
  records: ReadonlyArray<OutboxRecord.PreparedRecord>,
  plan: BatchPlan,
  outcomes: ReadonlyArray<PutOutcome>
): OutboxStore.PersistReport => {
  const holderOf = new Map<string, string>()
  const storedAt = new Set<number>()
  plan.unique.forEach((record, u) => {
    const outcome = outcomes[u]
    holderOf.set(
      OutboxRecord.identityKey(record),
      outcome === undefined || outcome.stored ? record.id : outcome.existingId
    )
    if (outcome?.stored === true) storedAt.add(plan.uniqueIndex[u] ?? -1)
  })
  const persisted: Array<string> = []
  const skipped: Array<string> = []
  const existingIds: Array<string> = []
  records.forEach((record, index) => {
    if (storedAt.has(index)) {
      persisted.push(record.id)
      return
    }
    skipped.push(record.id)
    existingIds.push(holderOf.get(OutboxRecord.identityKey(record)) ?? record.id)
  })
  return { persisted, skipped, existingIds }
}

/**
 * Persists a prepared, non-empty batch; `remember` is told the key of every record stored.
 *
 * @since 0.1.0
 */
export const persist = (
  ctx: StoreContext,
  remember: (record: OutboxRecord.PreparedRecord) => void
): OutboxStore.Backend["persist"] =>
  Effect.fnUntraced(function* (
    records: ReadonlyArray<OutboxRecord.PreparedRecord>,
    { replaceTerminal }: { readonly replaceTerminal: boolean }
  ) {
    const plan = planBatch(records)
    yield* checkIdsUnused(ctx, plan.toCheck, (position) => plan.positions[position] ?? position)
    const seqs = yield* allocateSeqs(
      ctx,
      plan.unique,
      seqFailure(plan.unique, (u) => plan.uniqueIndex[u] ?? u)
    )
    const outcomes = yield* Effect.forEach(
      plan.unique,
      (record, u) => putOne(ctx, record, plan.uniqueIndex[u] ?? u, seqs[u] ?? 0, replaceTerminal),
      { concurrency: 8 }
    )
    const storedPartitions = new Set<string>()
    plan.unique.forEach((record, u) => {
      if (outcomes[u]?.stored !== true) return
      remember(record)
      storedPartitions.add(record.partitionKey)
    })
    const now = yield* Clock.currentTimeMillis
    yield* Effect.forEach(
      storedPartitions,
      (partitionKey) =>
        retryFenceConflicts(ctx.dynamo.updateItem(listingUpdate(ctx.options.tableName, partitionKey, now))).pipe(
          StoreUnavailable.refail("persist", partitionKey)
        ),
      { discard: true }
    )
    return reportOf(records, plan, outcomes)
  })

/** A rejected seq allocation names the first record of its partition. */
const seqFailure =
  (records: ReadonlyArray<OutboxRecord.PreparedRecord>, batchIndex: (position: number) => number) =>
  (partitionKey: string) =>
  (error: DynamoDbError): InvalidRecord | StoreUnavailable => {
    const position = records.findIndex((record) => record.partitionKey === partitionKey)
    const record = records[position]
    return record === undefined
      ? StoreUnavailable.wrap("persist", partitionKey)(error)
      : persistFailure(batchIndex(position), record)(error)
  }

/**
 * Transactional enqueue (R-PERSIST-6): validates the records like `persist`, allocates their seqs and
 * returns one conditional `Put` per record (`attribute_not_exists(SK)`) for the caller to add to its own
 * `TransactWriteItems` next to its business writes — they commit or roll back together. One more entry
 * per partition updates its fence item so that `listPartitions` lists it. A record whose
 * identity already exists cancels the caller's transaction (`ConditionalCheckFailed` on its entry).
 * A batch may not hold the same identity twice (one transaction cannot write an item twice), and a
 * transaction holds at most 100 entries in all. Seqs of a rolled-back transaction are left as gaps.
 *
 * @since 0.1.0
 */
export const transactItems = (
  records: ReadonlyArray<OutboxRecord.NewOutboxRecord>,
  options: { readonly tableName?: string | undefined } = {}
): Effect.Effect<Array<TransactWriteItem>, InvalidRecord | StoreUnavailable, DynamoDb> =>
  Effect.gen(function* () {
    if (records.length === 0) return []
    const ctx: StoreContext = {
      dynamo: yield* DynamoDb,
      options: resolve({ tableName: options.tableName ?? DefaultTableName })
    }
    const prepared = yield* OutboxStore.prepare(records, RecordItem.limitProblem)
    const seen = new Set<string>()
    for (const [index, record] of prepared.entries()) {
      const identity = OutboxRecord.identityKey(record)
      if (seen.has(identity)) {
        return yield* new InvalidRecord({
          index,
          recordId: record.id,
          partitionKey: record.partitionKey,
          reason: "the batch holds this identity twice; one transaction cannot write an item twice"
        })
      }
      seen.add(identity)
    }
    yield* checkIdsUnused(ctx, prepared)
    const seqs = yield* allocateSeqs(
      ctx,
      prepared,
      seqFailure(prepared, (index) => index)
    )
    const now = yield* Clock.currentTimeMillis
    const puts = prepared.map((record, index): TransactWriteItem => ({
      Put: {
        TableName: ctx.options.tableName,
        Item: RecordItem.encodeNew(record, seqs[index] ?? 0),
        ConditionExpression: "attribute_not_exists(SK)"
      }
    }))
    const partitions = Array.from(new Set(prepared.map((record) => record.partitionKey)))
    return [
      ...puts,
      ...partitions.map((partitionKey): TransactWriteItem => ({
        Update: listingUpdate(ctx.options.tableName, partitionKey, now)
      }))
    ]
  }).pipe(Traced.span("DynamoDbOutboxStore.transactItems"))
