/**
 * The dashboard's short memory (SPEC §10): an in-process ring of snapshots taken every `intervalMillis`
 * (default 2 s) and kept for `windowMillis` (default 15 minutes), from which the page draws its charts.
 * Each point holds the process's cumulative delivered, dead-lettered and sink-failure counts (from the
 * `OutboxDelivered`, `DLQEntries` and `OutboxRecordFailures` metrics, in total and per record route) and,
 * when an `OutboxInspection` is at hand, the store's pending and claimed depth and oldest pending age.
 * Rates are differences of neighbouring points; nothing is downloaded or persisted.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Metric from "effect/Metric"
import type * as MetricPair from "effect/MetricPair"
import * as MetricState from "effect/MetricState"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import type { OutboxInspectionService } from "../../services/OutboxInspection.js"

/**
 * Cumulative counts since the process started.
 *
 * @since 0.1.0
 */
export interface Counts {
  readonly delivered: number
  readonly deadLettered: number
  readonly sinkFailures: number
}

/**
 * One snapshot.
 *
 * @since 0.1.0
 */
export interface Point extends Counts {
  /** Epoch milliseconds. */
  readonly at: number
  /** Pending records over all partitions; `null` without an inspection or when the store did not answer. */
  readonly pending: number | null
  /** Claimed records over all partitions. */
  readonly claimed: number | null
  /** Age of the oldest pending record over all partitions, in seconds (0 when none). */
  readonly oldestPendingAgeSeconds: number | null
  /** Counts per record route (routes beyond `maxRoutes` are summed under `_overflow`). */
  readonly routes: { readonly [route: string]: Counts }
}

/**
 * Options of the ring.
 *
 * @since 0.1.0
 */
export interface HistoryOptions {
  /** How often a snapshot is taken (default 2 s, at least 100 ms). */
  readonly intervalMillis?: number | undefined
  /** How long snapshots are kept (default 15 minutes). */
  readonly windowMillis?: number | undefined
  /** Distinct routes kept apart (default 50). */
  readonly maxRoutes?: number | undefined
}

/**
 * The ring.
 *
 * @since 0.1.0
 */
export interface History {
  readonly intervalMillis: number
  readonly windowMillis: number
  /** Takes one snapshot now. */
  readonly sample: Effect.Effect<void>
  /** The kept snapshots, oldest first. */
  readonly points: Effect.Effect<ReadonlyArray<Point>>
  /** Takes a snapshot every `intervalMillis` for the life of the scope. */
  readonly run: Effect.Effect<void, never, Scope.Scope>
}

const overflow = "_overflow"

type Kind = keyof Counts

const kinds: ReadonlyMap<string, Kind> = new Map<string, Kind>([
  ["OutboxDelivered", "delivered"],
  ["DLQEntries", "deadLettered"],
  ["OutboxRecordFailures", "sinkFailures"]
])

interface MutableCounts {
  delivered: number
  deadLettered: number
  sinkFailures: number
}

const zero = (): MutableCounts => ({ delivered: 0, deadLettered: 0, sinkFailures: 0 })

/**
 * Cumulative counts from metric pairs, in total and per route.
 *
 * @since 0.1.0
 */
export const countsOf = (
  pairs: ReadonlyArray<MetricPair.MetricPair.Untyped>,
  keepRoute: (route: string) => string
): { readonly total: Counts; readonly routes: { readonly [route: string]: Counts } } => {
  const total = zero()
  const routes: { [route: string]: MutableCounts } = {}
  for (const pair of pairs) {
    const kind = kinds.get(pair.metricKey.name)
    const state: unknown = pair.metricState
    if (kind === undefined || !MetricState.isCounterState(state)) continue
    const count = Number(state.count)
    total[kind] += count
    const route = pair.metricKey.tags.find((tag) => tag.key === "route")?.value
    if (route === undefined || route === "") continue
    const key = keepRoute(route)
    const counts = routes[key] ?? zero()
    routes[key] = counts
    counts[kind] += count
  }
  return { total, routes }
}

/**
 * A new ring reading the store through `inspection` when given.
 *
 * @since 0.1.0
 */
export const make = (inspection: Option.Option<OutboxInspectionService>, options: HistoryOptions = {}): History => {
  const intervalMillis = Math.max(100, Math.floor(options.intervalMillis ?? 2000))
  const windowMillis = Math.max(intervalMillis, Math.floor(options.windowMillis ?? 15 * 60_000))
  const maxRoutes = Math.max(1, Math.floor(options.maxRoutes ?? 50))
  const ring: Array<Point> = []
  const knownRoutes = new Set<string>()
  const keepRoute = (route: string): string => {
    if (knownRoutes.has(route)) return route
    if (knownRoutes.size < maxRoutes) {
      knownRoutes.add(route)
      return route
    }
    return overflow
  }

  const store = Option.match(inspection, {
    onNone: () => Effect.succeed({ pending: null, claimed: null, oldestPendingAgeSeconds: null }),
    onSome: (service) =>
      service.snapshot().pipe(
        Effect.map((snapshot) => {
          const now = DateTime.toEpochMillis(snapshot.at)
          let pending = 0
          let claimed = 0
          let oldest = 0
          for (const p of snapshot.partitions) {
            if (Either.isRight(p.pending)) pending += p.pending.right
            if (Either.isRight(p.claimed)) claimed += p.claimed.right
            if (Either.isRight(p.oldestPendingAt) && Option.isSome(p.oldestPendingAt.right)) {
              oldest = Math.max(oldest, (now - DateTime.toEpochMillis(p.oldestPendingAt.right.value)) / 1000)
            }
          }
          return { pending, claimed, oldestPendingAgeSeconds: oldest }
        }),
        // a store that fails (or a defect in its inspection) leaves a gap in the depth charts, never stops sampling
        Effect.catchAllCause(() => Effect.succeed({ pending: null, claimed: null, oldestPendingAgeSeconds: null }))
      )
  })

  const sample = Effect.gen(function* () {
    const [pairs, depth, at] = yield* Effect.all([Metric.snapshot, store, Clock.currentTimeMillis])
    const { routes, total } = countsOf(pairs, keepRoute)
    ring.push({ at, ...total, ...depth, routes })
    while (ring.length > 0 && (ring[0]?.at ?? at) < at - windowMillis) ring.shift()
  }).pipe(Effect.withTracerEnabled(false))

  return {
    intervalMillis,
    windowMillis,
    sample,
    points: Effect.sync(() => ring.slice()),
    run: Effect.asVoid(
      Effect.forkScoped(Effect.repeat(sample, Schedule.spaced(`${intervalMillis} millis`)).pipe(Effect.interruptible))
    )
  }
}
