/**
 * Metrics whose tags are resolved once, for updates made many times per batch or outside a fiber (a sink's
 * register callback): the drainer's per-record metrics and a `SinkRouter`'s per-send counters.
 *
 * @since 0.2.0
 */
import * as Arr from "effect/Array"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import type * as Metric from "effect/Metric"
import type * as MetricLabel from "effect/MetricLabel"

/**
 * A metric whose tags are resolved once: an update goes straight to the metric's registry entry. A metric
 * tagged with `Metric.tagged` builds a new label list and looks up its registry key on every update (a
 * hash of every tag); a bound metric builds the list once per set of fiber labels and hands the same list
 * to the untagged metric each time, which keeps the registry entry per list. The labels are those
 * `OutboxMetrics.tagged` (and any further `Metric.tagged`) would produce, in the same order, so both reach
 * the same series.
 *
 * @since 0.2.0
 */
export interface BoundMetric<In> {
  /** Updates the metric, with the fiber's metric labels (`FiberRef.currentMetricLabels`). */
  readonly update: (value: In, fiberLabels: ReadonlyArray<MetricLabel.MetricLabel>) => void
}

/**
 * Binds an untagged metric to its tags (innermost first, as `OutboxMetrics.tagsOf` lists them).
 *
 * @since 0.2.0
 */
export const bind = <Type, In, Out>(
  metric: Metric.Metric<Type, In, Out>,
  tags: ReadonlyArray<MetricLabel.MetricLabel>
): BoundMetric<In> => {
  let seen: ReadonlyArray<MetricLabel.MetricLabel> | undefined
  let labels: ReadonlyArray<MetricLabel.MetricLabel> = []
  return {
    update: (value, fiberLabels) => {
      if (fiberLabels !== seen) {
        seen = fiberLabels
        // what nested `Metric.tagged` wrappers hand the untagged metric: union(inner, union(outer, fiber))
        labels = tags.reduceRight<ReadonlyArray<MetricLabel.MetricLabel>>(
          (acc, tag) => Arr.union([tag], acc),
          fiberLabels
        )
      }
      metric.unsafeUpdate(value, labels)
    }
  }
}

/**
 * Updates a bound metric with many values in one step (one read of the fiber's metric labels).
 *
 * @since 0.2.0
 */
export const updateAll = (metric: BoundMetric<number>, values: ReadonlyArray<number>) =>
  FiberRef.getWith(FiberRef.currentMetricLabels, (labels) =>
    Effect.sync(() => {
      for (const value of values) metric.update(value, labels)
    })
  )
