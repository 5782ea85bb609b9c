/**
 * The state one drainer keeps between its cycles (one drainer runs one cycle at a time): its services,
 * its tagged metrics (SPEC §8), the adaptive batch size, and the records an earlier cycle left claimed,
 * which later cycles complete or release while the lease version is unchanged (SPEC §6 step 6).
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import type { OutboxRecord } from "../../domain/OutboxRecord.js"
import type { DeadLetterStoreService } from "../../services/DeadLetterStore.js"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import type { LeaseFenceService } from "../../services/LeaseFence.js"
import type { LeaseStore } from "../../services/LeaseStore.js"
import { bind } from "../../services/BoundMetric.js"
import * as OutboxMetrics from "../../services/OutboxMetrics.js"
import type { OutboxStore } from "../../services/OutboxStore.js"
import { SendError, type Sink } from "../../services/Sink.js"
import type { WakeHubService } from "../../services/WakeHub.js"
import type { WakeSignalService } from "../../services/WakeSignal.js"
import type { DrainerSettings } from "./Settings.js"
import * as SinkHealth from "./SinkHealth.js"
import type * as Watchdog from "./Watchdog.js"

/**
 * The metrics of one partition (and the drainer's route), tagged once; deliveries, send failures and dead
 * letters follow each record's route ({@link routeMetrics}).
 *
 * @since 0.1.0
 */
export const metricsFor = (partitionKey: string, routeId: string | undefined) => {
  const tag = <Type, In, Out>(metric: Metric.Metric<Type, In, Out>) =>
    OutboxMetrics.tagged(metric, partitionKey, routeId)
  return {
    depth: tag(OutboxMetrics.OutboxDepth),
    claimedDepth: tag(OutboxMetrics.OutboxClaimedDepth),
    batchSize: tag(OutboxMetrics.OutboxClaimBatchSize),
    depthFailures: tag(OutboxMetrics.OutboxDepthFailures),
    completions: tag(OutboxMetrics.OutboxCompletions),
    duplicateRisk: tag(OutboxMetrics.OutboxDuplicateRisk),
    deferred: tag(OutboxMetrics.OutboxDeferred),
    stalled: tag(OutboxMetrics.OutboxDrainStalled),
    noLease: tag(OutboxMetrics.DrainSkippedNoLease),
    expired: tag(OutboxMetrics.MessagesExpired),
    /** The per-record and per-wave metrics, bound to their tags (`BoundMetric.bind`). */
    bound: {
      latency: bind(OutboxMetrics.OutboxDrainLatency, OutboxMetrics.tagsOf(partitionKey, routeId)),
      replayCount: bind(OutboxMetrics.OutboxReplayCount, OutboxMetrics.tagsOf(partitionKey, routeId))
    },
    dropped: {
      poison: Metric.tagged(tag(OutboxMetrics.MessagesDropped), "reason", "poison"),
      permanent: Metric.tagged(tag(OutboxMetrics.MessagesDropped), "reason", "permanent"),
      expired: Metric.tagged(tag(OutboxMetrics.MessagesDropped), "reason", "expired")
    }
  }
}

/**
 * The metrics of one partition that follow a record's route: deliveries, send failures and dead letters.
 *
 * @since 0.1.0
 */
export const routeMetricsFor = (partitionKey: string, routeId: string | undefined) => {
  const tag = <Type, In, Out>(metric: Metric.Metric<Type, In, Out>) =>
    OutboxMetrics.tagged(metric, partitionKey, routeId)
  return {
    delivered: tag(OutboxMetrics.OutboxDelivered),
    failures: tag(OutboxMetrics.OutboxRecordFailures),
    /** The per-wave counters, bound to their tags (`BoundMetric.bind`). */
    bound: {
      delivered: bind(OutboxMetrics.OutboxDelivered, OutboxMetrics.tagsOf(partitionKey, routeId)),
      failures: bind(OutboxMetrics.OutboxRecordFailures, OutboxMetrics.tagsOf(partitionKey, routeId))
    },
    dlq: {
      poison: Metric.tagged(tag(OutboxMetrics.DLQEntries), "category", "poison"),
      permanent: Metric.tagged(tag(OutboxMetrics.DLQEntries), "category", "permanent"),
      expired: Metric.tagged(tag(OutboxMetrics.DLQEntries), "category", "expired")
    }
  }
}

/**
 * The route-following metrics of a drainer.
 *
 * @since 0.1.0
 */
export type RouteMetrics = ReturnType<typeof routeMetricsFor>

/**
 * The route-following metrics of a record: tagged with the drainer's route when it has one, else with the
 * record's own `routeId` (built once per route and kept).
 *
 * @since 0.1.0
 */
export const routeMetrics = (instance: Instance, record: OutboxRecord): RouteMetrics => {
  const routeId = instance.config.routeId ?? record.routeId
  const known = instance.routes.get(routeId)
  if (known !== undefined) return known
  const made = routeMetricsFor(instance.config.partitionKey, routeId === "" ? undefined : routeId)
  instance.routes.set(routeId, made)
  return made
}

