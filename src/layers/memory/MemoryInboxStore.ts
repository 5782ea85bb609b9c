/**
 * The in-memory `InboxStore` (SPEC §12): processed ids and high-water marks in maps owned by the layer.
 * A unit runs under one permit (units of one store run one at a time, like a single SQLite connection),
 * stages its writes and applies them only when its body succeeds, so a failing, dying or interrupted
 * handler leaves nothing behind. Ids are also kept in recording order, so a trim batch removes the oldest
 * ids from the front: O(batch), whatever the number of younger ids. A handler must not process a message
 * of the same store from inside its own unit (it would wait for itself).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type { InvalidConfiguration } from "../../domain/OutboxError.js"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as InboxStore from "../../services/InboxStore.js"

/**
 * Options of the memory inbox store (the options every inbox backend accepts).
 *
 * @since 0.1.0
 */
export interface MemoryInboxStoreOptions extends InboxStore.InboxOptions {}

const idKey = (consumer: string, messageId: string): string => JSON.stringify([consumer, messageId])
const markKey = (key: InboxStore.MarkKey): string => JSON.stringify([key.consumer, key.partitionKey, key.orderingKey])

/**
 * Memory state that tests and inspections may read: the number of ids held, and the entries a trim has
 * looked at in total (each trim batch touches only what it deletes, plus one entry it keeps).
 *
 * @since 0.1.0
 */
export interface MemoryInboxStats {
  readonly ids: () => number
  readonly trimTouched: () => number
}

/**
 * Builds the store and its statistics.
 *
 * @since 0.1.0
 */
export const makeWithStats = (
  options: MemoryInboxStoreOptions = {}
): Effect.Effect<
  { readonly store: InboxStore.InboxStoreService; readonly stats: MemoryInboxStats },
  InvalidConfiguration
> =>
  Effect.gen(function* () {
    const valid = yield* InboxStore.validateOptions("MemoryInboxStore", options)
    const lock = yield* Effect.makeSemaphore(1)
    const ids = new Map<string, number>()
    /** Ids in recording order, from `head` on. */
    let order: Array<{ readonly key: string; readonly at: number }> = []
    let head = 0
    const marks = new Map<string, number>()
    let touched = 0

    const atomically = <A, E, R>(body: (unit: InboxStore.InboxUnit) => Effect.Effect<A, E, R>) =>
      lock.withPermits(1)(
        Effect.suspend(() => {
          const stagedIds = new Map<string, number>()
          const stagedMarks = new Map<string, number>()
          const unit: InboxStore.InboxUnit = {
            record: (entry) =>
              Effect.sync(() => {
                const key = idKey(entry.consumer, entry.messageId)
                if (ids.has(key) || stagedIds.has(key)) return false
                stagedIds.set(key, entry.processedAtMillis)
                return true
              }),
            raiseMark: (key, seq) =>
              Effect.sync((): InboxStore.RaiseResult => {
                const k = markKey(key)
                const stored = stagedMarks.get(k) ?? marks.get(k)
                if (stored !== undefined && stored >= seq) return { raised: false, mark: stored }
                stagedMarks.set(k, seq)
                return { raised: true }
              })
          }
          return Effect.tap(body(unit), () =>
            Effect.sync(() => {
              for (const [key, at] of stagedIds) {
                ids.set(key, at)
                order.push({ key, at })
              }
              for (const [key, seq] of stagedMarks) marks.set(key, seq)
            })
          )
        })
      )

    const trimBatch = (beforeMillis: number, limit: number) =>
      lock.withPermits(1)(
        Effect.sync(() => {
          let deleted = 0
          while (deleted < limit && head < order.length) {
            const next = order[head]
            touched++
            if (next === undefined || next.at >= beforeMillis) break
            ids.delete(next.key)
            head++
            deleted++
          }
          if (head > 1024 && head * 2 > order.length) {
            order = order.slice(head)
            head = 0
          }
          return deleted
        })
      )

    const store = InboxStore.make(
      {
        name: "memory",
        atomically,
        isProcessed: (consumer, messageId) => Effect.sync(() => ids.has(idKey(consumer, messageId))),
        readMark: (key) => Effect.sync(() => Option.fromNullable(marks.get(markKey(key)))),
        trimBatch
      },
      valid
    )
    return { store, stats: { ids: () => ids.size, trimTouched: () => touched } }
  })

/**
 * Builds a memory inbox store with its own empty state.
 *
 * @since 0.1.0
 */
export const make = (
  options: MemoryInboxStoreOptions = {}
): Effect.Effect<InboxStore.InboxStoreService, InvalidConfiguration> =>
  Effect.map(makeWithStats(options), (built) => built.store)

/**
 * A memory inbox store layer with the given options.
 *
 * @since 0.1.0
 */
export const layerWith = (options: MemoryInboxStoreOptions): Layer.Layer<InboxStore.InboxStore, InvalidConfiguration> =>
  Layer.effect(InboxStore.InboxStore, make(options))

/**
 * The memory inbox store layer (fresh, empty state per build; 7-day dedupe window).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<InboxStore.InboxStore, InvalidConfiguration> = layerWith({})
