/**
 * Typed topics (SPEC §11): a message declared once — its name, its payload `Schema` and the functions that
 * derive its partition, ordering key and idempotency key from the decoded value — and the pure rules that
 * turn a value into a `NewOutboxRecord` and a delivered message back into the value.
 *
 * - `name` is the stable wire identity, carried in the record's `Outbox-Topic` header.
 * - `idempotencyKey` becomes the envelope id (prefixed with the topic name, so two topics sharing a route
 *   and a partition never collide): publishing the same event twice is the §2 `skipped` outcome
 *   (R-PERSIST-1), never a second message. `route` (default: the name) becomes `routeId` and `bindingId`.
 * - The payload is encoded with the Schema, then with the topic's {@link Codec} (JSON by default,
 *   `Content-Type: application/json`); an encode failure is an `InvalidRecord` naming the topic and the field,
 *   never the value.
 * - Every sink carries the wire metadata headers ({@link wireHeaders}); {@link decode} reads them back from a
 *   stored record, a webhook body or a broker message's headers and bytes, and fails with a typed
 *   `DecodeError` (naming the topic and the field, never the value) for a foreign or malformed message.
 *
 * Pure data and functions: no I/O. Publishing lives in `programs/Publish.ts`.
 *
 * @since 0.2.0
 */
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { DecodeError, InvalidRecord } from "./OutboxError.js"
import { NewOutboxRecord, OutboxRecord } from "./OutboxRecord.js"

/**
 * Wire header: the record id (deduplicate on it: delivery is at least once).
 *
 * @since 0.2.0
 */
export const RecordIdHeader = "Outbox-Record-Id"

/**
 * Wire header: the topic name (present when the record was published through a topic).
 *
 * @since 0.2.0
 */
export const TopicHeader = "Outbox-Topic"

/**
 * Wire header: the partition key.
 *
 * @since 0.2.0
 */
export const PartitionHeader = "Outbox-Partition"

/**
 * Wire header: the ordering key (absent for keyless records).
 *
 * @since 0.2.0
 */
export const OrderingKeyHeader = "Outbox-Ordering-Key"

/**
 * Wire header: the record's per-partition sequence number (decimal).
 *
 * @since 0.2.0
 */
export const SeqHeader = "Outbox-Seq"

/**
 * Wire header: when the record was persisted (ISO-8601, UTC, milliseconds).
 *
 * @since 0.2.0
 */
export const CreatedAtHeader = "Outbox-Created-At"

/**
 * Wire header kept from earlier versions on broker messages: the envelope id.
 *
 * @since 0.2.0
 */
export const EnvelopeIdHeader = "Outbox-Envelope-Id"

/**
 * The payload's content type, stored with the record's headers by `publish`.
 *
 * @since 0.2.0
 */
export const ContentTypeHeader = "Content-Type"

/**
 * The metadata header names a sink sets itself (a record's own headers never override them).
 *
 * @since 0.2.0
 */
export const metadataHeaders: ReadonlyArray<string> = [
  RecordIdHeader,
  TopicHeader,
  PartitionHeader,
  OrderingKeyHeader,
  SeqHeader,
  CreatedAtHeader
]

/**
 * How a payload's encoded form (the Schema's `Encoded` side) becomes bytes and back. Failures are
 * reasons in words, never the value.
 *
 * @since 0.2.0
 */
export interface Codec {
  /** The `Content-Type` stored with each record. */
  readonly contentType: string
  readonly encode: (encoded: unknown) => Either.Either<Uint8Array, string>
  readonly decode: (bytes: Uint8Array) => Either.Either<unknown, string>
}

const utf8Encoder = new TextEncoder()
const utf8Decoder = new TextDecoder("utf-8", { fatal: true })

/**
 * The default codec: UTF-8 JSON, `application/json`.
 *
 * @since 0.2.0
 */
export const json: Codec = {
  contentType: "application/json",
  encode: (encoded) => {
    try {
      const text = JSON.stringify(encoded)
      return typeof text === "string"
        ? Either.right(utf8Encoder.encode(text))
        : Either.left("the encoded value has no JSON form")
    } catch {
      return Either.left("the encoded value has no JSON form (a bigint or a cycle; encode bigints with Schema.BigInt)")
    }
  },
  decode: (bytes) => {
    let text: string
    try {
      text = utf8Decoder.decode(bytes)
    } catch {
      return Either.left("the payload is not UTF-8")
    }
    try {
      const parsed: unknown = JSON.parse(text)
      return Either.right(parsed)
    } catch {
      return Either.left("the payload is not JSON")
    }
  }
}

