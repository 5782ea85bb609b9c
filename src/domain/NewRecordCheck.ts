/**
 * The structural check of a new record's fields, for the hot paths (`NewOutboxRecord`'s constructor, a store's
 * persist): it accepts only what the `NewOutboxRecordFields` schema accepts — the fields read as the schema reads
 * them, from the input's own properties — without running the schema. Whatever it does not accept goes through
 * the schema, which accepts it or names the problem.
 *
 * @since 0.2.0
 */
import * as DateTime from "effect/DateTime"
import type { Headers } from "./OutboxRecord.js"

/**
 * The fields of a new record after validation (what the schema yields).
 *
 * @since 0.2.0
 */
export interface NewFields {
  readonly id?: string | undefined
  readonly partitionKey: string
  readonly envelopeId: string
  readonly bindingId: string
  readonly payload: Uint8Array
  readonly headers?: Headers | undefined
  readonly orderingKey?: string | undefined
  readonly address?: string | undefined
  readonly routeId?: string | undefined
  readonly createdAt?: DateTime.Utc | undefined
  readonly expiresAt?: DateTime.Utc | undefined
}

const own = (input: object, key: string): unknown => (Object.hasOwn(input, key) ? Reflect.get(input, key) : undefined)
const nonEmpty = (u: unknown): u is string => typeof u === "string" && u.length > 0
const optionalString = (u: unknown): u is string | undefined => u === undefined || typeof u === "string"
const optionalUtc = (u: unknown): u is DateTime.Utc | undefined =>
  u === undefined || (DateTime.isDateTime(u) && DateTime.isUtc(u))
/**
 * True for headers the `Headers` schema would yield unchanged: an object (not an array) whose enumerable
 * properties are all its own, all strings, and none named `__proto__` (the schema drops that key, where a
 * copy of the object would keep it). The quick checks of new records and of stored rows use it; anything else
 * is left to the schema, which accepts it or names the problem.
 *
 * @since 0.2.0
 */
export const isPlainHeaders = (u: unknown): u is Headers => {
  if (typeof u !== "object" || u === null || Array.isArray(u)) return false
  for (const key in u) {
    if (key === "__proto__" || !Object.hasOwn(u, key) || typeof Reflect.get(u, key) !== "string") return false
  }
  return true
}

const optionalHeaders = (u: unknown): u is Headers | undefined => u === undefined || isPlainHeaders(u)

/**
 * The fields of `input` when the structural check accepts them, else `undefined` (the schema then decides).
 *
 * @since 0.2.0
 */
export const quickFields = (input: unknown): NewFields | undefined => {
  if (typeof input !== "object" || input === null) return undefined
  const id = own(input, "id")
  const partitionKey = own(input, "partitionKey")
  const envelopeId = own(input, "envelopeId")
  const bindingId = own(input, "bindingId")
  const payload = own(input, "payload")
  const headers = own(input, "headers")
  const orderingKey = own(input, "orderingKey")
  const address = own(input, "address")
  const routeId = own(input, "routeId")
  const createdAt = own(input, "createdAt")
  const expiresAt = own(input, "expiresAt")
  if (
    (id === undefined || nonEmpty(id)) &&
    nonEmpty(partitionKey) &&
    nonEmpty(envelopeId) &&
    nonEmpty(bindingId) &&
    payload instanceof Uint8Array &&
    optionalHeaders(headers) &&
    optionalString(orderingKey) &&
    optionalString(address) &&
    optionalString(routeId) &&
    optionalUtc(createdAt) &&
    optionalUtc(expiresAt)
  ) {
    return {
      id,
      partitionKey,
      envelopeId,
      bindingId,
      payload,
      headers,
      orderingKey,
      address,
      routeId,
      createdAt,
      expiresAt
    }
  }
  return undefined
}

/**
 * What validating `input` with the schema would yield, when the structural check accepts it: the declared
 * fields the input has as own properties (no others, in the schema's order), the headers copied. `undefined`
 * otherwise.
 *
 * @since 0.2.0
 */
export const validated = (input: unknown): NewFields | undefined => {
  const fields = quickFields(input)
  if (fields === undefined || typeof input !== "object" || input === null) return undefined
  const out: { -readonly [K in keyof NewFields]: NewFields[K] } = Object.hasOwn(input, "id")
    ? {
        id: fields.id,
        partitionKey: fields.partitionKey,
        envelopeId: fields.envelopeId,
        bindingId: fields.bindingId,
        payload: fields.payload
      }
    : {
        partitionKey: fields.partitionKey,
        envelopeId: fields.envelopeId,
        bindingId: fields.bindingId,
        payload: fields.payload
      }
  // the optional fields the input has, added in the schema's order
  if (Object.hasOwn(input, "headers"))
    out.headers = fields.headers === undefined ? undefined : copyHeaders(fields.headers)
  if (Object.hasOwn(input, "orderingKey")) out.orderingKey = fields.orderingKey
  if (Object.hasOwn(input, "address")) out.address = fields.address
  if (Object.hasOwn(input, "routeId")) out.routeId = fields.routeId
  if (Object.hasOwn(input, "createdAt")) out.createdAt = fields.createdAt
  if (Object.hasOwn(input, "expiresAt")) out.expiresAt = fields.expiresAt
  return out
}

/** The own enumerable string-keyed entries of a headers object (what the schema's record yields). */
const copyHeaders = (headers: Headers): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const key of Object.keys(headers)) {
    const value = headers[key]
    if (value !== undefined) out[key] = value
  }
  return out
}
