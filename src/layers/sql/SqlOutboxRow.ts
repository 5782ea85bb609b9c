/**
 * The stored outbox row of the server-backed SQL stores (PostgreSQL, MySQL) and its decoding into an
 * `OutboxRecord`: integers arrive as numbers or as decimal text (`pg` returns `bigint` as text, `mysql2`
 * with `supportBigNumbers` returns text past 2^53), the payload as the driver's buffer, headers as JSON
 * text. A row that does not decode is a `CorruptRecord` naming the record.
 *
 * @since 0.1.0
 */
import * as DateTime from "effect/DateTime"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { isPlainHeaders } from "../../domain/NewRecordCheck.js"
import { CorruptRecord } from "../../domain/OutboxError.js"
import * as SchemaIssues from "../../domain/SchemaIssues.js"
import * as OutboxRecord from "../../domain/OutboxRecord.js"
import type * as ClaimOrder from "../../domain/ClaimOrder.js"
import * as Fence from "../../domain/Fence.js"
import * as SqlClaim from "./SqlClaim.js"

/**
 * An integer column: a number, or decimal text (`pg` returns `bigint` so; `mysql2` past 2^53).
 *
 * @since 0.1.0
 */
export const BigIntColumn = Schema.Union(Schema.Int, Schema.compose(Schema.NumberFromString, Schema.Int))

const NonNegative = Schema.Union(Schema.NonNegativeInt, Schema.compose(Schema.NumberFromString, Schema.NonNegativeInt))

/**
 * The stored form of one row, as the drivers return it.
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
  headers: Schema.parseJson(OutboxRecord.Headers),
  ordering_key: Schema.NullOr(Schema.NonEmptyString),
  created_at: BigIntColumn,
  expires_at: Schema.NullOr(BigIntColumn),
  seq: NonNegative,
  status: OutboxRecord.RecordStatus,
  claimed_by: Schema.NullOr(Schema.NonEmptyString),
  claim_version: NonNegative,
  claimed_at: Schema.NullOr(BigIntColumn),
  first_attempted_at: Schema.NullOr(BigIntColumn),
  replay_count: NonNegative,
  completed_at: Schema.NullOr(BigIntColumn)
})

/**
 * @since 0.1.0
 */
export type Row = typeof Row.Type

const decodeRowEither = Schema.decodeUnknownEither(Row)

const instant = (millis: number | null): Option.Option<DateTime.Utc> =>
  millis === null ? Option.none() : Option.some(DateTime.unsafeMake(millis))

const field = (row: unknown, name: string): unknown =>
  typeof row === "object" && row !== null ? Reflect.get(row, name) : undefined

/** Decodes one stored row into its `Row` form, or a `CorruptRecord` naming the record. */
const decodeRowForm = (input: unknown): Either.Either<Row, CorruptRecord> => {
  const quick = quickRow(input)
  if (quick !== undefined) return Either.right(quick)
  const decoded = decodeRowEither(input)
  if (Either.isRight(decoded)) return Either.right(decoded.right)
  const id = field(input, "id")
  const pk = field(input, "partition_key")
  return Either.left(
    new CorruptRecord({
      recordId: typeof id === "string" ? id : "<unknown>",
      partitionKey: typeof pk === "string" ? pk : undefined,
      reason: SchemaIssues.describe(decoded.left)
    })
  )
}

/**
 * Decodes one stored row into an `OutboxRecord`; anything that does not decode is a `CorruptRecord`
 * naming the record. The payload is copied out of the driver's buffer. Well-formed rows are checked
 * structurally (accepting a subset of what {@link Row} accepts); only the others run the schema.
 *
 * @since 0.1.0
 */
export const decodeRow = (input: unknown): Either.Either<OutboxRecord.OutboxRecord, CorruptRecord> =>
  Either.map(decodeRowForm(input), (row) => toRecord(row, undefined, DateTime.unsafeMake(row.created_at)))

/**
 * A claim candidate: a decoded row with the facts claim selection looks at, built into a record only
 * when it is claimed ({@link claimedRecord}).
 *
 * @since 0.1.0
 */