/**
 * A typed topic: `A` is the decoded value, `I` its encoded (wire) form.
 *
 * @since 0.2.0
 */
export interface Topic<A, I = A> {
  readonly name: string
  readonly schema: Schema.Schema<A, I>
  /** The route its records take (`routeId` and `bindingId`); default the name. */
  readonly route: string
  readonly codec: Codec
  readonly expiresIn: Option.Option<Duration.Duration>
  partitionKey(value: A): string
  orderingKey(value: A): string | undefined
  idempotencyKey(value: A): string
  address(value: A): string | undefined
  headers(value: A): Readonly<Record<string, string>>
}

/**
 * What a topic's payload may be: a `Schema` without requirements, or struct fields.
 *
 * @since 0.2.0
 */
export type Payload = Schema.Schema.AnyNoContext | Fields

/**
 * Struct fields without requirements.
 *
 * @since 0.2.0
 */
export type Fields = {
  readonly [x: PropertyKey]:
    | Schema.Schema.AnyNoContext
    | Schema.PropertySignature<
        Schema.PropertySignature.Token,
        Schema.Schema.AnyNoContext["Type"],
        PropertyKey,
        Schema.PropertySignature.Token,
        Schema.Schema.AnyNoContext["Encoded"],
        boolean,
        never
      >
}

/**
 * The schema a {@link Payload} stands for.
 *
 * @since 0.2.0
 */
export type PayloadSchema<P extends Payload> = P extends Schema.Schema.AnyNoContext
  ? P
  : P extends Fields
    ? Schema.Struct<P>
    : never

/**
 * The decoded value of a {@link Payload}.
 *
 * @since 0.2.0
 */
export type PayloadType<P extends Payload> = Schema.Schema.Type<PayloadSchema<P>>

/**
 * The encoded value of a {@link Payload}.
 *
 * @since 0.2.0
 */
export type PayloadEncoded<P extends Payload> = Schema.Schema.Encoded<PayloadSchema<P>>

/**
 * Options of {@link make}. The key options are functions of the decoded value.
 *
 * @since 0.2.0
 */
export interface MakeOptions<P extends Payload> {
  /** Stable wire identity: visible ASCII without `%` (the `Outbox-Topic` header). */
  readonly name: string
  /** A `Schema` (without requirements) or struct fields, as `DurableQueue.make` takes them. */
  readonly payload: P
  /** The partition: the unit of ordering and ownership (non-empty). */
  readonly partitionKey: (value: PayloadType<P>) => string
  /** Records sharing an ordering key inside a partition are delivered in age order; `""`/undefined: none. */
  readonly orderingKey?: ((value: PayloadType<P>) => string | undefined) | undefined
  /** The event's identity (non-empty): publishing the same key twice is skipped. */
  readonly idempotencyKey: (value: PayloadType<P>) => string
  /** The route (default: the name): which sink of a `SinkRouter` delivers it. */
  readonly route?: string | undefined
  /** The address (webhook URL, subject, routing key), fixed or per value. */
  readonly address?: string | ((value: PayloadType<P>) => string) | undefined
  /** Extra headers stored with each record, fixed or per value. */
  readonly headers?: Readonly<Record<string, string>> | ((value: PayloadType<P>) => Readonly<Record<string, string>>)
  /** Records expire this long after publish (default: never). */
  readonly expiresIn?: Duration.DurationInput | undefined
  /** How the encoded value becomes bytes (default {@link json}). */
  readonly codec?: Codec | undefined
}

/** A struct's fields or a schema, as a schema. */
const toSchema = (payload: Payload): Schema.Schema.AnyNoContext =>
  Schema.isSchema(payload) ? Schema.asSchema(payload) : Schema.Struct(payload)

const validName = /^[\x21-\x24\x26-\x7e]+$/

/**
 * Whether a topic name is valid: non-empty visible ASCII without `%`.
 *
 * @since 0.2.0
 */
export const isValidName = (name: string): boolean => validName.test(name)

/**
 * Declares a topic. Throws when `name` or `route` is not non-empty visible ASCII without `%` (a definition
 * error, found when the module loads).
 *
 * @since 0.2.0
 */
