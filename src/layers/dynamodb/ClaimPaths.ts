/**
 * The three ways a DynamoDB claim chooses its candidates (R-CLAIM-4/5, SPEC §3.3); each then claims
 * them with `ClaimTransaction.claimInOrder`:
 * - fast path (keyless partitions): `ClaimIndex` in age order, O(limit) reads; an ordering key on a page
 *   abandons it (to the scan path when nothing was claimed yet);
 * - scan path (keyed partitions): a consistent Query of the whole partition folded by `ClaimFold.ScanFold`;
 * - local path (`localClaimIndex`): a consistent walk of `ClaimLocalIndex` folded by `ClaimFold.LocalWalk`,
 *   stopping once `limit` records are selected.
 *
 * @since 0.1.0
 */
import type { QueryCommandOutput } from "@aws-sdk/client-dynamodb"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { LocalWalk, ScanFold } from "../../domain/ClaimFold.js"
import type { CorruptRecord, InvalidArgument, StoreUnavailable } from "../../domain/OutboxError.js"
import type * as OutboxRecord from "../../domain/OutboxRecord.js"
import * as OutboxMetrics from "../../services/OutboxMetrics.js"
import { ClaimableCondition, claimInOrder, type ClaimRun, claimValues } from "./ClaimTransaction.js"
import * as OutboxTable from "./OutboxTable.js"
import * as RecordItem from "./RecordItem.js"
import { decodeItems, nextCursor, noCursor, queryPage, type QueryInput, type StoreContext } from "./StoreContext.js"

/**
 * Scan-path claims reading more pages than this log a WARN and count `DynamoDBOutboxClaimScanPages`.
 *
 * @since 0.1.0
 */
export const DeepBacklogPageWarn = 8

/** Smallest `Limit` of a `ClaimLocalIndex` page (a page for one missing record would cost a request). */
const LocalMinPage = 16

/**
 * What the claim paths need besides the store context: where claimed records are remembered, and
 * (scan path) where a partition's keyed-ness is recorded.
 *
 * @since 0.1.0
 */
export interface ClaimHooks {
  readonly remember: (record: OutboxRecord.OutboxRecord) => void
  readonly keyed: (partitionKey: string, keyed: boolean) => void
}

/** One decoded query page with what it scanned. */
interface Page {
  readonly output: QueryCommandOutput
  readonly records: Array<OutboxRecord.OutboxRecord>
  readonly scanned: number
}

const readPage = (
  ctx: StoreContext,
  partitionKey: string,
  input: QueryInput,
  cursor: RecordItem.Item | undefined
): Effect.Effect<Page, StoreUnavailable | CorruptRecord | InvalidArgument> =>
  queryPage(ctx, "claim", partitionKey, input, cursor).pipe(
    Effect.flatMap((output) =>
      Either.match(decodeItems(output.Items ?? []), {
        onLeft: Effect.fail,
        onRight: (records) => Effect.succeed({ output, records, scanned: output.ScannedCount ?? records.length })
      })
    )
  )

/**
 * Fast path over `ClaimIndex`: reads pages until it holds enough claimable candidates for the rest of
 * the batch (or the index ends), then claims them; reading continues only to replace claims lost to
 * other claimers. Returns `"scan"` when an ordering key showed up before anything was claimed.
 *
 * @since 0.1.0
 */
export const claimFast = (
  ctx: StoreContext,
  hooks: ClaimHooks,
  run: ClaimRun
): Effect.Effect<"done" | "scan", StoreUnavailable | CorruptRecord | InvalidArgument> =>
  Effect.gen(function* () {
    const { limit, partitionKey, rule, state, token } = run
    let cursor: RecordItem.Item | undefined = undefined
    let exhausted = false
    while (!exhausted) {
      const remaining = limit - state.claimed.length
      const candidates: Array<OutboxRecord.OutboxRecord> = []
      while (candidates.length < remaining && !exhausted) {
        const page: Either.Either<Page, StoreUnavailable | CorruptRecord | InvalidArgument> = yield* Effect.either(
          readPage(
            ctx,
            partitionKey,
            {
              IndexName: OutboxTable.ClaimIndex,
              KeyConditionExpression: "PK = :pk",
              FilterExpression: ClaimableCondition,
              ExpressionAttributeNames: { "#status": "status" },
              ExpressionAttributeValues: { ":pk": RecordItem.str(partitionKey), ...claimValues(token, rule) },
              ScanIndexForward: true,
              Limit: ctx.options.pageSize ?? Math.max(remaining - candidates.length, 1)
            },
            cursor
          )
        )
        if (Either.isLeft(page)) {
          // records already claimed belong to the caller: stop with a short batch (R-CLAIM-8)
          if (state.claimed.length === 0) return yield* page.left
          state.stop = { _tag: "Transient", cause: page.left }
          return "done"
        }
        state.indexScanned += page.right.output.ScannedCount ?? page.right.records.length
        if (page.right.records.some((record) => Option.isSome(record.orderingKey))) {
          return state.claimed.length === 0 ? "scan" : "done"
        }
        candidates.push(...page.right.records)
        cursor = page.right.output.LastEvaluatedKey
        exhausted = cursor === undefined
      }
      yield* claimInOrder(ctx, hooks.remember, run, candidates)
      if (state.claimed.length >= limit || state.stop !== undefined) return "done"
    }
    return "done"
  })

