/**
 * Completes and releases of a batch (SPEC §6 steps 5-6), grouped into as few store calls as the order of
 * each key allows. A record whose complete or release fails stays claimed and is remembered, so that a
 * later cycle of the same lease version completes (delivered) or releases (not delivered) it.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Metric from "effect/Metric"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import type { StaleFencingToken, StoreUnavailable } from "../../domain/OutboxError.js"
import type { OutboxRecord } from "../../domain/OutboxRecord.js"
import { notClaimedBy } from "../../services/OutboxStore.js"
import type { BatchState, Counters, Flush } from "./BatchState.js"
import { updateAll } from "../../services/BoundMetric.js"
import type { Instance } from "./Instance.js"
import * as Lease from "./Lease.js"

/**
 * Completes records in one `complete` call (group commit). When a multi-id call fails naming some ids,
 * those fail; the others are completed one by one (a `StaleFencingToken` then means the batched call
 * already applied them). Returns the ids that failed, with their error.
 *
 * @since 0.1.0
 */
export const completeMany = (
  instance: Instance,
  ids: ReadonlyArray<string>,
  token: LeaseToken.LeaseToken
): Effect.Effect<ReadonlyMap<string, StaleFencingToken | StoreUnavailable>> =>
  Effect.suspend(() => {
    if (ids.length === 0) return noFailures
    instance.storeCalls += 1
    return Effect.matchEffect(instance.store.complete(ids, token), {
      // the ids are records this drainer claimed: an invalid one is a bug
      onFailure: (error) =>
        error._tag === "InvalidArgument" ? Effect.die(error) : completeEach(instance, ids, token, error),
      onSuccess: () => noFailures
    })
  })

/** No complete failed: the result of a complete that succeeded (shared: callers only read it). */
const noFailures: Effect.Effect<ReadonlyMap<string, StaleFencingToken | StoreUnavailable>> = Effect.succeed(new Map())

/** After a failed multi-id complete: the ids it named fail; the others are completed one by one. */
const completeEach = (
  instance: Instance,
  ids: ReadonlyArray<string>,
  token: LeaseToken.LeaseToken,
  error: StaleFencingToken | StoreUnavailable
): Effect.Effect<ReadonlyMap<string, StaleFencingToken | StoreUnavailable>> =>
  Effect.gen(function* () {
    const failed: Map<string, StaleFencingToken | StoreUnavailable> = new Map()
    const named = error._tag === "StaleFencingToken" && ids.length > 1 ? error.recordIds : undefined
    for (const id of ids) {
      if (named === undefined || named.includes(id)) {
        failed.set(id, error)
        continue
      }
      const single = yield* Effect.either(
        instance.store.complete([id], token).pipe(Effect.catchTag("InvalidArgument", Effect.die))
      )
      if (Either.isLeft(single) && single.left._tag !== "StaleFencingToken") failed.set(id, single.left)
    }
    return failed
  })

/**
 * Releases records (one call); on failure they are remembered and retried next cycle.
 *
 * @since 0.1.0
 */
export const release = (
  instance: Instance,
  records: ReadonlyArray<OutboxRecord>,
  token: LeaseToken.LeaseToken,
  state: BatchState
): Effect.Effect<void> =>
  Effect.gen(function* () {
    if (records.length === 0) return
    for (const record of records) state.held.delete(record.id)
    const ids = records.map((r) => r.id)
    instance.storeCalls += 1
    const result = yield* Effect.either(instance.store.release(ids, token))
    if (Either.isRight(result)) {
      state.counters.deferred += records.length
      yield* Metric.incrementBy(instance.metrics.deferred, records.length)
      return
    }
    state.counters.leftClaimed += records.length
    for (const record of records) instance.toRelease.set(record.id, record)
    yield* Effect.logWarning("release failed; records stay claimed until retried").pipe(
      Effect.annotateLogs({ recordIds: ids.join(","), error: result.left.message })
    )
  })

/** Moves a deferred record from its counter to `leftClaimed`. */
const unaccount = (counters: Counters, how: Flush["how"]): void => {
  if (how === "delivered") counters.delivered -= 1
  else if (how === "dlq") counters.deadLettered -= 1
  else counters.dropped -= 1
  counters.leftClaimed += 1
}

/** The deferred completes when the lease is not known to be held: they stay claimed. */
const keepClaimed = (
  instance: Instance,
  pending: ReadonlyArray<Flush>,
  token: LeaseToken.LeaseToken,
  state: BatchState,
  lease: "lost" | "unknown"
): Effect.Effect<void> =>
  Effect.gen(function* () {
    const sent = pending.filter((p) => p.how === "delivered").length
    for (const { how, record } of pending) {
      unaccount(state.counters, how)
      if (lease === "lost") instance.toComplete.delete(record.id)
    }
    if (lease === "lost" && sent > 0) yield* Metric.incrementBy(instance.metrics.duplicateRisk, sent)
    const first = pending[0]
    // found lost here: the cycle ends stale, like a loss seen after a wave's sends
    if (lease === "lost" && state.fenced === undefined && first !== undefined) {
      state.fenced = Lease.moved(instance, "complete", token, first.record.id)
    }
    yield* Effect.logWarning(
      lease === "lost"
        ? "lease lost before the deferred completes; not completing (may be delivered again)"
        : "lease unreadable before the deferred completes; completing in a later cycle"
    ).pipe(Effect.annotateLogs({ records: pending.length, version: token.version }))
  })