export const make = <P extends Payload>(options: MakeOptions<P>): Topic<PayloadType<P>, PayloadEncoded<P>> => {
  if (!isValidName(options.name)) {
    throw new Error(`topic name ${JSON.stringify(options.name)} must be non-empty visible ASCII without %`)
  }
  const route = options.route ?? options.name
  if (!isValidName(route)) {
    throw new Error(`route ${JSON.stringify(route)} of topic ${options.name} must be non-empty visible ASCII without %`)
  }
  const schema: Schema.Schema<PayloadType<P>, PayloadEncoded<P>> = toSchema(options.payload)
  const address = options.address
  const headers = options.headers
  const orderingKey = options.orderingKey
  return {
    name: options.name,
    schema,
    route,
    codec: options.codec ?? json,
    expiresIn: Option.map(Option.fromNullable(options.expiresIn), Duration.decode),
    partitionKey: (value) => options.partitionKey(value),
    orderingKey: (value) => (orderingKey === undefined ? undefined : orderingKey(value)),
    idempotencyKey: (value) => options.idempotencyKey(value),
    address: (value) => (address === undefined || typeof address === "string" ? address : address(value)),
    headers: (value) => (headers === undefined ? {} : typeof headers === "function" ? headers(value) : headers)
  }
}

/**
 * The decoded value of a topic.
 *
 * @since 0.2.0
 */
export type Type<T> = T extends Topic<infer A, infer _I> ? A : never

/**
 * The envelope id of a value: `<topic name>:<idempotency key>`.
 *
 * @since 0.2.0
 */
export const envelopeId = (topicName: string, idempotencyKey: string): string => `${topicName}:${idempotencyKey}`

/** The dotted path of the first issue of a parse error and what kind of issue it is (never the value). */
const firstIssue = (error: ParseResult.ParseError): { readonly field: string; readonly reason: string } => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const issue = issues[0]
  if (issue === undefined) return { field: "(value)", reason: "does not match the schema" }
  const field = issue.path.length === 0 ? "(value)" : issue.path.map(String).join(".")
  switch (issue._tag) {
    case "Missing":
      return { field, reason: "is missing" }
    case "Unexpected":
      return { field, reason: "is not allowed by the schema" }
    case "Type": {
      const expected = /^Expected ([^,]+), actual /.exec(issue.message)
      return { field, reason: expected === null ? "has the wrong type" : `is not ${expected[1]}` }
    }
    default:
      return { field, reason: "does not match the schema" }
  }
}

/**
 * Builds the `NewOutboxRecord` of one value (`index` is its position in the batch, for the error). `now`
 * dates `expiresAt` when the topic expires its records. `InvalidRecord` names the field when the value does not
 * encode, a key is empty, a header value is not a string, or the codec returns no bytes.
 *
 * @since 0.2.0
 */
export const toRecord = <A, I>(
  topic: Topic<A, I>,
  value: A,
  now: DateTime.Utc,
  index = 0
): Either.Either<NewOutboxRecord, InvalidRecord> => {
  const invalid = (field: string, reason: string, partitionKey?: string) =>
    Either.left(
      new InvalidRecord({
        index,
        topic: topic.name,
        field,
        reason: `topic ${topic.name}: field ${field} ${reason}`,
        ...(partitionKey !== undefined ? { partitionKey } : {})
      })
    )
  const encoded = Schema.encodeEither(topic.schema)(value)
  if (Either.isLeft(encoded)) {
    const issue = firstIssue(encoded.left)
    return invalid(issue.field, issue.reason)
  }
  const partitionKey = topic.partitionKey(value)
  if (typeof partitionKey !== "string" || partitionKey.length === 0) {
    return invalid("partitionKey", "is empty")
  }
  const key = topic.idempotencyKey(value)
  if (typeof key !== "string" || key.length === 0) return invalid("idempotencyKey", "is empty", partitionKey)
  const payload = topic.codec.encode(encoded.right)
  if (Either.isLeft(payload)) return invalid("(value)", payload.left, partitionKey)
  if (!(payload.right instanceof Uint8Array))
    return invalid("(value)", "was not encoded to bytes by the codec", partitionKey)
  // a copy made with `Object.assign`: adding properties to a spread copy is several times slower in V8
  const headers: Record<string, string> = Object.assign({}, topic.headers(value))
  for (const name of Object.keys(headers)) {
    if (typeof headers[name] !== "string")
      return invalid("headers", `${JSON.stringify(name)} is not a string`, partitionKey)
  }
  headers[ContentTypeHeader] = topic.codec.contentType
  headers[TopicHeader] = topic.name
  const orderingKey = topic.orderingKey(value)
  const address = topic.address(value)
  return Either.right(
    new NewOutboxRecord({
      partitionKey,
      envelopeId: envelopeId(topic.name, key),
      bindingId: topic.route,
      routeId: topic.route,
      payload: payload.right,
      headers,
      ...(typeof orderingKey === "string" && orderingKey.length > 0 ? { orderingKey } : {}),
      ...(typeof address === "string" && address.length > 0 ? { address } : {}),
      ...(Option.isSome(topic.expiresIn) ? { expiresAt: DateTime.addDuration(now, topic.expiresIn.value) } : {})
    })
  )
}

