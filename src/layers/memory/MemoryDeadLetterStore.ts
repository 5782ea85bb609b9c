/**
 * The in-memory `DeadLetterStore` (SPEC §5): the storage primitives of `DeadLetterStore.make` over one
 * `Ref`, each an atomic update. Stored and returned entries are copies (payload bytes and headers
 * included), so callers can never change what is stored by mutating a value. Redrive runs entry by
 * entry (persist, then delete): when a persist fails, the entries before it stay redriven and the
 * failing entry and those after it stay in the queue.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import { DeadLetterEntry } from "../../domain/DeadLetterEntry.js"
import * as DeadLetterStore from "../../services/DeadLetterStore.js"
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

/** The selected entries (uncopied), oldest first, at most the selection's limit. */
const selected = (entries: Entries, selection: DeadLetterStore.Selection): Array<DeadLetterEntry> => {
  const matching = Array.from(HashMap.values(entries))
    .filter((entry) => DeadLetterStore.matches(selection, entry))
    .sort(DeadLetterStore.byAge)
  return selection.limit < matching.length ? matching.slice(0, selection.limit) : matching
}

const removeAll = (entries: Entries, ids: Iterable<string>): readonly [number, Entries] => {
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
): Effect.Effect<DeadLetterStore.DeadLetterStoreService, never, OutboxStore> =>
  Effect.gen(function* () {
    const outbox = yield* OutboxStore
    const state = yield* Ref.make<Entries>(HashMap.empty())
    return DeadLetterStore.make(
      {
        insert: (entry) =>
          Ref.modify(state, (entries): readonly [boolean, Entries] =>
            HashMap.has(entries, entry.id) ? [false, entries] : [true, HashMap.set(entries, entry.id, copyEntry(entry))]
          ),
        get: (_operation, ids) =>
          Effect.map(Ref.get(state), (entries) =>
            ids.flatMap((id) =>
              Option.match(HashMap.get(entries, id), { onNone: () => [], onSome: (e) => [copyEntry(e)] })
            )
          ),
        select: (selection) => Effect.map(Ref.get(state), (entries) => selected(entries, selection).map(copyEntry)),
        remove: (_operation, ids) => Ref.modify(state, (entries) => removeAll(entries, ids)),
        removeWhere: (_operation, selection) =>
          Ref.modify(state, (entries) =>
            removeAll(
              entries,
              selected(entries, selection).map((entry) => entry.id)
            )
          ),
        redriveScope: (redrive) => redrive
      },
      outbox
    )
  })

/**
 * A memory dead-letter store layer with the given options; redrive goes through the `OutboxStore`.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: MemoryDeadLetterStoreOptions
): Layer.Layer<DeadLetterStore.DeadLetterStore, never, OutboxStore> =>
  Layer.effect(DeadLetterStore.DeadLetterStore, make(options))

/**
 * The memory dead-letter store layer (fresh, empty state per build).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<DeadLetterStore.DeadLetterStore, never, OutboxStore> = layerWith({})
