/**
 * The DynamoDB `OutboxStore` backend (SPEC §3.3): one table (see `OutboxTable`), record items keyed by
 * identity, one fence item per partition (high-water mark, seq counter, listing). The shared core
 * (`OutboxStore.make`) validates input, including every DynamoDB size limit (R-PERSIST-5); the parts
 * live beside this module: `Persist`, `SeqAllocation`, `Claim` (with `ClaimPaths`, `ClaimTransaction`),
 * `Settle`, `Expire`, `Reads`, `PartitionListing`, `FenceItem`. Stale reclaim (R-CLAIM-6) defaults to
 * 30 seconds. Design notes: docs/design/dynamodb.md.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import type { InvalidConfiguration, StoreUnavailable } from "../../domain/OutboxError.js"
import type * as OutboxRecord from "../../domain/OutboxRecord.js"
import { DynamoDb } from "../../services/DynamoDb.js"
import * as OutboxStore from "../../services/OutboxStore.js"
import { claim, KeyedHint } from "./Claim.js"
import { expire } from "./Expire.js"
import * as OutboxTable from "./OutboxTable.js"
import { listPartitions } from "./PartitionListing.js"
import { persist } from "./Persist.js"
import { countStatus, queryPending } from "./Reads.js"
import * as RecordItem from "./RecordItem.js"
import { KeyCache, settle } from "./Settle.js"
import { type DynamoDbOutboxStoreOptions, resolve, type StoreContext } from "./StoreContext.js"

export {
  /**
   * Scan-path claims reading more pages than this log a WARN and count `DynamoDBOutboxClaimScanPages`.
   *
   * @since 0.1.0
   */
  DeepBacklogPageWarn
} from "./ClaimPaths.js"
export {
  /**
   * How long after its last persist a partition may be de-listed on the word of `ClaimIndex` alone.
   *
   * @since 0.1.0
   */
  ListingGrace
} from "./PartitionListing.js"
export {
  /**
   * Transactional enqueue (R-PERSIST-6): the conditional puts of a batch (and the listing updates of its
   * partitions) for the caller's own `TransactWriteItems`.
   *
   * @since 0.1.0
   */
  transactItems
} from "./Persist.js"
export {
  /**
   * Default table name.
   *
   * @since 0.1.0
   */
  DefaultTableName,
  /**
   * Options of the DynamoDB store.
   *
   * @since 0.1.0
   */
  type DynamoDbOutboxStoreOptions,
  /**
   * What one local-path claim read, reported to `onLocalWalk`.
   *
   * @since 0.1.0
   */
  type LocalWalkReport,
  /**
   * What one scan-path claim saw, reported to `onScanFold`.
   *
   * @since 0.1.0
   */
  type ScanFoldReport
} from "./StoreContext.js"

/** Builds the store's backend over an existing, checked table. */
const makeBackend = (ctx: StoreContext, bypassLogged: Ref.Ref<boolean>): OutboxStore.Backend => {
  const cache = new KeyCache()
  const remember = (
    record: Pick<OutboxRecord.PreparedRecord, "id" | "partitionKey" | "envelopeId" | "bindingId">
  ): void => cache.set(record.id, record.partitionKey, RecordItem.recordSortKey(record))
  return {
    name: "dynamodb",
    validate: RecordItem.limitProblem,
    persist: persist(ctx, remember),
    claim: claim(ctx, { keyed: new KeyedHint(), bypassLogged, remember }),
    complete: settle(ctx, cache, "complete"),
    release: settle(ctx, cache, "release"),
    expire: expire(ctx),
    queryPending: queryPending(ctx),
    countPending: countStatus(ctx, "pending", "countPending"),
    countClaimed: countStatus(ctx, "claimed", "countClaimed"),
    listPartitions: listPartitions(ctx)
  }
}

/**
 * Builds the store: checks the options (`InvalidConfiguration` for a non-positive or infinite
 * `staleClaimAfter` or `retention`), ensures the table when asked (default), runs the schema preflight
 * (fails with `InvalidConfiguration` naming every mismatch), and returns the store service.
 *
 * @since 0.1.0
 */
export const make = (
  options: DynamoDbOutboxStoreOptions = {}
): Effect.Effect<OutboxStore.OutboxStoreService, InvalidConfiguration | StoreUnavailable, DynamoDb> =>
  Effect.gen(function* () {
    const valid = yield* OutboxStore.validateStoreOptions("DynamoDbOutboxStore", options)
    const dynamo = yield* DynamoDb
    const resolved = resolve(options, valid)
    const tableOptions = { localClaimIndex: resolved.localClaimIndex }
    if (options.ensureTable ?? true) yield* OutboxTable.ensureTable(resolved.tableName, tableOptions)
    else yield* OutboxTable.preflight(resolved.tableName, tableOptions)
    const bypassLogged = yield* Ref.make(false)
    return OutboxStore.make(makeBackend({ dynamo, options: resolved }, bypassLogged))
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
