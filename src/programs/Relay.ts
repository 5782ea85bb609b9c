/**
 * The relay (SPEC §6): runs one drainer per partition it leases, at most `maxPartitions` at once, and
 * serves every partition with pending work whatever their number. Discovery lists the partitions with
 * non-terminal records every `discoveryInterval` (sooner when a persist of this process or a `WakeSignal`
 * in the context signals new work, SPEC §13) and queues the ones it does not hold, longest-waiting first;
 * free slots are leased from that queue (§4: a partition another live owner holds is skipped; an expired
 * lease is taken over), and a slot that frees up is refilled from it at once — one refill for every slot
 * freed meanwhile, with no new listing until the queue runs dry. Queued partitions left without a slot are
 * probed (is another relay serving them?), as many as this relay has slots; while some wait with no lease,
 * drained partitions give their slot up at once (`idleRelease`): after a claim that came back empty, or short
 * of its limit with every record of its batch settled (one idling in its back-off is woken for it, never
 * interrupted) and busy ones after a turn
 * (`maxTurn`, `maxTurnBatches`) — a turn ends between two cycles, so the lease is released with nothing
 * in flight and the next epoch's version fences anything left (R-CLAIM-2, R-CLAIM-4). The waiting
 * partitions are reported (`OutboxUnleasedPartitions`, `OutboxUnleasedOldestAge`, a WARN past
 * `starvationThreshold`). Each held lease is renewed every third of `leaseTtl`; a failed renew interrupts
 * that partition's drainer. A drainer that fails ends its worker and hands the partition back, to be
 * leased again under a new epoch. Closing the relay's scope stops discovery, interrupts every drainer
 * (each runs its bounded final drain) and releases every lease. Dead-letter policies in the drainer
 * options put `DeadLetterStore` in the requirements. Design notes: docs/design/drainer.md.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { InvalidConfiguration } from "../domain/OutboxError.js"
import { LeaseStore, type Lease } from "../services/LeaseStore.js"
import * as OutboxMetrics from "../services/OutboxMetrics.js"
import { OutboxStore } from "../services/OutboxStore.js"
import type { Sink } from "../services/Sink.js"
import { WakeHub, type WakeHubService } from "../services/WakeHub.js"
import { unlessThrough, WakeSignal, type WakeSignalService } from "../services/WakeSignal.js"
import * as Build from "./drainer/Build.js"
import type * as Cycle from "./drainer/Cycle.js"
import type * as Loop from "./drainer/Loop.js"
import type * as Drainer from "./Drainer.js"

/**
 * Options of a relay.
 *
 * @since 0.1.0
 */
export interface RelayOptions {
  /** This relay's lease owner id; distinct per relay instance. */
  readonly owner: string
  /** Lease time-to-live (default 30 s); leases are renewed every third of it. */
  readonly leaseTtl?: Duration.DurationInput | undefined
  /** Most partitions this relay drains at once (default 64). */
  readonly maxPartitions?: number | undefined
  /** Time between discovery rounds (default 5 s); a slot that frees up starts a round at once. */
  readonly discoveryInterval?: Duration.DurationInput | undefined
  /**
   * How long a drained partition keeps its slot while it claims nothing and other partitions with work
   * wait for a lease (default 0: it gives the slot up as soon as it is found drained: at a claim that comes
   * back empty, or short of its limit once that batch settled every record). Drained counts from then.
   */
  readonly idleRelease?: Duration.DurationInput | undefined
  /**
   * Longest turn of a busy partition while others wait (default 10 s): the drainer then finishes its
   * batch, gives the lease up and queues behind the waiting partitions. Records sent whose complete
   * failed hold the turn while the drainer retries their completes, for at most this long again: then
   * the turn ends anyway (logged; the partition's next owner delivers them again).
   */
  readonly maxTurn?: Duration.DurationInput | undefined
  /** Most batches of a busy partition's turn while others wait (default 20). */
  readonly maxTurnBatches?: number | undefined
  /**
   * How long a partition with work may wait for a lease before the relay logs a WARN (default 1 min;
   * `/readyz` reports not ready past the same age).
   */
  readonly starvationThreshold?: Duration.DurationInput | undefined
  /** Options of every drainer (partition and owner are filled in by the relay). */
  readonly drainer?: Omit<Drainer.DrainerOptions, "partitionKey" | "owner"> | undefined
}

