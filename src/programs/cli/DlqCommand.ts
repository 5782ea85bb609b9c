/**
 * `effect-outbox dlq list | redrive | purge`: the dead-letter queue with the filters of SPEC §5
 * (`--route`, `--category`, `--since` inclusive, `--before` exclusive, `--limit`). Times are ISO-8601
 * instants or a duration meaning "that long ago" (`"2 hours"`).
 *
 * - `list` prints the matching entries, oldest first (a table, or JSON lines with `--json`).
 * - `redrive [ids…]` re-enqueues the given entries, or every entry matching the filters; without ids or
 *   any filter it refuses unless `--all` is given.
 * - `purge` deletes the matching entries; without any filter it refuses unless `--all` is given.
 *
 * @since 0.1.0
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import {
  type DeadLetterCategory,
  type DeadLetterEntry,
  type DeadLetterFilter,
  toJson
} from "../../domain/DeadLetterEntry.js"
import { DeadLetterStore } from "../../services/DeadLetterStore.js"
import { counted, inertLines, table } from "./Format.js"
import { CliFailure } from "./Settings.js"
import { resolve, storeOptions, withStores } from "./StoreOptions.js"

/**
 * Parses `--since` / `--before`: an ISO-8601 instant, or a duration meaning that long before `now`.
 *
 * @since 0.1.0
 */
export const parseInstant = (text: string, now: DateTime.Utc): Either.Either<DateTime.Utc, string> => {
  const trimmed = text.trim()
  const duration = Duration.decodeUnknown(trimmed)
  if (Option.isSome(duration)) return Either.right(DateTime.subtractDuration(now, duration.value))
  if (/^\d{4}-\d{2}-\d{2}/.test(trimmed)) {
    const instant = DateTime.make(trimmed)
    if (Option.isSome(instant)) return Either.right(DateTime.toUtc(instant.value))
  }
  return Either.left(`${JSON.stringify(text)} is neither an ISO-8601 instant nor a duration such as "2 hours"`)
}

const filterOptions = {
  route: Options.text("route").pipe(Options.withDescription("Only entries of this route"), Options.optional),
  category: Options.choice("category", ["poison", "permanent", "expired"]).pipe(
    Options.withDescription("Only entries of this category"),
    Options.optional
  ),
  since: Options.text("since").pipe(
    Options.withDescription('Failed at or after (ISO-8601 or e.g. "2 hours" ago)'),
    Options.optional
  ),
  before: Options.text("before").pipe(
    Options.withDescription('Failed strictly before (ISO-8601 or e.g. "1 day" ago)'),
    Options.optional
  ),
  limit: Options.integer("limit").pipe(Options.withDescription("At most this many entries"), Options.optional)
}

interface FilterFlags {
  readonly route: Option.Option<string>
  readonly category: Option.Option<DeadLetterCategory>
  readonly since: Option.Option<string>
  readonly before: Option.Option<string>
  readonly limit: Option.Option<number>
}

const toFilter = (flags: FilterFlags): Effect.Effect<DeadLetterFilter, CliFailure> =>
  Effect.gen(function* () {
    const now = yield* DateTime.now
    const instant = (name: string, value: Option.Option<string>) =>
      Option.match(value, {
        onNone: () => Effect.succeed(undefined),
        onSome: (text) =>
          Either.match(parseInstant(text, now), {
            onLeft: (reason) => Effect.fail(new CliFailure({ message: `--${name}: ${reason}`, exitCode: 2 })),
            onRight: (at) => Effect.succeed(at)
          })
      })
    const since = yield* instant("since", flags.since)
    const before = yield* instant("before", flags.before)
    if (Option.isSome(flags.limit) && flags.limit.value < 1) {
      return yield* new CliFailure({ message: "--limit must be 1 or more", exitCode: 2 })
    }
    return {
      ...(Option.isSome(flags.route) ? { routeId: flags.route.value } : {}),
      ...(Option.isSome(flags.category) ? { category: flags.category.value } : {}),
      ...(since !== undefined ? { since } : {}),
      ...(before !== undefined ? { before } : {}),
      ...(Option.isSome(flags.limit) ? { limit: flags.limit.value } : {})
    }
  })

const isEmptyFilter = (filter: DeadLetterFilter): boolean =>
  filter.routeId === undefined &&
  filter.category === undefined &&
  filter.since === undefined &&
  filter.before === undefined &&
  filter.limit === undefined

