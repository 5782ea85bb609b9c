/**
 * The stored form of outbox records and fence items in the DynamoDB table (SPEC §3.3): keys, the
 * `claim_sort` age key, encoding of a new record, decoding (with Schema) of a stored item, and a
 * conservative item-size estimate for the 400 KB limit.
 *
 * @since 0.1.0
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb"
import * as DateTime from "effect/DateTime"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as SchemaIssues from "../../domain/SchemaIssues.js"
import * as Schema from "effect/Schema"
import { CorruptRecord } from "../../domain/OutboxError.js"
import * as OutboxRecord from "../../domain/OutboxRecord.js"

/**
 * A DynamoDB item in the SDK's attribute-value form.
 *
 * @since 0.1.0
 */
export type Item = Record<string, AttributeValue>

/** Sort key of the per-partition fence item. @since 0.1.0 */
export const FenceSortKey = "FENCE"

/** Prefix of every record item's sort key. @since 0.1.0 */
export const RecordSortKeyPrefix = "OUTBOX#"

/**
 * Escapes a key component: `%` → `%25`, then `#` → `%23`, so `#` only ever separates components.
 *
 * @since 0.1.0
 */
export const escapeComponent = (value: string): string => value.replaceAll("%", "%25").replaceAll("#", "%23")

/**
 * The sort key of a record: `OUTBOX#` + esc(envelopeId) + `#` + esc(bindingId). The identity of a record
 * is its primary key.
 *
 * @since 0.1.0
 */
export const recordSortKey = (record: { readonly envelopeId: string; readonly bindingId: string }): string =>
  `${RecordSortKeyPrefix}${escapeComponent(record.envelopeId)}#${escapeComponent(record.bindingId)}`

/**
 * The primary key of a record item.
 *
 * @since 0.1.0
 */
export const recordKey = (record: {
  readonly partitionKey: string
  readonly envelopeId: string
  readonly bindingId: string
}): Item => ({ PK: { S: record.partitionKey }, SK: { S: recordSortKey(record) } })

/**
 * The primary key of a partition's fence item.
 *
 * @since 0.1.0
 */
export const fenceKey = (partitionKey: string): Item => ({ PK: { S: partitionKey }, SK: { S: FenceSortKey } })

/**
 * The age key: createdAt in epoch ms zero-padded to 19 digits, `#`, seq zero-padded to 20 digits. Its
 * lexical order is age order.
 *
 * @since 0.1.0
 */
export const claimSort = (createdAtMillis: number, seq: number): string =>
  `${String(Math.max(0, Math.trunc(createdAtMillis))).padStart(19, "0")}#${String(seq).padStart(20, "0")}`

/**
 * A number attribute.
 *
 * @since 0.1.0
 */
export const num = (n: number): AttributeValue => ({ N: String(n) })

/**
 * A string attribute.
 *
 * @since 0.1.0
 */
export const str = (s: string): AttributeValue => ({ S: s })

/**
 * The item of a freshly persisted (pending) record.
 *
 * @since 0.1.0
 */
export const encodeNew = (record: OutboxRecord.PreparedRecord, seq: number): Item => {
  const createdAt = DateTime.toEpochMillis(record.createdAt)
  const headers: Record<string, AttributeValue> = {}
  for (const [name, value] of Object.entries(record.headers)) headers[name] = { S: value }
  // the key's object takes the other attributes (`Object.assign`): adding them to a spread copy is slow in V8
  const item: Item = Object.assign(recordKey(record), {
    record_id: str(record.id),
    envelope_id: str(record.envelopeId),
    binding_id: str(record.bindingId),
    route_id: str(record.routeId),
    address: str(record.address),
    payload: { B: record.payload },
    headers: { M: headers },
    created_at: num(createdAt),
    seq: num(seq),
    status: str("pending"),
    claim_version: num(0),
    replay_count: num(0),
    claim_sort: str(claimSort(createdAt, seq))
  })
  if (Option.isSome(record.orderingKey)) item["ordering_key"] = str(record.orderingKey.value)
  if (Option.isSome(record.expiresAt)) {
    item["expires_at"] = num(DateTime.toEpochMillis(record.expiresAt.value))
    item["has_expiry"] = str(record.partitionKey)
  }
  return item
}

