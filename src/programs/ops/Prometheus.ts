/**
 * Renders Effect's metric registry in the Prometheus text exposition format (version 0.0.4) by the
 * Prometheus naming conventions, so a relay's `GET /metrics` serves every SPEC §8 metric with no second
 * bookkeeping. The Effect metric keys stay as SPEC §8 names them (and as OpenTelemetry exports them); the
 * exposition maps each to an `outbox_` snake_case name ({@link names}): counters end in `_total`, times are
 * in seconds (`OutboxDrainLatency` is recorded in milliseconds and exposed as
 * `outbox_delivery_latency_seconds`), delivered and dead-lettered records are counted apart
 * (`outbox_delivered_total`, `outbox_dead_lettered_total{category}`). A metric missing from the table keeps
 * its key, in snake_case (`_total` added to counters).
 *
 * Label cardinality is bounded: at most `maxPartitions` values of `partition` and `maxRoutes` values of
 * `route` are exposed per process, admitted first come first served and kept for the life of the exposition
 * (so a series never moves); any further value is exposed as {@link overflow}, with the samples of all the
 * values it stands for merged (counters and histograms summed, gauges summed or, for ages, the maximum).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import type * as MetricPair from "effect/MetricPair"
import * as MetricState from "effect/MetricState"
import * as Option from "effect/Option"

/**
 * The `Content-Type` of the exposition format this module renders.
 *
 * @since 0.1.0
 */
export const contentType = "text/plain; version=0.0.4; charset=utf-8"

/**
 * The label value that stands for every `partition` or `route` value beyond the cap.
 *
 * @since 0.1.0
 */
export const overflow = "_overflow"

/**
 * A metric name made valid for Prometheus (`[a-zA-Z_:][a-zA-Z0-9_:]*`): other characters become `_`.
 *
 * @since 0.1.0
 */
export const metricName = (name: string): string => {
  const cleaned = name.replace(/[^a-zA-Z0-9_:]/g, "_")
  return /^[a-zA-Z_:]/.test(cleaned) ? cleaned : `_${cleaned}`
}

/**
 * A label name made valid for Prometheus (`[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__`).
 *
 * @since 0.1.0
 */
export const labelName = (name: string): string => {
  const cleaned = name.replace(/[^a-zA-Z0-9_]/g, "_")
  const valid = /^[a-zA-Z_]/.test(cleaned) ? cleaned : `_${cleaned}`
  return valid.startsWith("__") ? `x${valid}` : valid
}

/**
 * A name in snake_case (`OutboxClaimBatchSize` → `outbox_claim_batch_size`), made valid for Prometheus.
 *
 * @since 0.1.0
 */
export const snakeCase = (name: string): string =>
  metricName(
    name
      .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
      .replace(/([A-Z]+)([A-Z][a-z])/g, "$1_$2")
      .toLowerCase()
  ).replace(/__+/g, "_")

/**
 * How an Effect metric is exposed: its Prometheus name, and a divisor that turns its unit into the base
 * unit (milliseconds → seconds: 1000).
 *
 * @since 0.1.0
 */
export interface Mapping {
  readonly name: string
  readonly divisor?: number | undefined
  /** How samples of values merged into {@link overflow} combine (gauges; default `sum`). */
  readonly merge?: "sum" | "max" | undefined
}

/**
 * The exposed name of every SPEC §8 metric (keys are the Effect metric keys).
 *
 * @since 0.1.0
 */
