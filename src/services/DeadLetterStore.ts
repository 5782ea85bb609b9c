/**
 * The `DeadLetterStore` port (SPEC §5).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as DateTime from "effect/DateTime"
import type * as Effect from "effect/Effect"
import type { DeadLetterEntry, DeadLetterFilter } from "../domain/DeadLetterEntry.js"
import type { DuplicateRecord, InvalidRecord, NotFound, StoreUnavailable } from "../domain/OutboxError.js"

/**
 * The dead-letter store. Returned entries are copies: mutating them changes nothing stored.
 *
 * @since 0.1.0
 */
export interface DeadLetterStoreService {
  /** Writes an entry; an existing id fails with `DuplicateRecord`. */
  readonly write: (entry: DeadLetterEntry) => Effect.Effect<void, DuplicateRecord | InvalidRecord | StoreUnavailable>
  /** Reads one entry, or `NotFound`. */
  readonly get: (id: string) => Effect.Effect<DeadLetterEntry, NotFound | StoreUnavailable>
  /** Entries matching the filter, oldest first by `(failedAt, id)`, at most `limit`. */
  readonly list: (filter: DeadLetterFilter) => Effect.Effect<ReadonlyArray<DeadLetterEntry>, StoreUnavailable>
  /** Deletes entries by id; returns how many existed. */
  readonly delete: (ids: ReadonlyArray<string>) => Effect.Effect<number, StoreUnavailable>
  /** Deletes every entry matching the filter (oldest first when limited), paging to the end. */
  readonly deleteWhere: (filter: DeadLetterFilter) => Effect.Effect<number, StoreUnavailable>
  /** Deletes entries with `failedAt` strictly before `before`, across all routes. */
  readonly purge: (before: DateTime.Utc) => Effect.Effect<number, StoreUnavailable>
  /**
   * Re-persists each entry as a fresh pending outbox record (new id and seq, `createdAt` now; same
   * partition, envelope, binding, payload, headers, ordering key, route, address), replacing a terminal
   * record of that identity, and deletes the entry. When a non-terminal record already holds the
   * identity, nothing is persisted, the entry is deleted and that record's id is returned. An unknown
   * entry id fails with `NotFound` and nothing is redriven. Returns the outbox record ids.
   */
  readonly redrive: (
    ids: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<string>, NotFound | InvalidRecord | StoreUnavailable>
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
