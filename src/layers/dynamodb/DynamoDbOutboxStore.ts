/**
 * The DynamoDB `OutboxStore` backend (SPEC §3.3; design record 0005 "Outbox partition design").
 *
 * **Layout** — see `OutboxTable.ts`: one table, record items keyed by identity (`PK` = partition,
 * `SK = OUTBOX#esc(envelopeId)#esc(bindingId)`), one fence item per partition (`SK = FENCE`) holding the
 * fence high-water mark (`max_claim_version`) and the seq counter, and four GSIs (`ClaimIndex`,
 * `RecordIdIndex`, `ExpiryIndex`, `PartitionIndex`).
 *
 * **Persist** allocates seqs with one `ADD seq_counter :n` per partition per batch (the batch takes the
 * block ending at the returned value; skipped records leave gaps; a `TransactionConflict` — the fence item
 * was in a claim's transaction at that instant, which the SDK does not retry — is retried with a short
 * back-off), then writes one conditional put per
 * record (`attribute_not_exists(SK)`); a failed condition is settled by a consistent read (same identity
 * → skipped, reported with the stored id; gone meanwhile → `StoreUnavailable`). Record ids must be unique
 * across identities: each id is looked up in `RecordIdIndex` before anything is written.
 *
 * **Claim** reads the fence consistently, rejects a token below the high-water mark, raises the mark with
 * a conditional update, then chooses candidates and claims each with one `TransactWriteItems` of
 * [ConditionCheck fence `max_claim_version <= v`, Update record with the claimable condition]:
 * - *fast path* (keyless partitions): `ClaimIndex` ascending with a claimable filter; it reads the pages
 *   holding enough candidates for the batch, then claims them, reading on only to replace claims lost to
 *   other claimers, and stops after `limit` claims — O(limit) reads. The moment a page shows an ordering
 *   key the index is abandoned (a GSI can show a younger sibling before its head): with nothing claimed
 *   yet the claim re-runs on the scan path, otherwise what was claimed is returned as a legal short batch.
 * - *scan path* (keyed partitions): a ConsistentRead Query of the base table paged to exhaustion as an
 *   interruptible `Stream`, folded into the oldest `retain = 3 × limit` claimable candidates (trimmed back
 *   to `retain` whenever the set reaches `2 × retain`) plus the oldest non-claimable record of each key
 *   (the blocking heads); the final choice is `ClaimOrder.selectFrom` over both. Memory stays bounded by
 *   `2 × retain` candidates plus one head per key. Candidates known to sit behind a blocking head are
 *   dropped before trimming, and a page's blocking heads are recorded before its candidates, so a
 *   partition that fits in one page is selected exactly.
 * - cancellation reasons: fence `ConditionalCheckFailed` → `StaleFencingToken` with nothing returned
 *   (R-CLAIM-8); record `ConditionalCheckFailed` → another claimer won, the record and the rest of its key
 *   are skipped for this batch; `TransactionConflict` → `OutboxClaimConflicts` +1, skipped likewise;
 *   throttling or any other failure → the claim stops and returns what it claimed with
 *   `truncated = Some(ClaimTruncated)` and `DynamoDBOutboxClaimTruncated` +1 (with nothing claimed it
 *   fails: `StoreUnavailable`). A claim that claimed nothing and met only conflicts fails with
 *   `TransactionConflict` so the caller may retry at once.
 * - a scan of more than 8 pages logs one WARN naming the partition and adds the page count to
 *   `DynamoDBOutboxClaimScanPages`.
 *
 * A store instance remembers which partitions its last scan found keyed and sends their next claims
 * straight to the scan path; a scan that finds no ordering key sends the partition back to the fast path.
 *
 * **Local claim index** (opt-in, `localClaimIndex: true`; design record 0005, deferred upgrade path 1):
 * the table carries the local secondary index `ClaimLocalIndex (PK, claim_sort)` (see `OutboxTable.ts`;
 * an LSI can only be created with the table, so an existing table needs a new table and a data
 * migration — the layer fails with `InvalidConfiguration` when the table lacks it). Every claim, keyed or
 * keyless, then takes the *local path*: it walks the index with `ConsistentRead: true` from the oldest
 * record (`claim_sort` ascending), page by page as an interruptible `Stream`, keeping the claimable
 * records that no blocking head holds back and the blocking heads themselves (the oldest non-claimable
 * non-terminal record of each ordering key; younger records of that key are dropped as they come), and
 * stops reading as soon as `limit` records are selected. Everything younger than the last record read
 * cannot change the choice (age order is index order), so a claim reads O(limit + records it must skip)
 * items, never the whole backlog. The final choice is `ClaimOrder.selectFrom` over the kept records and
 * heads; claiming then goes through the same per-record transactions and cancellation rules as the other
 * paths (records lost to other claimers leave a short batch, as on the scan path). Terminal records have
 * no `claim_sort` and never appear in the index.
 *
 * The claim transaction also pins the `replay_count` it read, so the returned record is exactly what
 * was stored without a read-back.
 *
 * **Complete/Release** resolve ids through an in-process cache of the keys this instance persisted or
 * claimed, else `RecordIdIndex` (retried a few times for index lag); an id the index does not show is
 * unknown (R-DONE-2). Each id is one conditional update on status, owner, version and id; several ids
 * are not atomic: earlier matches stay applied (R-DONE-3). Complete sets `ttl = now + retention` and
 * removes `claim_sort` and `has_expiry`.
 *
 * **Expire** queries `ExpiryIndex` (`has_expiry` = partition, `expires_at < before`) after the same fence
 * read and raise as a claim, and expires each record with a transaction [ConditionCheck fence, Update
 * record if still pending and due]; a sweep cut short after some transitions fails with
 * `ExpireIncomplete` carrying the count.
 *
 * **Reads**: `countPending`/`countClaimed` are `ClaimIndex` queries with `Select: COUNT` and a status
 * filter summed over pages; `queryPending` reads `ClaimIndex` in age order. Both see the index, which
 * DynamoDB updates asynchronously (with `localClaimIndex` they read `ClaimLocalIndex` consistently
 * instead, so they see every write that completed before them). `listPartitions` queries the shards of `PartitionIndex`, reading one
 * fence item per partition and never a record (R-READ-3). Persist lists a partition (sets its shard
 * and bumps `listing_epoch`, before and after writing); a claim that finds the partition empty de-lists
 * it with a removal conditional on the epoch it read, so a persist racing the claim keeps it listed. The
 * consistent scan path de-lists at once; the fast path only when `ClaimIndex` shows nothing at all and
 * the last persist is older than {@link ListingGrace} (the index may lag). A claim alone never lists a
 * partition.
 *
 * **Stale reclaim** (R-CLAIM-6) defaults to 30 seconds: it must exceed the worst clock skew between
 * the nodes that claim, plus the longest batch.
 *
 * @since 0.1.0
 */
import type { AttributeValue, QueryCommandOutput, TransactWriteItem } from "@aws-sdk/client-dynamodb"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as ClaimOrder from "../../domain/ClaimOrder.js"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import {
  ClaimTruncated,
  CorruptRecord,
  ExpireIncomplete,
  type InvalidConfiguration,
  InvalidRecord,
  StaleFencingToken,
  StoreUnavailable,
  TransactionConflict
} from "../../domain/OutboxError.js"
import * as OutboxRecord from "../../domain/OutboxRecord.js"
import { DynamoDb, type DynamoDbError, type DynamoDbService } from "../../services/DynamoDb.js"
import * as OutboxMetrics from "../../services/OutboxMetrics.js"
import * as OutboxStore from "../../services/OutboxStore.js"
import * as OutboxTable from "./OutboxTable.js"
import * as RecordItem from "./RecordItem.js"

