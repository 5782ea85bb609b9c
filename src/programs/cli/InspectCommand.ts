/**
 * `effect-outbox inspect`: per partition the pending and claimed depth, the age of the oldest pending
 * record and of the longest-held claim, the fence version, the lease owner and whether the head looks
 * stranded (`OutboxInspection`); dead-letter counts by category. A table by default,
 * one JSON document with `--json`. Facts a backend cannot answer are shown as `n/a` (null in JSON) and
 * named in `notes`.
 *
 * @since 0.1.0
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type { StoreUnavailable } from "../../domain/OutboxError.js"
import {
  type DeadLetterCounts,
  type Fact,
  OutboxInspection,
  type PartitionInspection,
  type Stranded
} from "../../services/OutboxInspection.js"
import { age, count, inertLines, table } from "./Format.js"
import { resolve, storeOptions, withStores } from "./StoreOptions.js"

/**
 * One partition's row.
 *
 * @since 0.1.0
 */
export interface PartitionReport {
  readonly partition: string
  readonly pending: number | null
  readonly claimed: number | null
  readonly oldestPendingAgeMillis: number | null
  readonly oldestClaimAgeMillis: number | null
  readonly fenceVersion: number | null
  readonly leaseOwner: string | null
  readonly leaseVersion: number | null
  readonly leaseExpired: boolean | null
  readonly stranded: Stranded | null
}

/**
 * The whole report.
 *
 * @since 0.1.0
 */
export interface InspectReport {
  readonly backend: string
  readonly partitions: ReadonlyArray<PartitionReport>
  readonly totals: { readonly pending: number; readonly claimed: number }
  readonly deadLetters: DeadLetterCounts & { readonly total: number }
  readonly notes: ReadonlyArray<string>
}

const orNull = <A>(fact: Fact<A>): A | null => (Either.isRight(fact) ? fact.right : null)

const ageOf = (fact: Fact<Option.Option<DateTime.Utc>>, now: DateTime.Utc): number | null =>
  Either.isRight(fact) && Option.isSome(fact.right) ? Math.max(0, DateTime.distance(fact.right.value, now)) : null

const row = (p: PartitionInspection, now: DateTime.Utc): PartitionReport => {
  const lease = Either.isRight(p.lease) ? Option.getOrNull(p.lease.right) : null
  return {
    partition: p.partitionKey,
    pending: orNull(p.pending),
    claimed: orNull(p.claimed),
    oldestPendingAgeMillis: ageOf(p.oldestPendingAt, now),
    oldestClaimAgeMillis: ageOf(p.oldestClaimedAt, now),
    fenceVersion: orNull(p.fence),
    leaseOwner: lease?.owner ?? null,
    leaseVersion: lease?.version ?? null,
    leaseExpired: lease === null ? null : !DateTime.greaterThan(lease.expiresAt, now),
    stranded: Option.getOrNull(p.stranded)
  }
}

const factNames: ReadonlyArray<readonly [string, (p: PartitionInspection) => boolean]> = [
  ["pending depth", (p) => Either.isLeft(p.pending)],
  ["claimed depth", (p) => Either.isLeft(p.claimed)],
  ["oldest pending age", (p) => Either.isLeft(p.oldestPendingAt)],
  ["oldest claim age", (p) => Either.isLeft(p.oldestClaimedAt)],
  ["fence version", (p) => Either.isLeft(p.fence)],
  ["lease", (p) => Either.isLeft(p.lease)]
]

/**
 * Gathers the report through the `OutboxInspection` port.
 *
 * @since 0.1.0
 */
export const report: Effect.Effect<InspectReport, StoreUnavailable, OutboxInspection> = Effect.gen(function* () {
  const inspection = yield* OutboxInspection
  const snapshot = yield* inspection.snapshot()
  const partitions = snapshot.partitions.map((p) => row(p, snapshot.at))
  const notes = [...snapshot.notes]
  for (const [label, unsupported] of factNames) {
    if (snapshot.partitions.some(unsupported)) notes.push(`${label} is not supported on ${snapshot.backend}`)
  }
  const stranded = partitions.filter((p) => p.stranded !== null)
  if (stranded.length > 0) {
    notes.push(`stranded heads (claimed records nobody is draining): ${stranded.map((p) => p.partition).join(", ")}`)
  }
  const deadLetters = snapshot.deadLetters
  return {
    backend: snapshot.backend,
    partitions,
    totals: {
      pending: partitions.reduce((sum, p) => sum + (p.pending ?? 0), 0),
      claimed: partitions.reduce((sum, p) => sum + (p.claimed ?? 0), 0)
    },
    deadLetters: { ...deadLetters, total: deadLetters.poison + deadLetters.permanent + deadLetters.expired },
    notes
  }
})

const cell = (value: number | null, format: (n: number) => string = count): string =>
  value === null ? "n/a" : format(value)

/**
 * Renders the report as text.
 *
 * @since 0.1.0
 */
export const render = (r: InspectReport): string => {
  const rows = r.partitions.map((p) => [
    p.partition,
    cell(p.pending),
    cell(p.claimed),
    p.pending === 0 ? "-" : cell(p.oldestPendingAgeMillis, age),
    cell(p.fenceVersion),
    // as the dashboard shows it
    p.stranded === null ? "ok" : "stranded",
    p.leaseOwner === null
      ? "-"
      : `${p.leaseOwner} v${p.leaseVersion ?? "?"}${p.leaseExpired === true ? " (expired)" : ""}`
  ])
  const lines = [
    `backend: ${r.backend}`,
    "",
    r.partitions.length === 0
      ? "no partitions with records"
      : table(
          ["partition", "pending", "claimed", "oldest pending", "fence", "head", "lease"],
          [...rows, ["total", count(r.totals.pending), count(r.totals.claimed), "", "", "", ""]]
        ),
    "",
    table(
      ["dead letters", "count"],
      [
        ["poison", count(r.deadLetters.poison)],
        ["permanent", count(r.deadLetters.permanent)],
        ["expired", count(r.deadLetters.expired)],
        ["total", count(r.deadLetters.total)]
      ]
    )
  ]
  for (const note of r.notes) lines.push(`note: ${note}`)
  return lines.join("\n")
}

/**
 * The `inspect` command.
 *
 * @since 0.1.0
 */
export const command = Command.make(
  "inspect",
  {
    ...storeOptions,
    json: Options.boolean("json").pipe(Options.withDescription("Print one JSON document instead of tables"))
  },
  (flags) =>
    Effect.gen(function* () {
      const { store } = yield* resolve(flags)
      const result = yield* withStores(store, report, { readOnly: true })
      yield* Console.log(inertLines(flags.json ? JSON.stringify(result, null, 2) : render(result)))
    })
).pipe(Command.withDescription("Show per-partition depths, fences and leases, and dead-letter counts"))