export const names: { readonly [key: string]: Mapping } = {
  OutboxDepth: { name: "outbox_depth_records" },
  OutboxClaimedDepth: { name: "outbox_claimed_depth_records" },
  OutboxClaimBatchSize: { name: "outbox_claim_batch_records" },
  OutboxDepthFailures: { name: "outbox_depth_read_failures_total" },
  OutboxClaimConflicts: { name: "outbox_claim_conflicts_total" },
  OutboxCompletions: { name: "outbox_completions_total" },
  OutboxDelivered: { name: "outbox_delivered_total" },
  OutboxReplayCount: { name: "outbox_claim_replays" },
  OutboxRecordFailures: { name: "outbox_sink_failures_total" },
  OutboxDuplicateRisk: { name: "outbox_duplicate_risk_total" },
  OutboxDeferred: { name: "outbox_deferred_total" },
  OutboxDrainStalled: { name: "outbox_drain_stalled_total" },
  DrainSkippedNoLease: { name: "outbox_drain_skipped_no_lease_total" },
  OutboxLeaseAcquired: { name: "outbox_lease_acquired_total" },
  OutboxLeaseLost: { name: "outbox_lease_lost_total" },
  OutboxUnleasedPartitions: { name: "outbox_unleased_partitions" },
  OutboxUnleasedOldestAge: { name: "outbox_unleased_oldest_age_seconds", merge: "max" },
  OutboxRouteSends: { name: "outbox_route_sends_total" },
  OutboxRoutePauses: { name: "outbox_route_pauses_total" },
  DLQEntries: { name: "outbox_dead_lettered_total" },
  MessagesDropped: { name: "outbox_dropped_total" },
  MessagesExpired: { name: "outbox_expired_total" },
  OutboxDrainLatency: { name: "outbox_delivery_latency_seconds", divisor: 1000 },
  DynamoDBOutboxClaimScanPages: { name: "outbox_dynamodb_claim_scan_pages_total" },
  DynamoDBOutboxClaimTruncated: { name: "outbox_dynamodb_claim_truncated_total" }
}

type PromType = "counter" | "gauge" | "histogram" | "summary"

/**
 * The Prometheus name of an Effect metric key of a type: from {@link names}, else the key in snake_case
 * (counters with `_total`).
 *
 * @since 0.1.0
 */
export const exposedName = (key: string, type: PromType): string => {
  const mapped = names[key]
  if (mapped !== undefined) return mapped.name
  const snake = snakeCase(key)
  return type === "counter" && !snake.endsWith("_total") ? `${snake}_total` : snake
}

/**
 * A sample computed outside the metric registry (a gauge read from the store at scrape time).
 *
 * @since 0.1.0
 */
export interface Sample {
  readonly name: string
  readonly type: "counter" | "gauge"
  readonly help: string
  readonly labels: ReadonlyArray<readonly [string, string]>
  readonly value: number
  /** How samples merged into {@link overflow} combine (default `sum`). */
  readonly merge?: "sum" | "max" | undefined
}

/**
 * Options of an exposition.
 *
 * @since 0.1.0
 */
export interface ExpositionOptions {
  /** Distinct `partition` label values exposed before the rest go to {@link overflow} (default 200). */
  readonly maxPartitions?: number | undefined
  /** Distinct `route` label values exposed before the rest go to {@link overflow} (default 50). */
  readonly maxRoutes?: number | undefined
}

/**
 * A renderer that remembers which label values it admitted.
 *
 * @since 0.1.0
 */
export interface Exposition {
  /** Renders metric pairs (e.g. `Metric.unsafeSnapshot()`) and extra samples as one document. */
  readonly render: (
    pairs: ReadonlyArray<MetricPair.MetricPair.Untyped>,
    extra?: ReadonlyArray<Sample> | undefined
  ) => string
}

const escapeLabelValue = (value: string): string =>
  value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"')

const escapeHelp = (text: string): string => text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")

/** A sample value as Prometheus writes it (`+Inf`, `-Inf`, `NaN`, or the number). */
const formatValue = (value: number | bigint): string => {
  if (typeof value === "bigint") return value.toString()
  if (Number.isNaN(value)) return "NaN"
  if (value === Number.POSITIVE_INFINITY) return "+Inf"
  if (value === Number.NEGATIVE_INFINITY) return "-Inf"
  return String(value)
}

const formatLabels = (labels: ReadonlyArray<readonly [string, string]>): string =>
  labels.length === 0
    ? ""
    : `{${labels.map(([name, value]) => `${labelName(name)}="${escapeLabelValue(value)}"`).join(",")}}`

type Labels = ReadonlyArray<readonly [string, string]>

