/**
 * Every metric the library emits (SPEC §8), defined once. Metrics are tagged with `partition` (and
 * `route` where known) at the point of use with {@link tagged}.
 *
 * The signature to alarm on: `OutboxClaimedDepth` standing non-zero while `OutboxDepth` is zero
 * (a stranded head blocking its key).
 *
 * @since 0.1.0
 */
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"
import * as MetricLabel from "effect/MetricLabel"

/** Pending records of a partition (gauge, from `countPending`, read at the end of a drain cycle). @since 0.1.0 */
export const OutboxDepth = Metric.gauge("OutboxDepth", { description: "pending records per partition" })

/**
 * Claimed records of a partition (gauge, from `countClaimed`, read at the end of a drain cycle: what the
 * cycle's batch left claimed and what other owners hold, not the batch in flight). @since 0.1.0
 */
export const OutboxClaimedDepth = Metric.gauge("OutboxClaimedDepth", {
  description: "claimed (in-flight or stranded) records per partition"
})

/** Size of the last claimed batch (gauge). @since 0.1.0 */
export const OutboxClaimBatchSize = Metric.gauge("OutboxClaimBatchSize", { description: "records per claim" })

/** Depth reads that failed (the drain goes on). @since 0.1.0 */
export const OutboxDepthFailures = Metric.counter("OutboxDepthFailures", {
  description: "failed countPending/countClaimed calls",
  incremental: true
})

/** Claims that met backend contention (DynamoDB TransactionConflict). @since 0.1.0 */
export const OutboxClaimConflicts = Metric.counter("OutboxClaimConflicts", {
  description: "claim transactions cancelled by contention",
  incremental: true
})

/** Records completed (delivered, dead-lettered or dropped). @since 0.1.0 */
export const OutboxCompletions = Metric.counter("OutboxCompletions", {
  description: "records completed (delivered, dead-lettered or dropped)",
  incremental: true
})

/**
 * Records the sink accepted (a send that succeeded), apart from dead-lettered and dropped ones; tagged with
 * the record's route when it has one. A record sent again after a lost lease is counted again.
 *
 * @since 0.1.0
 */
export const OutboxDelivered = Metric.counter("OutboxDelivered", {
  description: "records the sink accepted",
  incremental: true
})

/** Replay count of records when claimed (histogram). @since 0.1.0 */
export const OutboxReplayCount = Metric.histogram(
  "OutboxReplayCount",
  MetricBoundaries.linear({ start: 0, width: 1, count: 12 }),
  "replayCount of claimed records"
)

/** Records whose send failed (transient or permanent); tagged with the record's route when it has one. @since 0.1.0 */
export const OutboxRecordFailures = Metric.counter("OutboxRecordFailures", {
  description: "record sends that failed",
  incremental: true
})

/** Records sent whose completion was fenced or failed: they may be delivered again. @since 0.1.0 */
export const OutboxDuplicateRisk = Metric.counter("OutboxDuplicateRisk", {
  description: "records sent but not completed (may be delivered again)",
  incremental: true
})

/** Records released for a later cycle (transient failure, untried tail). @since 0.1.0 */
export const OutboxDeferred = Metric.counter("OutboxDeferred", {
  description: "records released back to pending",
  incremental: true
})

/** Batches abandoned by the watchdog. @since 0.1.0 */
export const OutboxDrainStalled = Metric.counter("OutboxDrainStalled", {
  description: "batches abandoned by the drain watchdog",
  incremental: true
})

/** Drain cycles skipped because no valid lease was held. @since 0.1.0 */
export const DrainSkippedNoLease = Metric.counter("DrainSkippedNoLease", {
  description: "drain cycles skipped without a lease",
  incremental: true
})

/** Partition leases a relay acquired (a new epoch each); with `OutboxLeaseLost`, lease churn. @since 0.1.0 */
export const OutboxLeaseAcquired = Metric.counter("OutboxLeaseAcquired", {
  description: "partition leases acquired by a relay",
  incremental: true
})

