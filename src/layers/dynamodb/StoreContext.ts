/**
 * What every part of the DynamoDB outbox store shares: its options (resolved once), the client and
 * table, the error mapping of a failed request and paged queries over the outbox table (SPEC §3.3).
 *
 * @since 0.1.0
 */
import type { QueryCommandInput, QueryCommandOutput } from "@aws-sdk/client-dynamodb"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import { type CorruptRecord, InvalidArgument, StoreUnavailable } from "../../domain/OutboxError.js"
import type * as OutboxRecord from "../../domain/OutboxRecord.js"
import type { DynamoDbError, DynamoDbService } from "../../services/DynamoDb.js"
import * as OutboxStore from "../../services/OutboxStore.js"
import * as RecordItem from "./RecordItem.js"
import { decodeAll } from "../DecodeAll.js"

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
 * The store's options with every default applied.
 *
 * @since 0.1.0
 */
export interface ResolvedOptions {
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

/**
 * Applies the defaults: table `effect-outbox`, stale reclaim after 30 seconds (R-CLAIM-6), retention
 * 1 hour, 3 index-lag retries 100 ms apart, no local claim index. `valid` carries the durations as
 * checked by `OutboxStore.validateStoreOptions`.
 *
 * @since 0.1.0
 */
export const resolve = (
  options: DynamoDbOutboxStoreOptions,
  valid: OutboxStore.ValidStoreOptions = {
    staleClaimAfterMillis: undefined,
    retentionMillis: OutboxStore.defaultRetentionMillis
  }
): ResolvedOptions => ({
  tableName: options.tableName ?? DefaultTableName,
  staleClaimAfterMillis: valid.staleClaimAfterMillis ?? DefaultStaleClaimAfterMillis,
  retentionSeconds: Math.ceil(valid.retentionMillis / 1000),
  pageSize: options.pageSize,
  indexLagRetries: options.indexLagRetries ?? 3,
  indexLagDelay: Duration.decode(options.indexLagDelay ?? "100 millis"),
  onScanFold: options.onScanFold,
  localClaimIndex: options.localClaimIndex ?? false,
  onLocalWalk: options.onLocalWalk
})

/**
 * Stale reclaim threshold when none is configured: 30 seconds (R-CLAIM-6).
 *
 * @since 0.1.0
 */
export const DefaultStaleClaimAfterMillis = 30_000

/**
 * The client and resolved options every store operation works with.
 *
 * @since 0.1.0
 */
export interface StoreContext {
  readonly dynamo: DynamoDbService
  readonly options: ResolvedOptions
}

/**
 * Maps a failed request of a store operation: DynamoDB's `ValidationException` (the same request can
 * never succeed) is `InvalidArgument`; anything else is `StoreUnavailable`.
 *
 * @since 0.1.0
 */
export const requestFailure =
  (operation: string, partitionKey?: string) =>
  (error: DynamoDbError): InvalidArgument | StoreUnavailable =>
    error.kind === "Validation"
      ? new InvalidArgument({
          operation,
          argument: "request",
          reason: `DynamoDB rejected the request: ${error.detail}`
        })
      : StoreUnavailable.wrap(operation, partitionKey)(error)

/**
 * Fails with `InvalidArgument` when a partition key is longer than the store accepts
 * (`RecordItem.MaxPartitionKeyBytes`): no record can be stored there.
 *
 * @since 0.1.0
 */
export const checkPartitionKey = (operation: string, partitionKey: string): Effect.Effect<void, InvalidArgument> => {
  const bytes = RecordItem.byteLength(partitionKey)
  return bytes > RecordItem.MaxPartitionKeyBytes
    ? Effect.fail(
        new InvalidArgument({
          operation,
          argument: "partitionKey",
          reason: `is ${bytes} bytes; the DynamoDB store's limit is ${RecordItem.MaxPartitionKeyBytes} bytes`
        })
      )
    : Effect.void
}

/**
 * True when a single-item write failed its condition.
 *
 * @since 0.1.0
 */
export const isConditionFailure = (error: DynamoDbError): boolean => error.kind === "ConditionalCheckFailed"

/**
 * Decodes record items with Schema, failing with the first `CorruptRecord`.
 *
 * @since 0.1.0
 */
export const decodeItems = (
  items: ReadonlyArray<RecordItem.Item>
): Either.Either<Array<OutboxRecord.OutboxRecord>, CorruptRecord> => decodeAll(items, RecordItem.decode)

/**
 * A Query of the outbox table without its table name and start key.
 *
 * @since 0.1.0
 */
export type QueryInput = Omit<QueryCommandInput, "TableName" | "ExclusiveStartKey">

/**
 * One page of a Query of the outbox table, from `cursor` (a `LastEvaluatedKey`) when given.
 *
 * @since 0.1.0
 */
export const queryPage = (
  ctx: StoreContext,
  operation: string,
  partitionKey: string | undefined,
  input: QueryInput,
  cursor: RecordItem.Item | undefined
): Effect.Effect<QueryCommandOutput, InvalidArgument | StoreUnavailable> =>
  ctx.dynamo
    .query({
      TableName: ctx.options.tableName,
      ...input,
      ...(cursor !== undefined ? { ExclusiveStartKey: cursor } : {})
    })
    .pipe(Effect.mapError(requestFailure(operation, partitionKey)))

/**
 * The position of a paged read (`Stream.paginateChunkEffect` state).
 *
 * @since 0.1.0
 */
export interface Cursor {
  readonly cursor: RecordItem.Item | undefined
}

/**
 * The first page's position.
 *
 * @since 0.1.0
 */
export const noCursor: Cursor = { cursor: undefined }

/**
 * The position after a page, or none when it was the last.
 *
 * @since 0.1.0
 */
export const nextCursor = (output: QueryCommandOutput): Option.Option<Cursor> =>
  Option.map(Option.fromNullable(output.LastEvaluatedKey), (next): Cursor => ({ cursor: next }))

/**
 * Retries a single-item write to a fence item rejected with `TransactionConflict` (a claim or expire
 * transaction checking that fence was in flight; the SDK does not retry it): up to 5 retries, jittered
 * exponential back-off from 10 ms.
 *
 * @since 0.1.0
 */
export const retryFenceConflicts = <A, R>(
  effect: Effect.Effect<A, DynamoDbError, R>
): Effect.Effect<A, DynamoDbError, R> =>
  Effect.retry(effect, {
    schedule: Schedule.exponential(Duration.millis(10)).pipe(Schedule.jittered, Schedule.intersect(Schedule.recurs(5))),
    while: (error) => error.kind === "TransactionConflict"
  })
