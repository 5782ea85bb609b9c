/**
 * Liveness and readiness of a relay process (SPEC §10): ready when the store answers, the relay is
 * running, no drainer stalled recently (`OutboxDrainStalled` did not grow within the stall window) and no
 * partition with pending work has waited for a lease longer than `starvationThreshold`
 * (`OutboxUnleasedOldestAge`: the relays lack slots for the partitions they could serve).
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as MetricState from "effect/MetricState"
import * as Option from "effect/Option"
import { OutboxStore } from "../../services/OutboxStore.js"

/**
 * The readiness verdict: `ready` and, when not, the reasons (one line each, no secrets).
 *
 * @since 0.1.0
 */
export interface Readiness {
  readonly ready: boolean
  readonly reasons: ReadonlyArray<string>
  readonly checks: {
    readonly store: "ok" | "unreachable"
    readonly relay: "running" | "stopped" | "absent"
    readonly drainers: "ok" | "stalled"
  }
}

/**
 * Options of {@link make}.
 *
 * @since 0.1.0
 */
export interface ReadinessOptions {
  /** Whether the relay runs; absent for a dashboard without a relay. */
  readonly relayRunning?: Effect.Effect<boolean> | undefined
  /** How long a drainer stall keeps the process unready (default 1 minute). */
  readonly stallWindow?: Duration.DurationInput | undefined
  /** How long the store may take to answer the probe (default 2 seconds). */
  readonly storeTimeout?: Duration.DurationInput | undefined
  /** How long a partition with work may wait for a lease before the process is not ready (default 1 minute). */
  readonly starvationThreshold?: Duration.DurationInput | undefined
}

/** The name of the watchdog counter (`OutboxMetrics.OutboxDrainStalled`). */
const stalledName = "OutboxDrainStalled"

/** The longest wait for a lease any relay of this process reported (`OutboxUnleasedOldestAge`), in seconds. */
const unleasedOldest: Effect.Effect<number> = Effect.map(Metric.snapshot, (pairs) => {
  let oldest = 0
  for (const pair of pairs) {
    const state: unknown = pair.metricState
    if (pair.metricKey.name === "OutboxUnleasedOldestAge" && MetricState.isGaugeState(state)) {
      oldest = Math.max(oldest, Number(state.value))
    }
  }
  return oldest
})

/** The sum of `OutboxDrainStalled` over every tag set in this process. */
const stalledTotal: Effect.Effect<number> = Effect.map(Metric.snapshot, (pairs) => {
  let total = 0
  for (const pair of pairs) {
    const state: unknown = pair.metricState
    if (pair.metricKey.name === stalledName && MetricState.isCounterState(state)) {
      total += Number(state.count)
    }
  }
  return total
})

/**
 * Builds the readiness check. The store probe is a `countPending` of a partition nobody uses, bounded
 * by `storeTimeout`; any failure or timeout is "unreachable".
 *
 * @since 0.1.0
 */
export const make = (options: ReadinessOptions = {}): Effect.Effect<Effect.Effect<Readiness>, never, OutboxStore> =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    const stallWindowMillis = Duration.toMillis(Duration.decode(options.stallWindow ?? "1 minute"))
    const storeTimeout = Duration.decode(options.storeTimeout ?? "2 seconds")
    const starvationSeconds = Duration.toMillis(Duration.decode(options.starvationThreshold ?? "1 minute")) / 1000
    let lastStalled = yield* stalledTotal
    let lastStallAt = Option.none<number>()

    return Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const stalled = yield* stalledTotal
      if (stalled > lastStalled) {
        lastStalled = stalled
        lastStallAt = Option.some(now)
      }
      const drainerStalled = Option.isSome(lastStallAt) && now - lastStallAt.value < stallWindowMillis
      const storeOk = yield* store.countPending("effect-outbox/readyz").pipe(
        Effect.timeout(storeTimeout),
        Effect.as(true),
        // a backend that cannot count answered all the same
        Effect.catchTag("DepthUnsupported", () => Effect.succeed(true)),
        Effect.catchAll(() => Effect.succeed(false)),
        Effect.catchAllDefect(() => Effect.succeed(false))
      )
      const relay =
        options.relayRunning === undefined
          ? ("absent" as const)
          : (yield* options.relayRunning)
            ? ("running" as const)
            : ("stopped" as const)
      const reasons: Array<string> = []
      if (!storeOk) reasons.push("the outbox store did not answer")
      if (relay === "stopped") reasons.push("the relay is not running")
      if (drainerStalled) reasons.push("a drainer stalled within the stall window")
      const waited = yield* unleasedOldest
      if (relay === "running" && waited >= starvationSeconds) {
        reasons.push(
          `partitions with pending work have waited ${Math.floor(waited)} s for a lease: the relays cannot keep up (raise maxPartitions or add relays)`
        )
      }
      return {
        ready: reasons.length === 0,
        reasons,
        checks: {
          store: storeOk ? "ok" : "unreachable",
          relay,
          drainers: drainerStalled ? "stalled" : "ok"
        }
      } satisfies Readiness
    })
  })