/**
 * What one scan-path claim saw, reported to {@link DynamoDbOutboxStoreOptions.onScanFold}.
 *
 * @since 0.1.0
 */
export interface ScanFoldReport {
  readonly partitionKey: string
  /** Query pages read. */
  readonly pages: number
  /** Record items read (DynamoDB `ScannedCount`, summed over pages). */
  readonly scanned: number
  /** The high-water mark of the retained candidate set during the fold. */
  readonly maxCandidates: number
  /** `3 × limit`. */
  readonly retain: number
  /** Blocking heads recorded (one per ordering key at most). */
  readonly blockingHeads: number
}

/**
 * What one local-path claim read, reported to {@link DynamoDbOutboxStoreOptions.onLocalWalk}.
 *
 * @since 0.1.0
 */
export interface LocalWalkReport {
  readonly partitionKey: string
  /** `ClaimLocalIndex` query pages read. */
  readonly pages: number
  /** Index items read (DynamoDB `ScannedCount`, summed over pages). */
  readonly scanned: number
  /** Records selected for claiming. */
  readonly selected: number
  /** Blocking heads met (one per ordering key at most). */
  readonly blockingHeads: number
  /** Whether the walk reached the end of the partition (rather than stopping at `limit`). */
  readonly exhausted: boolean
}

/**
 * Options of the DynamoDB store.
 *
 * @since 0.1.0
 */
export interface DynamoDbOutboxStoreOptions extends OutboxStore.StoreOptions {
  /** Table name (default `effect-outbox`). */
  readonly tableName?: string | undefined
  /**
   * Create the table (and enable TTL) when it does not exist (default `true`). Either way the layer runs
   * the schema preflight and fails with `InvalidConfiguration` naming every mismatch.
   */
  readonly ensureTable?: boolean | undefined
  /** `Limit` of every claim-path Query page (default: DynamoDB's 1 MB pages). For tests. */
  readonly pageSize?: number | undefined
  /** Extra `RecordIdIndex` lookups when an id is not found (index lag), default 3. */
  readonly indexLagRetries?: number | undefined
  /** Pause before each of those lookups, default 100 ms (read from `Clock`). */
  readonly indexLagDelay?: Duration.DurationInput | undefined
  /** Called after every scan-path fold (tests and diagnostics). */
  readonly onScanFold?: ((report: ScanFoldReport) => void) | undefined
  /**
   * Claim by walking the local secondary index `ClaimLocalIndex` consistently (O(limit) reads on keyed
   * partitions too). Default `false`. The table must have been created with the index (`ensureTable`
   * creates it for a new table); on a table without it the layer fails with `InvalidConfiguration`.
   */
  readonly localClaimIndex?: boolean | undefined
  /** Called after every local-path walk (tests and diagnostics). */
  readonly onLocalWalk?: ((report: LocalWalkReport) => void) | undefined
}

/**
 * Default table name.
 *
 * @since 0.1.0
 */
export const DefaultTableName = "effect-outbox"

/**
 * Scan-path claims reading more pages than this log a WARN and count `DynamoDBOutboxClaimScanPages`.
 *
 * @since 0.1.0
 */
export const DeepBacklogPageWarn = 8

const RetentionFactor = 3
/** Smallest `Limit` of a `ClaimLocalIndex` page (a page for one missing record would cost a request). */
const LocalMinPage = 16
const CacheCapacity = 100_000

const unavailable =
  (operation: string, partitionKey?: string) =>
  (cause: unknown): StoreUnavailable =>
    new StoreUnavailable({ operation, ...(partitionKey !== undefined ? { partitionKey } : {}), cause })

const isConditionFailure = (error: DynamoDbError): boolean => error.kind === "ConditionalCheckFailed"

/** A bounded id → key map (oldest insertion evicted first). */
class KeyCache {
  private readonly entries = new Map<string, { readonly partitionKey: string; readonly sortKey: string }>()
  get(id: string): { readonly partitionKey: string; readonly sortKey: string } | undefined {
    return this.entries.get(id)
  }
  set(id: string, partitionKey: string, sortKey: string): void {
    this.entries.delete(id)
    this.entries.set(id, { partitionKey, sortKey })
    if (this.entries.size > CacheCapacity) {
      const oldest = this.entries.keys().next()
      if (oldest.done !== true) this.entries.delete(oldest.value)
    }
  }
}

/** A bounded set of partitions known (from their last scan) to hold ordering keys. */
class KeyedHint {
  private readonly partitions = new Set<string>()
  has(partitionKey: string): boolean {
    return this.partitions.has(partitionKey)
  }
  set(partitionKey: string, keyed: boolean): void {
    this.partitions.delete(partitionKey)
    if (!keyed) return
    this.partitions.add(partitionKey)
    if (this.partitions.size > CacheCapacity) {
      const oldest = this.partitions.values().next()
      if (oldest.done !== true) this.partitions.delete(oldest.value)
    }
  }
}

/**
 * The scan-path fold: the oldest `retain` claimable candidates (trimmed when reaching `2 × retain`) and
 * the oldest non-claimable non-terminal record of each ordering key.
 */
class ScanFold {
  readonly retain: number
  candidates: Array<OutboxRecord.OutboxRecord> = []
  readonly heads = new Map<string, OutboxRecord.OutboxRecord>()
  pages = 0
  scanned = 0
  maxCandidates = 0
  /** Whether any non-terminal record of the partition carries an ordering key. */
  sawKey = false
  /** Non-terminal records seen. */
  nonTerminal = 0

  constructor(
    limit: number,
    private readonly rule: ClaimOrder.ClaimRule
  ) {
    this.retain = RetentionFactor * limit
  }

  private blocked(record: OutboxRecord.OutboxRecord): boolean {
    if (Option.isNone(record.orderingKey)) return false
    const head = this.heads.get(record.orderingKey.value)
    return head !== undefined && ClaimOrder.compareAge(head, record) < 0
  }

  private trim(): void {
    this.candidates = this.candidates
      .filter((record) => !this.blocked(record))
      .sort(ClaimOrder.compareAge)
      .slice(0, this.retain)
  }

  addPage(records: ReadonlyArray<OutboxRecord.OutboxRecord>, scanned: number): this {
    this.pages++
    this.scanned += scanned
    const claimable: Array<OutboxRecord.OutboxRecord> = []
    for (const record of records) {
      if (!ClaimOrder.isNonTerminal(record)) continue
      this.nonTerminal++
      if (Option.isSome(record.orderingKey)) this.sawKey = true
      if (ClaimOrder.isClaimable(record, this.rule)) {
        claimable.push(record)
      } else if (Option.isSome(record.orderingKey)) {
        const key = record.orderingKey.value
        const head = this.heads.get(key)
        if (head === undefined || ClaimOrder.compareAge(record, head) < 0) this.heads.set(key, record)
      }
    }
    for (const record of claimable) {
      if (this.blocked(record)) continue
      if (this.candidates.length >= 2 * this.retain) this.trim()
      this.candidates.push(record)
      if (this.candidates.length > this.maxCandidates) this.maxCandidates = this.candidates.length
    }
    return this
  }

  select(limit: number): Array<OutboxRecord.OutboxRecord> {
    return ClaimOrder.selectFrom([...this.candidates, ...this.heads.values()], limit, this.rule)
  }
}

/**
 * The local-path fold over `ClaimLocalIndex` pages, which arrive in age order: claimable records not held
 * back by a blocking head, and the oldest non-claimable non-terminal record of each ordering key. Done
 * once `limit` records are selected.
 */