export interface Candidate extends ClaimOrder.ClaimFacts {
  readonly row: Row
}

/**
 * Decodes the stored rows of a claim's candidate query into claim {@link Candidate}s, in their order (each
 * validated as {@link decodeRow} validates it); the first row that does not decode fails them all.
 *
 * @since 0.2.0
 */
export const decodeCandidates = (rows: Iterable<unknown>): Either.Either<Array<Candidate>, CorruptRecord> => {
  const out: Array<Candidate> = []
  let previous: Candidate | undefined
  for (const input of rows) {
    const decoded = decodeRowForm(input)
    if (Either.isLeft(decoded)) return Either.left(decoded.left)
    const row = decoded.right
    previous = {
      row,
      createdAt: SqlClaim.createdAtOf(row.created_at, previous),
      seq: row.seq,
      envelopeId: row.envelope_id,
      status: row.status,
      orderingKey: Option.fromNullable(row.ordering_key),
      claimVersion: row.claim_version,
      claimedAt: instant(row.claimed_at)
    }
    out.push(previous)
  }
  return Either.right(out)
}

/**
 * The record of a candidate the claim update changed: status `claimed` and the fields `Fence.stampClaim`
 * stamps, built once (no second copy of the record to apply the claim).
 *
 * @since 0.1.0
 */
export const claimedRecord = (candidate: Candidate, stamp: Fence.ClaimStamp<DateTime.Utc>): OutboxRecord.OutboxRecord =>
  toRecord(candidate.row, stamp, candidate.createdAt, candidate.orderingKey)

/**
 * The claim columns of a stored row (the SQL backends and SQLite name them alike).
 *
 * @since 0.2.0
 */
export interface ClaimColumns {
  readonly claimed_by: string | null
  readonly claim_version: number
  readonly claimed_at: number | null
  readonly first_attempted_at: number | null
  readonly replay_count: number
}

/**
 * The claim fields of a record read from its row: as stored, or with the claim `stamp` applied
 * (`Fence.stampClaim`; the stamp's values are shared by every record of its claim).
 *
 * @since 0.2.0
 */
export const claimFieldsOf = (
  row: ClaimColumns,
  stamp: Fence.ClaimStamp<DateTime.Utc> | undefined
): Fence.ClaimFields<DateTime.Utc> => {
  const firstAttemptedAt = instant(row.first_attempted_at)
  return stamp === undefined
    ? {
        claimedBy: Option.fromNullable(row.claimed_by),
        claimVersion: row.claim_version,
        claimedAt: instant(row.claimed_at),
        firstAttemptedAt,
        replayCount: row.replay_count
      }
    : {
        claimedBy: stamp.claimedBy,
        claimVersion: stamp.claimVersion,
        claimedAt: stamp.claimedAt,
        firstAttemptedAt: Fence.firstAttemptAfter(firstAttemptedAt, stamp),
        replayCount: row.replay_count + 1
      }
}

const toRecord = (
  r: Row,
  stamp: Fence.ClaimStamp<DateTime.Utc> | undefined,
  createdAt: DateTime.Utc,
  orderingKey: Option.Option<string> = Option.fromNullable(r.ordering_key)
): OutboxRecord.OutboxRecord => {
  const claim = claimFieldsOf(r, stamp)
  return OutboxRecord.makeUnvalidated({
    id: r.id,
    partitionKey: r.partition_key,
    envelopeId: r.envelope_id,
    bindingId: r.binding_id,
    routeId: r.route_id,
    address: r.address,
    payload: Uint8Array.from(r.payload),
    headers: r.headers,
    orderingKey,
    createdAt,
    expiresAt: instant(r.expires_at),
    seq: r.seq,
    status: stamp === undefined ? r.status : "claimed",
    claimedBy: claim.claimedBy,
    claimVersion: claim.claimVersion,
    claimedAt: claim.claimedAt,
    firstAttemptedAt: claim.firstAttemptedAt,
    replayCount: claim.replayCount,
    completedAt: instant(r.completed_at)
  })
}

