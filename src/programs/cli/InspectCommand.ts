/**
 * `effect-outbox inspect`: per partition the pending and claimed depth, the age of the oldest pending
 * record, the fence version and the lease owner; dead-letter counts by category. A table by default,
 * one JSON document with `--json`. Facts a backend cannot answer are shown as `n/a` (null in JSON) and
 * named in `notes`.
 *
 * @since 0.1.0
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Clock from "effect/Clock"
import * as Console from "effect/Console"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type { StoreUnavailable } from "../../domain/OutboxError.js"
import { LeaseStore } from "../../services/LeaseStore.js"
import { OutboxStore } from "../../services/OutboxStore.js"
import { type DeadLetterCounts, Probe } from "./Backends.js"
import { age, count, table } from "./Format.js"
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
  readonly fenceVersion: number | null
  readonly leaseOwner: string | null
  readonly leaseVersion: number | null
  readonly leaseExpired: boolean | null
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

const orNull = <A>(either: Either.Either<A, unknown>): A | null => (Either.isRight(either) ? either.right : null)

/**
 * Gathers the report from the stores in context.
 *
 * @since 0.1.0
 */
export const report: Effect.Effect<InspectReport, StoreUnavailable, OutboxStore | LeaseStore | Probe> = Effect.gen(
  function* () {
    const store = yield* OutboxStore
    const leases = yield* LeaseStore
    const probe = yield* Probe
    const now = yield* Clock.currentTimeMillis
    const listed = new Set(yield* probe.knownPartitions)
    const notes = [...probe.notes]
    const partitions = yield* Effect.forEach(
      Array.from(listed).sort(),
      (partition) =>
        Effect.gen(function* () {
          const pending = yield* Effect.either(store.countPending(partition))
          const claimed = yield* Effect.either(store.countClaimed(partition))
          const oldest =
            probe.oldestPendingAt === undefined ? undefined : yield* Effect.either(probe.oldestPendingAt(partition))
          const fence =
            probe.fenceVersion === undefined ? undefined : yield* Effect.either(probe.fenceVersion(partition))
          const lease = yield* Effect.either(leases.current(partition))
          const oldestAt = oldest === undefined ? null : orNull(oldest)
          return {
            partition,
            pending: orNull(pending),
            claimed: orNull(claimed),
            oldestPendingAgeMillis:
              oldestAt === null ? null : Option.match(oldestAt, { onNone: () => null, onSome: (at) => now - at }),
            fenceVersion: fence === undefined ? null : orNull(fence),
            leaseOwner: Either.isRight(lease) ? lease.right.token.owner : null,
            leaseVersion: Either.isRight(lease) ? lease.right.token.version : null,
            leaseExpired: Either.isRight(lease) ? DateTime.toEpochMillis(lease.right.expiresAt) <= now : null
          } satisfies PartitionReport
        }),
      { concurrency: 4 }
    )
    if (probe.oldestPendingAt === undefined) notes.push(`oldest pending age is not supported on ${probe.backend}`)
    if (probe.fenceVersion === undefined) notes.push(`fence version is not supported on ${probe.backend}`)
    const deadLetters = yield* probe.deadLetterCounts
    return {
      backend: probe.backend,
      partitions,
      totals: {
        pending: partitions.reduce((sum, p) => sum + (p.pending ?? 0), 0),
        claimed: partitions.reduce((sum, p) => sum + (p.claimed ?? 0), 0)
      },
      deadLetters: { ...deadLetters, total: deadLetters.poison + deadLetters.permanent + deadLetters.expired },
      notes
    }
  }
)

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
          ["partition", "pending", "claimed", "oldest pending", "fence", "lease"],
          [...rows, ["total", count(r.totals.pending), count(r.totals.claimed), "", "", ""]]
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
      const result = yield* withStores(store, report)
      yield* Console.log(flags.json ? JSON.stringify(result, null, 2) : render(result))
    })
).pipe(Command.withDescription("Show per-partition depths, fences and leases, and dead-letter counts"))