class LocalWalk {
  readonly selected: Array<OutboxRecord.OutboxRecord> = []
  readonly heads = new Map<string, OutboxRecord.OutboxRecord>()
  pages = 0
  scanned = 0
  nonTerminal = 0
  exhausted = false

  constructor(
    readonly limit: number,
    private readonly rule: ClaimOrder.ClaimRule
  ) {}

  get done(): boolean {
    return this.selected.length >= this.limit
  }

  addPage(records: ReadonlyArray<OutboxRecord.OutboxRecord>, scanned: number, last: boolean): this {
    this.pages++
    this.scanned += scanned
    if (last) this.exhausted = true
    for (const record of records) {
      if (this.done) break
      if (!ClaimOrder.isNonTerminal(record)) continue
      this.nonTerminal++
      const key = Option.getOrUndefined(record.orderingKey)
      if (key !== undefined && this.heads.has(key)) continue
      if (ClaimOrder.isClaimable(record, this.rule)) this.selected.push(record)
      else if (key !== undefined) this.heads.set(key, record)
    }
    return this
  }

  select(): Array<OutboxRecord.OutboxRecord> {
    return ClaimOrder.selectFrom([...this.selected, ...this.heads.values()], this.limit, this.rule)
  }
}

type ClaimOutcome =
  | { readonly _tag: "Claimed"; readonly record: OutboxRecord.OutboxRecord }
  | { readonly _tag: "Lost" }
  | { readonly _tag: "Conflict"; readonly cause: DynamoDbError }
  | { readonly _tag: "FenceLost" }
  | { readonly _tag: "Transient"; readonly cause: DynamoDbError }

const claimOutcome = (error: DynamoDbError): ClaimOutcome => {
  if (error.kind === "TransactionCanceled") {
    const reasons = error.cancellationReasons ?? []
    if (reasons[0] === "ConditionalCheckFailed") return { _tag: "FenceLost" }
    if (reasons.includes("TransactionConflict")) return { _tag: "Conflict", cause: error }
    if (reasons[1] === "ConditionalCheckFailed") return { _tag: "Lost" }
    return { _tag: "Transient", cause: error }
  }
  if (error.kind === "TransactionConflict") return { _tag: "Conflict", cause: error }
  return { _tag: "Transient", cause: error }
}

interface Resolved {
  readonly tableName: string
  readonly staleClaimAfterMillis: number
  readonly retentionSeconds: number
  readonly pageSize: number | undefined
  readonly indexLagRetries: number
  readonly indexLagDelay: Duration.Duration
  readonly onScanFold: ((report: ScanFoldReport) => void) | undefined
  readonly localClaimIndex: boolean
  readonly onLocalWalk: ((report: LocalWalkReport) => void) | undefined
}

const resolve = (options: DynamoDbOutboxStoreOptions): Resolved => ({
  tableName: options.tableName ?? DefaultTableName,
  staleClaimAfterMillis: Duration.toMillis(Duration.decode(options.staleClaimAfter ?? "30 seconds")),
  retentionSeconds: Math.ceil(Duration.toSeconds(Duration.decode(options.retention ?? "1 hour"))),
  pageSize: options.pageSize,
  indexLagRetries: options.indexLagRetries ?? 3,
  indexLagDelay: Duration.decode(options.indexLagDelay ?? "100 millis"),
  onScanFold: options.onScanFold,
  localClaimIndex: options.localClaimIndex ?? false,
  onLocalWalk: options.onLocalWalk
})

const decodeItems = (
  items: ReadonlyArray<RecordItem.Item>
): Either.Either<Array<OutboxRecord.OutboxRecord>, CorruptRecord> => {
  const records: Array<OutboxRecord.OutboxRecord> = []
  for (const item of items) {
    const decoded = RecordItem.decode(item)
    if (Either.isLeft(decoded)) return Either.left(decoded.left)
    records.push(decoded.right)
  }
  return Either.right(records)
}

/**
 * Fails with `InvalidRecord` when an id of the batch is already used by a stored record of another
 * identity (checked through `RecordIdIndex` before anything is written). Ids the store core generated
 * are fresh by construction and cost no lookup, so producers that leave ids to the store pay one
 * request per record less.
 */
const checkIdsUnused = (
  dynamo: DynamoDbService,
  tableName: string,
  records: ReadonlyArray<OutboxRecord.PreparedRecord>,
  batchIndex: (position: number) => number = (position) => position
): Effect.Effect<void, InvalidRecord | StoreUnavailable> =>
  Effect.forEach(
    records,
    (record, position) =>
      record.generatedId === true
        ? Effect.void
        : dynamo
            .query({
              TableName: tableName,
              IndexName: OutboxTable.RecordIdIndex,
              KeyConditionExpression: "record_id = :id",
              ExpressionAttributeValues: { ":id": RecordItem.str(record.id) }
            })
            .pipe(
              Effect.mapError(unavailable("persist", record.partitionKey)),
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
 * Retries a single-item write to a fence item that DynamoDB rejected with `TransactionConflict`: the item
 * was part of a claim or expire transaction in flight at that instant (each such transaction checks the
 * fence), which the SDK does not retry. Up to 5 retries, jittered exponential back-off from 10 ms.
 */
const retryFenceConflicts = <A, R>(effect: Effect.Effect<A, DynamoDbError, R>): Effect.Effect<A, DynamoDbError, R> =>
  Effect.retry(effect, {
    schedule: Schedule.exponential(Duration.millis(10)).pipe(Schedule.jittered, Schedule.intersect(Schedule.recurs(5))),
    while: (error) => error.kind === "TransactionConflict"
  })

/**
 * Allocates seqs: one `ADD seq_counter :n` per partition (in first-appearance order). Returns the seq of
 * every record, in batch order.
 */
const allocateSeqs = (
  dynamo: DynamoDbService,
  tableName: string,
  records: ReadonlyArray<OutboxRecord.PreparedRecord>
): Effect.Effect<Array<number>, StoreUnavailable> =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const counts = new Map<string, number>()
    for (const record of records) counts.set(record.partitionKey, (counts.get(record.partitionKey) ?? 0) + 1)
    const next = new Map<string, number>()
    for (const [partitionKey, n] of counts) {
      const output = yield* retryFenceConflicts(
        dynamo.updateItem({
          TableName: tableName,
          Key: RecordItem.fenceKey(partitionKey),
          UpdateExpression: "ADD seq_counter :n, listing_epoch :one SET partitions_shard = :shard, listed_at = :now",
          ExpressionAttributeValues: {
            ":n": RecordItem.num(n),
            ":one": RecordItem.num(1),
            ":now": RecordItem.num(now),
            ":shard": RecordItem.num(OutboxTable.partitionShard(partitionKey))
          },
          ReturnValues: "UPDATED_NEW"
        })
      ).pipe(Effect.mapError(unavailable("persist", partitionKey)))
      const end = Number(output.Attributes?.["seq_counter"]?.N)
      if (!Number.isSafeInteger(end) || end < n) {
        return yield* new StoreUnavailable({
          operation: "persist",
          partitionKey,
          cause: new Error(`seq allocation returned ${String(output.Attributes?.["seq_counter"]?.N)}`)
        })
      }
      next.set(partitionKey, end - n + 1)
    }
    return records.map((record) => {
      const seq = next.get(record.partitionKey) ?? 0
      next.set(record.partitionKey, seq + 1)
      return seq
    })
  })

/**
 * The fence update that lists a partition for `listPartitions` after records were written: sets the
 * shard and `listed_at`, and bumps `listing_epoch` so that a claim which read the fence earlier cannot
 * de-list the partition (its conditional removal fails).
 */