/**
 * A running relay.
 *
 * @since 0.1.0
 */
export interface RelayHandle {
  /** The owner id. */
  readonly owner: string
  /** The partitions currently leased and drained. */
  readonly partitions: Effect.Effect<ReadonlyArray<string>>
  /** Runs one discovery round now (also runs on its own every `discoveryInterval`). */
  readonly discover: Effect.Effect<void>
  /**
   * Partitions with pending work that the last discovery round found without a live lease, and how long
   * the oldest of them has waited (as this relay saw it).
   */
  readonly unleased: Effect.Effect<{ readonly partitions: number; readonly oldestWait: Duration.Duration }>
}

/**
 * The drainer options of relay options (`undefined` when they have none).
 *
 * @since 0.1.0
 */
export type DrainerOptionsOf<Options> = Options extends { readonly drainer: infer D } ? D : undefined

/**
 * What a relay with these options needs: the stores and the sink, and a `DeadLetterStore` unless every
 * disposal policy of its drainer options is `"drop"` (see `Drainer.DeadLetterRequirement`).
 *
 * @since 0.1.0
 */
export type RelayRequirements<Options = RelayOptions> =
  OutboxStore | LeaseStore | Sink | Drainer.DeadLetterRequirement<DrainerOptionsOf<Options>>

/**
 * Starts a relay in the current scope; closing the scope shuts it down (drainers finish or release
 * what they hold, leases are released). Fails with `InvalidConfiguration` when the drainer options
 * are unusable (e.g. an empty owner).
 *
 * @since 0.1.0
 */
export const start = <const Options extends RelayOptions>(
  options: Options
): Effect.Effect<RelayHandle, InvalidConfiguration, RelayRequirements<Options> | Scope.Scope> => startWith(options)

/** Shortest time between two discovery rounds that a `WakeSignal` brings forward. */
const wakeFloor = Duration.millis(250)

/**
 * Discovery every `interval`, or sooner (not before `wakeFloor`) when new work is signalled: by a persist
 * of this process in a partition the relay does not drain yet (`WakeHub`), or by the backend's signal (for
 * such a partition too, when the signal names partitions: `WakeSignal.awaitWorkWhere`).
 */
const discoveryLoop = (
  discover: Effect.Effect<void>,
  interval: Duration.Duration,
  wake: WakeSignalService | undefined,
  hub: WakeHubService,
  held: (partitionKey: string) => boolean
): Effect.Effect<void> => {
  const floor = Duration.min(interval, wakeFloor)
  const rest = Duration.subtract(interval, floor)
  const unheld = (partitionKey: string) => !held(partitionKey)
  // a source that signals through this hub wakes the wait below without a wait of its own
  const source = unlessThrough(wake, hub)
  return Effect.gen(function* () {
    for (;;) {
      // armed before the round, so that work persisted during the round is not missed
      const mark = hub.mark()
      // a backend that names the partition wakes discovery only for one not drained here yet
      const signal =
        source === undefined
          ? undefined
          : yield* Effect.fork(
              source.awaitWorkWhere === undefined ? source.awaitAnyWork : source.awaitWorkWhere(unheld)
            )
      yield* discover
      yield* Effect.sleep(floor)
      const local = hub.awaitAnyWork(mark, unheld)
      yield* Effect.raceFirst(
        Effect.sleep(rest),
        signal === undefined ? local : Effect.raceFirst(Fiber.await(signal), local)
      )
      if (signal !== undefined) yield* Fiber.interruptFork(signal)
    }
  })
}

/** Lease acquires and lease reads a relay has in flight at once while it fills slots or probes. */
const leaseConcurrency = 16

/** How often the starvation WARN may repeat while partitions keep waiting. */
const warnEvery = Duration.toMillis(Duration.minutes(1))