const utf8 = new TextEncoder()
/**
 * The UTF-8 length of a string in bytes.
 *
 * @since 0.1.0
 */
export const byteLength = (s: string): number => utf8.encode(s).length

/**
 * Room kept free in every item for what a claim adds later (`claimed_by`, `claimed_at`,
 * `first_attempted_at`, `completed_at`, `ttl`, …).
 *
 * @since 0.1.0
 */
export const ReservedItemBytes = 2048

/**
 * DynamoDB's item size limit.
 *
 * @since 0.1.0
 */
export const MaxItemBytes = 400 * 1024

/**
 * The largest payload the DynamoDB store accepts: what fits in one 400 KB item next to the record's
 * other attributes (the item as a whole is checked too).
 *
 * @since 0.1.0
 */
export const MaxPayloadBytes = 400_000

/**
 * A conservative estimate of an item's stored size: attribute names and values in UTF-8, numbers at
 * their maximum of 21 bytes, 3 bytes per map plus 1 per map entry.
 *
 * @since 0.1.0
 */
export const estimateItemBytes = (item: Item): number => {
  const valueSize = (value: AttributeValue): number => {
    if (value.S !== undefined) return byteLength(value.S)
    if (value.N !== undefined) return 21
    if (value.B !== undefined) return value.B.length
    if (value.BOOL !== undefined || value.NULL !== undefined) return 1
    if (value.M !== undefined) {
      let size = 3
      for (const [name, inner] of Object.entries(value.M)) size += byteLength(name) + valueSize(inner) + 1
      return size
    }
    if (value.L !== undefined) {
      let size = 3
      for (const inner of value.L) size += valueSize(inner) + 1
      return size
    }
    return 64
  }
  let total = 0
  for (const [name, value] of Object.entries(item)) total += byteLength(name) + valueSize(value)
  return total
}

/**
 * Why a prepared record cannot be stored as one item (over 400 KB with the reserve), or `undefined`.
 *
 * @since 0.1.0
 */
export const itemSizeProblem = (record: OutboxRecord.PreparedRecord): string | undefined => {
  if (record.payload.length > MaxPayloadBytes) {
    return `payload of ${record.payload.length} bytes is over the DynamoDB store's limit of ${MaxPayloadBytes} bytes`
  }
  const size = estimateItemBytes(encodeNew(record, Number.MAX_SAFE_INTEGER)) + ReservedItemBytes
  return size > MaxItemBytes
    ? `the record needs about ${size} bytes as a DynamoDB item (payload ${record.payload.length} bytes); the limit is ${MaxItemBytes} bytes`
    : undefined
}

/**
 * The longest partition key the DynamoDB store accepts, in UTF-8 bytes: it is the table's hash key
 * (DynamoDB allows 2048 bytes) and the range key of `PartitionIndex` (1024 bytes).
 *
 * @since 0.1.0
 */
export const MaxPartitionKeyBytes = 1024

/**
 * The longest record id the DynamoDB store accepts, in UTF-8 bytes: DynamoDB's limit on the hash key of
 * `RecordIdIndex`.
 *
 * @since 0.1.0
 */
export const MaxRecordIdBytes = 2048

/**
 * Whether a stored record can have this id (non-empty, at most {@link MaxRecordIdBytes}).
 *
 * @since 0.1.0
 */
export const canBeRecordId = (id: string): boolean => id.length > 0 && byteLength(id) <= MaxRecordIdBytes

/**
 * DynamoDB's limit on a sort key value (the table's `SK`), in UTF-8 bytes.
 *
 * @since 0.1.0
 */