const listingUpdate = (tableName: string, partitionKey: string, now: number) => ({
  TableName: tableName,
  Key: RecordItem.fenceKey(partitionKey),
  UpdateExpression: "SET partitions_shard = :shard, listed_at = :now ADD listing_epoch :one",
  ExpressionAttributeValues: {
    ":shard": RecordItem.num(OutboxTable.partitionShard(partitionKey)),
    ":now": RecordItem.num(now),
    ":one": RecordItem.num(1)
  }
})

/**
 * How long after its last persist a partition may be de-listed on the word of `ClaimIndex` alone (an
 * eventually consistent index may not show records written just before). The consistent scan path
 * de-lists without waiting.
 *
 * @since 0.1.0
 */
export const ListingGrace = Duration.minutes(1)

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
    const dynamo = yield* DynamoDb
    const tableName = options.tableName ?? DefaultTableName
    const prepared = yield* OutboxStore.prepare(records, RecordItem.itemSizeProblem)
    const seen = new Set<string>()
    for (let index = 0; index < prepared.length; index++) {
      const record = prepared[index]
      if (record === undefined) continue
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
    yield* checkIdsUnused(dynamo, tableName, prepared)
    const seqs = yield* allocateSeqs(dynamo, tableName, prepared)
    const now = yield* Clock.currentTimeMillis
    const puts = prepared.map((record, index): TransactWriteItem => ({
      Put: {
        TableName: tableName,
        Item: RecordItem.encodeNew(record, seqs[index] ?? 0),
        ConditionExpression: "attribute_not_exists(SK)"
      }
    }))
    const partitions = Array.from(new Set(prepared.map((record) => record.partitionKey)))
    return [
      ...puts,
      ...partitions.map((partitionKey): TransactWriteItem => ({ Update: listingUpdate(tableName, partitionKey, now) }))
    ]
  }).pipe(Effect.withSpan("DynamoDbOutboxStore.transactItems"))

/**
 * Builds the store over an existing, checked table (see {@link make} for the checks).
 */