// ---------------------------------------------------------------------------------------------------------
// wire metadata
// ---------------------------------------------------------------------------------------------------------

/**
 * Escapes a header value: `%` and every character outside visible ASCII (space included) become UTF-8
 * percent escapes, so any key travels in any transport's header; plain keys (`order-42`) are unchanged.
 *
 * @since 0.2.0
 */
export const encodeHeaderValue = (value: string): string =>
  /^[\x21-\x24\x26-\x7e]*$/.test(value)
    ? value
    : Array.from(value, (char) => (/^[\x21-\x24\x26-\x7e]$/.test(char) ? char : escapeChar(char))).join("")

/** A lone surrogate has no UTF-8 form: it travels as U+FFFD. */
const escapeChar = (char: string): string => {
  try {
    return encodeURIComponent(char)
  } catch {
    return "%EF%BF%BD"
  }
}

/**
 * Reverses {@link encodeHeaderValue}; `None` for a malformed escape.
 *
 * @since 0.2.0
 */
export const decodeHeaderValue = (value: string): Option.Option<string> => {
  if (!value.includes("%")) return Option.some(value)
  try {
    return Option.some(decodeURIComponent(value))
  } catch {
    return Option.none()
  }
}

/**
 * The wire metadata of a record (SPEC §11): `Outbox-Record-Id`, `Outbox-Topic` (when the record has one),
 * `Outbox-Partition`, `Outbox-Ordering-Key` (when keyed), `Outbox-Seq` and `Outbox-Created-At`. Values are
 * escaped with {@link encodeHeaderValue}.
 *
 * @since 0.2.0
 */
export const wireHeaders = (record: OutboxRecord): Record<string, string> => writeWireHeaders(record, {})

/**
 * Writes the wire metadata of a record ({@link wireHeaders}) into `headers`, over any header of the same
 * name, and returns it: a sink that publishes the record's own headers too writes both into one object.
 *
 * @since 0.2.0
 */
export const writeWireHeaders = (record: OutboxRecord, headers: Record<string, string>): Record<string, string> => {
  headers[RecordIdHeader] = encodeHeaderValue(record.id)
  const topic = record.headers[TopicHeader]
  if (topic !== undefined && topic.length > 0) headers[TopicHeader] = encodeHeaderValue(topic)
  headers[PartitionHeader] = encodeHeaderValue(record.partitionKey)
  if (Option.isSome(record.orderingKey)) headers[OrderingKeyHeader] = encodeHeaderValue(record.orderingKey.value)
  headers[SeqHeader] = String(record.seq)
  headers[CreatedAtHeader] = DateTime.formatIso(record.createdAt)
  return headers
}

/**
 * What a consumer knows of a delivered message besides its value: enough to deduplicate (`recordId`) and
 * order (`partitionKey`, `orderingKey`, `seq`) without the store.
 *
 * @since 0.2.0
 */
export interface MessageMetadata {
  readonly recordId: string
  readonly topic: string
  readonly partitionKey: string
  readonly orderingKey: Option.Option<string>
  readonly seq: number
  readonly createdAt: DateTime.Utc
  /** The record's headers as published (`Content-Type`, `Outbox-Topic`, the topic's own), no transport metadata. */
  readonly headers: Readonly<Record<string, string>>
}

/**
 * A decoded message: the typed value and its metadata.
 *
 * @since 0.2.0
 */
export interface Decoded<A> {
  readonly value: A
  readonly metadata: MessageMetadata
}

/**
 * A broker message in plain form: its headers (names matched case-insensitively) and its bytes.
 *
 * @since 0.2.0
 */
export interface WireMessage {
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  readonly data: Uint8Array
}

