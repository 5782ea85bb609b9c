/**
 * The in-memory `DeadLetterStore` (SPEC §5). All entries live in one `Ref`; every operation is one
 * atomic update. Stored and returned entries are copies (payload bytes and headers included), so
 * callers can never change what is stored by mutating a value. Redrive persists through the
 * `OutboxStore` service the layer was built with, entry by entry, deleting each entry only after its
 * record is persisted: when a persist fails, the entries before it stay redriven (and deleted) and the
 * failing entry and those after it stay in the queue.
 *
 * @since 0.1.0
 */
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import { DeadLetterEntry, type DeadLetterFilter } from "../../domain/DeadLetterEntry.js"
import { DuplicateRecord, type InvalidRecord, NotFound } from "../../domain/OutboxError.js"
import {
  DeadLetterStore,
  type DeadLetterStoreService,
  redriveOne,
  validateEntry
} from "../../services/DeadLetterStore.js"
import { OutboxStore } from "../../services/OutboxStore.js"

/**
 * Options of the memory dead-letter store. It has none today; the type exists so that every backend
 * module offers the same `layerWith(options)` shape.
 *
 * @since 0.1.0
 */
export interface MemoryDeadLetterStoreOptions {}

type Entries = HashMap.HashMap<string, DeadLetterEntry>

/**
 * A deep copy of an entry: new instance, new payload buffer, new headers object.
 *
 * @since 0.1.0
 */
export const copyEntry = (entry: DeadLetterEntry): DeadLetterEntry =>
  new DeadLetterEntry(
    { ...entry, payload: new Uint8Array(entry.payload), headers: { ...entry.headers } },
    { disableValidation: true }
  )

/**
 * The filter's limit as a count: absent or `+Infinity` means no limit; anything else is floored and
 * clamped at 0 (`NaN` → 0).
 */
const limitOf = (filter: DeadLetterFilter): number => {
  const limit = filter.limit
  if (limit === undefined || limit === Number.POSITIVE_INFINITY) return Number.POSITIVE_INFINITY
  return Number.isFinite(limit) && limit > 0 ? Math.floor(limit) : 0
}

const matches = (filter: DeadLetterFilter, entry: DeadLetterEntry): boolean => {
  if (filter.routeId !== undefined && entry.routeId !== filter.routeId) return false
  if (filter.category !== undefined && entry.category !== filter.category) return false
  const failedAt = DateTime.toEpochMillis(entry.failedAt)
  if (filter.since !== undefined && failedAt < DateTime.toEpochMillis(filter.since)) return false
  if (filter.before !== undefined && failedAt >= DateTime.toEpochMillis(filter.before)) return false
  return true
}

/** Oldest first by `(failedAt, id)`. */
const byAge = (a: DeadLetterEntry, b: DeadLetterEntry): number => {
  const d = DateTime.toEpochMillis(a.failedAt) - DateTime.toEpochMillis(b.failedAt)
  if (d !== 0) return d
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0
}

const select = (entries: Entries, filter: DeadLetterFilter): Array<DeadLetterEntry> => {
  const limit = limitOf(filter)
  if (limit === 0) return []
  const selected = Array.from(HashMap.values(entries))
    .filter((entry) => matches(filter, entry))
    .sort(byAge)
  return limit < selected.length ? selected.slice(0, limit) : selected
}

/**
 * Shared with every dead-letter backend; defined with the port.
 *
 * @since 0.1.0
 */
export { redriveRecord, validateEntry } from "../../services/DeadLetterStore.js"

/**
 * Builds a memory dead-letter store over the `OutboxStore` in context (used by redrive).
 *
 * @since 0.1.0
 */