const makeBackend = (dynamo: DynamoDbService, options: Resolved, bypassLogged: Ref.Ref<boolean>) => {
  const { tableName } = options
  const cache = new KeyCache()
  // Partitions whose last scan saw ordering keys go straight to the scan path (the fast path would read
  // a ClaimIndex page only to abandon it); a scan that sees no key sends the partition back to the fast path.
  const keyedPartitions = new KeyedHint()
  const remember = (
    record: Pick<OutboxRecord.PreparedRecord, "id" | "partitionKey" | "envelopeId" | "bindingId">
  ): void => cache.set(record.id, record.partitionKey, RecordItem.recordSortKey(record))

  // ---------------------------------------------------------------- persist

  const putOne = (
    record: OutboxRecord.PreparedRecord,
    seq: number,
    replaceTerminal: boolean
  ): Effect.Effect<
    { readonly stored: true } | { readonly stored: false; readonly existingId: string },
    StoreUnavailable
  > => {
    const item = RecordItem.encodeNew(record, seq)
    const put = (condition: string, values?: Record<string, AttributeValue>) =>
      dynamo.putItem({
        TableName: tableName,
        Item: item,
        ConditionExpression: condition,
        ...(values !== undefined
          ? { ExpressionAttributeValues: values, ExpressionAttributeNames: { "#status": "status" } }
          : {})
      })
    return put("attribute_not_exists(SK)").pipe(
      Effect.as({ stored: true } as const),
      Effect.catchIf(isConditionFailure, () =>
        Effect.gen(function* () {
          const existing = yield* dynamo
            .getItem({ TableName: tableName, Key: RecordItem.recordKey(record), ConsistentRead: true })
            .pipe(Effect.mapError(unavailable("persist", record.partitionKey)))
          const holder = existing.Item
          const holderId = holder?.["record_id"]?.S
          const holderStatus = holder?.["status"]?.S
          if (holder === undefined || holderId === undefined) {
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
          }).pipe(Effect.as({ stored: true } as const), Effect.mapError(unavailable("persist", record.partitionKey)))
        })
      ),
      Effect.mapError((error) =>
        error._tag === "StoreUnavailable" ? error : unavailable("persist", record.partitionKey)(error)
      )
    )
  }

  const persist: OutboxStore.Backend["persist"] = (records, { replaceTerminal }) =>
    Effect.gen(function* () {
      // in-batch duplicates: the first occurrence is written, the rest skipped
      const firstIndex = new Map<string, number>()
      const unique: Array<OutboxRecord.PreparedRecord> = []
      for (let index = 0; index < records.length; index++) {
        const record = records[index]
        if (record === undefined) continue
        const identity = OutboxRecord.identityKey(record)
        if (!firstIndex.has(identity)) {
          firstIndex.set(identity, index)
          unique.push(record)
        }
      }
      // every id of the batch (skipped duplicates included) must not belong to another stored identity
      const checked = new Set<string>()
      const toCheck: Array<OutboxRecord.PreparedRecord> = []
      const positions: Array<number> = []
      records.forEach((record, index) => {
        const pair = `${record.id}\u0000${OutboxRecord.identityKey(record)}`
        if (checked.has(pair)) return
        checked.add(pair)
        toCheck.push(record)
        positions.push(index)
      })
      yield* checkIdsUnused(dynamo, tableName, toCheck, (position) => positions[position] ?? position)
      const seqs = yield* allocateSeqs(dynamo, tableName, unique)
      const outcomes = yield* Effect.forEach(
        unique,
        (record, index) => putOne(record, seqs[index] ?? 0, replaceTerminal),
        { concurrency: 8 }
      )
      const holderOf = new Map<string, string>()
      unique.forEach((record, index) => {
        const outcome = outcomes[index]
        const holder = outcome === undefined || outcome.stored ? record.id : outcome.existingId
        holderOf.set(OutboxRecord.identityKey(record), holder)
        if (outcome?.stored === true) remember(record)
      })
      const storedPartitions = new Set<string>()
      unique.forEach((record, index) => {
        if (outcomes[index]?.stored === true) storedPartitions.add(record.partitionKey)
      })
      const now = yield* Clock.currentTimeMillis
      yield* Effect.forEach(
        storedPartitions,
        (partitionKey) =>
          retryFenceConflicts(dynamo.updateItem(listingUpdate(tableName, partitionKey, now))).pipe(
            Effect.mapError(unavailable("persist", partitionKey))
          ),
        { discard: true }
      )
      const persisted: Array<string> = []
      const skipped: Array<string> = []
      const existingIds: Array<string> = []
      let u = 0
      for (let index = 0; index < records.length; index++) {
        const record = records[index]
        if (record === undefined) continue
        const identity = OutboxRecord.identityKey(record)
        if (firstIndex.get(identity) === index) {
          const outcome = outcomes[u++]
          if (outcome !== undefined && outcome.stored) {
            persisted.push(record.id)
            continue
          }
        }
        skipped.push(record.id)
        existingIds.push(holderOf.get(identity) ?? record.id)
      }
      return { persisted, skipped, existingIds }
    })

  // ---------------------------------------------------------------- fence

  const readFence = (partitionKey: string, operation: string) =>
    dynamo.getItem({ TableName: tableName, Key: RecordItem.fenceKey(partitionKey), ConsistentRead: true }).pipe(
      Effect.mapError(unavailable(operation, partitionKey)),
      Effect.flatMap((output) =>
        Either.match(RecordItem.decodeFence(output.Item), {
          onLeft: (reason) =>
            Effect.fail(
              new StoreUnavailable({
                operation,
                partitionKey,
                cause: new Error(`fence item of partition ${partitionKey} is malformed: ${reason}`)
              })
            ),
          onRight: Effect.succeed
        })
      )
    )

  // A failed fence condition proves the mark is above the token: the error is StaleFencingToken whether
  // or not the mark itself can be read for the message (a read failure must not turn it into
  // StoreUnavailable, which would tell the caller to retry a claim it has lost for good).
  const staleToken = (
    partitionKey: string,
    token: LeaseToken.LeaseTokenLike,
    operation: string
  ): Effect.Effect<never, StaleFencingToken> =>
    readFence(partitionKey, operation).pipe(
      Effect.map((fence) => OutboxStore.belowHighWaterMark(operation, partitionKey, token, fence.highWaterMark)),
      Effect.orElseSucceed(
        () =>
          new StaleFencingToken({
            operation,
            partitionKey,
            owner: token.owner,
            version: token.version,
            reason: `a newer owner raised the partition's fence above version ${token.version} (the high-water mark could not be read)`
          })
      ),
      Effect.flatMap(Effect.fail)
    )

  /** Consistent read of the fence; below the mark → stale; raise it (conditional) when the token is above. */
  const raiseFence = (
    partitionKey: string,
    token: LeaseToken.LeaseTokenLike,
    operation: string
  ): Effect.Effect<RecordItem.Fence, StaleFencingToken | StoreUnavailable> =>
    Effect.gen(function* () {
      const fence = yield* readFence(partitionKey, operation)
      if (token.version < fence.highWaterMark) {
        return yield* OutboxStore.belowHighWaterMark(operation, partitionKey, token, fence.highWaterMark)
      }
      if (token.version === fence.highWaterMark) return fence
      yield* dynamo
        .updateItem({
          TableName: tableName,
          Key: RecordItem.fenceKey(partitionKey),
          UpdateExpression: "SET max_claim_version = :v",
          ConditionExpression: "attribute_not_exists(max_claim_version) OR max_claim_version <= :v",
          ExpressionAttributeValues: { ":v": RecordItem.num(token.version) }
        })
        .pipe(
          Effect.catchIf(isConditionFailure, () => staleToken(partitionKey, token, operation)),
          Effect.mapError((error) =>
            error._tag === "DynamoDbError" ? unavailable(operation, partitionKey)(error) : error
          )
        )
      return fence
    })

  /**
   * Removes a partition found empty from `listPartitions`, unless a persist listed it again since the
   * claim read the fence (`listing_epoch` changed). Best effort: a failure leaves it listed.
   */
  const delist = (partitionKey: string, fence: RecordItem.Fence): Effect.Effect<void> =>
    dynamo
      .updateItem({
        TableName: tableName,
        Key: RecordItem.fenceKey(partitionKey),
        UpdateExpression: "REMOVE partitions_shard",
        ...(fence.listingEpoch === undefined
          ? { ConditionExpression: "attribute_not_exists(listing_epoch)" }
          : {
              ConditionExpression: "listing_epoch = :epoch",
              ExpressionAttributeValues: { ":epoch": RecordItem.num(fence.listingEpoch) }
            })
      })
      .pipe(Effect.ignore)

  // ---------------------------------------------------------------- claim

  const claimableCondition = (): string =>
    "#status = :pending OR (#status = :claimed AND (claim_version < :v OR attribute_not_exists(claimed_at) OR claimed_at < :staleBefore))"

  const claimValues = (
    token: LeaseToken.LeaseTokenLike,
    rule: ClaimOrder.ClaimRule
  ): Record<string, AttributeValue> => ({
    ":pending": RecordItem.str("pending"),
    ":claimed": RecordItem.str("claimed"),
    ":v": RecordItem.num(token.version),
    ":staleBefore": RecordItem.num(rule.nowMillis - (rule.staleClaimAfterMillis ?? rule.nowMillis + 1))
  })

  const claimOne = (
    record: OutboxRecord.OutboxRecord,
    token: LeaseToken.LeaseTokenLike,
    rule: ClaimOrder.ClaimRule
  ): Effect.Effect<ClaimOutcome> => {
    const values = {
      ...claimValues(token, rule),
      ":owner": RecordItem.str(token.owner),
      ":now": RecordItem.num(rule.nowMillis),
      ":one": RecordItem.num(1),
      ":rc": RecordItem.num(record.replayCount),
      ":id": RecordItem.str(record.id)
    }
    return dynamo
      .transactWriteItems({
        TransactItems: [
          {
            ConditionCheck: {
              TableName: tableName,
              Key: RecordItem.fenceKey(record.partitionKey),
              ConditionExpression: "max_claim_version <= :v",
              ExpressionAttributeValues: { ":v": RecordItem.num(token.version) }
            }
          },
          {
            Update: {
              TableName: tableName,
              Key: RecordItem.recordKey(record),
              UpdateExpression:
                "SET #status = :claimed, claimed_by = :owner, claim_version = :v, claimed_at = :now, " +
                "first_attempted_at = if_not_exists(first_attempted_at, :now) ADD replay_count :one",
              ConditionExpression: `record_id = :id AND replay_count = :rc AND (${claimableCondition()})`,
              ExpressionAttributeNames: { "#status": "status" },
              ExpressionAttributeValues: values
            }
          }
        ]
      })
      .pipe(
        Effect.map((): ClaimOutcome => ({
          _tag: "Claimed",
          record: OutboxRecord.update(record, {
            status: "claimed",
            claimedBy: Option.some(token.owner),
            claimVersion: token.version,
            claimedAt: Option.some(DateTime.unsafeMake(rule.nowMillis)),
            firstAttemptedAt: Option.orElse(record.firstAttemptedAt, () =>
              Option.some(DateTime.unsafeMake(rule.nowMillis))
            ),
            replayCount: record.replayCount + 1
          })
        })),
        Effect.catchAll((error) => Effect.succeed(claimOutcome(error)))
      )
  }

  /** Claims `candidates` in order until `limit`, applying the cancellation rules. */
  const claimInOrder = (
    partitionKey: string,
    token: LeaseToken.LeaseTokenLike,
    rule: ClaimOrder.ClaimRule,
    limit: number,
    state: ClaimState,
    candidates: ReadonlyArray<OutboxRecord.OutboxRecord>
  ): Effect.Effect<void> =>
    Effect.gen(function* () {
      for (const record of candidates) {
        if (state.claimed.length >= limit || state.stop !== undefined) return
        const key = Option.getOrUndefined(record.orderingKey)
        if (key !== undefined && state.skippedKeys.has(key)) continue
        const outcome = yield* claimOne(record, token, rule)
        switch (outcome._tag) {
          case "Claimed":
            state.claimed.push(outcome.record)
            remember(outcome.record)
            break
          case "Lost":
            state.lost++
            if (key !== undefined) state.skippedKeys.add(key)
            break
          case "Conflict":
            state.conflicts++
            yield* Metric.increment(OutboxMetrics.tagged(OutboxMetrics.OutboxClaimConflicts, partitionKey))
            if (key !== undefined) state.skippedKeys.add(key)
            break
          case "FenceLost":
            state.stop = { _tag: "FenceLost" }
            return
          case "Transient":
            state.stop = { _tag: "Transient", cause: outcome.cause }
            return
        }
      }
    })

  const queryPage = (
    operation: string,
    partitionKey: string | undefined,
    input: Omit<Parameters<DynamoDbService["query"]>[0], "TableName" | "ExclusiveStartKey">,
    cursor: RecordItem.Item | undefined
  ) =>
    dynamo
      .query({
        TableName: tableName,
        ...input,
        ...(cursor !== undefined ? { ExclusiveStartKey: cursor } : {})
      })
      .pipe(Effect.mapError(unavailable(operation, partitionKey)))

  /**
   * Fast path over ClaimIndex: reads pages until it holds enough claimable candidates for the rest of the
   * batch (or the index is exhausted), and only then claims them, so an ordering key showing up on any of
   * those pages sends the claim to the scan path with nothing claimed. Reading continues only when claims
   * were lost to other claimers; a key seen then ends the batch short (legal). Returns `"scan"` when the
   * partition must take the scan path.
   */
  const claimFast = (
    partitionKey: string,
    token: LeaseToken.LeaseTokenLike,
    rule: ClaimOrder.ClaimRule,
    limit: number,
    state: ClaimState
  ): Effect.Effect<"done" | "scan", StoreUnavailable | CorruptRecord> =>
    Effect.gen(function* () {
      let cursor: RecordItem.Item | undefined = undefined
      let exhausted = false
      while (!exhausted) {
        const remaining = limit - state.claimed.length
        const candidates: Array<OutboxRecord.OutboxRecord> = []
        while (candidates.length < remaining && !exhausted) {
          const page: Either.Either<
            { readonly output: QueryCommandOutput; readonly records: Array<OutboxRecord.OutboxRecord> },
            StoreUnavailable | CorruptRecord
          > = yield* Effect.either(
            queryPage(
              "claim",
              partitionKey,
              {
                IndexName: OutboxTable.ClaimIndex,
                KeyConditionExpression: "PK = :pk",
                FilterExpression: claimableCondition(),
                ExpressionAttributeNames: { "#status": "status" },
                ExpressionAttributeValues: { ":pk": RecordItem.str(partitionKey), ...claimValues(token, rule) },
                ScanIndexForward: true,
                Limit: options.pageSize ?? Math.max(remaining - candidates.length, 1)
              },
              cursor
            ).pipe(
              Effect.flatMap((output) =>
                Either.match(decodeItems(output.Items ?? []), {
                  onLeft: Effect.fail,
                  onRight: (records) => Effect.succeed({ output, records })
                })
              )
            )
          )
          if (Either.isLeft(page)) {
            // records already claimed belong to the caller: stop with a short batch (R-CLAIM-8)
            if (state.claimed.length === 0) return yield* page.left
            state.stop = { _tag: "Transient", cause: page.left }
            return "done"
          }
          const output: QueryCommandOutput = page.right.output
          state.indexScanned += output.ScannedCount ?? output.Items?.length ?? 0
          if (page.right.records.some((record) => Option.isSome(record.orderingKey))) {
            return state.claimed.length === 0 ? "scan" : "done"
          }
          candidates.push(...page.right.records)
          cursor = output.LastEvaluatedKey
          exhausted = cursor === undefined
        }
        yield* claimInOrder(partitionKey, token, rule, limit, state, candidates)
        if (state.claimed.length >= limit || state.stop !== undefined) return "done"
      }
      return "done"
    })

  /** The scan path: exhaustive consistent read, folded, then selected with ClaimOrder. */
  const claimScan = (
    partitionKey: string,
    token: LeaseToken.LeaseTokenLike,
    rule: ClaimOrder.ClaimRule,
    limit: number,
    state: ClaimState
  ): Effect.Effect<void, StoreUnavailable | CorruptRecord> =>
    Effect.gen(function* () {
      const pages = Stream.paginateChunkEffect(noCursor, ({ cursor }) =>
        queryPage(
          "claim",
          partitionKey,
          {
            KeyConditionExpression: "PK = :pk AND begins_with(SK, :prefix)",
            FilterExpression: "#status IN (:pending, :claimed)",
            ExpressionAttributeNames: { "#status": "status" },
            ExpressionAttributeValues: {
              ":pk": RecordItem.str(partitionKey),
              ":prefix": RecordItem.str(RecordItem.RecordSortKeyPrefix),
              ":pending": RecordItem.str("pending"),
              ":claimed": RecordItem.str("claimed")
            },
            ConsistentRead: true,
            ...(options.pageSize !== undefined ? { Limit: options.pageSize } : {})
          },
          cursor
        ).pipe(
          Effect.flatMap((output) =>
            Either.match(decodeItems(output.Items ?? []), {
              onLeft: Effect.fail,
              onRight: (records) =>
                Effect.succeed([
                  Chunk.of({ records, scanned: output.ScannedCount ?? records.length }),
                  Option.map(Option.fromNullable(output.LastEvaluatedKey), (next): Cursor => ({ cursor: next }))
                ] as const)
            })
          )
        )
      )
      const fold = yield* Stream.runFold(pages, new ScanFold(limit, rule), (acc, page) =>
        acc.addPage(page.records, page.scanned)
      )
      options.onScanFold?.({
        partitionKey,
        pages: fold.pages,
        scanned: fold.scanned,
        maxCandidates: fold.maxCandidates,
        retain: fold.retain,
        blockingHeads: fold.heads.size
      })
      if (fold.pages > DeepBacklogPageWarn) {
        yield* Effect.logWarning(
          `claim on partition ${partitionKey} read ${fold.pages} pages of its backlog on the scan path (ordering keys force a consistent scan; deep keyed backlogs cost O(backlog) per claim)`
        ).pipe(Effect.annotateLogs({ partition: partitionKey, pages: fold.pages }))
        yield* Metric.incrementBy(
          OutboxMetrics.tagged(OutboxMetrics.DynamoDBOutboxClaimScanPages, partitionKey),
          fold.pages
        )
      }
      keyedPartitions.set(partitionKey, fold.sawKey)
      state.scanNonTerminal = fold.nonTerminal
      yield* claimInOrder(partitionKey, token, rule, limit, state, fold.select(limit))
    })

  /**
   * The local path: walks `ClaimLocalIndex` consistently in age order, stops once `limit` records are
   * selected (or the partition ends), then claims the selection in order.
   */
  const claimLocal = (
    partitionKey: string,
    token: LeaseToken.LeaseTokenLike,
    rule: ClaimOrder.ClaimRule,
    limit: number,
    state: ClaimState
  ): Effect.Effect<void, StoreUnavailable | CorruptRecord> =>
    Effect.gen(function* () {
      const walk = new LocalWalk(limit, rule)
      const pages = Stream.paginateChunkEffect(noCursor, ({ cursor }) =>
        Effect.suspend(() =>
          queryPage(
            "claim",
            partitionKey,
            {
              IndexName: OutboxTable.ClaimLocalIndex,
              KeyConditionExpression: "PK = :pk",
              ExpressionAttributeValues: { ":pk": RecordItem.str(partitionKey) },
              ConsistentRead: true,
              ScanIndexForward: true,
              Limit: options.pageSize ?? Math.max(limit - walk.selected.length, LocalMinPage)
            },
            cursor
          )
        ).pipe(
          Effect.flatMap((output) =>
            Either.match(decodeItems(output.Items ?? []), {
              onLeft: Effect.fail,
              onRight: (records) =>
                Effect.succeed([
                  Chunk.of({
                    records,
                    scanned: output.ScannedCount ?? records.length,
                    last: output.LastEvaluatedKey === undefined
                  }),
                  Option.map(Option.fromNullable(output.LastEvaluatedKey), (next): Cursor => ({ cursor: next }))
                ] as const)
            })
          )
        )
      )
      yield* Stream.runFoldWhile(
        pages,
        walk,
        (acc) => !acc.done,
        (acc, page) => acc.addPage(page.records, page.scanned, page.last)
      )
      options.onLocalWalk?.({
        partitionKey,
        pages: walk.pages,
        scanned: walk.scanned,
        selected: walk.selected.length,
        blockingHeads: walk.heads.size,
        exhausted: walk.exhausted
      })
      state.scanNonTerminal = walk.nonTerminal
      yield* claimInOrder(partitionKey, token, rule, limit, state, walk.select())
    })

  const claim: OutboxStore.Backend["claim"] = (partitionKey, token, limit) =>
    Effect.gen(function* () {
      const fence = yield* raiseFence(partitionKey, token, "claim")
      if (limit <= 0) return OutboxStore.ClaimBatch([])
      const rule: ClaimOrder.ClaimRule = {
        version: token.version,
        nowMillis: yield* Clock.currentTimeMillis,
        staleClaimAfterMillis: options.staleClaimAfterMillis
      }
      const state: ClaimState = {
        claimed: [],
        indexScanned: 0,
        scanNonTerminal: undefined,
        lost: 0,
        conflicts: 0,
        skippedKeys: new Set(),
        stop: undefined
      }
      const path = options.localClaimIndex
        ? yield* Effect.as(claimLocal(partitionKey, token, rule, limit, state), "local" as const)
        : keyedPartitions.has(partitionKey)
          ? "scan"
          : yield* claimFast(partitionKey, token, rule, limit, state)
      if (path === "scan") {
        const first = yield* Ref.getAndSet(bypassLogged, true)
        if (!first) {
          yield* Effect.logInfo(
            `partition ${partitionKey} holds ordering keys: claims on keyed partitions bypass ClaimIndex and scan the partition consistently (logged once per store)`
          ).pipe(Effect.annotateLogs({ partition: partitionKey }))
        }
        yield* claimScan(partitionKey, token, rule, limit, state)
      }
      const stop = state.stop
      if (stop?._tag === "FenceLost") return yield* staleToken(partitionKey, token, "claim")
      if (stop?._tag === "Transient") {
        if (state.claimed.length === 0) {
          return yield* new StoreUnavailable({ operation: "claim", partitionKey, cause: stop.cause })
        }
        yield* Metric.increment(OutboxMetrics.tagged(OutboxMetrics.DynamoDBOutboxClaimTruncated, partitionKey))
        return OutboxStore.ClaimBatch(
          state.claimed,
          Option.some(
            new ClaimTruncated({ partitionKey, claimed: state.claimed.length, requested: limit, cause: stop.cause })
          )
        )
      }
      if (state.claimed.length === 0 && state.conflicts > 0 && state.lost === 0) {
        return yield* new TransactionConflict({ partitionKey, operation: "claim" })
      }
      if (state.claimed.length === 0 && fence.listed) {
        // the partition holds no non-terminal record: stop listing it (R-READ-3 lists partitions with work)
        const emptyByScan = state.scanNonTerminal === 0
        const emptyByIndex =
          state.scanNonTerminal === undefined &&
          state.indexScanned === 0 &&
          (fence.listedAt === undefined || fence.listedAt < rule.nowMillis - Duration.toMillis(ListingGrace))
        if (emptyByScan || emptyByIndex) yield* delist(partitionKey, fence)
      }
      return OutboxStore.ClaimBatch(state.claimed)
    })

  // ---------------------------------------------------------------- complete / release

  const lookupKey = (
    id: string,
    operation: string
  ): Effect.Effect<{ readonly partitionKey: string; readonly sortKey: string } | undefined, StoreUnavailable> => {
    const cached = cache.get(id)
    if (cached !== undefined) return Effect.succeed(cached)
    const once = dynamo
      .query({
        TableName: tableName,
        IndexName: OutboxTable.RecordIdIndex,
        KeyConditionExpression: "record_id = :id",
        ExpressionAttributeValues: { ":id": RecordItem.str(id) }
      })
      .pipe(
        Effect.mapError(unavailable(operation)),
        Effect.map((output) => {
          const item = output.Items?.[0]
          const partitionKey = item?.["PK"]?.S
          const sortKey = item?.["SK"]?.S
          return partitionKey !== undefined && sortKey !== undefined ? { partitionKey, sortKey } : undefined
        })
      )
    const attempt = (
      left: number
    ): Effect.Effect<{ readonly partitionKey: string; readonly sortKey: string } | undefined, StoreUnavailable> =>
      Effect.flatMap(once, (found) =>
        found !== undefined || left <= 0
          ? Effect.succeed(found)
          : Effect.zipRight(Effect.sleep(options.indexLagDelay), attempt(left - 1))
      )
    return attempt(options.indexLagRetries)
  }

  const finish = (
    operation: "complete" | "release",
    ids: ReadonlyArray<string>,
    token: LeaseToken.LeaseTokenLike
  ): Effect.Effect<void, StaleFencingToken | StoreUnavailable> =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const mismatched: Array<string> = []
      const distinct = Array.from(new Set(ids))
      for (const id of distinct) {
        const key = yield* lookupKey(id, operation)
        if (key === undefined) {
          mismatched.push(id)
          continue
        }
        const update =
          operation === "complete"
            ? {
                UpdateExpression:
                  "SET #status = :completed, completed_at = :now, #ttl = :ttl REMOVE claim_sort, has_expiry",
                ExpressionAttributeNames: { "#status": "status", "#ttl": OutboxTable.TtlAttribute },
                values: {
                  ":completed": RecordItem.str("completed"),
                  ":now": RecordItem.num(now),
                  ":ttl": RecordItem.num(Math.floor(now / 1000) + options.retentionSeconds)
                }
              }
            : {
                UpdateExpression: "SET #status = :pending REMOVE claimed_by, claimed_at",
                ExpressionAttributeNames: { "#status": "status" },
                values: { ":pending": RecordItem.str("pending") }
              }
        const matched = yield* dynamo
          .updateItem({
            TableName: tableName,
            Key: { PK: RecordItem.str(key.partitionKey), SK: RecordItem.str(key.sortKey) },
            UpdateExpression: update.UpdateExpression,
            ConditionExpression:
              "record_id = :id AND #status = :claimed AND claimed_by = :owner AND claim_version = :v",
            ExpressionAttributeNames: update.ExpressionAttributeNames,
            ExpressionAttributeValues: {
              ...update.values,
              ":id": RecordItem.str(id),
              ":claimed": RecordItem.str("claimed"),
              ":owner": RecordItem.str(token.owner),
              ":v": RecordItem.num(token.version)
            }
          })
          .pipe(
            Effect.as(true),
            Effect.catchIf(isConditionFailure, () => Effect.succeed(false)),
            Effect.mapError(unavailable(operation, key.partitionKey))
          )
        if (!matched) mismatched.push(id)
      }
      if (mismatched.length > 0) return yield* OutboxStore.notClaimedBy(operation, token, mismatched)
    })

  // ---------------------------------------------------------------- expire

  const expire: OutboxStore.Backend["expire"] = (before, partitionKey, token) =>
    Effect.gen(function* () {
      yield* raiseFence(partitionKey, token, "expire")
      const now = yield* Clock.currentTimeMillis
      const beforeMillis = DateTime.toEpochMillis(before)
      let expired = 0
      let cursor: RecordItem.Item | undefined = undefined
      const cut = (cause: unknown) =>
        expired > 0
          ? Effect.fail(new ExpireIncomplete({ partitionKey, expired, cause }))
          : Effect.fail(unavailable("expire", partitionKey)(cause))
      for (;;) {
        const page: Either.Either<QueryCommandOutput, StoreUnavailable> = yield* Effect.either(
          queryPage(
            "expire",
            partitionKey,
            {
              IndexName: OutboxTable.ExpiryIndex,
              KeyConditionExpression: "has_expiry = :pk AND expires_at < :before",
              ExpressionAttributeValues: {
                ":pk": RecordItem.str(partitionKey),
                ":before": RecordItem.num(beforeMillis)
              }
            },
            cursor
          )
        )
        if (Either.isLeft(page)) return yield* cut(page.left.cause)
        for (const key of page.right.Items ?? []) {
          const pk = key["PK"]
          const sk = key["SK"]
          if (pk === undefined || sk === undefined) continue
          const result = yield* Effect.either(
            dynamo.transactWriteItems({
              TransactItems: [
                {
                  ConditionCheck: {
                    TableName: tableName,
                    Key: RecordItem.fenceKey(partitionKey),
                    ConditionExpression: "max_claim_version <= :v",
                    ExpressionAttributeValues: { ":v": RecordItem.num(token.version) }
                  }
                },
                {
                  Update: {
                    TableName: tableName,
                    Key: { PK: pk, SK: sk },
                    UpdateExpression: "SET #status = :expired, #ttl = :ttl REMOVE claim_sort, has_expiry",
                    ConditionExpression: "#status = :pending AND expires_at < :before",
                    ExpressionAttributeNames: { "#status": "status", "#ttl": OutboxTable.TtlAttribute },
                    ExpressionAttributeValues: {
                      ":expired": RecordItem.str("expired"),
                      ":pending": RecordItem.str("pending"),
                      ":before": RecordItem.num(beforeMillis),
                      ":ttl": RecordItem.num(Math.floor(now / 1000) + options.retentionSeconds)
                    }
                  }
                }
              ]
            })
          )
          if (Either.isRight(result)) {
            expired++
            continue
          }
          const outcome = claimOutcome(result.left)
          if (outcome._tag === "Lost") continue
          if (outcome._tag === "FenceLost") {
            const stale = yield* Effect.flip(staleToken(partitionKey, token, "expire"))
            if (expired === 0) return yield* stale
            return yield* new ExpireIncomplete({ partitionKey, expired, cause: stale })
          }
          return yield* cut(result.left)
        }
        if (page.right.LastEvaluatedKey === undefined) return expired
        cursor = page.right.LastEvaluatedKey
      }
    })

  // ---------------------------------------------------------------- reads

  // With the local claim index, depth counts and previews read it consistently (exact counts);
  // otherwise they read ClaimIndex, which DynamoDB updates asynchronously.
  const depthIndex: { readonly IndexName: string; readonly ConsistentRead?: boolean } = options.localClaimIndex
    ? { IndexName: OutboxTable.ClaimLocalIndex, ConsistentRead: true }
    : { IndexName: OutboxTable.ClaimIndex }

  const queryPending: OutboxStore.Backend["queryPending"] = (partitionKey, limit) =>
    Effect.gen(function* () {
      const found: Array<OutboxRecord.OutboxRecord> = []
      let cursor: RecordItem.Item | undefined = undefined
      for (;;) {
        const output: QueryCommandOutput = yield* queryPage(
          "queryPending",
          partitionKey,
          {
            ...depthIndex,
            KeyConditionExpression: "PK = :pk",
            FilterExpression: "#status = :pending",
            ExpressionAttributeNames: { "#status": "status" },
            ExpressionAttributeValues: { ":pk": RecordItem.str(partitionKey), ":pending": RecordItem.str("pending") },
            ScanIndexForward: true,
            Limit: Math.max(limit - found.length, 1)
          },
          cursor
        )
        const records = yield* decodeItems(output.Items ?? [])
        for (const record of records) if (found.length < limit) found.push(record)
        if (found.length >= limit || output.LastEvaluatedKey === undefined) break
        cursor = output.LastEvaluatedKey
      }
      return found.sort(ClaimOrder.compareAge)
    })

  const countStatus = (status: "pending" | "claimed", operation: string) => (partitionKey: string) =>
    Effect.gen(function* () {
      let total = 0
      let cursor: RecordItem.Item | undefined = undefined
      for (;;) {
        const output: QueryCommandOutput = yield* queryPage(
          operation,
          partitionKey,
          {
            ...depthIndex,
            KeyConditionExpression: "PK = :pk",
            FilterExpression: "#status = :status",
            ExpressionAttributeNames: { "#status": "status" },
            ExpressionAttributeValues: { ":pk": RecordItem.str(partitionKey), ":status": RecordItem.str(status) },
            Select: "COUNT"
          },
          cursor
        )
        total += output.Count ?? 0
        if (output.LastEvaluatedKey === undefined) return total
        cursor = output.LastEvaluatedKey
      }
    })

  const listPartitions: OutboxStore.Backend["listPartitions"] = Stream.flatMap(
    Stream.range(0, OutboxTable.PartitionShards - 1),
    (shard) =>
      Stream.paginateChunkEffect(noCursor, ({ cursor }) =>
        queryPage(
          "listPartitions",
          undefined,
          {
            IndexName: OutboxTable.PartitionIndex,
            KeyConditionExpression: "partitions_shard = :shard",
            ExpressionAttributeValues: { ":shard": RecordItem.num(shard) }
          },
          cursor
        ).pipe(
          Effect.map(
            (output) =>
              [
                Chunk.fromIterable(
                  (output.Items ?? []).flatMap((item) => (item["PK"]?.S !== undefined ? [item["PK"].S] : []))
                ),
                Option.map(Option.fromNullable(output.LastEvaluatedKey), (next): Cursor => ({ cursor: next }))
              ] as const
          )
        )
      )
  )

  return OutboxStore.make({
    name: "dynamodb",
    validate: RecordItem.itemSizeProblem,
    persist,
    claim,
    complete: (ids, token) => finish("complete", ids, token),
    release: (ids, token) => finish("release", ids, token),
    expire,
    queryPending,
    countPending: countStatus("pending", "countPending"),
    countClaimed: countStatus("claimed", "countClaimed"),
    listPartitions
  })
}

