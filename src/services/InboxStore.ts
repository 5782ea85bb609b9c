/**
 * The `InboxStore` port (SPEC §12) and the shared core every backend goes through.
 *
 * Backends implement {@link InboxBackend}: an atomic unit (a SQL transaction, a DynamoDB
 * `TransactWriteItems`, a memory commit) offering two conditional writes — record a message id unless it is
 * recorded, raise a key's high-water mark unless it is at or above a `seq` — plus reads and a bounded
 * delete of old ids. {@link make} holds the rules so that backends cannot drift apart:
 *
 * - validation (`InvalidArgument` naming the argument, before anything is read or written);
 * - the order of the decisions: an id already recorded is `Duplicate`; else, for a message with an ordering
 *   key, a mark at or above its `seq` is `Stale`; else the handler runs and everything commits together →
 *   `Processed`. The id is recorded *before* the handler runs, inside the unit, so a concurrent delivery of
 *   the same id waits on it (SQL) or is refused at commit (DynamoDB) and never commits a second run;
 * - a `Stale` message is not recorded (the unit is rolled back), so its outcome stays `Stale`;
 * - a handler failure rolls the unit back and becomes `HandlerFailed` (retryable unless the handler failed
 *   with `PermanentFailure` or `DecodeError`);
 * - retention: {@link InboxStoreService.trim} deletes ids recorded before `now - dedupeWindow` (default 7
 *   days) in batches of at most `trimBatchSize`, folded over a stream of batches; marks are kept;
 * - one span per public operation, time from `Clock`.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as InboxMessage from "../domain/InboxMessage.js"
import * as InboxOutcome from "../domain/InboxOutcome.js"
import {
  HandlerFailed,
  InvalidArgument,
  InvalidConfiguration,
  type StoreUnavailable,
  type TransactionConflict
} from "../domain/OutboxError.js"
import * as Traced from "./Traced.js"

/**
 * Errors `process` may fail with besides the handler's (which arrive as `HandlerFailed`).
 *
 * @since 0.1.0
 */
export type ProcessError = HandlerFailed | InvalidArgument | TransactionConflict | StoreUnavailable

/**
 * What one {@link InboxStoreService.trim} did: ids deleted and delete statements (batches) it took.
 *
 * @since 0.1.0
 */
export interface TrimReport {
  readonly deleted: number
  readonly batches: number
}

/**
 * The inbox store port.
 *
 * @since 0.1.0
 */
export interface InboxStoreService {
  /**
   * Processes `message` for `consumer` effectively once: atomically records the id, raises the key's
   * high-water mark and runs `handler`, whose SQL writes join the same transaction (on DynamoDB it adds its
   * `TransactWriteItems` entries, see `DynamoDbInboxStore.write`). Outcomes: `Processed`, `Duplicate`,
   * `Stale` (SPEC §12). A failing handler commits nothing and fails with `HandlerFailed`.
   */
  readonly process: <A, E, R>(
    consumer: string,
    message: InboxMessage.InboxMessage,
    handler: Effect.Effect<A, E, R>
  ) => Effect.Effect<InboxOutcome.InboxOutcome<A>, ProcessError, R>
  /** True when `consumer` has recorded `messageId` (and it was not trimmed yet). */
  readonly isProcessed: (
    consumer: string,
    messageId: string
  ) => Effect.Effect<boolean, InvalidArgument | StoreUnavailable>
  /** The consumer's high-water mark of `(partitionKey, orderingKey)`, none before the first message. */
  readonly mark: (
    consumer: string,
    partitionKey: string,
    orderingKey: string
  ) => Effect.Effect<Option.Option<number>, InvalidArgument | StoreUnavailable>
  /**
   * Deletes ids recorded before `now - dedupeWindow`, oldest first, in batches of at most `trimBatchSize`
   * (at most `maxTrimBatches` of them per call); marks are kept. Each batch costs O(batch) through an index
   * on the recording time. DynamoDB expires ids with its TTL instead and reports nothing deleted.
   */
  readonly trim: Effect.Effect<TrimReport, StoreUnavailable>
}

/**
 * The `InboxStore` service tag.
 *
 * @since 0.1.0
 */
export class InboxStore extends Context.Tag("effect-outbox/InboxStore")<InboxStore, InboxStoreService>() {}

/**
 * A processed id as a backend stores it.
 *
 * @since 0.1.0
 */
