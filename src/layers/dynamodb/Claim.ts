/**
 * A DynamoDB claim (R-CLAIM-1..10): admit the token at the fence (raising it), choose a path (local when
 * `localClaimIndex`, scan for partitions known keyed, else fast), and turn the claim state into the
 * result: fence lost → `StaleFencingToken` with nothing returned; a transient stop → `ClaimTruncated`
 * short batch (`StoreUnavailable` when nothing was claimed); only conflicts → `TransactionConflict`.
 * A claim that finds a listed partition empty de-lists it.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import type * as ClaimOrder from "../../domain/ClaimOrder.js"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import { ClaimTruncated, StoreUnavailable, TransactionConflict } from "../../domain/OutboxError.js"
import * as OutboxMetrics from "../../services/OutboxMetrics.js"
import * as OutboxStore from "../../services/OutboxStore.js"
import { claimFast, type ClaimHooks, claimLocal, claimScan } from "./ClaimPaths.js"
import { type ClaimRun, emptyClaimState } from "./ClaimTransaction.js"
import { raiseFence, staleToken } from "./FenceItem.js"
import { delist, mayDelist } from "./PartitionListing.js"
import { checkPartitionKey, type StoreContext } from "./StoreContext.js"

/** How many partitions a {@link KeyedHint} remembers. */
const HintCapacity = 100_000

/**
 * A bounded set of partitions known (from their last scan) to hold ordering keys: their claims go
 * straight to the scan path. A scan that sees no key removes the partition. Oldest entries are evicted
 * first.
 *
 * @since 0.1.0
 */
export class KeyedHint {
  private readonly partitions = new Set<string>()
  constructor(private readonly capacity: number = HintCapacity) {}
  /** Whether the partition's last scan saw an ordering key. */
  has(partitionKey: string): boolean {
    return this.partitions.has(partitionKey)
  }
  /** Records what a scan of the partition saw. */
  set(partitionKey: string, keyed: boolean): void {
    this.partitions.delete(partitionKey)
    if (!keyed) return
    this.partitions.add(partitionKey)
    if (this.partitions.size > this.capacity) {
      const oldest = this.partitions.values().next()
      if (oldest.done !== true) this.partitions.delete(oldest.value)
    }
  }
}

/**
 * What a store instance keeps between claims.
 *
 * @since 0.1.0
 */
export interface ClaimMemory {
  readonly keyed: KeyedHint
  /** Whether the one-per-store INFO about keyed partitions was logged. */
  readonly bypassLogged: Ref.Ref<boolean>
  readonly remember: ClaimHooks["remember"]
}

/**
 * Turns a finished claim into its result (see the module doc for the rules).
 *
 * @since 0.1.0
 */
export const finishClaim = (
  ctx: StoreContext,
  run: ClaimRun
): Effect.Effect<OutboxStore.ClaimBatch, OutboxStore.ClaimError> =>
  Effect.gen(function* () {
    const { limit, partitionKey, state, token } = run
    const stop = state.stop
    if (stop?._tag === "FenceLost") return yield* staleToken(ctx, partitionKey, token, "claim")
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
    return OutboxStore.ClaimBatch(state.claimed)
  })

const logBypassOnce = (memory: ClaimMemory, partitionKey: string): Effect.Effect<void> =>
  Effect.flatMap(Ref.getAndSet(memory.bypassLogged, true), (logged) =>
    logged
      ? Effect.void
      : Effect.logInfo(
          `partition ${partitionKey} holds ordering keys: claims on keyed partitions bypass ClaimIndex and scan the partition consistently (logged once per store)`
        ).pipe(Effect.annotateLogs({ partition: partitionKey }))
  )

/**
 * The backend's `claim`.
 *
 * @since 0.1.0
 */
export const claim =
  (ctx: StoreContext, memory: ClaimMemory): OutboxStore.Backend["claim"] =>
  (partitionKey: string, token: LeaseToken.LeaseTokenLike, limit: number) =>
    Effect.gen(function* () {
      yield* checkPartitionKey("claim", partitionKey)
      const fence = yield* raiseFence(ctx, partitionKey, token, "claim")
      if (limit <= 0) return OutboxStore.ClaimBatch([])
      const rule: ClaimOrder.ClaimRule = {
        version: token.version,
        nowMillis: yield* Clock.currentTimeMillis,
        staleClaimAfterMillis: ctx.options.staleClaimAfterMillis
      }
      const run: ClaimRun = { partitionKey, token, rule, limit, state: emptyClaimState() }
      const hooks: ClaimHooks = {
        remember: memory.remember,
        keyed: (partition, keyed) => memory.keyed.set(partition, keyed)
      }
      const path = ctx.options.localClaimIndex
        ? yield* Effect.as(claimLocal(ctx, hooks, run), "local" as const)
        : memory.keyed.has(partitionKey)
          ? "scan"
          : yield* claimFast(ctx, hooks, run)
      if (path === "scan") {
        yield* logBypassOnce(memory, partitionKey)
        yield* claimScan(ctx, hooks, run)
      }
      const batch = yield* finishClaim(ctx, run)
      if (
        batch.records.length === 0 &&
        mayDelist(fence, {
          consistentNonTerminal: run.state.scanNonTerminal,
          indexScanned: run.state.indexScanned,
          nowMillis: rule.nowMillis
        })
      ) {
        yield* delist(ctx, partitionKey, fence)
      }
      return batch
    })