export const make = (
  _options: MemoryDeadLetterStoreOptions = {}
): Effect.Effect<DeadLetterStoreService, never, OutboxStore> =>
  Effect.gen(function* () {
    const outbox = yield* OutboxStore
    const state = yield* Ref.make<Entries>(HashMap.empty())

    const write = (entry: DeadLetterEntry) =>
      Either.match(validateEntry(entry), {
        onLeft: (error): Effect.Effect<void, DuplicateRecord | InvalidRecord> => Effect.fail(error),
        onRight: (valid) =>
          Ref.modify(state, (entries): readonly [Either.Either<void, DuplicateRecord>, Entries] =>
            HashMap.has(entries, valid.id)
              ? [Either.left(new DuplicateRecord({ ids: [valid.id], partitionKey: valid.partitionKey })), entries]
              : [Either.right(undefined), HashMap.set(entries, valid.id, copyEntry(valid))]
          ).pipe(Effect.flatten)
      }).pipe(Effect.withSpan("DeadLetterStore.write", { attributes: { "outbox.partition": entry.partitionKey } }))

    const get = (id: string) =>
      Ref.get(state).pipe(
        Effect.flatMap((entries) =>
          Option.match(HashMap.get(entries, id), {
            onNone: () => Effect.fail(new NotFound({ entity: "DeadLetterEntry", ids: [id] })),
            onSome: (entry) => Effect.succeed(copyEntry(entry))
          })
        ),
        Effect.withSpan("DeadLetterStore.get")
      )

    const list = (filter: DeadLetterFilter) =>
      Ref.get(state).pipe(
        Effect.map((entries) => select(entries, filter).map(copyEntry)),
        Effect.withSpan("DeadLetterStore.list")
      )

    const removeIds = (ids: Iterable<string>): Effect.Effect<number> =>
      Ref.modify(state, (entries): readonly [number, Entries] => {
        let count = 0
        const next = HashMap.mutate(entries, (draft) => {
          for (const id of ids) {
            if (HashMap.has(draft, id)) {
              HashMap.remove(draft, id)
              count++
            }
          }
        })
        return [count, next]
      })

    const deleteIds = (ids: ReadonlyArray<string>) =>
      removeIds(new Set(ids)).pipe(
        Effect.withSpan("DeadLetterStore.delete", { attributes: { "outbox.ids": ids.length } })
      )

    const deleteWhere = (filter: DeadLetterFilter) =>
      Ref.modify(state, (entries): readonly [number, Entries] => {
        const selected = select(entries, filter)
        return [
          selected.length,
          HashMap.removeMany(
            entries,
            selected.map((entry) => entry.id)
          )
        ]
      }).pipe(Effect.withSpan("DeadLetterStore.deleteWhere"))

    const purge = (before: DateTime.Utc) => deleteWhere({ before }).pipe(Effect.withSpan("DeadLetterStore.purge"))

    const redrive = (ids: ReadonlyArray<string>) =>
      Effect.gen(function* () {
        const unique = Array.from(new Set(ids))
        const entries = yield* Ref.get(state)
        const missing = unique.filter((id) => !HashMap.has(entries, id))
        if (missing.length > 0) return yield* new NotFound({ entity: "DeadLetterEntry", ids: missing })
        const recordIds: Array<string> = []
        for (const id of unique) {
          const entry = HashMap.get(entries, id)
          if (Option.isNone(entry)) continue
          const recordId = yield* redriveOne(outbox, entry.value)
          yield* removeIds([id])
          recordIds.push(recordId)
        }
        return recordIds
      }).pipe(Effect.withSpan("DeadLetterStore.redrive", { attributes: { "outbox.ids": ids.length } }))

    return DeadLetterStore.of({ write, get, list, delete: deleteIds, deleteWhere, purge, redrive })
  })

/**
 * A memory dead-letter store layer with the given options; redrive goes through the `OutboxStore`.
 *
 * @since 0.1.0
 */
export const layerWith = (options: MemoryDeadLetterStoreOptions): Layer.Layer<DeadLetterStore, never, OutboxStore> =>
  Layer.effect(DeadLetterStore, make(options))

/**
 * The memory dead-letter store layer (fresh, empty state per build).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<DeadLetterStore, never, OutboxStore> = layerWith({})