export interface ProcessedEntry {
  readonly consumer: string
  readonly messageId: string
  readonly partitionKey: string
  readonly processedAtMillis: number
  /** When a backend with native expiry (DynamoDB TTL) may drop the id. */
  readonly expiresAtMillis: number
}

/**
 * The key of a high-water mark.
 *
 * @since 0.1.0
 */
export interface MarkKey {
  readonly consumer: string
  readonly partitionKey: string
  readonly orderingKey: string
}

/**
 * What a conditional mark raise did: raised to the new `seq`, or refused because the stored mark is at or
 * above it.
 *
 * @since 0.1.0
 */
export type RaiseResult = { readonly raised: true } | { readonly raised: false; readonly mark: number }

/**
 * The conditional writes of one atomic unit. Neither validates; both only stage or perform writes that
 * commit or roll back with the unit.
 *
 * @since 0.1.0
 */
export interface InboxUnit {
  /** Records the id unless it is recorded (false then, nothing written). */
  readonly record: (entry: ProcessedEntry) => Effect.Effect<boolean, StoreUnavailable>
  /** Raises the mark to `seq` when it is below (or absent); else reports the stored mark. */
  readonly raiseMark: (key: MarkKey, seq: number, nowMillis: number) => Effect.Effect<RaiseResult, StoreUnavailable>
}

/**
 * A backend's commit found that a concurrent unit recorded the id first (`duplicate`), raised the mark
 * past this message's `seq` (`stale`), or refused an item of the handler (`handler`). Only backends that
 * check their conditions at commit (DynamoDB) fail with it; the core turns it into an outcome.
 *
 * @since 0.1.0
 */
export class CommitRefused extends Data.TaggedError("InboxCommitRefused")<{
  readonly reason: "duplicate" | "stale" | "handler"
  readonly mark?: number | undefined
  readonly detail: string
  readonly retryable: boolean
}> {}

/**
 * The storage of an inbox backend.
 *
 * @since 0.1.0
 */
