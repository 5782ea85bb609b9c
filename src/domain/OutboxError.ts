/**
 * Every expected failure of the library, as `Schema.TaggedError` classes whose `_tag` equals the class
 * name. Callers narrow with `Effect.catchTag`. Each error carries the facts a caller needs to act
 * (partition, record ids, versions) and, where there is one, the underlying `cause`.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

/**
 * The presented lease token does not (or no longer) own what it tried to touch: the token is invalid,
 * its version is below the partition's fence high-water mark, or the records are not claimed by it.
 * The holder has lost the partition (or never had it) and must stop.
 *
 * @since 0.1.0
 */
export class StaleFencingToken extends Schema.TaggedError<StaleFencingToken>()("StaleFencingToken", {
  /** What was being done: `claim`, `complete`, `release`, `expire`, `renew`, … */
  operation: Schema.String,
  /** Why the token was rejected, in words. */
  reason: Schema.String,
  partitionKey: Schema.optional(Schema.String),
  /** Record ids that did not match the token (complete/release). */
  recordIds: Schema.optional(Schema.Array(Schema.String)),
  owner: Schema.optional(Schema.String),
  version: Schema.optional(Schema.Number),
  /** The partition's fence high-water mark when known. */
  highWaterMark: Schema.optional(Schema.Number)
}) {
  override get message(): string {
    const where = this.partitionKey !== undefined ? ` on partition ${this.partitionKey}` : ""
    const ids =
      this.recordIds !== undefined && this.recordIds.length > 0 ? ` (records ${this.recordIds.join(", ")})` : ""
    return `${this.operation}${where} rejected a stale fencing token: ${this.reason}${ids}`
  }
}

/**
 * A claim found contention in the backend and claimed nothing: the caller may retry at once.
 *
 * @since 0.1.0
 */