/**
 * The tagged metrics of a drainer.
 *
 * @since 0.1.0
 */
export type DrainerMetrics = ReturnType<typeof metricsFor>

/**
 * The services a drainer works with. `dlq` is absent when every policy drops; `wake` when no backend
 * signals new work; `fence` when the backend has no fenced complete.
 *
 * @since 0.1.0
 */
export interface Services {
  readonly store: OutboxStore["Type"]
  readonly leases: LeaseStore["Type"]
  readonly sink: Sink["Type"]
  readonly dlq: DeadLetterStoreService | undefined
  readonly wake: WakeSignalService | undefined
  /** The fenced complete, when the backend offers one: the end-of-batch complete is then the lease check. */
  readonly fence: LeaseFenceService | undefined
  /** The in-process wake-up: persists of this process end an idle pause at once. */
  readonly hub: WakeHubService
}

/**
 * A lease read that found the lease held, and how long it stands (see `Instance.leaseHorizon`).
 *
 * @since 0.1.0
 */
export interface LeaseHorizon {
  readonly token: LeaseToken.LeaseToken
  readonly writes: number
  readonly untilMillis: number
}

/**
 * The deadline timers a drainer's loop keeps (see `Watchdog`): the batch watchdog's and the waves' sends'.
 *
 * @since 0.2.0
 */
export interface Timers {
  readonly watchdog: Watchdog.Timer
  readonly send: Watchdog.Timer
}

/**
 * One drainer's settings, services and state.
 *
 * @since 0.1.0
 */
export interface Instance extends Services {
  readonly config: DrainerSettings
  readonly metrics: DrainerMetrics
  /** The route-following metrics per route (`""`: no route), built on first use. */
  readonly routes: Map<string, RouteMetrics>
  /**
   * The error of a send that outlived `sendTimeout` (a transient failure), made on first use: most drainers
   * never need it, and a relay builds a drainer for every partition it leases.
   */
  readonly timeoutError: () => SendError
  readonly gaugeIntervalMillis: number
  readonly expireIntervalMillis: number
  readonly watchdog: Duration.Duration
  /** The deadline timers of the running loop (`Watchdog.start`); none outside the loop (`drainOnce`). */
  timers: Timers | undefined
  /** Transient send failures in a row, and when they were last logged. */
  readonly sinkHealth: SinkHealth.SinkHealth
  /** The claim size of the next cycle. */
  currentBatchSize: number
  /**
   * Every send of the last wave finished without waiting: the next wave offers every lane (a wide wave),
   * still with at most `maxConcurrency` sends in flight (see `Waves`).
   */
  sendsAtOnce: boolean
  /** Complete, release and dead-letter write calls so far (see `BatchState.leaseHeldAt`). */
  storeCalls: number
  /**
   * What the last lease read (or a renew of this owner's written since) found held, while it still stands
   * (`LeaseWrites`): the token, the partition's lease-write count at the read, and the instant the read
   * stops standing in for a new one.
   */
  leaseHorizon: LeaseHorizon | undefined
  lastGaugeAt: number
  lastSweepAt: number
  /** The lease version `toComplete` and `toRelease` belong to. */
  strandedVersion: number
  /** Records left claimed after they were delivered or disposed: to complete in a later cycle. */
  readonly toComplete: Map<string, OutboxRecord>
  /** Records left claimed without a send: to release in a later cycle. */
  readonly toRelease: Map<string, OutboxRecord>
}

/** The timeout error of {@link Instance.timeoutError}, made once, when first asked for. */
const timeoutErrorOf = (sendTimeout: Duration.Duration): (() => SendError) => {
  let made: SendError | undefined
  return () =>
    (made ??= new SendError({
      retryable: true,
      code: "timeout",
      message: `send did not finish within ${Duration.toMillis(sendTimeout)} ms`
    }))
}

/**
 * A fresh drainer instance.
 *
 * @since 0.1.0
 */
export const make = (config: DrainerSettings, services: Services): Instance => ({
  ...services,
  config,
  metrics: metricsFor(config.partitionKey, config.routeId),
  routes: new Map(),
  timeoutError: timeoutErrorOf(config.sendTimeout),
  gaugeIntervalMillis: Duration.toMillis(config.gaugeInterval),
  expireIntervalMillis: Duration.toMillis(config.expireInterval),
  watchdog: Duration.sum(config.batchTimeout, config.watchdogGrace),
  timers: undefined,
  sinkHealth: SinkHealth.make(config.partitionKey),
  currentBatchSize: config.batchSize,
  sendsAtOnce: false,
  storeCalls: 0,
  leaseHorizon: undefined,
  lastGaugeAt: Number.NEGATIVE_INFINITY,
  lastSweepAt: Number.NEGATIVE_INFINITY,
  strandedVersion: 0,
  toComplete: new Map(),
  toRelease: new Map()
})