interface Histogram {
  readonly buckets: Map<number, number>
  sum: number
  count: number
}

interface Series {
  readonly labels: Labels
  value: number
  histogram: Histogram | undefined
  quantiles: Array<readonly [number, number]> | undefined
}

interface Family {
  readonly name: string
  readonly type: PromType
  help: string | undefined
  readonly merge: "sum" | "max"
  readonly series: Map<string, Series>
}

const toNumber = (value: number | bigint): number => (typeof value === "bigint" ? Number(value) : value)

/**
 * A new exposition with its own label admission.
 *
 * @since 0.1.0
 */
export const make = (options: ExpositionOptions = {}): Exposition => {
  const caps: ReadonlyMap<string, number> = new Map([
    ["partition", Math.max(1, Math.floor(options.maxPartitions ?? 200))],
    ["route", Math.max(1, Math.floor(options.maxRoutes ?? 50))]
  ])
  const admitted = new Map<string, Set<string>>()

  const capLabel = (name: string, value: string): string => {
    const cap = caps.get(name)
    if (cap === undefined) return value
    let seen = admitted.get(name)
    if (seen === undefined) {
      seen = new Set()
      admitted.set(name, seen)
    }
    if (seen.has(value)) return value
    if (seen.size < cap) {
      seen.add(value)
      return value
    }
    return overflow
  }

  const capLabels = (labels: Labels): Labels => labels.map(([name, value]) => [name, capLabel(name, value)] as const)

  const familyFor = (
    families: Map<string, Family>,
    name: string,
    type: PromType,
    help: string | undefined,
    merge: "sum" | "max"
  ): Family | undefined => {
    const existing = families.get(name)
    if (existing !== undefined) {
      existing.help ??= help
      // one name, one type: a clash (two keys mapped to one name) keeps the first
      return existing.type === type ? existing : undefined
    }
    const family: Family = { name, type, help, merge, series: new Map() }
    families.set(name, family)
    return family
  }

  const seriesOf = (family: Family, labels: Labels): { readonly series: Series; readonly fresh: boolean } => {
    const key = formatLabels(labels)
    const existing = family.series.get(key)
    if (existing !== undefined) return { series: existing, fresh: false }
    const series: Series = { labels, value: 0, histogram: undefined, quantiles: undefined }
    family.series.set(key, series)
    return { series, fresh: true }
  }

  const addValue = (family: Family, labels: Labels, value: number): void => {
    const { fresh, series } = seriesOf(family, labels)
    if (fresh) series.value = value
    else series.value = family.merge === "max" ? Math.max(series.value, value) : series.value + value
  }

  const addPair = (families: Map<string, Family>, pair: MetricPair.MetricPair.Untyped): void => {
    const key = pair.metricKey
    const state: unknown = pair.metricState
    const mapping = names[key.name]
    const divisor = mapping?.divisor ?? 1
    const merge = mapping?.merge ?? "sum"
    // Prometheus' linter wants help text on every family: the Effect key stands in for a missing description
    const help = Option.getOrElse(key.description, () => key.name)
    const labels = capLabels(key.tags.map((tag) => [tag.key, tag.value] as const))
    if (MetricState.isCounterState(state)) {
      const family = familyFor(families, exposedName(key.name, "counter"), "counter", help, merge)
      if (family !== undefined) addValue(family, labels, toNumber(state.count) / divisor)
    } else if (MetricState.isGaugeState(state)) {
      const family = familyFor(families, exposedName(key.name, "gauge"), "gauge", help, merge)
      if (family !== undefined) addValue(family, labels, toNumber(state.value) / divisor)
    } else if (MetricState.isHistogramState(state)) {
      const family = familyFor(families, exposedName(key.name, "histogram"), "histogram", help, merge)
      if (family === undefined) return
      const { series } = seriesOf(family, labels)
      const histogram: Histogram = series.histogram ?? { buckets: new Map(), sum: 0, count: 0 }
      series.histogram = histogram
      for (const [boundary, cumulative] of state.buckets) {
        const le = boundary / divisor
        histogram.buckets.set(le, (histogram.buckets.get(le) ?? 0) + cumulative)
      }
      histogram.sum += state.sum / divisor
      histogram.count += state.count
    } else if (MetricState.isSummaryState(state)) {
      const family = familyFor(families, exposedName(key.name, "summary"), "summary", help, merge)
      if (family === undefined) return
      const { fresh, series } = seriesOf(family, labels)
      // quantiles of merged summaries cannot be combined: the first value's are kept
      if (fresh) {
        series.quantiles = []
        for (const [quantile, value] of state.quantiles) {
          if (Option.isSome(value)) series.quantiles.push([quantile, value.value / divisor])
        }
        series.histogram = { buckets: new Map(), sum: state.sum / divisor, count: state.count }
      }
    } else if (MetricState.isFrequencyState(state)) {
      const family = familyFor(families, exposedName(key.name, "counter"), "counter", help, merge)
      if (family === undefined) return
      for (const [occurrence, count] of state.occurrences) addValue(family, [...labels, ["key", occurrence]], count)
    }
  }

  const lines = (family: Family): Array<string> => {
    const out: Array<string> = []
    const name = family.name
    const sorted = Array.from(family.series.entries()).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    for (const [, series] of sorted) {
      const histogram = series.histogram
      if (family.type === "histogram" && histogram !== undefined) {
        const boundaries = Array.from(histogram.buckets.keys()).sort((a, b) => a - b)
        for (const le of boundaries) {
          out.push(
            `${name}_bucket${formatLabels([...series.labels, ["le", formatValue(le)]])} ${histogram.buckets.get(le) ?? 0}`
          )
        }
        if (!histogram.buckets.has(Number.POSITIVE_INFINITY)) {
          out.push(`${name}_bucket${formatLabels([...series.labels, ["le", "+Inf"]])} ${histogram.count}`)
        }
        out.push(`${name}_sum${formatLabels(series.labels)} ${formatValue(histogram.sum)}`)
        out.push(`${name}_count${formatLabels(series.labels)} ${histogram.count}`)
      } else if (family.type === "summary" && histogram !== undefined) {
        for (const [quantile, value] of series.quantiles ?? []) {
          out.push(`${name}${formatLabels([...series.labels, ["quantile", String(quantile)]])} ${formatValue(value)}`)
        }
        out.push(`${name}_sum${formatLabels(series.labels)} ${formatValue(histogram.sum)}`)
        out.push(`${name}_count${formatLabels(series.labels)} ${histogram.count}`)
      } else {
        out.push(`${name}${formatLabels(series.labels)} ${formatValue(series.value)}`)
      }
    }
    return out
  }

  return {
    render: (pairs, extra = []) => {
      const families = new Map<string, Family>()
      for (const pair of pairs) addPair(families, pair)
      for (const sample of extra) {
        const family = familyFor(families, sample.name, sample.type, sample.help, sample.merge ?? "sum")
        if (family !== undefined) addValue(family, capLabels(sample.labels), sample.value)
      }
      const out: Array<string> = []
      for (const name of Array.from(families.keys()).sort()) {
        const family = families.get(name)
        if (family === undefined || family.series.size === 0) continue
        if (family.help !== undefined) out.push(`# HELP ${name} ${escapeHelp(family.help)}`)
        out.push(`# TYPE ${name} ${family.type}`)
        for (const line of lines(family)) out.push(line)
      }
      return out.length === 0 ? "" : `${out.join("\n")}\n`
    }
  }
}

const shared = make()

/**
 * Renders metric pairs with the process-wide exposition (default caps): one `# HELP` and `# TYPE` per
 * name, then its samples, names in alphabetical order.
 *
 * @since 0.1.0
 */
export const render = (
  pairs: ReadonlyArray<MetricPair.MetricPair.Untyped>,
  extra?: ReadonlyArray<Sample> | undefined
): string => shared.render(pairs, extra)

/**
 * The current exposition document of every metric registered in this process.
 *
 * @since 0.1.0
 */
export const scrape: Effect.Effect<string> = Effect.map(Metric.snapshot, (pairs) => render(pairs))