/**
 * A webhook request as received: the JSON body (text or bytes) the webhook sink POSTs.
 *
 * @since 0.2.0
 */
export interface WebhookRequest {
  readonly body: string | Uint8Array
  readonly headers?: Readonly<Record<string, string | ReadonlyArray<string> | undefined>> | undefined
}

/**
 * What {@link decode} accepts: a stored or claimed record, a webhook request, or a broker message.
 *
 * @since 0.2.0
 */
export type Message = OutboxRecord | WebhookRequest | WireMessage

/** The body of a webhook request (RecordJson, as documented in `schemas/webhook-body.schema.json`). */
const WebhookBody = Schema.Struct({
  id: Schema.NonEmptyString,
  partitionKey: Schema.NonEmptyString,
  orderingKey: Schema.NullOr(Schema.String),
  headers: Schema.Record({ key: Schema.String, value: Schema.String }),
  payload: Schema.Uint8ArrayFromBase64,
  createdAt: Schema.DateTimeUtc,
  seq: Schema.NonNegativeInt
})

const transportOnly = new Set(
  [RecordIdHeader, PartitionHeader, OrderingKeyHeader, SeqHeader, CreatedAtHeader, EnvelopeIdHeader, "Nats-Msg-Id"].map(
    (name) => name.toLowerCase()
  )
)

const firstValue = (value: string | ReadonlyArray<string> | undefined): string | undefined =>
  typeof value === "string" ? value : value?.[0]

/** Decodes the payload bytes of a message of `topic`. */
const decodePayload = <A, I>(
  topic: Topic<A, I>,
  bytes: Uint8Array,
  recordId: string
): Either.Either<A, DecodeError> => {
  const raw = topic.codec.decode(bytes)
  if (Either.isLeft(raw)) {
    return Either.left(new DecodeError({ topic: topic.name, recordId, field: "(payload)", reason: raw.left }))
  }
  return Either.mapLeft(Schema.decodeUnknownEither(topic.schema)(raw.right), (error) => {
    const issue = firstIssue(error)
    return new DecodeError({
      topic: topic.name,
      recordId,
      field: issue.field,
      reason: `field ${issue.field} ${issue.reason}`
    })
  })
}

const checkTopic = <A, I>(
  topic: Topic<A, I>,
  headers: Readonly<Record<string, string>>,
  recordId: string
): Either.Either<string, DecodeError> => {
  const named = Object.entries(headers).find(([name]) => name.toLowerCase() === TopicHeader.toLowerCase())?.[1]
  if (named === undefined) {
    return Either.left(
      new DecodeError({ topic: topic.name, recordId, field: TopicHeader, reason: "the message names no topic" })
    )
  }
  if (named !== topic.name) {
    return Either.left(
      new DecodeError({
        topic: topic.name,
        recordId,
        field: TopicHeader,
        reason: `the message belongs to another topic`
      })
    )
  }
  return Either.right(named)
}

/**
 * Decodes a stored or claimed record of `topic`.
 *
 * @since 0.2.0
 */
export const decodeRecord = <A, I>(topic: Topic<A, I>, record: OutboxRecord): Either.Either<Decoded<A>, DecodeError> =>
  Either.flatMap(checkTopic(topic, record.headers, record.id), (name) =>
    Either.map(decodePayload(topic, record.payload, record.id), (value) => ({
      value,
      metadata: {
        recordId: record.id,
        topic: name,
        partitionKey: record.partitionKey,
        orderingKey: record.orderingKey,
        seq: record.seq,
        createdAt: record.createdAt,
        headers: record.headers
      }
    }))
  )

/**
 * Decodes the body of a webhook request (the JSON the webhook sink POSTs) for `topic`.
 *
 * @since 0.2.0
 */
export const decodeWebhook = <A, I>(
  topic: Topic<A, I>,
  request: WebhookRequest
): Either.Either<Decoded<A>, DecodeError> => {
  const fail = (field: string, reason: string) => Either.left(new DecodeError({ topic: topic.name, field, reason }))
  let text: string
  if (typeof request.body === "string") text = request.body
  else {
    try {
      text = utf8Decoder.decode(request.body)
    } catch {
      return fail("(body)", "the body is not UTF-8")
    }
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return fail("(body)", "the body is not JSON")
  }
  const body = Schema.decodeUnknownEither(WebhookBody)(parsed)
  if (Either.isLeft(body)) {
    const issue = firstIssue(body.left)
    return fail(issue.field, `the body's field ${issue.field} ${issue.reason}`)
  }
  const b = body.right
  return Either.flatMap(checkTopic(topic, b.headers, b.id), (name) =>
    Either.map(decodePayload(topic, b.payload, b.id), (value) => ({
      value,
      metadata: {
        recordId: b.id,
        topic: name,
        partitionKey: b.partitionKey,
        orderingKey: Option.filter(Option.fromNullable(b.orderingKey), (key) => key.length > 0),
        seq: b.seq,
        createdAt: b.createdAt,
        headers: b.headers
      }
    }))
  )
}

