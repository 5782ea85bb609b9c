/**
 * The drainer (SPEC §6): drains one partition while its owner holds the partition's lease. Each cycle
 * claims a batch, sends it through the `Sink` group by group (each ordering key strictly in age order;
 * nothing overtakes a head of its key, R-CLAIM-5), completes what was delivered, dead-letters or drops
 * what will not be (§5), and releases what failed transiently. The loop adapts the batch size and backs
 * off while idle; a `WakeSignal` in the context ends an idle pause early. Design: docs/design/drainer.md.
 *
 * A policy that dead-letters (the default for `onExpired`, `onPermanentFailure`, `onPoison`) puts
 * `DeadLetterStore` in the requirements of {@link make} and {@link run}; with every policy `"drop"`
 * it is not needed.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import { DrainStalled, type InvalidConfiguration } from "../domain/OutboxError.js"
import type { DeadLetterStore } from "../services/DeadLetterStore.js"
import type { LeaseStore } from "../services/LeaseStore.js"
import type { OutboxStore } from "../services/OutboxStore.js"
import type { Sink } from "../services/Sink.js"
import * as Build from "./drainer/Build.js"
import type { DrainError } from "./drainer/Loop.js"
import type { DrainerOptions } from "./drainer/Settings.js"

/**
 * The watchdog error, defined with every other error in `OutboxError` and re-exported here.
 *
 * @since 0.1.0
 */
export { DrainStalled }

/**
 * Options, settings and the pure rules of a cycle (defaults of SPEC §6, poison gate, expiry, grouping by
 * ordering key, adaptive batch size).
 *
 * @since 0.1.0
 */
export {
  type Disposal,
  type DrainerOptions,
  type DrainerSettings,
  groupByKey,
  isExpired,
  isPoison,
  nextBatchSize,
  settings
} from "./drainer/Settings.js"

/**
 * What one cycle did, and the errors that end a cycle.
 *
 * @since 0.1.0
 */
export type { CycleError, CycleResult } from "./drainer/Cycle.js"

/**
 * Errors that end the loop: the lease was lost, or the watchdog fired.
 *
 * @since 0.1.0
 */
export type { DrainError } from "./drainer/Loop.js"

/**
 * A drainer of one partition.
 *
 * @since 0.1.0
 */
export type Drainer = Build.Drainer

/**
 * Options whose three disposal policies are all `"drop"`: no record is ever dead-lettered.
 *
 * @since 0.1.0
 */
export interface DropsEverything {
  readonly onExpired: "drop"
  readonly onPermanentFailure: "drop"
  readonly onPoison: "drop"
}

/**
 * `DeadLetterStore` unless the options (their literal types) drop under every policy; `never` then.
 *
 * @since 0.1.0
 */
export type DeadLetterRequirement<Options> = Options extends DropsEverything ? never : DeadLetterStore

/**
 * What a drainer with these options needs.
 *
 * @since 0.1.0
 */
export type DrainerRequirements<Options = DrainerOptions> =
  OutboxStore | LeaseStore | Sink | DeadLetterRequirement<Options>

/**
 * Builds a drainer. Fails with `InvalidConfiguration` when the partition key or owner is empty.
 *
 * @since 0.1.0
 */
export const make = <const Options extends DrainerOptions>(
  options: Options
): Effect.Effect<Drainer, InvalidConfiguration, DrainerRequirements<Options>> => Build.build(options)

/**
 * Builds a drainer and runs its loop.
 *
 * @since 0.1.0
 */
export const run = <const Options extends DrainerOptions>(
  options: Options
): Effect.Effect<never, DrainError | InvalidConfiguration, DrainerRequirements<Options>> =>
  Effect.flatMap(Build.build(options), (drainer) => drainer.run)