export const MaxSortKeyBytes = 1024

/**
 * Why a prepared record's keys break a DynamoDB key limit, or `undefined`: the partition key up to
 * {@link MaxPartitionKeyBytes}, the record id up to {@link MaxRecordIdBytes}, the sort key built from
 * envelope and binding ids (after escaping) up to {@link MaxSortKeyBytes}.
 *
 * @since 0.1.0
 */
export const keyLimitProblem = (
  record: Pick<OutboxRecord.PreparedRecord, "id" | "partitionKey" | "envelopeId" | "bindingId">
): string | undefined => {
  const partitionKeyBytes = byteLength(record.partitionKey)
  if (partitionKeyBytes > MaxPartitionKeyBytes) {
    return `partitionKey is ${partitionKeyBytes} bytes; the DynamoDB store's limit is ${MaxPartitionKeyBytes} bytes (the range key of PartitionIndex)`
  }
  const idBytes = byteLength(record.id)
  if (idBytes > MaxRecordIdBytes) {
    return `id is ${idBytes} bytes; DynamoDB's limit for the RecordIdIndex key is ${MaxRecordIdBytes} bytes`
  }
  const sortKeyBytes = byteLength(recordSortKey(record))
  if (sortKeyBytes > MaxSortKeyBytes) {
    return `envelopeId and bindingId make a sort key of ${sortKeyBytes} bytes (${RecordSortKeyPrefix} + escaped envelopeId + # + escaped bindingId); DynamoDB's sort key limit is ${MaxSortKeyBytes} bytes`
  }
  return undefined
}

/**
 * DynamoDB's limit on an attribute name (header names are the keys of the `headers` map), in UTF-8 bytes.
 *
 * @since 0.1.0
 */
export const MaxAttributeNameBytes = 65535

/**
 * Why a header name cannot be a DynamoDB map key (empty, or over {@link MaxAttributeNameBytes}), or
 * `undefined`.
 *
 * @since 0.1.0
 */
export const headerNameProblem = (headers: OutboxRecord.Headers): string | undefined => {
  for (const name of Object.keys(headers)) {
    if (name.length === 0) return "a header name is empty; DynamoDB map keys must not be empty"
    const bytes = byteLength(name)
    if (bytes > MaxAttributeNameBytes) {
      return `a header name is ${bytes} bytes; DynamoDB's attribute name limit is ${MaxAttributeNameBytes} bytes`
    }
  }
  return undefined
}

/**
 * Why a prepared record cannot be stored by the DynamoDB store (a key limit, a header name, then the
 * item size), or `undefined`. The store core calls it for every record before anything is written.
 *
 * @since 0.1.0
 */
export const limitProblem = (record: OutboxRecord.PreparedRecord): string | undefined =>
  keyLimitProblem(record) ?? headerNameProblem(record.headers) ?? itemSizeProblem(record)

const S = Schema.Struct({ S: Schema.String })
const NonEmptyS = Schema.Struct({ S: Schema.NonEmptyString })
const N = Schema.Struct({ N: Schema.NumberFromString.pipe(Schema.int()) })

const StoredItem = Schema.Struct({
  PK: NonEmptyS,
  SK: NonEmptyS,
  record_id: NonEmptyS,
  envelope_id: NonEmptyS,
  binding_id: NonEmptyS,
  route_id: Schema.optional(S),
  address: Schema.optional(S),
  payload: Schema.optional(Schema.Struct({ B: Schema.Uint8ArrayFromSelf })),
  headers: Schema.optional(Schema.Struct({ M: Schema.Record({ key: Schema.String, value: S }) })),
  ordering_key: Schema.optional(NonEmptyS),
  created_at: N,
  expires_at: Schema.optional(N),
  seq: N,
  status: Schema.Struct({ S: OutboxRecord.RecordStatus }),
  claimed_by: Schema.optional(NonEmptyS),
  claim_version: N,
  claimed_at: Schema.optional(N),
  first_attempted_at: Schema.optional(N),
  replay_count: N,
  completed_at: Schema.optional(N)
})