interface Cursor {
  readonly cursor: RecordItem.Item | undefined
}

const noCursor: Cursor = { cursor: undefined }

interface ClaimState {
  readonly claimed: Array<OutboxRecord.OutboxRecord>
  /** Items the fast path's ClaimIndex queries evaluated (before the claimable filter). */
  indexScanned: number
  /** Non-terminal records the scan path saw, when it ran. */
  scanNonTerminal: number | undefined
  lost: number
  conflicts: number
  readonly skippedKeys: Set<string>
  stop: { readonly _tag: "FenceLost" } | { readonly _tag: "Transient"; readonly cause: unknown } | undefined
}

/**
 * Builds the store: ensures the table when asked (default), runs the schema preflight (fails with
 * `InvalidConfiguration` naming every mismatch), and returns the store service.
 *
 * @since 0.1.0
 */
export const make = (
  options: DynamoDbOutboxStoreOptions = {}
): Effect.Effect<OutboxStore.OutboxStoreService, InvalidConfiguration | StoreUnavailable, DynamoDb> =>
  Effect.gen(function* () {
    const dynamo = yield* DynamoDb
    const resolved = resolve(options)
    const tableOptions = { localClaimIndex: resolved.localClaimIndex }
    if (options.ensureTable ?? true) yield* OutboxTable.ensureTable(resolved.tableName, tableOptions)
    else yield* OutboxTable.preflight(resolved.tableName, tableOptions)
    const bypassLogged = yield* Ref.make(false)
    return makeBackend(dynamo, resolved, bypassLogged)
  })

/**
 * The store as a layer with the given options.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: DynamoDbOutboxStoreOptions
): Layer.Layer<OutboxStore.OutboxStore, InvalidConfiguration | StoreUnavailable, DynamoDb> =>
  Layer.effect(OutboxStore.OutboxStore, make(options))

/**
 * The store with defaults: table `effect-outbox` (created if missing), stale reclaim after 30 seconds,
 * retention 1 hour.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<OutboxStore.OutboxStore, InvalidConfiguration | StoreUnavailable, DynamoDb> = layerWith(
  {}
)
