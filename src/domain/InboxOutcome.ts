/**
 * The outcomes of `Inbox.process` (SPEC §12): `Processed` (the handler ran and its writes committed with
 * the inbox row), `Duplicate` (the consumer already processed this message id; the handler did not run),
 * `Stale` (the consumer's high-water mark for the message's ordering key is at or above its `seq`; the
 * handler did not run). All three are successes for a receiver: the message is settled.
 *
 * @since 0.1.0
 */

/**
 * The handler ran and committed; `value` is what it returned.
 *
 * @since 0.1.0
 */
export interface Processed<A> {
  readonly _tag: "Processed"
  readonly value: A
}

/**
 * The message id was already recorded for this consumer; nothing ran.
 *
 * @since 0.1.0
 */
export interface Duplicate {
  readonly _tag: "Duplicate"
}

/**
 * A message of the same ordering key with a `seq` at or above this one was already processed; nothing
 * ran. `mark` is the consumer's high-water mark for the key.
 *
 * @since 0.1.0
 */
export interface Stale {
  readonly _tag: "Stale"
  readonly mark: number
}

/**
 * What processing a message came to.
 *
 * @since 0.1.0
 */
export type InboxOutcome<A> = Processed<A> | Duplicate | Stale

/**
 * @since 0.1.0
 */
export const processed = <A>(value: A): InboxOutcome<A> => ({ _tag: "Processed", value })

/**
 * @since 0.1.0
 */
export const duplicate: InboxOutcome<never> = { _tag: "Duplicate" }

/**
 * @since 0.1.0
 */
export const stale = (mark: number): InboxOutcome<never> => ({ _tag: "Stale", mark })
