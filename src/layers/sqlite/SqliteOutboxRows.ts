/**
 * Decoding stored SQLite outbox rows (SPEC §3.2): the `Row` schema, a structural fast path whose
 * acceptance is exactly the schema's, and building `OutboxRecord`s from decoded rows, optionally with a
 * claim applied (`Fence.stampClaim`). Anything undecodable is a `CorruptRecord` naming the record.
 *
 * @since 0.1.0
 */
import * as DateTime from "effect/DateTime"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as SchemaIssues from "../../domain/SchemaIssues.js"
import * as Schema from "effect/Schema"
import * as Fence from "../../domain/Fence.js"
import { CorruptRecord } from "../../domain/OutboxError.js"
import { claimFieldsOf, isRowObject, quickHeaders } from "../sql/SqlOutboxRow.js"
import * as OutboxRecord from "../../domain/OutboxRecord.js"

/**
 * The stored form of one row, as SQLite returns it (integers come back as numbers). Besides the column
 * types it checks what the stored record requires (non-empty ids, non-negative integer counters), so a
 * decoded row needs no second validation pass. `status` and `headers` are decoded separately to name
 * the problem precisely.
 *
 * @since 0.1.0
 */
export const Row = Schema.Struct({
  id: Schema.NonEmptyString,
  partition_key: Schema.NonEmptyString,
  envelope_id: Schema.NonEmptyString,
  binding_id: Schema.NonEmptyString,
  route_id: Schema.String,
  address: Schema.String,
  payload: Schema.Uint8ArrayFromSelf,
  headers: Schema.String,
  ordering_key: Schema.NullOr(Schema.NonEmptyString),
  created_at: Schema.Int,
  expires_at: Schema.NullOr(Schema.Int),
  seq: Schema.NonNegativeInt,
  status: Schema.String,
  claimed_by: Schema.NullOr(Schema.NonEmptyString),
  claim_version: Schema.NonNegativeInt,
  claimed_at: Schema.NullOr(Schema.Int),
  first_attempted_at: Schema.NullOr(Schema.Int),
  replay_count: Schema.NonNegativeInt,
  completed_at: Schema.NullOr(Schema.Int)
})

/**
 * @since 0.1.0
 */
export type Row = typeof Row.Type

/**
 * A `{ n }` count row.
 *
 * @since 0.1.0
 */
export const CountRow = Schema.Struct({ n: Schema.Number })

/**
 * The identity columns of a row.
 *
 * @since 0.1.0
 */
export const IdentityRow = Schema.Struct({
  partition_key: Schema.String,
  envelope_id: Schema.String,
  binding_id: Schema.String
})

/**
 * A row holding only an `id`.
 *
 * @since 0.1.0
 */
export const IdRow = Schema.Struct({ id: Schema.String })

const decodeRowEither = Schema.decodeUnknownEither(Row)
const decodeStatus = Schema.decodeUnknownEither(OutboxRecord.RecordStatus)
const decodeHeaders = Schema.decodeUnknownEither(Schema.parseJson(OutboxRecord.Headers))
const emptyHeaders: OutboxRecord.Headers = {}

const instant = (millis: number | null): Option.Option<DateTime.Utc> =>
  millis === null ? Option.none() : Option.some(DateTime.unsafeMake(millis))

const rowId = (row: unknown): string => {
  if (typeof row !== "object" || row === null) return "<unknown>"
  const id: unknown = Reflect.get(row, "id")
  return typeof id === "string" ? id : String(id)
}

const rowPartition = (row: unknown): string | undefined => {
  if (typeof row !== "object" || row === null) return undefined
  const pk: unknown = Reflect.get(row, "partition_key")
  return typeof pk === "string" ? pk : undefined
}

const corrupt = (row: unknown, reason: string): CorruptRecord =>
  new CorruptRecord({ recordId: rowId(row), partitionKey: rowPartition(row), reason })

/**
 * A row that passed decoding: the validated columns with the status and headers decoded.
 *
 * @since 0.1.0
 */
export interface DecodedRow {
  readonly row: Row
  readonly status: OutboxRecord.RecordStatus
  readonly headers: OutboxRecord.Headers
}

/**
 * A stored row's columns, each of any value: a row as read, before {@link decodeRowFields} checks it.
 *
 * @since 0.2.0
 */
export type RowValues = { readonly [K in keyof Row]: unknown }

/**
 * The row object of a row read as an array of values (better-sqlite3's raw mode, through
 * `Connection.executeValues`), whose values come in the order of `SqlOutboxStatements.columns` (the order the
 * stores select them). better-sqlite3 builds a row object through V8's API, a property at a time; reading the
 * row as an array and building the object here, every row with the same shape, takes about half the time for
 * the claim's rows. A missing value is `undefined`, which {@link decodeRowFields} reports as a corrupt row.
 *
 * @since 0.2.0
 */
export const rowOfValues = (values: ReadonlyArray<unknown>): RowValues => ({
  id: values[0],
  partition_key: values[1],
  envelope_id: values[2],
  binding_id: values[3],
  route_id: values[4],
  address: values[5],
  payload: values[6],
  headers: values[7],
  ordering_key: values[8],
  created_at: values[9],
  expires_at: values[10],
  seq: values[11],
  status: values[12],
  claimed_by: values[13],
  claim_version: values[14],
  claimed_at: values[15],
  first_attempted_at: values[16],
  replay_count: values[17],
  completed_at: values[18]
})

// ---------------------------------------------------------------------------------------------------
// The structural fast path. Each check accepts a subset of what the corresponding schema accepts
// (and the schema would return the value unchanged for it), so a row is accepted by the fast path
// only when the schema would accept it too; anything else goes through the schema, which then
// accepts it or names the problem. Acceptance is therefore exactly the schema's.
// ---------------------------------------------------------------------------------------------------

