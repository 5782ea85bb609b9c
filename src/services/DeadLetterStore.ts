/**
 * The `DeadLetterStore` port (SPEC §5) and the shared core every backend goes through.
 *
 * Backends implement {@link DeadLetterBackend} (storage only: insert, get, select, remove, removeWhere and
 * the scope a redrive runs in). {@link make} wraps one with what must not drift between backends: entry
 * validation (`InvalidRecord`), argument validation (`InvalidArgument`: empty or non-string ids, a filter
 * with a bad route, category, instant or limit, `since` after `before`, a `purge` instant that is not a
 * `DateTime`), filter normalisation (one meaning of "no limit": an absent `limit`), the `(failedAt, id)`
 * order and the limit cut, the redrive loop (persist, then delete, entry by entry) and one span per
 * operation.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as SchemaIssues from "../domain/SchemaIssues.js"
import * as Schema from "effect/Schema"
import { DeadLetterCategory, DeadLetterEntry, type DeadLetterFilter } from "../domain/DeadLetterEntry.js"
import {
  DuplicateRecord,
  InvalidArgument,
  InvalidRecord,
  NotFound,
  type StoreUnavailable
} from "../domain/OutboxError.js"
import { NewOutboxRecord } from "../domain/OutboxRecord.js"
import type { OutboxStoreService } from "./OutboxStore.js"
import * as Traced from "./Traced.js"

/**
 * The dead-letter store. Returned entries are copies: mutating them changes nothing stored.
 *
 * @since 0.1.0
 */
