/**
 * The optional `WakeSignal` port: a backend that can notice new work (e.g. PostgreSQL `LISTEN` on a
 * channel its persist `NOTIFY`s) tells idle drainers and the relay's discovery to stop backing off.
 * Polling stays the fallback: a lost or late signal only delays work until the next poll, never loses
 * it (SPEC §3.4).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type { WakeHubService } from "./WakeHub.js"

/**
 * A source of "there may be new work" signals.
 *
 * @since 0.1.0
 */
export interface WakeSignalService {
  /**
   * Completes when new work may have arrived for the partition (or for any partition, for a backend
   * that cannot tell which) after the call started. Never fails: a broken signal source simply never
   * completes, and callers race it against their poll interval.
   */
  readonly awaitWork: (partitionKey: string) => Effect.Effect<void>
  /** Completes when new work may have arrived in any partition after the call started. */
  readonly awaitAnyWork: Effect.Effect<void>
  /**
   * Completes when new work may have arrived, after the call started, in a partition `matches` accepts.
   * Optional: a backend whose signal names the partition offers it, so that a relay's discovery wakes only
   * for partitions it does not drain yet (the others' drainers are woken through `awaitWork`); without it,
   * callers use `awaitAnyWork`.
   */
  readonly awaitWorkWhere?: ((matches: (partitionKey: string) => boolean) => Effect.Effect<void>) | undefined
  /**
   * The `WakeHub` through which the source gives each of its signals as well, if it does (as
   * `SqliteWakeSignal` does): a drainer waiting on that same hub then needs no wait of its own on this
   * source (a fiber per wait, forked again after every signal). Optional.
   *
   * @since 0.2.0
   */
  readonly signalsThrough?: WakeHubService | undefined
}

/**
 * The `WakeSignal` service tag. Optional: programs read it with `Effect.serviceOption` and poll alone
 * when it is absent.
 *
 * @since 0.1.0
 */
export class WakeSignal extends Context.Tag("effect-outbox/WakeSignal")<WakeSignal, WakeSignalService>() {}

/**
 * The source a waiter on `hub` must still wait on beside the hub: none when the source gives its signals
 * through that hub (`signalsThrough`, as `SqliteWakeSignal` does), since a wait on the hub already sees
 * them; else the source itself. The drainer's idle pause and the relay's discovery wait both ask it.
 *
 * @since 0.2.0
 */
export const unlessThrough = (
  wake: WakeSignalService | undefined,
  hub: WakeHubService
): WakeSignalService | undefined => (wake?.signalsThrough === hub ? undefined : wake)