export interface InboxBackend {
  /** Backend name for errors and spans. */
  readonly name: string
  /**
   * Runs `body` as one atomic unit: its writes and the handler's commit together when it succeeds, none
   * when it fails, dies or is interrupted. Inside a caller's SQL transaction it is a savepoint.
   */
  readonly atomically: <A, E, R>(
    body: (unit: InboxUnit) => Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | CommitRefused | TransactionConflict | StoreUnavailable, R>
  readonly isProcessed: (consumer: string, messageId: string) => Effect.Effect<boolean, StoreUnavailable>
  readonly readMark: (key: MarkKey) => Effect.Effect<Option.Option<number>, StoreUnavailable>
  /** Deletes at most `limit` ids recorded before `beforeMillis`, oldest first; returns how many. */
  readonly trimBatch: (beforeMillis: number, limit: number) => Effect.Effect<number, StoreUnavailable>
}

/**
 * Options every inbox backend accepts.
 *
 * @since 0.1.0
 */
export interface InboxOptions {
  /** How long processed ids are kept at least (default 7 days). */
  readonly dedupeWindow?: Duration.DurationInput | undefined
  /** Ids deleted per trim statement (default 1000). */
  readonly trimBatchSize?: number | undefined
  /** Trim statements per `trim` call at most (default 1000). */
  readonly maxTrimBatches?: number | undefined
}

/**
 * {@link InboxOptions} after validation.
 *
 * @since 0.1.0
 */
export interface ValidInboxOptions {
  readonly dedupeWindowMillis: number
  readonly trimBatchSize: number
  readonly maxTrimBatches: number
}

/**
 * The default dedupe window: 7 days.
 *
 * @since 0.1.0
 */
export const defaultDedupeWindow: Duration.Duration = Duration.days(7)

const positiveInt = (u: unknown): boolean => typeof u === "number" && Number.isSafeInteger(u) && u > 0

/**
 * Validates the options every backend accepts; `component` names the layer in the error.
 *
 * @since 0.1.0
 */
export const validateOptions = (
  component: string,
  options: InboxOptions
): Effect.Effect<ValidInboxOptions, InvalidConfiguration> => {
  const problems: Array<string> = []
  const window = Duration.decodeUnknown(options.dedupeWindow ?? defaultDedupeWindow)
  const dedupeWindowMillis = Option.isSome(window) ? Duration.toMillis(window.value) : Number.NaN
  if (!Number.isFinite(dedupeWindowMillis) || dedupeWindowMillis <= 0) {
    problems.push("dedupeWindow must be a finite positive duration")
  }
  const trimBatchSize = options.trimBatchSize ?? 1000
  if (!positiveInt(trimBatchSize)) problems.push("trimBatchSize must be a positive integer")
  const maxTrimBatches = options.maxTrimBatches ?? 1000
  if (!positiveInt(maxTrimBatches)) problems.push("maxTrimBatches must be a positive integer")
  return problems.length > 0
    ? Effect.fail(new InvalidConfiguration({ component, problems }))
    : Effect.succeed({ dedupeWindowMillis, trimBatchSize, maxTrimBatches })
}

/** The unit's body fails with this to roll back a message found stale. */
class StaleAbort extends Data.TaggedError("InboxStaleAbort")<{ readonly mark: number }> {}

const invalid = (operation: string, argument: string, reason: string): Effect.Effect<never, InvalidArgument> =>
  Effect.fail(new InvalidArgument({ operation, argument, reason }))

const nonEmpty = (u: unknown): u is string => typeof u === "string" && u.length > 0

const reasonOf = (error: unknown): string => {
  if (typeof error === "object" && error !== null) {
    const message: unknown = Reflect.get(error, "message")
    if (typeof message === "string" && message.length > 0) return message
    const tag: unknown = Reflect.get(error, "_tag")
    if (typeof tag === "string") return tag
  }
  return String(error)
}

/**
 * The `HandlerFailed` of a handler's failure: permanent when it failed with `PermanentFailure` or
 * `DecodeError` (or is itself a `HandlerFailed`, kept as it is), retryable otherwise.
 *
 * @since 0.1.0
 */
export const handlerFailed = (consumer: string, messageId: string, error: unknown): HandlerFailed => {
  if (error instanceof HandlerFailed) return error
  const tag = typeof error === "object" && error !== null ? Reflect.get(error, "_tag") : undefined
  const permanent = tag === "PermanentFailure" || tag === "DecodeError"
  const inner = permanent && typeof error === "object" && error !== null ? Reflect.get(error, "cause") : undefined
  return new HandlerFailed({
    consumer,
    messageId,
    retryable: !permanent,
    reason: reasonOf(error),
    cause: permanent ? (inner ?? error) : error
  })
}

/** The span of one operation (made when a tracer is installed, see `Traced`). */
const span = Traced.span

/**
 * Wraps a backend with the shared core (see the module doc).
 *
 * @since 0.1.0
 */
export const make = (backend: InboxBackend, options: ValidInboxOptions): InboxStoreService => {
  const process = <A, E, R>(
    consumer: string,
    message: InboxMessage.InboxMessage,
    handler: Effect.Effect<A, E, R>
  ): Effect.Effect<InboxOutcome.InboxOutcome<A>, ProcessError, R> => {
    if (!nonEmpty(consumer)) return invalid("process", "consumer", "must be a non-empty string")
    const wrong = InboxMessage.problem(message)
    if (wrong !== undefined) return invalid("process", wrong.argument, wrong.reason)
    const orderingKey = InboxMessage.orderingKeyOf(message)
    const seq = message.seq ?? 0
    // written as plain combinators (no generators, no per-call schedules): this runs once per delivered message
    const onHandlerFailure = (error: E): HandlerFailed => handlerFailed(consumer, message.messageId, error)
    const runHandler = Effect.mapBoth(handler, { onFailure: onHandlerFailure, onSuccess: InboxOutcome.processed })
    const body = (now: number) => (unit: InboxUnit) =>
      Effect.flatMap(
        unit.record({
          consumer,
          messageId: message.messageId,
          partitionKey: message.partitionKey,
          processedAtMillis: now,
          expiresAtMillis: now + options.dedupeWindowMillis
        }),
        (fresh): Effect.Effect<InboxOutcome.InboxOutcome<A>, HandlerFailed | StaleAbort | StoreUnavailable, R> => {
          if (!fresh) return Effect.succeed(InboxOutcome.duplicate)
          if (orderingKey === undefined) return runHandler
          return Effect.flatMap(
            unit.raiseMark({ consumer, partitionKey: message.partitionKey, orderingKey }, seq, now),
            (raised): Effect.Effect<InboxOutcome.InboxOutcome<A>, HandlerFailed | StaleAbort, R> =>
              raised.raised ? runHandler : Effect.fail(new StaleAbort({ mark: raised.mark }))
          )
        }
      )
    // whole milliseconds: the SQL columns are integers (a test clock can stand between two)
    return Effect.clockWith((clock) => backend.atomically(body(Math.floor(clock.unsafeCurrentTimeMillis())))).pipe(
      Effect.catchAll((error) => {
        switch (error._tag) {
          case "InboxStaleAbort":
            return refusedOutcome(
              consumer,
              message,
              orderingKey,
              new CommitRefused({ reason: "stale", mark: error.mark, retryable: false, detail: "mark at or above seq" })
            )
          case "InboxCommitRefused":
            return refusedOutcome(consumer, message, orderingKey, error)
          default:
            return Effect.fail(error)
        }
      }),
      span("InboxStore.process", {
        "inbox.consumer": consumer,
        "inbox.partition": message.partitionKey,
        "inbox.backend": backend.name
      })
    )
  }

  const refusedOutcome = (
    consumer: string,
    message: InboxMessage.InboxMessage,
    orderingKey: string | undefined,
    refused: CommitRefused
  ): Effect.Effect<InboxOutcome.InboxOutcome<never>, HandlerFailed | StoreUnavailable> => {
    switch (refused.reason) {
      case "duplicate":
        return Effect.succeed(InboxOutcome.duplicate)
      case "stale":
        // a concurrent unit may have recorded this very id and raised the mark: Duplicate wins over Stale
        return Effect.flatMap(backend.isProcessed(consumer, message.messageId), (recorded) => {
          if (recorded) return Effect.succeed(InboxOutcome.duplicate)
          if (refused.mark !== undefined) return Effect.succeed(InboxOutcome.stale(refused.mark))
          return orderingKey === undefined
            ? Effect.succeed(InboxOutcome.stale(message.seq ?? 0))
            : Effect.map(backend.readMark({ consumer, partitionKey: message.partitionKey, orderingKey }), (mark) =>
                InboxOutcome.stale(Option.getOrElse(mark, () => message.seq ?? 0))
              )
        })
      case "handler":
        return Effect.fail(
          new HandlerFailed({
            consumer,
            messageId: message.messageId,
            retryable: refused.retryable,
            reason: refused.detail
          })
        )
    }
  }

  const trim: Effect.Effect<TrimReport, StoreUnavailable> = Effect.gen(function* () {
    const before = Math.floor(yield* Clock.currentTimeMillis) - options.dedupeWindowMillis
    return yield* Stream.paginateEffect(0, (batch: number) =>
      Effect.map(backend.trimBatch(before, options.trimBatchSize), (deleted) => {
        const more = deleted >= options.trimBatchSize && batch + 1 < options.maxTrimBatches
        return [deleted, more ? Option.some(batch + 1) : Option.none()] as const
      })
    ).pipe(
      Stream.runFold({ deleted: 0, batches: 0 }, (report: TrimReport, deleted: number) => ({
        deleted: report.deleted + deleted,
        batches: report.batches + 1
      }))
    )
  }).pipe(span("InboxStore.trim", { "inbox.backend": backend.name }))

  const isProcessed = (
    consumer: string,
    messageId: string
  ): Effect.Effect<boolean, InvalidArgument | StoreUnavailable> => {
    if (!nonEmpty(consumer)) return invalid("isProcessed", "consumer", "must be a non-empty string")
    if (!nonEmpty(messageId)) return invalid("isProcessed", "messageId", "must be a non-empty string")
    return backend.isProcessed(consumer, messageId)
  }

  const mark = (
    consumer: string,
    partitionKey: string,
    orderingKey: string
  ): Effect.Effect<Option.Option<number>, InvalidArgument | StoreUnavailable> => {
    if (!nonEmpty(consumer)) return invalid("mark", "consumer", "must be a non-empty string")
    if (!nonEmpty(partitionKey)) return invalid("mark", "partitionKey", "must be a non-empty string")
    if (!nonEmpty(orderingKey)) return invalid("mark", "orderingKey", "must be a non-empty string")
    return backend.readMark({ consumer, partitionKey, orderingKey })
  }

  return InboxStore.of({
    process,
    isProcessed: (consumer, messageId) =>
      isProcessed(consumer, messageId).pipe(span("InboxStore.isProcessed", { "inbox.consumer": consumer })),
    mark: (consumer, partitionKey, orderingKey) =>
      mark(consumer, partitionKey, orderingKey).pipe(span("InboxStore.mark", { "inbox.consumer": consumer })),
    trim
  })
}
