/**
 * The `DeadLetterStore` port (SPEC §5).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { DeadLetterEntry, type DeadLetterFilter } from "../domain/DeadLetterEntry.js"
import { type DuplicateRecord, InvalidRecord, type NotFound, type StoreUnavailable } from "../domain/OutboxError.js"
import { NewOutboxRecord } from "../domain/OutboxRecord.js"
import type { OutboxStoreService } from "./OutboxStore.js"

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
        reason: `invalid dead-letter entry: ${ParseResult.TreeFormatter.formatErrorSync(error)}`
      })
    },
    onRight: (fields) => new DeadLetterEntry(fields, { disableValidation: true })
  })

/**
 * Redrives one entry through the outbox store (SPEC §5): persists {@link redriveRecord} with
 * `replaceTerminal`, and returns the id of the record that now holds the identity — the new one, or the
 * non-terminal record that already held it (then nothing was persisted). Every backend's `redrive`
 * goes through it; deleting the entry is the backend's part.
 *
 * @since 0.1.0
 */
export const redriveOne = (
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
