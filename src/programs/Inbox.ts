/**
 * The consumer side (SPEC §12): at-least-once delivery becomes effectively-once processing.
 * {@link process} runs a handler for a delivered message through the `InboxStore` in context — dedupe per
 * `(consumer, messageId)`, per-key high-water mark on `seq`, the handler's writes in the same transaction —
 * and answers `Processed`, `Duplicate` or `Stale`. {@link disposition} is the one rule every receiver
 * (webhook route, NATS and RabbitMQ consumers) applies to the result: settle it, ask for a redelivery, or
 * refuse it for good. {@link trimmer} keeps the processed ids within the dedupe window.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Schedule from "effect/Schedule"
import type * as InboxMessage from "../domain/InboxMessage.js"
import type * as InboxOutcome from "../domain/InboxOutcome.js"
import { PermanentFailure, type StoreUnavailable } from "../domain/OutboxError.js"
import { InboxStore, type ProcessError, type TrimReport } from "../services/InboxStore.js"

/**
 * Processes `message` for `consumer` effectively once (see `InboxStoreService.process`): `Duplicate` when
 * the consumer already processed its id, `Stale` when a message of its ordering key with a `seq` at or
 * above its own was processed, else the handler runs and its writes commit with the inbox row →
 * `Processed`. A handler failure commits nothing and fails with `HandlerFailed`.
 *
 * @since 0.1.0
 */
export const process = <A, E, R>(
  consumer: string,
  message: InboxMessage.InboxMessage,
  handler: Effect.Effect<A, E, R>
): Effect.Effect<InboxOutcome.InboxOutcome<A>, ProcessError, R | InboxStore> =>
  Effect.flatMap(InboxStore, (store) => store.process(consumer, message, handler))

/**
 * Marks every failure of a handler permanent (`PermanentFailure`): the inbox reports it as a
 * `HandlerFailed` with `retryable: false`, and receivers refuse the message instead of asking for it again.
 *
 * @since 0.1.0
 */
export const permanent = <A, E, R>(handler: Effect.Effect<A, E, R>): Effect.Effect<A, PermanentFailure, R> =>
  Effect.mapError(
    handler,
    (error) =>
      new PermanentFailure({
        reason:
          typeof error === "object" && error !== null && typeof Reflect.get(error, "message") === "string"
            ? String(Reflect.get(error, "message"))
            : String(error),
        cause: error
      })
  )

/**
 * What a receiver does with a delivery once processing ended:
 *
 * - `Settle`: the message is done (`Processed`, `Duplicate`, `Stale`): acknowledge it.
 * - `Retry`: a transient failure (a retryable `HandlerFailed`, `TransactionConflict`, `StoreUnavailable`,
 *   a defect or an interruption): ask for a redelivery after `retryAfter`.
 * - `Reject`: it can never succeed (a permanent `HandlerFailed`, `DecodeError`, `InvalidArgument`): refuse
 *   it without redelivery.
 *
 * @since 0.1.0
 */
export type Disposition =
  | { readonly _tag: "Settle"; readonly outcome: "Processed" | "Duplicate" | "Stale" }
  | { readonly _tag: "Retry"; readonly reason: string }
  | { readonly _tag: "Reject"; readonly reason: string }

const tagOf = (u: unknown): string | undefined => {
  const tag = typeof u === "object" && u !== null ? Reflect.get(u, "_tag") : undefined
  return typeof tag === "string" ? tag : undefined
}

const messageOf = (u: unknown): string => {
  const message = typeof u === "object" && u !== null ? Reflect.get(u, "message") : undefined
  return typeof message === "string" ? message : String(u)
}

/**
 * The {@link Disposition} of a failure of processing.
 *
 * @since 0.1.0
 */
export const dispositionOfError = (error: unknown): Disposition => {
  const tag = tagOf(error)
  if (tag === "HandlerFailed") {
    const retryable = typeof error === "object" && error !== null && Reflect.get(error, "retryable") === true
    return retryable ? { _tag: "Retry", reason: messageOf(error) } : { _tag: "Reject", reason: messageOf(error) }
  }
  if (tag === "DecodeError" || tag === "InvalidArgument" || tag === "PermanentFailure") {
    return { _tag: "Reject", reason: messageOf(error) }
  }
  return { _tag: "Retry", reason: tag === undefined ? messageOf(error) : `${tag}: ${messageOf(error)}` }
}

/**
 * The {@link Disposition} of a finished processing (its `Exit`).
 *
 * @since 0.1.0
 */
export const disposition = <A, E>(exit: Exit.Exit<InboxOutcome.InboxOutcome<A>, E>): Disposition =>
  Exit.match(exit, {
    onSuccess: (outcome) => ({ _tag: "Settle", outcome: outcome._tag }),
    onFailure: (cause) => {
      const failure = Cause.failureOption(cause)
      if (failure._tag === "Some") return dispositionOfError(failure.value)
      return { _tag: "Retry", reason: Cause.isInterruptedOnly(cause) ? "interrupted" : "defect" }
    }
  })

/**
 * Trims processed ids older than the dedupe window every `interval` (default 1 hour), forever; a failed
 * trim is logged and tried again at the next interval. Fork it beside a consumer.
 *
 * @since 0.1.0
 */
export const trimmer = (
  interval: Duration.DurationInput = Duration.hours(1)
): Effect.Effect<never, never, InboxStore> =>
  Effect.flatMap(InboxStore, (store) =>
    store.trim.pipe(
      Effect.tap((report: TrimReport) =>
        report.deleted > 0 ? Effect.logDebug(`inbox trim deleted ${report.deleted} ids`) : Effect.void
      ),
      Effect.catchAll((error: StoreUnavailable) => Effect.logWarning("inbox trim failed", error)),
      Effect.repeat(Schedule.spaced(interval)),
      Effect.zipRight(Effect.never)
    )
  )