const decodeStored = Schema.decodeUnknownEither(StoredItem)

const instant = (value: { readonly N: number } | undefined): Option.Option<DateTime.Utc> =>
  value === undefined ? Option.none() : Option.some(DateTime.unsafeMake(value.N))

const identityOf = (item: Item): { recordId: string; partitionKey: string | undefined } => ({
  recordId: item["record_id"]?.S ?? item["SK"]?.S ?? "?",
  partitionKey: item["PK"]?.S
})

/**
 * Decodes a stored record item (from the table or `ClaimIndex`), failing with `CorruptRecord`.
 *
 * @since 0.1.0
 */
export const decode = (item: Item): Either.Either<OutboxRecord.OutboxRecord, CorruptRecord> => {
  const decoded = decodeStored(item)
  if (Either.isLeft(decoded)) {
    const { partitionKey, recordId } = identityOf(item)
    return Either.left(
      new CorruptRecord({
        recordId,
        partitionKey,
        reason: SchemaIssues.describe(decoded.left)
      })
    )
  }
  const v = decoded.right
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(v.headers?.M ?? {})) headers[name] = value.S
  return Either.right(
    new OutboxRecord.OutboxRecord(
      {
        id: v.record_id.S,
        partitionKey: v.PK.S,
        envelopeId: v.envelope_id.S,
        bindingId: v.binding_id.S,
        routeId: v.route_id?.S ?? "",
        address: v.address?.S ?? "",
        payload: v.payload?.B ?? new Uint8Array(0),
        headers,
        orderingKey: Option.fromNullable(v.ordering_key?.S),
        createdAt: DateTime.unsafeMake(v.created_at.N),
        expiresAt: instant(v.expires_at),
        seq: v.seq.N,
        status: v.status.S,
        claimedBy: Option.fromNullable(v.claimed_by?.S),
        claimVersion: v.claim_version.N,
        claimedAt: instant(v.claimed_at),
        firstAttemptedAt: instant(v.first_attempted_at),
        replayCount: v.replay_count.N,
        completedAt: instant(v.completed_at)
      },
      { disableValidation: true }
    )
  )
}

/**
 * The fence item's state: the high-water mark (0 when never raised), the seq counter, and the listing
 * facts used by `listPartitions` (whether the partition is listed, the listing epoch every persist bumps,
 * and when it was last listed, in epoch ms).
 *
 * @since 0.1.0
 */
export interface Fence {
  readonly highWaterMark: number
  readonly seqCounter: number
  readonly listed: boolean
  readonly listingEpoch: number | undefined
  readonly listedAt: number | undefined
}

const FenceItem = Schema.Struct({
  max_claim_version: Schema.optional(N),
  seq_counter: Schema.optional(N),
  partitions_shard: Schema.optional(N),
  listing_epoch: Schema.optional(N),
  listed_at: Schema.optional(N)
})

const decodeFenceItem = Schema.decodeUnknownEither(FenceItem)

/**
 * Decodes a fence item (absent → zeros, not listed), or describes why it is malformed.
 *
 * @since 0.1.0
 */
export const decodeFence = (item: Item | undefined): Either.Either<Fence, string> => {
  if (item === undefined) {
    return Either.right({
      highWaterMark: 0,
      seqCounter: 0,
      listed: false,
      listingEpoch: undefined,
      listedAt: undefined
    })
  }
  return Either.mapBoth(decodeFenceItem(item), {
    onLeft: (error) => SchemaIssues.describe(error),
    onRight: (v) => ({
      highWaterMark: v.max_claim_version?.N ?? 0,
      seqCounter: v.seq_counter?.N ?? 0,
      listed: v.partitions_shard !== undefined,
      listingEpoch: v.listing_epoch?.N,
      listedAt: v.listed_at?.N
    })
  })
}