export interface DeadLetterStoreService {
  /** Writes an entry; an existing id fails with `DuplicateRecord`. */
  readonly write: (entry: DeadLetterEntry) => Effect.Effect<void, DuplicateRecord | InvalidRecord | StoreUnavailable>
  /** Reads one entry, or `NotFound`. */
  readonly get: (id: string) => Effect.Effect<DeadLetterEntry, NotFound | InvalidArgument | StoreUnavailable>
  /** Entries matching the filter, oldest first by `(failedAt, id)`, at most `limit`. */
  readonly list: (
    filter: DeadLetterFilter
  ) => Effect.Effect<ReadonlyArray<DeadLetterEntry>, InvalidArgument | StoreUnavailable>
  /** Deletes entries by id; returns how many existed. */
  readonly delete: (ids: ReadonlyArray<string>) => Effect.Effect<number, InvalidArgument | StoreUnavailable>
  /** Deletes every entry matching the filter (oldest first when limited), paging to the end. */
  readonly deleteWhere: (filter: DeadLetterFilter) => Effect.Effect<number, InvalidArgument | StoreUnavailable>
  /** Deletes entries with `failedAt` strictly before `before`, across all routes. */
  readonly purge: (before: DateTime.Utc) => Effect.Effect<number, InvalidArgument | StoreUnavailable>
  /**
   * Re-persists each entry as a fresh pending outbox record (new id and seq, `createdAt` now; same
   * partition, envelope, binding, payload, headers, ordering key, route, address), replacing a terminal
   * record of that identity, and deletes the entry. When a non-terminal record already holds the
   * identity, nothing is persisted, the entry is deleted and that record's id is returned. An unknown
   * entry id fails with `NotFound` and nothing is redriven. Returns the outbox record ids.
   */
  readonly redrive: (
    ids: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<string>, NotFound | InvalidRecord | InvalidArgument | StoreUnavailable>
}

/**
 * The `DeadLetterStore` service tag.
 *
 * @since 0.1.0
 */
export class DeadLetterStore extends Context.Tag("effect-outbox/DeadLetterStore")<
  DeadLetterStore,
  DeadLetterStoreService
>() {}

const decodeEntry = Schema.decodeUnknownEither(Schema.Struct(DeadLetterEntry.fields))

/**
 * The fresh outbox record a redrive persists for an entry: same partition, envelope, binding, payload,
 * headers, ordering key, route and address; no id and no `createdAt`, so the store generates a
 * time-ordered id and stamps now.
 *
 * @since 0.1.0
 */
export const redriveRecord = (entry: DeadLetterEntry): NewOutboxRecord =>
  new NewOutboxRecord(
    {
      partitionKey: entry.partitionKey,
      envelopeId: entry.envelopeId,
      bindingId: entry.bindingId,
      payload: new Uint8Array(entry.payload),
      headers: { ...entry.headers },
      orderingKey: entry.orderingKey,
      routeId: entry.routeId,
      address: entry.address
    },
    { disableValidation: true }
  )

/**
 * Validates an entry handed to `write` (values may arrive as plain objects or instances built with
 * validation disabled).
 *
 * @since 0.1.0
 */
export const validateEntry = (entry: unknown): Either.Either<DeadLetterEntry, InvalidRecord> =>
  Either.mapBoth(decodeEntry(entry), {
    onLeft: (error) => {
      const id = typeof entry === "object" && entry !== null ? Reflect.get(entry, "recordId") : undefined
      const pk = typeof entry === "object" && entry !== null ? Reflect.get(entry, "partitionKey") : undefined
      return new InvalidRecord({
        index: 0,
        recordId: typeof id === "string" && id.length > 0 ? id : undefined,
        partitionKey: typeof pk === "string" && pk.length > 0 ? pk : undefined,
        reason: `invalid dead-letter entry: ${SchemaIssues.describe(error)}`
      })
    },
    onRight: (fields) => new DeadLetterEntry(fields, { disableValidation: true })
  })

/**
 * Redrives one entry through the outbox store (SPEC §5): persists {@link redriveRecord} with
 * `replaceTerminal`, and returns the id of the record that now holds the identity — the new one, or the
 * non-terminal record that already held it (then nothing was persisted).
 */
const redriveOne = (
  outbox: OutboxStoreService,
  entry: DeadLetterEntry
): Effect.Effect<string, InvalidRecord | StoreUnavailable> =>
  outbox.persist([redriveRecord(entry)], { replaceTerminal: true }).pipe(
    Effect.map((report) => report.persisted[0] ?? report.existingIds[0]),
    Effect.catchTag("DuplicateRecord", (duplicate: DuplicateRecord) => Effect.succeed(duplicate.existingIds?.[0])),
    Effect.flatMap((recordId) =>
      recordId === undefined
        ? Effect.dieMessage(`redrive of dead-letter entry ${entry.id}: the outbox store reported no record id`)
        : Effect.succeed(recordId)
    )
  )

/**
 * A filter after validation: instants as epoch milliseconds, `limit` at least 1 (`Infinity` when the
 * filter has none), `sinceMillis < beforeMillis` when both are set.
 *
 * @since 0.1.0
 */
export interface Selection {
  readonly routeId: string | undefined
  readonly category: DeadLetterCategory | undefined
  readonly sinceMillis: number | undefined
  readonly beforeMillis: number | undefined
  readonly limit: number
}

/**
 * The storage primitives of a dead-letter backend. None validates its arguments, orders results for the
 * caller or writes spans (the core does). `operation` names the public operation for `StoreUnavailable`.
 * Returned entries must be the backend's own fresh values (mutating them changes nothing stored).
 *
 * @since 0.1.0
 */
export interface DeadLetterBackend {
  /** Stores a validated entry; `false` (nothing written) when an entry with its id exists. */
  readonly insert: (entry: DeadLetterEntry) => Effect.Effect<boolean, InvalidRecord | StoreUnavailable>
  /** The stored entries among these distinct ids, in any order (absent ids are simply missing). */
  readonly get: (
    operation: string,
    ids: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<DeadLetterEntry>, StoreUnavailable>
  /** Entries matching the selection, in any order, including at least its oldest `limit` by `(failedAt, id)`. */
  readonly select: (selection: Selection) => Effect.Effect<ReadonlyArray<DeadLetterEntry>, StoreUnavailable>
  /** Deletes the entries of these distinct ids; returns how many existed. */
  readonly remove: (operation: string, ids: ReadonlyArray<string>) => Effect.Effect<number, StoreUnavailable>
  /**
   * Deletes the entries matching the selection (its oldest `limit` by `(failedAt, id)` when limited), to the
   * end; returns how many it deleted.
   */
  readonly removeWhere: (operation: string, selection: Selection) => Effect.Effect<number, StoreUnavailable>
  /**
   * Runs a whole redrive: inside one transaction where the backend has them (the outbox store's persist
   * joining it), else as it is.
   */
  readonly redriveScope: <A, E>(redrive: Effect.Effect<A, E>) => Effect.Effect<A, E | StoreUnavailable>
}

/**
 * A `removeWhere` made of bounded statements: `deleteOldest(n)` deletes the oldest `n` entries matching the
 * selection and returns how many it deleted; it runs with `n` at most `chunk` until fewer than `n` are
 * deleted or the selection's limit is reached. Returns the total.
 *
 * @since 0.1.0
 */
export const removeInChunks = <E>(
  selection: Selection,
  chunk: number,
  deleteOldest: (n: number) => Effect.Effect<number, E>
): Effect.Effect<number, E> =>
  Effect.gen(function* () {
    let remaining = selection.limit
    let total = 0
    while (remaining > 0) {
      const n = Math.min(chunk, remaining)
      const deleted = yield* deleteOldest(n)
      total += deleted
      remaining -= deleted
      if (deleted < n) break
    }
    return total
  })

/**
 * Oldest first by `(failedAt, id)`, ids compared by UTF-16 code units.
 *
 * @since 0.1.0
 */
export const byAge = (a: DeadLetterEntry, b: DeadLetterEntry): number => {
  const d = DateTime.toEpochMillis(a.failedAt) - DateTime.toEpochMillis(b.failedAt)
  if (d !== 0) return d
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0
}

/**
 * True when an entry matches a selection's route, category and time window (not its limit).
 *
 * @since 0.1.0
 */
export const matches = (selection: Selection, entry: DeadLetterEntry): boolean => {
  if (selection.routeId !== undefined && entry.routeId !== selection.routeId) return false
  if (selection.category !== undefined && entry.category !== selection.category) return false
  const failedAt = DateTime.toEpochMillis(entry.failedAt)
  if (selection.sinceMillis !== undefined && failedAt < selection.sinceMillis) return false
  if (selection.beforeMillis !== undefined && failedAt >= selection.beforeMillis) return false
  return true
}

const isNonEmptyString = (u: unknown): u is string => typeof u === "string" && u.length > 0
const isCategory = Schema.is(DeadLetterCategory)

const invalid = (operation: string, argument: string, reason: string) =>
  Either.left(new InvalidArgument({ operation, argument, reason }))

const instantOf = (
  operation: string,
  argument: string,
  value: unknown
): Either.Either<number | undefined, InvalidArgument> => {
  if (value === undefined) return Either.right(undefined)
  return DateTime.isDateTime(value)
    ? Either.right(DateTime.toEpochMillis(value))
    : invalid(operation, argument, "must be a DateTime")
}

/** Validates a filter; `undefined` when its time window is empty (`since` equal to `before`). */
const selectionOf = (operation: string, filter: unknown): Either.Either<Selection | undefined, InvalidArgument> =>
  Either.gen(function* () {
    if (typeof filter !== "object" || filter === null) return yield* invalid(operation, "filter", "must be an object")
    const routeId: unknown = Reflect.get(filter, "routeId")
    const category: unknown = Reflect.get(filter, "category")
    const limit: unknown = Reflect.get(filter, "limit")
    if (routeId !== undefined && typeof routeId !== "string") {
      return yield* invalid(operation, "filter.routeId", "must be a string")
    }
    if (category !== undefined && !isCategory(category)) {
      return yield* invalid(operation, "filter.category", "must be poison, permanent or expired")
    }
    const sinceMillis = yield* instantOf(operation, "filter.since", Reflect.get(filter, "since"))
    const beforeMillis = yield* instantOf(operation, "filter.before", Reflect.get(filter, "before"))
    if (limit !== undefined && !(typeof limit === "number" && Number.isSafeInteger(limit) && limit > 0)) {
      return yield* invalid(operation, "filter.limit", "must be a positive integer (omit it for no limit)")
    }
    if (sinceMillis !== undefined && beforeMillis !== undefined) {
      if (sinceMillis > beforeMillis) return yield* invalid(operation, "filter", "since is after before")
      if (sinceMillis === beforeMillis) return undefined
    }
    return { routeId, category, sinceMillis, beforeMillis, limit: limit ?? Number.POSITIVE_INFINITY }
  })

/** Validates a list of entry ids and drops repeats (first occurrence kept). */
const idsOf = (operation: string, ids: unknown): Either.Either<ReadonlyArray<string>, InvalidArgument> => {
  if (!Array.isArray(ids)) return invalid(operation, "ids", "must be an array of entry ids")
  const unique = new Set<string>()
  for (const id of ids) {
    if (!isNonEmptyString(id)) return invalid(operation, "ids", "every id must be a non-empty string")
    unique.add(id)
  }
  return Either.right(Array.from(unique))
}

/** The span of one operation (made when a tracer is installed, see `Traced`). */
const span = Traced.span

const countOf = (ids: unknown): number => (Array.isArray(ids) ? ids.length : 0)

/**
 * Wraps a dead-letter backend with the shared core; redrive persists into `outbox`.
 *
 * @since 0.1.0
 */
export const make = (backend: DeadLetterBackend, outbox: OutboxStoreService): DeadLetterStoreService => {
  const list = (operation: string, filter: unknown) =>
    Effect.flatMap(selectionOf(operation, filter), (selection) =>
      selection === undefined
        ? Effect.succeed([])
        : Effect.map(backend.select(selection), (entries) => {
            const ordered = entries.slice().sort(byAge)
            return ordered.length > selection.limit ? ordered.slice(0, selection.limit) : ordered
          })
    )

  const removeWhere = (operation: string, selection: Selection | undefined) =>
    selection === undefined ? Effect.succeed(0) : backend.removeWhere(operation, selection)

  const redriveIds = (ids: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      const found = new Map((yield* backend.get("redrive", ids)).map((entry) => [entry.id, entry]))
      const missing = ids.filter((id) => !found.has(id))
      if (missing.length > 0) return yield* new NotFound({ entity: "DeadLetterEntry", ids: missing })
      const recordIds: Array<string> = []
      for (const id of ids) {
        const entry = found.get(id)
        if (entry === undefined) continue
        recordIds.push(yield* redriveOne(outbox, entry))
        yield* backend.remove("redrive", [id])
      }
      return recordIds
    })