const entryJson = (entry: DeadLetterEntry) => ({
  ...toJson(entry),
  payload: Buffer.from(entry.payload).toString("base64")
})

const truncate = (text: string, width: number): string => (text.length <= width ? text : `${text.slice(0, width - 1)}…`)

const list = Command.make(
  "list",
  {
    ...storeOptions,
    ...filterOptions,
    json: Options.boolean("json").pipe(Options.withDescription("One JSON object per line"))
  },
  (flags) =>
    Effect.gen(function* () {
      const { store } = yield* resolve(flags)
      const filter = yield* toFilter(flags)
      const entries = yield* withStores(
        store,
        Effect.flatMap(DeadLetterStore, (dlq) => dlq.list(filter)),
        { readOnly: true }
      )
      if (flags.json) {
        for (const entry of entries) yield* Console.log(inertLines(JSON.stringify(entryJson(entry))))
        return
      }
      if (entries.length === 0) return yield* Console.log("no dead-letter entries match")
      yield* Console.log(
        table(
          ["failed at", "id", "category", "partition", "route", "envelope", "code", "attempts", "reason"],
          entries.map((entry) => [
            DateTime.formatIso(entry.failedAt),
            entry.id,
            entry.category,
            entry.partitionKey,
            entry.routeId ?? "",
            entry.envelopeId,
            entry.errorCode,
            String(entry.attempts),
            truncate(entry.reason, 60)
          ])
        )
      )
      yield* Console.log(counted(entries.length, "entry", "entries"))
    })
).pipe(Command.withDescription("List dead-letter entries, oldest first"))

const redrive = Command.make(
  "redrive",
  {
    ...storeOptions,
    ...filterOptions,
    all: Options.boolean("all").pipe(Options.withDescription("Allow redriving every entry (no ids, no filter)")),
    ids: Args.text({ name: "id" }).pipe(
      Args.withDescription("Entry ids (default: every entry matching the filters)"),
      Args.repeated
    )
  },
  (flags) =>
    Effect.gen(function* () {
      const { store } = yield* resolve(flags)
      const filter = yield* toFilter(flags)
      if (flags.ids.length === 0 && isEmptyFilter(filter) && !flags.all) {
        return yield* new CliFailure({
          message:
            "refusing to redrive every dead-letter entry: give entry ids, a filter (--route, --since, …) or --all",
          exitCode: 2
        })
      }
      const redriven = yield* withStores(
        store,
        Effect.gen(function* () {
          const dlq = yield* DeadLetterStore
          const ids = flags.ids.length > 0 ? flags.ids : (yield* dlq.list(filter)).map((entry) => entry.id)
          if (ids.length === 0) return []
          return yield* dlq.redrive(ids)
        })
      )
      yield* Console.log(`redrove ${counted(redriven.length, "entry", "entries")} into the outbox`)
      for (const id of redriven) yield* Console.log(inertLines(id))
    })
).pipe(Command.withDescription("Re-enqueue dead-letter entries as fresh pending records"))

const purge = Command.make(
  "purge",
  {
    ...storeOptions,
    ...filterOptions,
    all: Options.boolean("all").pipe(Options.withDescription("Allow purging without any filter"))
  },
  (flags) =>
    Effect.gen(function* () {
      const { store } = yield* resolve(flags)
      const filter = yield* toFilter(flags)
      if (isEmptyFilter(filter) && !flags.all) {
        return yield* new CliFailure({
          message: "refusing to purge every dead-letter entry: give a filter (--before, --route, …) or --all",
          exitCode: 2
        })
      }
      const onlyBefore =
        filter.before !== undefined &&
        filter.routeId === undefined &&
        filter.category === undefined &&
        filter.since === undefined &&
        filter.limit === undefined
      const deleted = yield* withStores(
        store,
        Effect.flatMap(DeadLetterStore, (dlq) =>
          onlyBefore && filter.before !== undefined ? dlq.purge(filter.before) : dlq.deleteWhere(filter)
        )
      )
      yield* Console.log(`purged ${counted(deleted, "entry", "entries")}`)
    })
).pipe(Command.withDescription("Delete dead-letter entries matching the filters"))

/**
 * The `dlq` command and its subcommands.
 *
 * @since 0.1.0
 */
export const command = Command.make("dlq").pipe(
  Command.withDescription("Dead-letter queue: list, redrive, purge"),
  Command.withSubcommands([list, redrive, purge])
)
