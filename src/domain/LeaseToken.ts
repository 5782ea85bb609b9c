/**
 * Lease tokens: the proof of ownership of a partition that every fenced store operation presents.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * A lease token `{ owner, version }` issued by a `LeaseStore`.
 *
 * The constructor validates (non-empty owner, positive safe-integer version). Stores never rely on
 * `instanceof`: they accept any value of this shape and check it with {@link isValid}, so a plain
 * object decoded elsewhere, or an instance built with validation disabled, is checked all the same.
 *
 * @since 0.1.0
 */
export class LeaseToken extends Schema.Class<LeaseToken>("effect-outbox/LeaseToken")({
  owner: Schema.NonEmptyString,
  version: Schema.Int.pipe(Schema.positive())
}) {}

/**
 * The shape stores accept wherever a token is required.
 *
 * @since 0.1.0
 */
export interface LeaseTokenLike {
  readonly owner: string
  readonly version: number
}

/**
 * A token is valid iff `owner` is a non-empty string and `version` is a safe integer greater than zero.
 * Anything else (including values that are not objects at all) is invalid.
 *
 * @since 0.1.0
 */
export const isValid = (token: unknown): token is LeaseTokenLike => {
  if (typeof token !== "object" || token === null) return false
  const owner: unknown = Reflect.get(token, "owner")
  const version: unknown = Reflect.get(token, "version")
  return (
    typeof owner === "string" &&
    owner.length > 0 &&
    typeof version === "number" &&
    Number.isSafeInteger(version) &&
    version > 0
  )
}

/**
 * Describes what is wrong with a token, or `undefined` when it is valid.
 *
 * @since 0.1.0
 */
export const invalidReason = (token: unknown): string | undefined => {
  if (typeof token !== "object" || token === null) return "token is not an object"
  const owner: unknown = Reflect.get(token, "owner")
  const version: unknown = Reflect.get(token, "version")
  if (typeof owner !== "string" || owner.length === 0) return "token owner is empty"
  if (typeof version !== "number" || !Number.isSafeInteger(version) || version <= 0) {
    return `token version ${String(version)} is not a positive safe integer`
  }
  return undefined
}
