/**
 * Publishing typed values (SPEC §11): a value of a topic is encoded with its Schema and codec, turned into a
 * `NewOutboxRecord` (`Topic.toRecord`) and persisted through the `OutboxStore` in context — so on SQLite and
 * PostgreSQL it joins an enclosing `sql.withTransaction` exactly as `persist` does (R-PERSIST-6) — or through
 * the `Enqueue` service (backpressure, SPEC §7). An encode failure is an `InvalidRecord` naming the topic and
 * the field, and nothing of the batch is stored (R-PERSIST-5). Publishing an event whose idempotency key was
 * already published is the §2 `skipped` outcome (R-PERSIST-1/2), reported, never a second message and never
 * a failure.
 *
 * @since 0.2.0
 */
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { InvalidRecord, StoreUnavailable } from "../domain/OutboxError.js"
import type { NewOutboxRecord } from "../domain/OutboxRecord.js"
import * as Topic from "../domain/Topic.js"
import { OutboxStore, type PersistReport } from "../services/OutboxStore.js"
import { Enqueue, type EnqueueError } from "./Enqueue.js"

/**
 * What one publish did: `published` with the new record's id, or `skipped` with the id of the record that
 * already holds the event (same topic, idempotency key, partition and route).
 *
 * @since 0.2.0
 */
export interface Published {
  readonly outcome: "published" | "skipped"
  readonly recordId: string
}

/**
 * Builds the records of a batch of values (all or nothing: the first invalid value fails the batch).
 *
 * @since 0.2.0
 */
export const toRecords = <A, I>(
  topic: Topic.Topic<A, I>,
  values: Iterable<A>
): Effect.Effect<Array<NewOutboxRecord>, InvalidRecord> =>
  Effect.flatMap(DateTime.now, (now) => {
    const records: Array<NewOutboxRecord> = []
    let index = 0
    for (const value of values) {
      const record = Topic.toRecord(topic, value, now, index)
      if (Either.isLeft(record)) return Effect.fail(record.left)
      records.push(record.right)
      index += 1
    }
    return Effect.succeed(records)
  })

const publishedOf = (report: PersistReport): Published => {
  const persisted = report.persisted[0]
  if (persisted !== undefined) return { outcome: "published", recordId: persisted }
  return { outcome: "skipped", recordId: report.existingIds[0] ?? report.skipped[0] ?? "" }
}

const skippedReport = (error: {
  readonly ids: ReadonlyArray<string>
  readonly existingIds?: ReadonlyArray<string> | undefined
}): PersistReport => ({ persisted: [], skipped: error.ids, existingIds: error.existingIds ?? error.ids })

/**
 * Publishes a batch of values of one topic through the `OutboxStore` in context: one persist, joining the
 * caller's transaction. Values already published are reported in `skipped` (with the holders' ids in
 * `existingIds`).
 *
 * @since 0.2.0
 */
export const publishAll = Effect.fn("Topic.publishAll")(function* <A, I>(
  topic: Topic.Topic<A, I>,
  values: Iterable<NoInfer<A>>
): Effect.fn.Return<PersistReport, InvalidRecord | StoreUnavailable, OutboxStore> {
  const records = yield* toRecords(topic, values)
  if (records.length === 0) return { persisted: [], skipped: [], existingIds: [] }
  const store = yield* OutboxStore
  return yield* store
    .persist(records)
    .pipe(Effect.catchTag("DuplicateRecord", (error) => Effect.succeed(skippedReport(error))))
})

/**
 * Publishes one value through the `OutboxStore` in context (joining the caller's transaction).
 *
 * @since 0.2.0
 */
export const publish = <A, I>(
  topic: Topic.Topic<A, I>,
  value: NoInfer<A>
): Effect.Effect<Published, InvalidRecord | StoreUnavailable, OutboxStore> =>
  Effect.map(publishAll(topic, [value]), publishedOf)

/**
 * The errors of {@link enqueue} and {@link enqueueAll}: `Enqueue`'s without `DuplicateRecord` (a duplicate
 * is reported as skipped).
 *
 * @since 0.2.0
 */
export type EnqueueTopicError = Exclude<EnqueueError, { readonly _tag: "DuplicateRecord" }>

/**
 * Publishes a batch of values through the `Enqueue` service: the backpressure check first (`OutboxFull`,
 * nothing stored), then one persist joining the caller's transaction.
 *
 * @since 0.2.0
 */
export const enqueueAll = Effect.fn("Topic.enqueueAll")(function* <A, I>(
  topic: Topic.Topic<A, I>,
  values: Iterable<NoInfer<A>>
): Effect.fn.Return<PersistReport, EnqueueTopicError, Enqueue> {
  const records = yield* toRecords(topic, values)
  if (records.length === 0) return { persisted: [], skipped: [], existingIds: [] }
  const service = yield* Enqueue
  return yield* service
    .enqueue(records)
    .pipe(Effect.catchTag("DuplicateRecord", (error) => Effect.succeed(skippedReport(error))))
})

/**
 * Publishes one value through the `Enqueue` service (backpressure).
 *
 * @since 0.2.0
 */
export const enqueue = <A, I>(
  topic: Topic.Topic<A, I>,
  value: NoInfer<A>
): Effect.Effect<Published, EnqueueTopicError, Enqueue> => Effect.map(enqueueAll(topic, [value]), publishedOf)