/** One leased partition: its worker fiber and the state of its turn. */
interface Slot {
  readonly lease: Lease
  fiber: Fiber.RuntimeFiber<void> | undefined
  readonly startedAt: number
  /** Cycles of this turn that claimed records. */
  batches: number
  /**
   * Since when the partition has been drained (see {@link drained}): the first of a run of empty claims, or
   * the last claim short of its limit whose batch settled every record; undefined otherwise.
   */
  idleSince: number | undefined
  /** Records earlier cycles left claimed (sent but not completed, or not yet released). */
  stranded: number
  /** Since when the turn has had stranded records without a break; undefined while it has none. */
  strandedSince: number | undefined
  /** The turn was asked to end. */
  ending: boolean
}

/**
 * Whether a leased cycle left its partition drained: its claim came back empty or short of its limit and
 * not truncated (so it took every record claimable when it ran), and its batch settled every record (none
 * released back, none left claimed). One rule for empty and short claims: a truncated one is not drained.
 */
const drained = (result: Cycle.CycleResult): boolean =>
  result.claimed < result.limit && !result.truncated && result.deferred === 0 && result.leftClaimed === 0

const startWith = (
  options: RelayOptions
): Effect.Effect<RelayHandle, InvalidConfiguration, OutboxStore | LeaseStore | Sink | Scope.Scope> =>
  Effect.gen(function* () {
    const owner = options.owner
    const leaseTtl = Duration.decode(options.leaseTtl ?? "30 seconds")
    const idleRelease = Duration.decode(options.idleRelease ?? 0)
    const maxTurn = Duration.decode(options.maxTurn ?? "10 seconds")
    const starvationThreshold = Duration.decode(options.starvationThreshold ?? "1 minute")
    const maxTurnBatches = options.maxTurnBatches ?? 20
    const problems: Array<string> = []
    if (typeof owner !== "string" || owner.length === 0) problems.push("owner must be a non-empty string")
    if (!Duration.isFinite(leaseTtl) || Duration.toMillis(leaseTtl) < 1) {
      problems.push("leaseTtl must be a finite duration of at least 1 millisecond")
    }
    for (const [name, value] of [
      ["idleRelease", idleRelease],
      ["maxTurn", maxTurn],
      ["starvationThreshold", starvationThreshold]
    ] as const) {
      if (!Duration.isFinite(value)) problems.push(`${name} must be a finite duration`)
    }
    if (!Number.isSafeInteger(maxTurnBatches) || maxTurnBatches < 1) {
      problems.push("maxTurnBatches must be a positive integer")
    }
    if (problems.length > 0) return yield* new InvalidConfiguration({ component: "Relay", problems })
    const renewEvery = Duration.millis(Math.max(1, Math.floor(Duration.toMillis(leaseTtl) / 3)))
    const maxPartitions = Math.max(1, Math.floor(options.maxPartitions ?? 64))
    const discoveryInterval = Duration.decode(options.discoveryInterval ?? "5 seconds")
    const idleReleaseMillis = Duration.toMillis(idleRelease)
    const maxTurnMillis = Duration.toMillis(maxTurn)
    const starvationMillis = Duration.toMillis(starvationThreshold)
    // lease reads per round for partitions this relay has no slot for (is another relay serving them?)
    const probeLimit = Math.max(64, 2 * maxPartitions)
    const drainerOptions = options.drainer ?? {}
    // validates the drainer options once, before anything is leased
    yield* Build.build({ ...drainerOptions, partitionKey: "relay-configuration-check", owner })

    const store = yield* OutboxStore
    const leases = yield* LeaseStore
    const wake = Option.getOrUndefined(yield* Effect.serviceOption(WakeSignal))
    const hub = yield* WakeHub
    const context = yield* Effect.context<OutboxStore | LeaseStore | Sink>()
    const scope = yield* Effect.scope
    const workers = new Map<string, Slot>()
    /** Partitions with pending work known to have no live lease, and since when this relay saw them so. */
    const waiting = new Map<string, number>()
    /** Turns that may still end in favour of waiting partitions before the next discovery round. */
    let yieldBudget = 0
    /**
     * Partitions of the last listing this relay holds no slot for, in the order they get one (the
     * longest-waiting first); freed slots are filled from it until it runs dry or the next round.
     */
    let queue: Array<string> = []
    let lastWarnAt = Number.NEGATIVE_INFINITY
    let stopping = false
    const kicks = yield* Queue.sliding<void>(1)
    const roundLock = yield* Effect.makeSemaphore(1)
    const unleasedCount = Metric.tagged(OutboxMetrics.OutboxUnleasedPartitions, "relay", owner)
    const unleasedAge = Metric.tagged(OutboxMetrics.OutboxUnleasedOldestAge, "relay", owner)

    const renewLoop = (lease: Lease): Effect.Effect<never, string> =>
      Effect.gen(function* () {
        for (;;) {
          yield* Effect.sleep(renewEvery)
          const renewed = yield* Effect.either(leases.renew(lease.partitionKey, lease.token, leaseTtl))
          if (Either.isLeft(renewed)) return yield* Effect.fail(renewed.left.message)
        }
      })

    /**
     * Ends a turn between cycles while partitions wait: once the partition is drained (an empty claim, or a
     * short one that settled its batch), or after a long turn.
     */
    const endTurn =
      (slot: Slot): Loop.TurnEnd =>
      (result, stranded) =>
        Effect.clockWith((clock) =>
          Effect.sync(() => {
            const now = clock.unsafeCurrentTimeMillis()
            slot.stranded = stranded
            if (stranded === 0) slot.strandedSince = undefined
            else if (slot.strandedSince === undefined) slot.strandedSince = now
            if (result !== undefined && result.leased) {
              if (result.claimed > 0) slot.batches += 1
              // drained since the first of a run of drained cycles; a cycle that claimed records starts it anew
              if (!drained(result)) slot.idleSince = undefined
              else if (result.claimed > 0 || slot.idleSince === undefined) slot.idleSince = now
            }
            if (stopping) return false
            // Records sent but not completed hold the turn: the drainer retries their completes under this
            // lease, and a new owner would deliver them again. For at most `maxTurn`: a complete that keeps
            // failing must not keep the slot from waiting partitions forever (their next owner delivers
            // them again, at least once, already counted as duplicate risk; their younger siblings stay
            // behind them).
            const strandedHold = slot.strandedSince !== undefined && now - slot.strandedSince < maxTurnMillis
            if (strandedHold) return false
            // asked to end by a discovery round or a refill (see `handOn`)
            if (slot.ending) return true
            if (yieldBudget <= 0) return false
            const idle = stranded === 0 && slot.idleSince !== undefined && now - slot.idleSince >= idleReleaseMillis
            const turnOver = slot.batches >= maxTurnBatches || now - slot.startedAt >= maxTurnMillis
            if (!idle && !turnOver) return false
            yieldBudget -= 1
            slot.ending = true
            // a partition that still has work queues up again behind the ones that waited
            if (!idle) {
              waiting.set(slot.lease.partitionKey, now)
              queue.push(slot.lease.partitionKey)
            }
            return true
          })
        ).pipe(
          // a turn that leaves stranded records behind says so: they are delivered again
          Effect.tap((end) =>
            end && stranded > 0
              ? Effect.logWarning(
                  `turn ended with ${stranded} records still claimed after their completes kept failing; the partition's next owner delivers them again`
                ).pipe(Effect.annotateLogs({ partition: slot.lease.partitionKey, owner, stranded }))
              : Effect.void
          )
        )

    /** Drains one leased partition until its turn ends, its drainer fails or its renew fails. */
    const worker = (slot: Slot): Effect.Effect<void> =>
      Effect.gen(function* () {
        const lease = slot.lease
        const partitionKey = lease.partitionKey
        const drainer = yield* Build.build({ ...drainerOptions, partitionKey, owner })
        // not `raceFirst`: interrupting a race does not wait for the loser's finalizers, so the lease
        // would be released while the drainer's final drain still has sends in flight. Here a failed
        // renew, or the worker's own interruption, interrupts the drainer and waits for it to stop.
        const drain = yield* Effect.fork(drainer.runTurn(endTurn(slot)))
        const renew = yield* Effect.fork(
          renewLoop(lease).pipe(
            Effect.catchAll((reason) =>
              Effect.zipRight(
                Effect.logWarning("lease renew failed; stopping the drainer").pipe(
                  Effect.annotateLogs({ reason }),
                  Effect.zipRight(
                    Metric.increment(OutboxMetrics.tagged(OutboxMetrics.OutboxLeaseLost, lease.partitionKey))
                  )
                ),
                Fiber.interrupt(drain)
              )
            )
          )
        )
        const exit = yield* Fiber.await(drain).pipe(Effect.onInterrupt(() => Fiber.interrupt(drain)))
        yield* Fiber.interrupt(renew)
        if (Exit.isFailure(exit)) {
          yield* Effect.logWarning("drainer stopped; partition handed back").pipe(
            Effect.annotateLogs({ cause: Cause.pretty(exit.cause) })
          )
        }
      }).pipe(
        Effect.catchAll((error) =>
          Effect.logError("drainer could not start").pipe(Effect.annotateLogs({ error: error.message }))
        ),
        Effect.ensuring(Effect.ignore(leases.release(slot.lease.partitionKey, slot.lease.token))),
        Effect.ensuring(
          Effect.sync(() => {
            workers.delete(slot.lease.partitionKey)
          })
        ),
        // the freed slot goes to a waiting partition at once
        Effect.ensuring(Queue.offer(kicks, undefined)),
        Effect.annotateLogs({ partition: slot.lease.partitionKey, owner }),
        Effect.provide(context)
      )

    /**
     * Leases a partition into a free slot and starts its worker; not interrupted between a granted lease
     * and its registered worker (shutdown must find the worker to release the lease).
     */
    const lease = (partitionKey: string, now: number): Effect.Effect<void> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function* () {
          const acquired = yield* Effect.either(leases.acquire(partitionKey, owner, leaseTtl))
          if (Either.isLeft(acquired)) {
            // LeaseHeld: another live owner serves the partition
            if (acquired.left._tag !== "LeaseHeld") {
              yield* Effect.logWarning("lease acquire failed").pipe(
                Effect.annotateLogs({ partition: partitionKey, error: acquired.left.message })
              )
            }
            return
          }
          if (stopping) return yield* Effect.ignore(leases.release(partitionKey, acquired.right.token))
          yield* Metric.increment(OutboxMetrics.tagged(OutboxMetrics.OutboxLeaseAcquired, partitionKey))
          // lease churn is read from both counters: the lost one exists (at zero) once a lease is held
          yield* Metric.incrementBy(OutboxMetrics.tagged(OutboxMetrics.OutboxLeaseLost, partitionKey), 0)
          yield* Effect.logDebug("partition leased").pipe(
            Effect.annotateLogs({ partition: partitionKey, version: acquired.right.token.version })
          )
          const slot: Slot = {
            lease: acquired.right,
            fiber: undefined,
            startedAt: now,
            batches: 0,
            idleSince: undefined,
            stranded: 0,
            strandedSince: undefined,
            ending: false
          }
          workers.set(partitionKey, slot)
          const fiber = yield* Effect.forkDaemon(restore(worker(slot)))
          if (workers.get(partitionKey) === slot) slot.fiber = fiber
        })
      )

    /** Whether another owner holds a live lease of the partition (`undefined` when the read failed). */
    const leasedElsewhere = (partitionKey: string, now: number): Effect.Effect<boolean | undefined> =>
      Effect.map(Effect.either(leases.current(partitionKey)), (current) =>
        Either.isRight(current)
          ? DateTime.toEpochMillis(current.right.expiresAt) > now
          : current.left._tag === "LeaseNotFound"
            ? false
            : undefined
      )

    /**
     * Leases the queue's partitions, in order, into the free slots: one acquire per free slot at a time
     * (`leaseConcurrency` in flight), the next ones in the queue taking the slots of those another owner
     * holds. A partition still held here (its turn is ending) goes back to the end of the queue.
     */
    const fill = (now: number): Effect.Effect<void> =>
      Effect.gen(function* () {
        const held: Array<string> = []
        while (!stopping && workers.size < maxPartitions && queue.length > 0) {
          const batch: Array<string> = []
          while (batch.length < maxPartitions - workers.size && queue.length > 0) {
            const partitionKey = queue.shift()
            if (partitionKey === undefined) break
            if (workers.has(partitionKey)) held.push(partitionKey)
            else batch.push(partitionKey)
          }
          for (const partitionKey of batch) waiting.delete(partitionKey)
          yield* Effect.forEach(batch, (partitionKey) => lease(partitionKey, now), {
            concurrency: leaseConcurrency,
            discard: true
          })
        }
        for (const partitionKey of held) queue.push(partitionKey)
      })

    /**
     * Probes queued partitions this relay has no slot for (is another relay serving them?): those another
     * owner holds leave the queue, the others wait. `all` re-reads the queue's head up to `probeLimit`
     * (a discovery round); otherwise only partitions not known to wait are read, until as many wait as
     * this relay has slots (enough to hand every slot on at once).
     */
    const probe = (now: number, all: boolean): Effect.Effect<void> =>
      Effect.gen(function* () {
        if (stopping || queue.length === 0) return
        const keys: Array<string> = []
        let known = waiting.size
        for (const partitionKey of queue) {
          if (keys.length >= probeLimit || (!all && known >= maxPartitions)) break
          if (!all && waiting.has(partitionKey)) continue
          keys.push(partitionKey)
          if (!waiting.has(partitionKey)) known += 1
        }
        if (keys.length === 0) return
        const elsewhere = new Set<string>()
        yield* Effect.forEach(
          keys,
          (partitionKey) =>
            Effect.map(leasedElsewhere(partitionKey, now), (found) => {
              if (found === true) {
                waiting.delete(partitionKey)
                elsewhere.add(partitionKey)
              } else if (found === false && !waiting.has(partitionKey)) waiting.set(partitionKey, now)
            }),
          { concurrency: leaseConcurrency, discard: true }
        )
        if (elsewhere.size > 0) queue = queue.filter((partitionKey) => !elsewhere.has(partitionKey))
      })

    /**
     * Hands slots on to waiting partitions (drainers idling in their back-off are woken to end their turn
     * at once rather than after the back-off) and reports the waiting ones.
     */
    const handOn = (now: number): Effect.Effect<void> =>
      Effect.gen(function* () {
        yieldBudget = waiting.size
        for (const slot of workers.values()) {
          if (yieldBudget <= 0) break
          const idle = slot.idleSince !== undefined && now - slot.idleSince >= idleReleaseMillis
          if (slot.ending || slot.stranded > 0 || !idle || slot.fiber === undefined) continue
          yieldBudget -= 1
          slot.ending = true
          // woken rather than interrupted: its next cycle ends the turn between two cycles, so nothing it
          // holds (a claim, a pooled connection, a lease read) is cut off midway
          hub.signal(slot.lease.partitionKey)
        }
        let oldest = now
        for (const since of waiting.values()) oldest = Math.min(oldest, since)
        const oldestMillis = now - oldest
        yield* Metric.set(unleasedCount, waiting.size)
        yield* Metric.set(unleasedAge, oldestMillis / 1000)
        if (oldestMillis >= starvationMillis && now - lastWarnAt >= warnEvery) {
          lastWarnAt = now
          yield* Effect.logWarning(
            `${waiting.size} partitions with pending work have no lease; the oldest has waited ${Duration.format(Duration.millis(oldestMillis))} (this relay drains at most ${maxPartitions} at once)`
          ).pipe(Effect.annotateLogs({ unleased: waiting.size, oldestWaitMillis: oldestMillis, maxPartitions }))
        }
      })

    /** A discovery round: lists the partitions with work, queues the ones not held here, fills, probes. */
    const round: Effect.Effect<void> = Effect.gen(function* () {
      if (stopping) return
      const listed = yield* Effect.either(Stream.runCollect(store.listPartitions))
      if (Either.isLeft(listed)) {
        yield* Effect.logWarning("partition discovery failed").pipe(Effect.annotateLogs({ error: listed.left.message }))
        return
      }
      const now = yield* Clock.currentTimeMillis
      const keys = Chunk.toReadonlyArray(listed.right)
      const present = new Set(keys)
      for (const partitionKey of waiting.keys()) if (!present.has(partitionKey)) waiting.delete(partitionKey)
      // the longest-waiting first; partitions not seen waiting before keep the listing's order
      queue = keys
        .filter((partitionKey) => !workers.has(partitionKey))
        .map((partitionKey, index) => ({ partitionKey, index, since: waiting.get(partitionKey) ?? now }))
        .sort((a, b) => a.since - b.since || a.index - b.index)
        .map((candidate) => candidate.partitionKey)
      yield* fill(now)
      yield* probe(now, true)
      yield* handOn(now)
    })

    /**
     * What a freed slot starts: the queue of the last round fills the free slots (no listing, no lease
     * scan per slot); only when it has run dry with slots still free does a new round list the partitions.
     */
    const refill: Effect.Effect<void> = Effect.gen(function* () {
      if (stopping) return
      const now = yield* Clock.currentTimeMillis
      yield* fill(now)
      if (workers.size < maxPartitions && queue.length === 0) return yield* round
      yield* probe(now, false)
      yield* handOn(now)
    })

    const locked = (effect: Effect.Effect<void>): Effect.Effect<void> =>
      roundLock.withPermits(1)(effect).pipe(Effect.annotateLogs({ owner }), Effect.withTracerEnabled(false))
    const discover = locked(round)

    const discovery = yield* Effect.forkDaemon(
      discoveryLoop(discover, discoveryInterval, wake, hub, (p) => workers.has(p))
    )
    // freed slots coalesce: kicks that arrive while a refill or round runs make one more refill after it
    const kicked = yield* Effect.forkDaemon(Effect.forever(Effect.zipRight(Queue.take(kicks), locked(refill))))

    yield* Scope.addFinalizer(
      scope,
      Effect.gen(function* () {
        stopping = true
        yield* Fiber.interrupt(discovery)
        yield* Fiber.interrupt(kicked)
        yield* Fiber.interruptAll(
          Array.from(workers.values()).flatMap((slot) => (slot.fiber === undefined ? [] : [slot.fiber]))
        )
        yield* Metric.set(unleasedCount, 0)
        yield* Metric.set(unleasedAge, 0)
        yield* Effect.logInfo("relay stopped").pipe(Effect.annotateLogs({ owner }))
      })
    )

    return {
      owner,
      partitions: Effect.sync(() => Array.from(workers.keys()).sort()),
      discover,
      unleased: Effect.clockWith((clock) =>
        Effect.sync(() => {
          const now = clock.unsafeCurrentTimeMillis()
          let oldest = now
          for (const since of waiting.values()) oldest = Math.min(oldest, since)
          return { partitions: waiting.size, oldestWait: Duration.millis(now - oldest) }
        })
      )
    }
  })

/**
 * Runs a relay until interrupted.
 *
 * @since 0.1.0
 */
export const run = <const Options extends RelayOptions>(
  options: Options
): Effect.Effect<never, InvalidConfiguration, RelayRequirements<Options>> =>
  Effect.scoped(Effect.zipRight(startWith(options), Effect.never))

/**
 * A relay as a layer: starts with the layer, stops (releasing every lease) when the layer's scope
 * closes.
 *
 * @since 0.1.0
 */
export const layer = <const Options extends RelayOptions>(
  options: Options
): Layer.Layer<never, InvalidConfiguration, RelayRequirements<Options>> => Layer.scopedDiscard(startWith(options))