export class TransactionConflict extends Schema.TaggedError<TransactionConflict>()("TransactionConflict", {
  partitionKey: Schema.String,
  operation: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {
  override get message(): string {
    return `${this.operation} on partition ${this.partitionKey} hit a transaction conflict; retry`
  }
}

/**
 * Report of a short claim batch (R-CLAIM-8): the backend stopped after `claimed` records because of a
 * transient failure. The records already claimed are returned with the batch; this is not raised as
 * a failure but carried in `ClaimBatch.truncated`.
 *
 * @since 0.1.0
 */
export class ClaimTruncated extends Schema.TaggedError<ClaimTruncated>()("ClaimTruncated", {
  partitionKey: Schema.String,
  claimed: Schema.Number,
  requested: Schema.Number,
  cause: Schema.Defect
}) {
  override get message(): string {
    return `claim on partition ${this.partitionKey} stopped after ${this.claimed} of ${this.requested} records`
  }
}

/**
 * Every record of a non-empty persist batch already existed (R-PERSIST-2), or a dead-letter entry
 * with that id already exists.
 *
 * @since 0.1.0
 */
export class DuplicateRecord extends Schema.TaggedError<DuplicateRecord>()("DuplicateRecord", {
  /** Ids of the records (or entries) that were skipped as duplicates. */
  ids: Schema.Array(Schema.String),
  partitionKey: Schema.optional(Schema.String),
  /**
   * For each id in `ids` (same order), the id of the stored record holding its identity, when the store
   * knows it (persist always reports it; dead-letter writes do not).
   */
  existingIds: Schema.optional(Schema.Array(Schema.String))
}) {
  override get message(): string {
    return `duplicate record(s): ${this.ids.join(", ")}`
  }
}

/**
 * A record handed to `persist` is invalid (R-PERSIST-5). Nothing of the batch was stored.
 *
 * @since 0.1.0
 */
export class InvalidRecord extends Schema.TaggedError<InvalidRecord>()("InvalidRecord", {
  /** Position of the record in the batch. */
  index: Schema.Number,
  /** The record id when the input had a usable one. */
  recordId: Schema.optional(Schema.String),
  partitionKey: Schema.optional(Schema.String),
  reason: Schema.String,
  /** The topic of the value, when it was published through a typed topic (SPEC §11). */
  topic: Schema.optional(Schema.String),
  /** The field (dotted path) of the value that failed to encode, or the key option that was empty. */
  field: Schema.optional(Schema.String)
}) {
  override get message(): string {
    const id = this.recordId !== undefined ? ` ${this.recordId}` : ""
    return `invalid record${id} at index ${this.index}: ${this.reason}`
  }
}

/**
 * A delivered message could not be decoded (SPEC §11, §12): a bad envelope, missing or malformed wire
 * metadata, a message naming no or another topic, or a payload the topic's Schema rejects. Names the topic,
 * the field and (when known) the record id, never the value. Permanent: the same message never decodes.
 *
 * @since 0.2.0
 */
export class DecodeError extends Schema.TaggedError<DecodeError>()("DecodeError", {
  /** The topic the message was decoded as, when one was expected. */
  topic: Schema.optional(Schema.String),
  /** The record id, when the message carried one. */
  recordId: Schema.optional(Schema.String),
  /** The field (dotted path, header name, `(payload)` or `(body)`) that was wrong, when one was. */
  field: Schema.optional(Schema.String),
  reason: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {
  override get message(): string {
    const topic = this.topic !== undefined ? ` of topic ${this.topic}` : ""
    const id = this.recordId !== undefined ? ` (record ${this.recordId})` : ""
    return `cannot decode a message${topic}${id}: ${this.reason}`
  }
}

/**
 * An argument of a port operation is invalid (empty or non-string key, non-finite or non-positive
 * duration, bad filter, …). Nothing was read or written. The message names the argument, never its value.
 *
 * @since 0.1.0
 */
export class InvalidArgument extends Schema.TaggedError<InvalidArgument>()("InvalidArgument", {
  operation: Schema.String,
  argument: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `${this.operation}: invalid ${this.argument}: ${this.reason}`
  }
}

/**
 * A stored record could not be read back: its stored form is corrupt (unknown status, malformed
 * headers, …). Nothing is skipped silently: the operation fails naming the record.
 *
 * @since 0.1.0
 */
export class CorruptRecord extends Schema.TaggedError<CorruptRecord>()("CorruptRecord", {
  recordId: Schema.String,
  partitionKey: Schema.optional(Schema.String),
  reason: Schema.String
}) {
  override get message(): string {
    return `stored record ${this.recordId} is corrupt: ${this.reason}`
  }
}

/**
 * The backend failed transiently (I/O, throttling, lock timeouts). Retry later.
 *
 * @since 0.1.0
 */
export class StoreUnavailable extends Schema.TaggedError<StoreUnavailable>()("StoreUnavailable", {
  operation: Schema.String,
  partitionKey: Schema.optional(Schema.String),
  cause: Schema.Defect
}) {
  override get message(): string {
    const where = this.partitionKey !== undefined ? ` on partition ${this.partitionKey}` : ""
    return `store unavailable during ${this.operation}${where}`
  }

  /**
   * The `StoreUnavailable` of an operation (and partition) with a given cause, as a function of the
   * cause (for `Effect.try`'s `catch` and for failures chosen case by case).
   */
  static wrap(operation: string, partitionKey?: string | undefined): (cause: unknown) => StoreUnavailable {
    return (cause) => new StoreUnavailable({ operation, partitionKey, cause })
  }

  /**
   * Fails with `StoreUnavailable` (the original failure as its `cause`) in place of every failure of
   * the effect.
   */
  static refail(
    operation: string,
    partitionKey?: string | undefined
  ): <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, StoreUnavailable, R> {
    return (effect) => Effect.mapError(effect, (cause) => new StoreUnavailable({ operation, partitionKey, cause }))
  }

  /**
   * Like {@link StoreUnavailable.refail}, for the failures tagged `tag` only (e.g. a driver's
   * `SqlError`); every other failure passes through unchanged.
   */
  static refailTag<T extends string>(
    tag: T,
    operation: string,
    partitionKey?: string | undefined
  ): <A, E extends { readonly _tag: string }, R>(
    effect: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, Exclude<E, { readonly _tag: T }> | StoreUnavailable, R> {
    return <A, E extends { readonly _tag: string }, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.catchAll(effect, (error): Effect.Effect<never, Exclude<E, { readonly _tag: T }> | StoreUnavailable> =>
        isNotTagged(error, tag)
          ? Effect.fail(error)
          : Effect.fail(new StoreUnavailable({ operation, partitionKey, cause: error }))
      )
  }
}

const isNotTagged = <E extends { readonly _tag: string }, T extends string>(
  error: E,
  tag: T
): error is Exclude<E, { readonly _tag: T }> => error._tag !== tag

/**
 * The backend cannot answer a depth question (R-READ-2).
 *
 * @since 0.1.0
 */
export class DepthUnsupported extends Schema.TaggedError<DepthUnsupported>()("DepthUnsupported", {
  operation: Schema.String,
  backend: Schema.String
}) {
  override get message(): string {
    return `${this.backend} cannot answer ${this.operation}`
  }
}

/**
 * An expire sweep was cut short after `expired` transitions (R-EXP-3).
 *
 * @since 0.1.0
 */
export class ExpireIncomplete extends Schema.TaggedError<ExpireIncomplete>()("ExpireIncomplete", {
  partitionKey: Schema.String,
  expired: Schema.Number,
  cause: Schema.Defect
}) {
  override get message(): string {
    return `expire on partition ${this.partitionKey} stopped after ${this.expired} records`
  }
}

/**
 * Backpressure: the partition's pending depth reached `limit`; nothing was persisted. Retry after
 * `retryAfterMillis`.
 *
 * @since 0.1.0
 */
export class OutboxFull extends Schema.TaggedError<OutboxFull>()("OutboxFull", {
  partitionKey: Schema.String,
  depth: Schema.Number,
  limit: Schema.Number,
  retryAfterMillis: Schema.Number
}) {
  override get message(): string {
    return `outbox partition ${this.partitionKey} is full (${this.depth} pending, limit ${this.limit})`
  }
}

/**
 * Another owner (or the same owner, which must renew instead) holds an unexpired lease.
 *
 * @since 0.1.0
 */
export class LeaseHeld extends Schema.TaggedError<LeaseHeld>()("LeaseHeld", {
  partitionKey: Schema.String,
  heldBy: Schema.String,
  version: Schema.Number,
  expiresAt: Schema.DateTimeUtcFromSelf
}) {
  override get message(): string {
    return `partition ${this.partitionKey} is leased by ${this.heldBy} (version ${this.version})`
  }
}

/**
 * No live lease record: never acquired, or released.
 *
 * @since 0.1.0
 */
export class LeaseNotFound extends Schema.TaggedError<LeaseNotFound>()("LeaseNotFound", {
  partitionKey: Schema.String
}) {
  override get message(): string {
    return `no lease for partition ${this.partitionKey}`
  }
}

/**
 * A looked-up entity does not exist.
 *
 * @since 0.1.0
 */
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", {
  /** What kind of thing was looked up, e.g. `DeadLetterEntry`. */
  entity: Schema.String,
  ids: Schema.Array(Schema.String)
}) {
  override get message(): string {
    return `${this.entity} not found: ${this.ids.join(", ")}`
  }
}

/**
 * A store's configuration does not match what it finds (e.g. an existing DynamoDB table with another
 * key schema or a missing index). Lists every mismatch.
 *
 * @since 0.1.0
 */
export class InvalidConfiguration extends Schema.TaggedError<InvalidConfiguration>()("InvalidConfiguration", {
  component: Schema.String,
  problems: Schema.Array(Schema.String)
}) {
  override get message(): string {
    return `${this.component} is misconfigured:\n- ${this.problems.join("\n- ")}`
  }
}

/**
 * The watchdog abandoned a batch that ran longer than `batchTimeout + watchdogGrace`. The drainer
 * fails with it so its supervisor restarts it (under a new lease epoch, which makes the abandoned
 * records claimable again).
 *
 * @since 0.1.0
 */
export class DrainStalled extends Schema.TaggedError<DrainStalled>()("DrainStalled", {
  partitionKey: Schema.String,
  /** Records of the batch still unfinished when it was abandoned. */
  held: Schema.Number,
  elapsedMillis: Schema.Number
}) {
  override get message(): string {
    return `drain of partition ${this.partitionKey} stalled after ${this.elapsedMillis} ms with ${this.held} records held`
  }
}

/**
 * An inbox handler failed (SPEC §12): nothing of it was committed, and the message id was not recorded.
 * `retryable` is false when the handler marked the failure permanent (it failed with `PermanentFailure`
 * or `DecodeError`); a receiver then settles the message for good (4xx, `term`, reject) instead of asking
 * for a redelivery. `cause` is the handler's own error.
 *
 * @since 0.1.0
 */
export class HandlerFailed extends Schema.TaggedError<HandlerFailed>()("HandlerFailed", {
  consumer: Schema.String,
  messageId: Schema.String,
  retryable: Schema.Boolean,
  reason: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {
  override get message(): string {
    const kind = this.retryable ? "retryable" : "permanent"
    return `handler of consumer ${this.consumer} failed on message ${this.messageId} (${kind}): ${this.reason}`
  }
}

/**
 * A handler's way to say "retrying will not help" (invalid business input, a rule that can never pass):
 * the inbox turns it into a `HandlerFailed` with `retryable: false`.
 *
 * @since 0.1.0
 */
export class PermanentFailure extends Schema.TaggedError<PermanentFailure>()("PermanentFailure", {
  reason: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {
  override get message(): string {
    return `permanent failure: ${this.reason}`
  }
}
