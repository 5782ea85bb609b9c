/**
 * Read-only facts about an outbox for operators (`effect-outbox inspect`, dashboards): the partitions a
 * backend knows of (including ones that emptied), per partition the pending and claimed depth, the oldest
 * pending and oldest claimed record, the fence high-water mark (R-CLAIM-4) and the current lease; dead-letter
 * counts per category (SPEC §5).
 *
 * A backend hands {@link make} plain read primitives (a {@link Backend}); the core adds the lease (through the
 * `LeaseStore` port when one is provided), the stranded-head rule, ordering and spans. A fact a backend cannot
 * answer cheaply is `Left(DepthUnsupported)` naming it — never a guess. Inspection never writes.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { DeadLetterCategory } from "../domain/DeadLetterEntry.js"
import { DepthUnsupported, type InvalidArgument, type StoreUnavailable } from "../domain/OutboxError.js"
import type { LeaseStoreService } from "./LeaseStore.js"
import * as Traced from "./Traced.js"

/**
 * A fact the backend answers (`Right`), or `Left(DepthUnsupported)` when it cannot answer it cheaply.
 *
 * @since 0.1.0
 */
export type Fact<A> = Either.Either<A, DepthUnsupported>

/**
 * Dead-letter entry counts per category.
 *
 * @since 0.1.0
 */
export type DeadLetterCounts = { readonly [C in DeadLetterCategory]: number }

/**
 * The lease currently recorded for a partition (it may have expired: compare `expiresAt` with now).
 *
 * @since 0.1.0
 */
export interface LeaseView {
  readonly owner: string
  readonly version: number
  readonly expiresAt: DateTime.Utc
}

/**
 * What a backend reads for one partition.
 *
 * @since 0.1.0
 */
export interface PartitionFacts {
  readonly pending: Fact<number>
  readonly claimed: Fact<number>
  /** `createdAt` of the oldest pending record; `None` when nothing is pending. */
  readonly oldestPendingAt: Fact<Option.Option<DateTime.Utc>>
  /** `claimedAt` of the longest-held claimed record; `None` when nothing is claimed. */
  readonly oldestClaimedAt: Fact<Option.Option<DateTime.Utc>>
  /** The fence high-water mark (0 when never raised). */
  readonly fence: Fact<number>
}

/**
 * Why a partition's head looks stranded: records stay claimed with no work left behind them and no live
 * lease (`claimedWithoutPending`), or a claim is older than the threshold (`claimedTooLong`).
 *
 * @since 0.1.0
 */
export type Stranded = "claimedWithoutPending" | "claimedTooLong"

/**
 * One partition as the core reports it.
 *
 * @since 0.1.0
 */
export interface PartitionInspection extends PartitionFacts {
  readonly partitionKey: string
  /** The recorded lease; `Right(None)` when there is none, `Left` without a lease store. */
  readonly lease: Fact<Option.Option<LeaseView>>
  /** The stranded-head verdict; `None` when the head looks healthy (or the facts to tell are unsupported). */
  readonly stranded: Option.Option<Stranded>
}

/**
 * A whole snapshot, partitions in key order.
 *
 * @since 0.1.0
 */
export interface Snapshot {
  readonly backend: string
  readonly at: DateTime.Utc
  readonly partitions: ReadonlyArray<PartitionInspection>
  readonly deadLetters: DeadLetterCounts
  /** Human notes on what this backend cannot answer. */
  readonly notes: ReadonlyArray<string>
}

/**
 * Options of {@link OutboxInspectionService.snapshot} and {@link OutboxInspectionService.partition}.
 *
 * @since 0.1.0
 */
export interface InspectOptions {
  /** A claim held longer than this makes the head stranded (default 5 minutes). */
  readonly strandedAfter?: Duration.DurationInput | undefined
}

/**
 * The inspection port.
 *
 * @since 0.1.0
 */
export interface OutboxInspectionService {
  /** The backend's name (`memory`, `sqlite`, `dynamodb`, …). */
  readonly backend: string
  /** Human notes on what this backend cannot answer. */
  readonly notes: ReadonlyArray<string>
  /** Every partition the backend knows of, including ones that emptied where it remembers them, sorted. */
  readonly partitions: Effect.Effect<ReadonlyArray<string>, StoreUnavailable>
  /** One partition's facts. */
  readonly partition: (
    partitionKey: string,
    options?: InspectOptions
  ) => Effect.Effect<PartitionInspection, StoreUnavailable>
  /** Dead-letter entries per category. */
  readonly deadLetters: Effect.Effect<DeadLetterCounts, StoreUnavailable>
  /** Every known partition and the dead-letter counts. */
  readonly snapshot: (options?: InspectOptions) => Effect.Effect<Snapshot, StoreUnavailable>
}

/**
 * The inspection service tag.
 *
 * @since 0.1.0
 */
export class OutboxInspection extends Context.Tag("effect-outbox/OutboxInspection")<
  OutboxInspection,
  OutboxInspectionService
>() {}

/**
 * What a backend implements: plain reads, no spans, no lease logic.
 *
 * @since 0.1.0
 */
export interface Backend {
  readonly name: string
  readonly notes: ReadonlyArray<string>
  /** Known partitions (order does not matter; duplicates are removed). */
  readonly partitions: Effect.Effect<ReadonlyArray<string>, StoreUnavailable>
  readonly facts: (partitionKey: string) => Effect.Effect<PartitionFacts, StoreUnavailable>
  readonly deadLetters: Effect.Effect<DeadLetterCounts, StoreUnavailable>
}

/**
 * `Left(DepthUnsupported)` for a fact `backend` cannot answer.
 *
 * @since 0.1.0
 */
export const unsupported = <A>(backend: string, fact: string): Fact<A> =>
  Either.left(new DepthUnsupported({ operation: `inspect.${fact}`, backend }))