/**
 * The end-of-batch complete through the backend's `LeaseFence` (one statement that is also the lease
 * check). Returns the ids that failed, with their error — or `undefined` when it completed nothing, so
 * that the lease must be read to know why.
 */
const completeFenced = (
  instance: Instance,
  ids: ReadonlyArray<string>,
  token: LeaseToken.LeaseToken
): Effect.Effect<ReadonlyMap<string, StaleFencingToken | StoreUnavailable> | undefined> =>
  Effect.gen(function* () {
    const fence = instance.fence
    if (fence === undefined) return undefined
    instance.storeCalls += 1
    const result = yield* Effect.either(fence.complete(instance.config.partitionKey, ids, token))
    const failed = new Map<string, StaleFencingToken | StoreUnavailable>()
    if (Either.isLeft(result)) {
      for (const id of ids) failed.set(id, result.left)
      return failed
    }
    if (result.right._tag === "Unconfirmed") return undefined
    const completed = result.right.completed
    const mismatched = ids.filter((id) => !completed.has(id))
    if (mismatched.length > 0) {
      const error = notClaimedBy("complete", token, mismatched)
      for (const id of mismatched) failed.set(id, error)
    }
    return failed
  })

/**
 * Completes the records whose completes were deferred to the end of the batch, in one call, after one
 * more lease check — or, when the last wave left that check to it and the backend has a `LeaseFence`, in
 * one fenced statement that is the check (a fenced complete that matches nothing falls back to a lease
 * read): with the lease known lost (or unreadable) they stay claimed — completed by a later cycle of this
 * epoch, or claimed again by the next owner — and are counted as left claimed.
 *
 * @since 0.1.0
 */
export const flushDeferred = (
  instance: Instance,
  token: LeaseToken.LeaseToken,
  state: BatchState
): Effect.Effect<void> =>
  Effect.gen(function* () {
    const pending = state.toFlush
    state.toFlush = []
    const unverified = state.leaseUnverified
    state.leaseUnverified = false
    if (pending.length === 0) return
    const ids = pending.map((p) => p.record.id)
    let failed: ReadonlyMap<string, StaleFencingToken | StoreUnavailable>
    if (state.fenced !== undefined) return yield* keepClaimed(instance, pending, token, state, "lost")
    const fenced = unverified ? yield* completeFenced(instance, ids, token) : undefined
    if (fenced !== undefined) failed = fenced
    else {
      // no fence, or the fenced complete matched nothing: the lease is read (unless the last check stands)
      const lease = unverified ? yield* Lease.check(instance, token) : yield* Lease.checkAgain(instance, token, state)
      if (lease !== "held") return yield* keepClaimed(instance, pending, token, state, lease)
      failed = yield* completeMany(instance, ids, token)
    }
    const doneAt = yield* Clock.currentTimeMillis
    const latencies: Array<number> = []
    let duplicateRisk = 0
    for (const { how, record } of pending) {
      const error = failed.get(record.id)
      if (error === undefined) {
        instance.toComplete.delete(record.id)
        if (how === "delivered") latencies.push(Math.max(0, doneAt - DateTime.toEpochMillis(record.createdAt)))
        continue
      }
      unaccount(state.counters, how)
      if (how === "delivered") duplicateRisk += 1
      yield* Effect.logError("deferred complete failed; record stays claimed").pipe(
        Effect.annotateLogs({ recordId: record.id, error: error.message })
      )
    }
    if (duplicateRisk > 0) yield* Metric.incrementBy(instance.metrics.duplicateRisk, duplicateRisk)
    if (latencies.length > 0) yield* updateAll(instance.metrics.bound.latency, latencies)
  })

/**
 * Completes or releases records an earlier cycle left claimed, while the lease version is unchanged.
 *
 * @since 0.1.0
 */
export const retryStranded = (instance: Instance, token: LeaseToken.LeaseToken): Effect.Effect<void> =>
  Effect.gen(function* () {
    if (instance.strandedVersion !== token.version) {
      // a new epoch makes them claimable by version: nothing to do
      instance.toComplete.clear()
      instance.toRelease.clear()
      instance.strandedVersion = token.version
      return
    }
    for (const [id, record] of instance.toComplete) {
      const result = yield* Effect.either(instance.store.complete([id], token))
      if (Either.isRight(result)) {
        instance.toComplete.delete(id)
        yield* Metric.increment(instance.metrics.completions)
      } else if (result.left._tag === "StaleFencingToken") {
        instance.toComplete.delete(id)
      } else {
        yield* Effect.logDebug("stranded record still not completed").pipe(Effect.annotateLogs({ recordId: record.id }))
        break
      }
    }
    for (const [id] of instance.toRelease) {
      const result = yield* Effect.either(instance.store.release([id], token))
      if (Either.isRight(result) || result.left._tag === "StaleFencingToken") instance.toRelease.delete(id)
      else break
    }
  })