  return DeadLetterStore.of({
    write: (entry) =>
      Effect.gen(function* () {
        const valid = yield* validateEntry(entry)
        if (!(yield* backend.insert(valid))) {
          return yield* new DuplicateRecord({ ids: [valid.id], partitionKey: valid.partitionKey })
        }
      }).pipe(
        span("DeadLetterStore.write", {
          "outbox.partition": typeof entry === "object" && entry !== null ? entry.partitionKey : undefined
        })
      ),
    get: (id) =>
      Effect.gen(function* () {
        if (!isNonEmptyString(id)) {
          return yield* new InvalidArgument({ operation: "get", argument: "id", reason: "must be a non-empty string" })
        }
        const entry = (yield* backend.get("get", [id])).find((candidate) => candidate.id === id)
        if (entry === undefined) return yield* new NotFound({ entity: "DeadLetterEntry", ids: [id] })
        return entry
      }).pipe(span("DeadLetterStore.get")),
    list: (filter) => list("list", filter).pipe(span("DeadLetterStore.list")),
    delete: (ids) =>
      Effect.flatMap(idsOf("delete", ids), (unique) =>
        unique.length === 0 ? Effect.succeed(0) : backend.remove("delete", unique)
      ).pipe(span("DeadLetterStore.delete", { "outbox.ids": countOf(ids) })),
    deleteWhere: (filter) =>
      Effect.flatMap(selectionOf("deleteWhere", filter), (selection) => removeWhere("deleteWhere", selection)).pipe(
        span("DeadLetterStore.deleteWhere")
      ),
    purge: (before) =>
      Effect.gen(function* () {
        if (!DateTime.isDateTime(before)) {
          return yield* new InvalidArgument({ operation: "purge", argument: "before", reason: "must be a DateTime" })
        }
        return yield* removeWhere("purge", {
          routeId: undefined,
          category: undefined,
          sinceMillis: undefined,
          beforeMillis: DateTime.toEpochMillis(before),
          limit: Number.POSITIVE_INFINITY
        })
      }).pipe(span("DeadLetterStore.purge")),
    redrive: (ids) =>
      Effect.flatMap(idsOf("redrive", ids), (unique) =>
        unique.length === 0 ? Effect.succeed([]) : backend.redriveScope(redriveIds(unique))
      ).pipe(span("DeadLetterStore.redrive", { "outbox.ids": countOf(ids) }))
  })
}