/**
 * Decodes a broker message (headers and bytes) of `topic` from its wire metadata headers.
 *
 * @since 0.2.0
 */
export const decodeWire = <A, I>(topic: Topic<A, I>, message: WireMessage): Either.Either<Decoded<A>, DecodeError> => {
  const lower = new Map<string, string>()
  const kept: Record<string, string> = {}
  for (const [name, raw] of Object.entries(message.headers)) {
    const value = firstValue(raw)
    if (value === undefined) continue
    lower.set(name.toLowerCase(), value)
    if (!transportOnly.has(name.toLowerCase())) kept[name] = value
  }
  const header = (name: string): Either.Either<Option.Option<string>, DecodeError> => {
    const raw = lower.get(name.toLowerCase())
    if (raw === undefined) return Either.right(Option.none())
    return Option.match(decodeHeaderValue(raw), {
      onNone: () =>
        Either.left(new DecodeError({ topic: topic.name, field: name, reason: `header ${name} is malformed` })),
      onSome: (value) => Either.right(Option.some(value))
    })
  }
  const required = (name: string): Either.Either<string, DecodeError> =>
    Either.flatMap(header(name), (value) =>
      Option.match(value, {
        onNone: () =>
          Either.left(
            new DecodeError({
              topic: topic.name,
              field: name,
              reason: `header ${name} is missing (not an outbox message)`
            })
          ),
        onSome: Either.right
      })
    )
  return Either.gen(function* () {
    const recordId = yield* required(RecordIdHeader)
    const named = yield* required(TopicHeader)
    const partitionKey = yield* required(PartitionHeader)
    const orderingKey = Option.filter(yield* header(OrderingKeyHeader), (key) => key.length > 0)
    const seqText = yield* required(SeqHeader)
    const createdAtText = yield* required(CreatedAtHeader)
    const seq = Number(seqText)
    if (!/^\d+$/.test(seqText) || !Number.isSafeInteger(seq)) {
      return yield* Either.left(
        new DecodeError({
          topic: topic.name,
          recordId,
          field: SeqHeader,
          reason: `header ${SeqHeader} is not a number`
        })
      )
    }
    const createdAt = DateTime.make(createdAtText)
    if (Option.isNone(createdAt) || !/^\d{4}-\d\d-\d\dT/.test(createdAtText)) {
      return yield* Either.left(
        new DecodeError({
          topic: topic.name,
          recordId,
          field: CreatedAtHeader,
          reason: `header ${CreatedAtHeader} is not an ISO-8601 instant`
        })
      )
    }
    kept[TopicHeader] = named
    yield* checkTopic(topic, { [TopicHeader]: named }, recordId)
    const value = yield* decodePayload(topic, message.data, recordId)
    return {
      value,
      metadata: {
        recordId,
        topic: named,
        partitionKey,
        orderingKey,
        seq,
        createdAt: DateTime.toUtc(createdAt.value),
        headers: kept
      }
    }
  })
}

const isRecord = (message: Message): message is OutboxRecord => message instanceof OutboxRecord

const isWire = (message: WebhookRequest | WireMessage): message is WireMessage => "data" in message

/**
 * Decodes a delivered message of `topic` — a stored or claimed record, a webhook request (`{ body,
 * headers? }`) or a broker message (`{ headers, data }`) — back into the typed value and its metadata.
 * A foreign or malformed message (another topic, no outbox headers, a payload the Schema rejects) fails
 * with `DecodeError`, never a defect.
 *
 * @since 0.2.0
 */
export const decode = <A, I>(topic: Topic<A, I>, message: Message): Either.Either<Decoded<A>, DecodeError> =>
  isRecord(message)
    ? decodeRecord(topic, message)
    : isWire(message)
      ? decodeWire(topic, message)
      : decodeWebhook(topic, message)