/** Partition leases a relay lost because a renew failed (taken over, expired, store failure). @since 0.1.0 */
export const OutboxLeaseLost = Metric.counter("OutboxLeaseLost", {
  description: "partition leases lost on a failed renew",
  incremental: true
})

/**
 * Partitions with pending work that no relay leases, as a relay's last discovery round saw them (gauge,
 * tagged with `relay`, the owner id). Non-zero for long means the relays lack slots: see
 * `OutboxUnleasedOldestAge`. @since 0.1.0
 */
export const OutboxUnleasedPartitions = Metric.gauge("OutboxUnleasedPartitions", {
  description: "partitions with pending work and no lease, per relay"
})

/**
 * Seconds the longest-waiting partition with pending work has gone without a lease, as a relay saw it
 * (gauge, tagged with `relay`); 0 when none waits. Past the relay's `starvationThreshold` the relay logs
 * a WARN and `/readyz` reports not ready. @since 0.1.0
 */
export const OutboxUnleasedOldestAge = Metric.gauge("OutboxUnleasedOldestAge", {
  description: "seconds the oldest partition with pending work has waited for a lease, per relay"
})

/** Dead-letter entries written; tag with `category`. @since 0.1.0 */
export const DLQEntries = Metric.counter("DLQEntries", {
  description: "dead-letter entries written",
  incremental: true
})

/** Messages dropped by policy; tag with `reason`. @since 0.1.0 */
export const MessagesDropped = Metric.counter("MessagesDropped", {
  description: "messages dropped by policy",
  incremental: true
})

/** Records expired (by sweep or on the claim path). @since 0.1.0 */
export const MessagesExpired = Metric.counter("MessagesExpired", { description: "records expired", incremental: true })

/** Enqueue-to-delivery latency in milliseconds. @since 0.1.0 */
export const OutboxDrainLatency = Metric.histogram(
  "OutboxDrainLatency",
  MetricBoundaries.exponential({ start: 1, factor: 2, count: 20 }),
  "milliseconds from createdAt to delivery"
)

/** Pages read by DynamoDB scan-path claims that crossed the deep-backlog threshold. @since 0.1.0 */
export const DynamoDBOutboxClaimScanPages = Metric.counter("DynamoDBOutboxClaimScanPages", {
  description: "pages read by deep DynamoDB scan-path claims",
  incremental: true
})

/** DynamoDB claims that returned a short batch (R-CLAIM-8). @since 0.1.0 */
export const DynamoDBOutboxClaimTruncated = Metric.counter("DynamoDBOutboxClaimTruncated", {
  description: "DynamoDB claims cut short by a transient failure",
  incremental: true
})

/**
 * The tags {@link tagged} puts on a metric, innermost first: the partition, then the route when given.
 *
 * @since 0.1.0
 */
export const tagsOf = (partitionKey: string, routeId?: string): ReadonlyArray<MetricLabel.MetricLabel> =>
  routeId !== undefined && routeId.length > 0
    ? [MetricLabel.make("partition", partitionKey), MetricLabel.make("route", routeId)]
    : [MetricLabel.make("partition", partitionKey)]

/**
 * Tags a metric with the partition (and route when given): {@link tagsOf}.
 *
 * @since 0.1.0
 */
export const tagged = <Type, In, Out>(
  metric: Metric.Metric<Type, In, Out>,
  partitionKey: string,
  routeId?: string
): Metric.Metric<Type, In, Out> =>
  tagsOf(partitionKey, routeId).reduce((tagged, label) => Metric.tagged(tagged, label.key, label.value), metric)

/** Sends through a `SinkRouter`; tagged with `route` and `outcome` (`delivered`, `transient`, `permanent`, `paused`, `unrouted`). @since 0.2.0 */
export const OutboxRouteSends = Metric.counter("OutboxRouteSends", {
  description: "sends through a SinkRouter by route and outcome",
  incremental: true
})

/** Pauses a `SinkRouter` started for a route (a `Retry-After` or a failure streak); tagged with `route`. @since 0.2.0 */
export const OutboxRoutePauses = Metric.counter("OutboxRoutePauses", {
  description: "route pauses started by a SinkRouter",
  incremental: true
})
