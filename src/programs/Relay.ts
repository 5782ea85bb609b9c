/**
 * The relay (SPEC §6): runs one drainer per partition it can lease. Discovery lists the partitions with
 * non-terminal records every `discoveryInterval` (sooner when a persist of this process or a `WakeSignal`
 * in the context signals new work, SPEC §13) and
 * leases each it does not hold, up to `maxPartitions` (§4: a partition another owner holds is skipped).
 * Each held lease is renewed every third of `leaseTtl`; a failed renew interrupts that partition's
 * drainer. A drainer that fails ends its worker and hands the partition back, to be leased again under
 * a new epoch (R-CLAIM-4). Closing the relay's scope stops discovery, interrupts every drainer (each runs
 * its bounded final drain) and releases every lease. Dead-letter policies in the drainer options put
 * `DeadLetterStore` in the requirements. Design notes: docs/design/drainer.md.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { InvalidConfiguration } from "../domain/OutboxError.js"
import { LeaseStore, type Lease } from "../services/LeaseStore.js"
import * as OutboxMetrics from "../services/OutboxMetrics.js"
import { OutboxStore } from "../services/OutboxStore.js"
import type { Sink } from "../services/Sink.js"
import { WakeHub, type WakeHubService } from "../services/WakeHub.js"
import { WakeSignal, type WakeSignalService } from "../services/WakeSignal.js"
import * as Build from "./drainer/Build.js"
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
  /** Time between discovery rounds (default 5 s). */
  readonly discoveryInterval?: Duration.DurationInput | undefined
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
 * of this process in a partition the relay does not drain yet (`WakeHub`), or by the backend's signal.
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
  return Effect.gen(function* () {
    for (;;) {
      // armed before the round, so that work persisted during the round is not missed
      const mark = hub.mark()
      const signal = wake === undefined ? undefined : yield* Effect.fork(wake.awaitAnyWork)
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

const startWith = (
  options: RelayOptions
): Effect.Effect<RelayHandle, InvalidConfiguration, OutboxStore | LeaseStore | Sink | Scope.Scope> =>
  Effect.gen(function* () {
    const owner = options.owner
    const leaseTtl = Duration.decode(options.leaseTtl ?? "30 seconds")
    const problems: Array<string> = []
    if (typeof owner !== "string" || owner.length === 0) problems.push("owner must be a non-empty string")
    if (!Duration.isFinite(leaseTtl) || Duration.toMillis(leaseTtl) < 1) {
      problems.push("leaseTtl must be a finite duration of at least 1 millisecond")
    }
    if (problems.length > 0) return yield* new InvalidConfiguration({ component: "Relay", problems })
    const renewEvery = Duration.millis(Math.max(1, Math.floor(Duration.toMillis(leaseTtl) / 3)))
    const maxPartitions = Math.max(1, Math.floor(options.maxPartitions ?? 64))
    const discoveryInterval = Duration.decode(options.discoveryInterval ?? "5 seconds")
    const drainerOptions = options.drainer ?? {}
    // validates the drainer options once, before anything is leased
    yield* Build.build({ ...drainerOptions, partitionKey: "relay-configuration-check", owner })

    const store = yield* OutboxStore
    const leases = yield* LeaseStore
    const wake = Option.getOrUndefined(yield* Effect.serviceOption(WakeSignal))
    const hub = yield* WakeHub
    const context = yield* Effect.context<OutboxStore | LeaseStore | Sink>()
    const scope = yield* Effect.scope
    const workers = new Map<string, Fiber.RuntimeFiber<void>>()
    let stopping = false

    const renewLoop = (lease: Lease): Effect.Effect<never, string> =>
      Effect.gen(function* () {
        for (;;) {
          yield* Effect.sleep(renewEvery)
          const renewed = yield* Effect.either(leases.renew(lease.partitionKey, lease.token, leaseTtl))
          if (Either.isLeft(renewed)) return yield* Effect.fail(renewed.left.message)
        }
      })

    /** Drains one leased partition until its drainer fails, its renew fails, or it is interrupted. */
    const worker = (lease: Lease): Effect.Effect<void> =>
      Effect.gen(function* () {
        const partitionKey = lease.partitionKey
        const drainer = yield* Build.build({ ...drainerOptions, partitionKey, owner })
        // not `raceFirst`: interrupting a race does not wait for the loser's finalizers, so the lease
        // would be released while the drainer's final drain still has sends in flight. Here a failed
        // renew, or the worker's own interruption, interrupts the drainer and waits for it to stop.
        const drain = yield* Effect.fork(drainer.run)
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
        Effect.ensuring(Effect.ignore(leases.release(lease.partitionKey, lease.token))),
        Effect.ensuring(
          Effect.sync(() => {
            workers.delete(lease.partitionKey)
          })
        ),
        Effect.annotateLogs({ partition: lease.partitionKey, owner }),
        Effect.provide(context)
      )

    const discover: Effect.Effect<void> = Effect.gen(function* () {
      if (stopping || workers.size >= maxPartitions) return
      const listed = yield* Effect.either(Stream.runCollect(store.listPartitions))
      if (Either.isLeft(listed)) {
        yield* Effect.logWarning("partition discovery failed").pipe(Effect.annotateLogs({ error: listed.left.message }))
        return
      }
      for (const partitionKey of listed.right) {
        if (stopping || workers.size >= maxPartitions) return
        if (workers.has(partitionKey)) continue
        const acquired = yield* Effect.either(leases.acquire(partitionKey, owner, leaseTtl))
        if (Either.isLeft(acquired)) {
          if (acquired.left._tag !== "LeaseHeld") {
            yield* Effect.logWarning("lease acquire failed").pipe(
              Effect.annotateLogs({ partition: partitionKey, error: acquired.left.message })
            )
          }
          continue
        }
        if (stopping) {
          yield* Effect.ignore(leases.release(partitionKey, acquired.right.token))
          return
        }
        yield* Metric.increment(OutboxMetrics.tagged(OutboxMetrics.OutboxLeaseAcquired, partitionKey))
        // lease churn is read from both counters: the lost one exists (at zero) once a lease is held
        yield* Metric.incrementBy(OutboxMetrics.tagged(OutboxMetrics.OutboxLeaseLost, partitionKey), 0)
        yield* Effect.logDebug("partition leased").pipe(
          Effect.annotateLogs({ partition: partitionKey, version: acquired.right.token.version })
        )
        const fiber = yield* Effect.forkDaemon(worker(acquired.right))
        if (fiber.unsafePoll() === null) workers.set(partitionKey, fiber)
      }
    }).pipe(Effect.annotateLogs({ owner }), Effect.withTracerEnabled(false))

    const discovery = yield* Effect.forkDaemon(
      discoveryLoop(discover, discoveryInterval, wake, hub, (p) => workers.has(p))
    )

    yield* Scope.addFinalizer(
      scope,
      Effect.gen(function* () {
        stopping = true
        yield* Fiber.interrupt(discovery)
        yield* Fiber.interruptAll(Array.from(workers.values()))
        yield* Effect.logInfo("relay stopped").pipe(Effect.annotateLogs({ owner }))
      })
    )

    return {
      owner,
      partitions: Effect.sync(() => Array.from(workers.keys()).sort()),
      discover
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
