/**
 * Renders Effect's own metric registry in the Prometheus text exposition format (version 0.0.4), so a
 * relay's `GET /metrics` serves every SPEC §8 metric with no second bookkeeping: counters and gauges as
 * samples, histograms as cumulative `_bucket{le}` series with `_sum` and `_count`, summaries as quantile
 * series, frequencies as one counter sample per occurrence key. Metric tags become labels.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import type * as MetricKey from "effect/MetricKey"
import type * as MetricKeyType from "effect/MetricKeyType"
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

type PromType = "counter" | "gauge" | "histogram" | "summary"

interface Family {
  readonly name: string
  readonly type: PromType
  help: string | undefined
  readonly lines: Array<string>
}

type UntypedKey = MetricKey.MetricKey<MetricKeyType.MetricKeyType<unknown, unknown>>

const tagsOf = (key: UntypedKey): Array<readonly [string, string]> =>
  key.tags.map((label) => [label.key, label.value] as const)

const familyFor = (families: Map<string, Family>, name: string, type: PromType, key: UntypedKey): Family => {
  const existing = families.get(name)
  const help = Option.getOrUndefined(key.description)
  if (existing !== undefined) {
    existing.help ??= help
    return existing
  }
  const family: Family = { name, type, help, lines: [] }
  families.set(name, family)
  return family
}

const renderPair = (families: Map<string, Family>, pair: MetricPair.MetricPair.Untyped): void => {
  const key: UntypedKey = pair.metricKey
  const state: unknown = pair.metricState
  const name = metricName(key.name)
  const tags = tagsOf(key)
  if (MetricState.isCounterState(state)) {
    familyFor(families, name, "counter", key).lines.push(`${name}${formatLabels(tags)} ${formatValue(state.count)}`)
  } else if (MetricState.isGaugeState(state)) {
    familyFor(families, name, "gauge", key).lines.push(`${name}${formatLabels(tags)} ${formatValue(state.value)}`)
  } else if (MetricState.isHistogramState(state)) {
    const family = familyFor(families, name, "histogram", key)
    let sawInfinity = false
    for (const [boundary, cumulative] of state.buckets) {
      if (boundary === Number.POSITIVE_INFINITY) sawInfinity = true
      family.lines.push(`${name}_bucket${formatLabels([...tags, ["le", formatValue(boundary)]])} ${cumulative}`)
    }
    if (!sawInfinity) family.lines.push(`${name}_bucket${formatLabels([...tags, ["le", "+Inf"]])} ${state.count}`)
    family.lines.push(`${name}_sum${formatLabels(tags)} ${formatValue(state.sum)}`)
    family.lines.push(`${name}_count${formatLabels(tags)} ${state.count}`)
  } else if (MetricState.isSummaryState(state)) {
    const family = familyFor(families, name, "summary", key)
    for (const [quantile, value] of state.quantiles) {
      if (Option.isSome(value)) {
        family.lines.push(
          `${name}${formatLabels([...tags, ["quantile", String(quantile)]])} ${formatValue(value.value)}`
        )
      }
    }
    family.lines.push(`${name}_sum${formatLabels(tags)} ${formatValue(state.sum)}`)
    family.lines.push(`${name}_count${formatLabels(tags)} ${state.count}`)
  } else if (MetricState.isFrequencyState(state)) {
    const family = familyFor(families, name, "counter", key)
    for (const [occurrence, count] of state.occurrences) {
      family.lines.push(`${name}${formatLabels([...tags, ["key", occurrence]])} ${count}`)
    }
  }
}

/**
 * Renders metric pairs (e.g. `Metric.unsafeSnapshot()`) as one exposition document: one `# HELP` and
 * `# TYPE` per metric name, then its samples, names in alphabetical order.
 *
 * @since 0.1.0
 */
export const render = (pairs: ReadonlyArray<MetricPair.MetricPair.Untyped>): string => {
  const families = new Map<string, Family>()
  const sorted = pairs
    .map((pair) => ({ pair, sortKey: `${metricName(pair.metricKey.name)}${formatLabels(tagsOf(pair.metricKey))}` }))
    .sort((a, b) => (a.sortKey < b.sortKey ? -1 : a.sortKey > b.sortKey ? 1 : 0))
  for (const { pair } of sorted) renderPair(families, pair)
  const out: Array<string> = []
  for (const name of Array.from(families.keys()).sort()) {
    const family = families.get(name)
    if (family === undefined || family.lines.length === 0) continue
    if (family.help !== undefined) out.push(`# HELP ${name} ${escapeHelp(family.help)}`)
    out.push(`# TYPE ${name} ${family.type}`)
    for (const line of family.lines) out.push(line)
  }
  return out.length === 0 ? "" : `${out.join("\n")}\n`
}

/**
 * The current exposition document of every metric registered in this process.
 *
 * @since 0.1.0
 */
export const scrape: Effect.Effect<string> = Effect.map(Metric.snapshot, render)