/**
 * The scan path: a consistent Query of the partition's non-terminal records paged to exhaustion as an
 * interruptible `Stream`, folded with `ScanFold`, then claimed in selection order. A scan deeper than
 * {@link DeepBacklogPageWarn} pages logs a WARN and counts its pages.
 *
 * @since 0.1.0
 */
export const claimScan = (
  ctx: StoreContext,
  hooks: ClaimHooks,
  run: ClaimRun
): Effect.Effect<void, StoreUnavailable | CorruptRecord | InvalidArgument> =>
  Effect.gen(function* () {
    const { limit, partitionKey, rule, state } = run
    const pages = Stream.paginateChunkEffect(noCursor, ({ cursor }) =>
      readPage(
        ctx,
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
          ...(ctx.options.pageSize !== undefined ? { Limit: ctx.options.pageSize } : {})
        },
        cursor
      ).pipe(Effect.map((page) => [Chunk.of(page), nextCursor(page.output)] as const))
    )
    const fold = yield* Stream.runFold(pages, new ScanFold<OutboxRecord.OutboxRecord>(limit, rule), (acc, page) =>
      acc.addPage(page.records, page.scanned)
    )
    ctx.options.onScanFold?.({
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
    hooks.keyed(partitionKey, fold.sawKey)
    state.scanNonTerminal = fold.nonTerminal
    yield* claimInOrder(ctx, hooks.remember, run, fold.select(limit))
  })

/**
 * The local path: walks `ClaimLocalIndex` consistently in age order with `LocalWalk`, stops once `limit`
 * records are selected (or the partition ends), then claims the selection in order.
 *
 * @since 0.1.0
 */
export const claimLocal = (
  ctx: StoreContext,
  hooks: ClaimHooks,
  run: ClaimRun
): Effect.Effect<void, StoreUnavailable | CorruptRecord | InvalidArgument> =>
  Effect.gen(function* () {
    const { limit, partitionKey, rule, state } = run
    const walk = new LocalWalk<OutboxRecord.OutboxRecord>(limit, rule)
    const pages = Stream.paginateChunkEffect(noCursor, ({ cursor }) =>
      Effect.suspend(() =>
        readPage(
          ctx,
          partitionKey,
          {
            IndexName: OutboxTable.ClaimLocalIndex,
            KeyConditionExpression: "PK = :pk",
            ExpressionAttributeValues: { ":pk": RecordItem.str(partitionKey) },
            ConsistentRead: true,
            ScanIndexForward: true,
            Limit: ctx.options.pageSize ?? Math.max(limit - walk.selected.length, LocalMinPage)
          },
          cursor
        )
      ).pipe(Effect.map((page) => [Chunk.of(page), nextCursor(page.output)] as const))
    )
    yield* Stream.runFoldWhile(
      pages,
      walk,
      (acc) => !acc.done,
      (acc, page) => acc.addPage(page.records, page.scanned, page.output.LastEvaluatedKey === undefined)
    )
    ctx.options.onLocalWalk?.({
      partitionKey,
      pages: walk.pages,
      scanned: walk.scanned,
      selected: walk.selected.length,
      blockingHeads: walk.heads.size,
      exhausted: walk.exhausted
    })
    state.scanNonTerminal = walk.nonTerminal
    yield* claimInOrder(ctx, hooks.remember, run, walk.select())
  })