// ---------------------------------------------------------------------------------------------------
// The structural fast path: accepts a subset of what `Row` accepts (and yields what it would yield);
// anything else goes through the schema, which then accepts it or names the problem.
// ---------------------------------------------------------------------------------------------------

const int = (u: unknown): number | undefined => {
  const n = typeof u === "number" ? u : typeof u === "string" && /^-?[0-9]{1,16}$/.test(u) ? Number(u) : undefined
  return n !== undefined && Number.isSafeInteger(n) ? n : undefined
}
const nullableInt = (u: unknown): number | null | undefined => (u === null ? null : int(u))
const nonEmpty = (u: unknown): u is string => typeof u === "string" && u.length > 0

/**
 * The headers of a well-formed `headers` column (JSON text of a string map the `Headers` schema keeps
 * unchanged), or `undefined` for anything the schema must look at. The SQL stores' row checks (SQLite,
 * PostgreSQL, MySQL) share it.
 *
 * @since 0.2.0
 */
export const quickHeaders = (u: unknown): OutboxRecord.Headers | undefined => {
  if (u === "{}") return {}
  if (typeof u !== "string") return undefined
  let parsed: unknown
  try {
    parsed = JSON.parse(u)
  } catch {
    return undefined
  }
  return isPlainHeaders(parsed) ? parsed : undefined
}

/**
 * An object whose properties can be read (as `unknown`): what a driver returns as a row. The row checks read
 * columns as plain properties through it rather than with `Reflect.get`: the rows of one statement share a
 * shape, and a read through the inline cache costs about a tenth of a `Reflect.get` (the checks run for every
 * row a claim reads).
 *
 * @since 0.2.0
 */
export const isRowObject = (input: unknown): input is Readonly<Record<string, unknown>> =>
  typeof input === "object" && input !== null

const quickRow = (u: unknown): Row | undefined => {
  if (!isRowObject(u)) return undefined
  const id = u.id
  const pk = u.partition_key
  const env = u.envelope_id
  const bind = u.binding_id
  const route = u.route_id
  const addr = u.address
  const payload = u.payload
  const okey = u.ordering_key
  const status = u.status
  const by = u.claimed_by
  const headers = quickHeaders(u.headers)
  const createdAt = int(u.created_at)
  const expiresAt = nullableInt(u.expires_at)
  const seq = int(u.seq)
  const version = int(u.claim_version)
  const claimedAt = nullableInt(u.claimed_at)
  const firstAttemptedAt = nullableInt(u.first_attempted_at)
  const replayCount = int(u.replay_count)
  const completedAt = nullableInt(u.completed_at)
  if (
    !nonEmpty(id) ||
    !nonEmpty(pk) ||
    !nonEmpty(env) ||
    !nonEmpty(bind) ||
    typeof route !== "string" ||
    typeof addr !== "string" ||
    !(payload instanceof Uint8Array) ||
    headers === undefined ||
    !(okey === null || nonEmpty(okey)) ||
    !(status === "pending" || status === "claimed" || status === "completed" || status === "expired") ||
    !(by === null || nonEmpty(by)) ||
    createdAt === undefined ||
    expiresAt === undefined ||
    seq === undefined ||
    seq < 0 ||
    version === undefined ||
    version < 0 ||
    claimedAt === undefined ||
    firstAttemptedAt === undefined ||
    replayCount === undefined ||
    replayCount < 0 ||
    completedAt === undefined
  ) {
    return undefined
  }
  return {
    id,
    partition_key: pk,
    envelope_id: env,
    binding_id: bind,
    route_id: route,
    address: addr,
    payload,
    headers,
    ordering_key: okey,
    created_at: createdAt,
    expires_at: expiresAt,
    seq,
    status,
    claimed_by: by,
    claim_version: version,
    claimed_at: claimedAt,
    first_attempted_at: firstAttemptedAt,
    replay_count: replayCount,
    completed_at: completedAt
  }
}
