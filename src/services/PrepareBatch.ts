/**
 * Preparing a batch of new records for a store (R-PERSIST-2/4/5): validation of every record (a
 * structural check accepting exactly what the `NewOutboxRecordFields` schema accepts, the schema itself
 * only to name a problem — by field, never by value), no lone surrogate in any string field (every backend
 * alike), defaults, time-ordered ids, and the rejection of one id used by two identities
 * of the batch. Used by the `OutboxStore` core, and by backends that persist outside it.
 *
 * @since 0.1.0
 */
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as SchemaIssues from "../domain/SchemaIssues.js"
import * as Schema from "effect/Schema"
import { InvalidRecord } from "../domain/OutboxError.js"
import * as NewRecordCheck from "../domain/NewRecordCheck.js"
import * as OutboxRecord from "../domain/OutboxRecord.js"

const decodeNew = Schema.decodeUnknownEither(Schema.Struct(OutboxRecord.NewOutboxRecordFields))

const inputId = (input: unknown): string | undefined => {
  if (typeof input !== "object" || input === null) return undefined
  const id: unknown = Reflect.get(input, "id")
  return typeof id === "string" && id.length > 0 ? id : undefined
}

const inputPartition = (input: unknown): string | undefined => {
  if (typeof input !== "object" || input === null) return undefined
  const pk: unknown = Reflect.get(input, "partitionKey")
  return typeof pk === "string" && pk.length > 0 ? pk : undefined
}

/**
 * Validates a batch of new records and fills every default (R-PERSIST-4/5): ids (time-ordered),
 * `createdAt = now`, empty headers, `""` route and address, empty ordering key → none. Also rejects a
 * batch that uses one id for two different identities. Fails with `InvalidRecord` naming the first bad
 * record.
 *
 * @since 0.1.0
 */
export const prepare = Effect.fnUntraced(function* (
  records: ReadonlyArray<unknown>,
  validate?: (record: OutboxRecord.PreparedRecord) => string | undefined
) {
  const now = yield* DateTime.now
  const prepared: Array<OutboxRecord.PreparedRecord> = []
  const idOwners = new Map<string, string>()
  let nextId: (() => string) | undefined
  for (let index = 0; index < records.length; index++) {
    const input = records[index]
    let value = NewRecordCheck.quickFields(input)
    if (value === undefined) {
      const decoded = decodeNew(input)
      if (Either.isLeft(decoded)) {
        return yield* new InvalidRecord({
          index,
          recordId: inputId(input),
          partitionKey: inputPartition(input),
          reason: SchemaIssues.describe(decoded.left)
        })
      }
      value = decoded.right
    }
    let id = value.id
    const generatedId = id === undefined
    if (id === undefined) {
      nextId ??= yield* OutboxRecord.idGenerator
      id = nextId()
    }
    const record: OutboxRecord.PreparedRecord = {
      id,
      partitionKey: value.partitionKey,
      envelopeId: value.envelopeId,
      bindingId: value.bindingId,
      routeId: value.routeId ?? "",
      address: value.address ?? "",
      payload: value.payload,
      headers: value.headers === undefined ? {} : { ...value.headers },
      orderingKey:
        value.orderingKey === undefined || value.orderingKey.length === 0
          ? Option.none()
          : Option.some(value.orderingKey),
      createdAt: value.createdAt ?? now,
      expiresAt: Option.fromNullable(value.expiresAt),
      generatedId
    }
    const illFormed = surrogateField(record)
    if (illFormed !== undefined) {
      return yield* new InvalidRecord({
        index,
        recordId: wellFormed(id) ? id : undefined,
        partitionKey: wellFormed(record.partitionKey) ? record.partitionKey : undefined,
        reason: `${illFormed} holds a lone surrogate (not well-formed Unicode); it would be stored altered`
      })
    }
    const identity = OutboxRecord.identityKey(record)
    const owner = idOwners.get(id)
    if (owner !== undefined && owner !== identity) {
      return yield* new InvalidRecord({
        index,
        recordId: id,
        partitionKey: record.partitionKey,
        reason: "the same id is used by two different records of the batch"
      })
    }
    idOwners.set(id, identity)
    const problem = validate?.(record)
    if (problem !== undefined) {
      return yield* new InvalidRecord({ index, recordId: id, partitionKey: record.partitionKey, reason: problem })
    }
    prepared.push(record)
  }
  return prepared
})

const loneSurrogate = /\p{Cs}/u

const wellFormed = (text: string): boolean => !loneSurrogate.test(text)

/**
 * The first string field of a record holding a lone surrogate (UTF-16 that no UTF-8 store can keep: SQLite
 * and PostgreSQL would turn it into U+FFFD, so two different ids could collide), or `undefined`.
 * Header names are not quoted: the name itself may be the ill-formed text.
 */
const surrogateField = (record: OutboxRecord.PreparedRecord): string | undefined => {
  if (!wellFormed(record.id)) return "id"
  if (!wellFormed(record.partitionKey)) return "partitionKey"
  if (!wellFormed(record.envelopeId)) return "envelopeId"
  if (!wellFormed(record.bindingId)) return "bindingId"
  if (!wellFormed(record.routeId)) return "routeId"
  if (!wellFormed(record.address)) return "address"
  if (Option.isSome(record.orderingKey) && !wellFormed(record.orderingKey.value)) return "orderingKey"
  for (const [name, value] of Object.entries(record.headers)) {
    if (!wellFormed(name)) return "a header name"
    if (!wellFormed(value)) return `header ${name}`
  }
  return undefined
}
