/**
 * Builds a drainer from its options and the services in the context: `OutboxStore`, `LeaseStore`,
 * `Sink`, and, when present, `DeadLetterStore` and `WakeSignal`. A dead-letter policy without a
 * `DeadLetterStore` is refused with `InvalidConfiguration` (the public `Drainer.make` makes it a compile
 * error instead), as are an empty partition key or owner.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { InvalidConfiguration } from "../../domain/OutboxError.js"
import { DeadLetterStore } from "../../services/DeadLetterStore.js"
import { LeaseFence } from "../../services/LeaseFence.js"
import { LeaseStore } from "../../services/LeaseStore.js"
import { OutboxStore } from "../../services/OutboxStore.js"
import { Sink } from "../../services/Sink.js"
import { WakeHub } from "../../services/WakeHub.js"
import { WakeSignal } from "../../services/WakeSignal.js"
import * as Cycle from "./Cycle.js"
import * as Instance from "./Instance.js"
import * as Loop from "./Loop.js"
import { type DrainerOptions, type DrainerSettings, settings } from "./Settings.js"

/**
 * A drainer of one partition.
 *
 * @since 0.1.0
 */
export interface Drainer {
  readonly settings: DrainerSettings
  /** One cycle with the given claim limit (default: the current adaptive batch size). */
  readonly drainOnce: (limit?: number) => Effect.Effect<Cycle.CycleResult, Cycle.CycleError>
  /** The loop: cycles forever, adapting the batch size and backing off while idle. */
  readonly run: Effect.Effect<never, Loop.DrainError>
  /** The loop in a turn: returns between two cycles once `endTurn` says so (see `Loop.runTurn`). */
  readonly runTurn: (endTurn: Loop.TurnEnd) => Effect.Effect<void, Loop.DrainError>
  /** The current adaptive batch size. */
  readonly batchSize: Effect.Effect<number>
}

/**
 * What is wrong with the settings given the services at hand (empty when nothing is).
 *
 * @since 0.1.0
 */
export const problems = (config: DrainerSettings, hasDeadLetterStore: boolean): Array<string> => {
  const found: Array<string> = []
  if (config.partitionKey.length === 0) found.push("partitionKey is empty")
  if (config.owner.length === 0) found.push("owner is empty")
  if (!hasDeadLetterStore) {
    for (const [name, policy] of [
      ["onExpired", config.onExpired],
      ["onPermanentFailure", config.onPermanentFailure],
      ["onPoison", config.onPoison]
    ] as const) {
      if (policy === "dlq") found.push(`${name} is "dlq" but no DeadLetterStore is provided`)
    }
  }
  return found
}

/**
 * Builds a drainer, checking at run time what `Drainer.make` checks at compile time.
 *
 * @since 0.1.0
 */
export const build = (
  options: DrainerOptions
): Effect.Effect<Drainer, InvalidConfiguration, OutboxStore | LeaseStore | Sink> =>
  Effect.gen(function* () {
    const config = settings(options)
    const store = yield* OutboxStore
    const leases = yield* LeaseStore
    const sink = yield* Sink
    const dlq = yield* Effect.serviceOption(DeadLetterStore)
    const wake = yield* Effect.serviceOption(WakeSignal)
    const fence = yield* Effect.serviceOption(LeaseFence)
    const hub = yield* WakeHub
    const found = problems(config, Option.isSome(dlq))
    if (found.length > 0) return yield* new InvalidConfiguration({ component: "Drainer", problems: found })
    const instance = Instance.make(config, {
      store,
      leases,
      sink,
      dlq: Option.getOrUndefined(dlq),
      wake: Option.getOrUndefined(wake),
      fence: Option.getOrUndefined(fence),
      hub
    })
    return {
      settings: config,
      drainOnce: (limit?: number) => Cycle.drainOnce(instance, limit),
      run: Loop.run(instance),
      runTurn: (endTurn: Loop.TurnEnd) => Loop.runTurn(instance, endTurn),
      batchSize: Effect.sync(() => instance.currentBatchSize)
    }
  })