/**
 * An answered fact.
 *
 * @since 0.1.0
 */
export const known = <A>(value: A): Fact<A> => Either.right(value)

/**
 * Turns a count that may fail with `DepthUnsupported` (as `countPending`/`countClaimed` do) into a fact.
 *
 * @since 0.1.0
 */
export const fact = <A>(effect: Effect.Effect<A, DepthUnsupported | InvalidArgument | StoreUnavailable>) =>
  effect.pipe(
    Effect.map(known<A>),
    Effect.catchTag("DepthUnsupported", (error) => Effect.succeed(Either.left(error))),
    // inspected partition keys are listed by the store or checked by the caller: an invalid one is a bug
    Effect.catchTag("InvalidArgument", (error) => Effect.die(error))
  )

/**
 * Zero counts for every category.
 *
 * @since 0.1.0
 */
export const noDeadLetters = (): { [C in DeadLetterCategory]: number } => ({ poison: 0, permanent: 0, expired: 0 })

/**
 * Dead-letter counts from `(category, count)` rows (a SQL `GROUP BY category`); unknown categories are
 * ignored and missing ones count 0.
 *
 * @since 0.1.0
 */
export const deadLetterCounts = (
  rows: Iterable<{ readonly category: string; readonly n: number }>
): { [C in DeadLetterCategory]: number } => {
  const counts = noDeadLetters()
  for (const row of rows) {
    const category = DeadLetterCategory.literals.find((c) => c === row.category)
    if (category !== undefined) counts[category] = row.n
  }
  return counts
}

/**
 * The dead-letter categories, in report order.
 *
 * @since 0.1.0
 */
export const categories: ReadonlyArray<DeadLetterCategory> = DeadLetterCategory.literals

const defaultStrandedAfter = Duration.minutes(5)

/**
 * The stranded-head rule: records are claimed and either a claim is older than `strandedAfter`, or nothing
 * is pending behind them and no unexpired lease holds the partition.
 *
 * @since 0.1.0
 */
export const strandedOf = (
  facts: PartitionFacts,
  lease: Fact<Option.Option<LeaseView>>,
  now: DateTime.Utc,
  strandedAfter: Duration.Duration
): Option.Option<Stranded> => {
  if (Either.isLeft(facts.claimed) || facts.claimed.right === 0) return Option.none()
  if (Either.isRight(facts.oldestClaimedAt) && Option.isSome(facts.oldestClaimedAt.right)) {
    const held = DateTime.distance(facts.oldestClaimedAt.right.value, now)
    if (held > Duration.toMillis(strandedAfter)) return Option.some("claimedTooLong")
  }
  if (Either.isRight(facts.pending) && facts.pending.right === 0) {
    const live =
      Either.isRight(lease) && Option.isSome(lease.right) && DateTime.greaterThan(lease.right.value.expiresAt, now)
    if (!live && Either.isRight(lease)) return Option.some("claimedWithoutPending")
  }
  return Option.none()
}

/**
 * Builds the service over a backend's reads, with leases read through `leases` when given.
 *
 * @since 0.1.0
 */
export const make = (backend: Backend, leases: Option.Option<LeaseStoreService>): OutboxInspectionService => {
  const leaseOf = (partitionKey: string): Effect.Effect<Fact<Option.Option<LeaseView>>, StoreUnavailable> =>
    Option.match(leases, {
      onNone: () => Effect.succeed(unsupported<Option.Option<LeaseView>>(backend.name, "lease")),
      onSome: (store) =>
        store.current(partitionKey).pipe(
          Effect.map((lease) =>
            known(
              Option.some<LeaseView>({
                owner: lease.token.owner,
                version: lease.token.version,
                expiresAt: lease.expiresAt
              })
            )
          ),
          // a partition key the lease store refuses can hold no lease
          Effect.catchTags({
            LeaseNotFound: () => Effect.succeed(known(Option.none<LeaseView>())),
            InvalidArgument: () => Effect.succeed(known(Option.none<LeaseView>()))
          })
        )
    })

  const partitions = Effect.map(backend.partitions, (keys) => Array.from(new Set(keys)).sort()).pipe(
    Traced.span("OutboxInspection.partitions")
  )

  const inspectOne = (partitionKey: string, options: InspectOptions, now: DateTime.Utc) =>
    Effect.gen(function* () {
      const facts = yield* backend.facts(partitionKey)
      const lease = yield* leaseOf(partitionKey)
      const strandedAfter = Duration.decode(options.strandedAfter ?? defaultStrandedAfter)
      return {
        partitionKey,
        ...facts,
        lease,
        stranded: strandedOf(facts, lease, now, strandedAfter)
      } satisfies PartitionInspection
    })

  const partition = (partitionKey: string, options: InspectOptions = {}) =>
    Effect.flatMap(DateTime.now, (now) => inspectOne(partitionKey, options, now)).pipe(
      Traced.span("OutboxInspection.partition", { "outbox.partition": partitionKey })
    )

  const deadLetters = backend.deadLetters.pipe(Traced.span("OutboxInspection.deadLetters"))

  const snapshot = (options: InspectOptions = {}) =>
    Effect.gen(function* () {
      const at = yield* DateTime.now
      const keys = yield* partitions
      const inspected = yield* Effect.forEach(keys, (key) => inspectOne(key, options, at), { concurrency: 4 })
      const counts = yield* deadLetters
      return { backend: backend.name, at, partitions: inspected, deadLetters: counts, notes: backend.notes }
    }).pipe(Traced.span("OutboxInspection.snapshot"))

  return OutboxInspection.of({
    backend: backend.name,
    notes: backend.notes,
    partitions,
    partition,
    deadLetters,
    snapshot
  })
}