const isText = (u: unknown): u is string => typeof u === "string"
const isNonEmpty = (u: unknown): u is string => typeof u === "string" && u.length > 0
const isInt = (u: unknown): u is number => typeof u === "number" && Number.isSafeInteger(u)
const isNonNegativeInt = (u: unknown): u is number => isInt(u) && u >= 0
const isIntOrNull = (u: unknown): u is number | null => u === null || isInt(u)

/** True when `input` has exactly what {@link Row} requires of every column (plain reads: `isRowObject`). */
const isRow = (input: unknown): input is Row => {
  if (!isRowObject(input)) return false
  const orderingKey = input.ordering_key
  const claimedBy = input.claimed_by
  return (
    isNonEmpty(input.id) &&
    isNonEmpty(input.partition_key) &&
    isNonEmpty(input.envelope_id) &&
    isNonEmpty(input.binding_id) &&
    isText(input.route_id) &&
    isText(input.address) &&
    input.payload instanceof Uint8Array &&
    isText(input.headers) &&
    (orderingKey === null || isNonEmpty(orderingKey)) &&
    isInt(input.created_at) &&
    isIntOrNull(input.expires_at) &&
    isNonNegativeInt(input.seq) &&
    isText(input.status) &&
    (claimedBy === null || isNonEmpty(claimedBy)) &&
    isNonNegativeInt(input.claim_version) &&
    isIntOrNull(input.claimed_at) &&
    isIntOrNull(input.first_attempted_at) &&
    isNonNegativeInt(input.replay_count) &&
    isIntOrNull(input.completed_at)
  )
}

const isStatus = (u: string): u is OutboxRecord.RecordStatus =>
  u === "pending" || u === "claimed" || u === "completed" || u === "expired"

/** The schema path: decodes with {@link Row} and the status and headers schemas, naming any problem. */
const decodeRowSlow = (input: unknown): Either.Either<DecodedRow, CorruptRecord> => {
  const row = decodeRowEither(input)
  if (Either.isLeft(row)) return Either.left(corrupt(input, SchemaIssues.describe(row.left)))
  const r = row.right
  const status = decodeStatus(r.status)
  if (Either.isLeft(status)) return Either.left(corrupt(input, `unknown status ${JSON.stringify(r.status)}`))
  const headers = r.headers === "{}" ? Either.right(emptyHeaders) : decodeHeaders(r.headers)
  if (Either.isLeft(headers)) {
    return Either.left(corrupt(input, `malformed headers: ${SchemaIssues.describe(headers.left)}`))
  }
  return Either.right({ row: r, status: status.right, headers: headers.right })
}

/**
 * Decodes and validates one stored row. Anything that does not decode (unknown status, malformed
 * headers JSON, wrong column types, invalid field values) is a `CorruptRecord` naming the record id.
 *
 * Well-formed rows are checked structurally (no decoder runs, the row object is kept as it is); only
 * a row the structural check does not accept goes through the `Row` schema, which then accepts it or
 * produces the error. The accepted rows are exactly those the schema accepts.
 *
 * @since 0.1.0
 */
export const decodeRowFields = (input: unknown): Either.Either<DecodedRow, CorruptRecord> => {
  if (isRow(input) && isStatus(input.status)) {
    const headers = quickHeaders(input.headers)
    if (headers !== undefined) return Either.right({ row: input, status: input.status, headers })
  }
  return decodeRowSlow(input)
}

/**
 * Builds the `OutboxRecord` of a decoded row, optionally with a claim applied (status `claimed` and the
 * fields `Fence.stampClaim` stamps, from the claim's `Fence.ClaimStamp`, whose values every record of the claim
 * shares). `createdAt` and `orderingKey` may be passed when the caller already built them. Every
 * field was validated by {@link decodeRowFields}, so the record is built without a second validation pass.
 *
 * @since 0.1.0
 */
export const toRecord = (
  decoded: DecodedRow,
  stamp?: Fence.ClaimStamp<DateTime.Utc>,
  createdAt: DateTime.Utc = DateTime.unsafeMake(decoded.row.created_at),
  orderingKey: Option.Option<string> = Option.fromNullable(decoded.row.ordering_key)
): OutboxRecord.OutboxRecord => {
  const r = decoded.row
  const claim = claimFieldsOf(r, stamp)
  return OutboxRecord.makeUnvalidated({
    id: r.id,
    partitionKey: r.partition_key,
    envelopeId: r.envelope_id,
    bindingId: r.binding_id,
    routeId: r.route_id,
    address: r.address,
    payload: r.payload,
    headers: decoded.headers,
    orderingKey,
    createdAt,
    expiresAt: instant(r.expires_at),
    seq: r.seq,
    // named one by one, not spread: the literal then has every field from the start
    status: stamp === undefined ? decoded.status : "claimed",
    claimedBy: claim.claimedBy,
    claimVersion: claim.claimVersion,
    claimedAt: claim.claimedAt,
    firstAttemptedAt: claim.firstAttemptedAt,
    replayCount: claim.replayCount,
    completedAt: instant(r.completed_at)
  })
}

/**
 * Decodes one stored row into an `OutboxRecord` ({@link decodeRowFields} then {@link toRecord}).
 *
 * @since 0.1.0
 */
export const decodeRow = (input: unknown): Either.Either<OutboxRecord.OutboxRecord, CorruptRecord> =>
  Either.map(decodeRowFields(input), (decoded) => toRecord(decoded))
