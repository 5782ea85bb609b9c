/**
 * Gauges read from the store at scrape time through `OutboxInspection` (SPEC §8, §10): what is in the outbox
 * now, whichever process drains it — so `effect-outbox dashboard`, which runs no relay, serves them too, and
 * alerts on the backlog do not depend on which relay holds which lease.
 *
 * - `outbox_backlog_records{partition}` pending records; `outbox_claimed_records{partition}` claimed ones;
 * - `outbox_oldest_pending_age_seconds{partition}` age of the oldest pending record (0 when none);
 * - `outbox_stranded_head{partition}` 1 when the head looks stranded (SPEC §8's alarm signature);
 * - `outbox_dead_letter_entries{category}` entries in the dead-letter queue now;
 * - `outbox_store_up` 1 when the inspection answered, 0 when the store did not.
 *
 * A fact the backend cannot answer cheaply (`DepthUnsupported`) has no sample rather than a guess.
 *
 * @since 0.1.0
 */
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type { OutboxInspectionService, Snapshot } from "../../services/OutboxInspection.js"
import type { Sample } from "./Prometheus.js"

const gauge = (
  name: string,
  help: string,
  labels: ReadonlyArray<readonly [string, string]>,
  value: number,
  merge: "sum" | "max" = "sum"
): Sample => ({ name, type: "gauge", help, labels, value, merge })

const backlogHelp = "pending records per partition, read from the store"
const claimedHelp = "claimed records per partition, read from the store"
const ageHelp = "age of the oldest pending record per partition (0 when none is pending)"
const strandedHelp =
  "1 when the partition's head looks stranded (claimed with nothing pending and no live lease, or claimed too long)"

/** Zero samples of a partition the store no longer lists (it emptied and the backend forgot it). */
const emptied = (partitionKey: string): Array<Sample> => {
  const labels = [["partition", partitionKey]] as const
  return [
    gauge("outbox_backlog_records", backlogHelp, labels, 0),
    gauge("outbox_claimed_records", claimedHelp, labels, 0),
    gauge("outbox_oldest_pending_age_seconds", ageHelp, labels, 0, "max"),
    gauge("outbox_stranded_head", strandedHelp, labels, 0)
  ]
}

/**
 * The samples of a snapshot.
 *
 * @since 0.1.0
 */
export const samples = (snapshot: Snapshot): Array<Sample> => {
  const now = DateTime.toEpochMillis(snapshot.at)
  const out: Array<Sample> = [gauge("outbox_store_up", "1 when the outbox store answered the inspection", [], 1)]
  for (const p of snapshot.partitions) {
    const labels = [["partition", p.partitionKey]] as const
    if (Either.isRight(p.pending)) out.push(gauge("outbox_backlog_records", backlogHelp, labels, p.pending.right))
    if (Either.isRight(p.claimed)) out.push(gauge("outbox_claimed_records", claimedHelp, labels, p.claimed.right))
    if (Either.isRight(p.oldestPendingAt)) {
      const age = Option.match(p.oldestPendingAt.right, {
        onNone: () => 0,
        onSome: (at) => Math.max(0, now - DateTime.toEpochMillis(at)) / 1000
      })
      out.push(gauge("outbox_oldest_pending_age_seconds", ageHelp, labels, age, "max"))
    }
    out.push(gauge("outbox_stranded_head", strandedHelp, labels, Option.isSome(p.stranded) ? 1 : 0))
  }
  for (const [category, count] of Object.entries(snapshot.deadLetters)) {
    out.push(
      gauge("outbox_dead_letter_entries", "entries in the dead-letter queue now", [["category", category]], count)
    )
  }
  return out
}

/**
 * Reads the store's samples, remembering the partitions it reported: a partition that later drops out of
 * the store's listing (some backends forget emptied partitions) is reported at zero rather than vanishing,
 * so its series ends at 0. At most `maxRemembered` partitions are remembered.
 *
 * @since 0.1.0
 */
export interface Reader {
  /** The samples from an inspection (none without one); a store that does not answer: `outbox_store_up 0`. */
  readonly read: (inspection: Option.Option<OutboxInspectionService>) => Effect.Effect<Array<Sample>>
}

/**
 * A new {@link Reader}.
 *
 * @since 0.1.0
 */
export const make = (options: { readonly maxRemembered?: number | undefined } = {}): Reader => {
  const limit = Math.max(0, Math.floor(options.maxRemembered ?? 1000))
  const remembered = new Set<string>()
  return {
    read: (inspection) =>
      Option.match(inspection, {
        onNone: () => Effect.succeed([]),
        onSome: (service) =>
          service.snapshot().pipe(
            Effect.map((snapshot) => {
              const out = samples(snapshot)
              const listed = new Set(snapshot.partitions.map((p) => p.partitionKey))
              for (const key of remembered) if (!listed.has(key)) out.push(...emptied(key))
              for (const key of listed) if (remembered.size < limit) remembered.add(key)
              return out
            }),
            Effect.catchAll(() =>
              Effect.succeed([gauge("outbox_store_up", "1 when the outbox store answered the inspection", [], 0)])
            )
          )
      })
  }
}
