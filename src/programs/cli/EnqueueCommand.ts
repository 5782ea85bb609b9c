/**
 * `effect-outbox enqueue`: reads JSON lines from stdin, one record per line, and enqueues them through
 * `Enqueue` (with its backpressure check) in batches. A bad line is reported on stderr with its line number
 * and skipped; the good lines are still enqueued: when the store rejects a record of a batch
 * (`InvalidRecord`), that line is reported with its own reason and the rest of the batch is persisted
 * again without it; any other batch failure is narrowed down by halving the batch, unless it concerns the
 * whole store (disk full, read-only, locked), which is reported once per batch. Exit code 0 when every line
 * was accepted, 1 otherwise.
 *
 * A line: `{"partitionKey": "…", "envelopeId": "…", "bindingId": "…", "payload": <JSON value or
 * string> | "payloadBase64": "<base64 bytes>", "id"?, "orderingKey"?, "routeId"?, "address"?,
 * "headers"?: {…}, "expiresAt"?: ISO-8601}`. A string payload is stored as its UTF-8 bytes; any other JSON
 * value as its JSON text; `payloadBase64` as the bytes it encodes (for binary payloads). A line that is not
 * valid UTF-8, or holds a string with a lone surrogate, is rejected (it would otherwise be stored with
 * U+FFFD in place of the bad bytes). Messages name the field at fault, never its value.
 *
 * @since 0.1.0
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Chunk from "effect/Chunk"
import * as Console from "effect/Console"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { Readable } from "node:stream"
import { NewOutboxRecord } from "../../domain/OutboxRecord.js"
import * as Enqueue from "../Enqueue.js"
import { counted } from "./Format.js"
import { CliFailure, errorText } from "./Settings.js"
import * as SqliteFile from "./SqliteFile.js"
import { resolve, storeOptions, withStores } from "./StoreOptions.js"

const required = (what: string) =>
  Schema.String.annotations({ message: () => `must be ${what}` }).pipe(
    Schema.nonEmptyString({ message: () => `must be ${what}` })
  )
const text = Schema.String.annotations({ message: () => "must be a string" })
const optional = <S extends Schema.Schema.All>(schema: S) => Schema.optionalWith(schema, { exact: true })

/**
 * The schema of one input line (messages name the rule broken, never the value).
 *
 * @since 0.1.0
 */
export const InputLine = Schema.Struct({
  id: optional(required("a non-empty string")),
  partitionKey: required("a non-empty string"),
  envelopeId: required("a non-empty string"),
  bindingId: required("a non-empty string"),
  payload: optional(Schema.Unknown),
  payloadBase64: optional(
    Schema.String.pipe(
      Schema.filter((value) => /^[A-Za-z0-9+/]*={0,2}$/.test(value) && value.length % 4 === 0, {
        message: () => "must be base64 (A-Z a-z 0-9 + /, padded with =)"
      })
    )
  ),
  orderingKey: optional(text),
  routeId: optional(text),
  address: optional(text),
  headers: optional(
    Schema.Record({ key: Schema.String, value: text }).annotations({
      message: () => "must be an object of string values"
    })
  ),
  expiresAt: optional(
    Schema.DateTimeUtc.annotations({ message: () => "must be an ISO-8601 instant such as 2030-01-01T00:00:00Z" })
  )
}).annotations({ message: () => "a line must be a JSON object" })

const decodeLine = Schema.decodeUnknownEither(InputLine, { onExcessProperty: "error", errors: "all" })
const encoder = new TextEncoder()
const utf8 = new TextDecoder("utf-8", { fatal: true })
const loneSurrogate = /\p{Cs}/u

/** The path of the first string (key or value) of a JSON value holding a lone surrogate. */
const surrogatePath = (value: unknown, path: ReadonlyArray<string>): Option.Option<string> => {
  if (typeof value === "string") return loneSurrogate.test(value) ? Option.some(path.join(".")) : Option.none()
  if (Array.isArray(value)) {
    for (const [index, item] of value.entries()) {
      const found = surrogatePath(item, [...path, String(index)])
      if (Option.isSome(found)) return found
    }
    return Option.none()
  }
  if (typeof value === "object" && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      if (loneSurrogate.test(key)) return Option.some([...path, "(a key)"].join("."))
      const found = surrogatePath(item, [...path, key])
      if (Option.isSome(found)) return found
    }
  }
  return Option.none()
}

const issueText = (issue: ParseResult.ArrayFormatterIssue): string => {
  const field = issue.path.join(".")
  switch (issue._tag) {
    case "Missing":
      return `${field} is required`
    case "Unexpected":
      return `unknown field ${field}`
    default: {
      // a message of a schema without its own wording may quote the value: name the field only
      const message = issue.message.includes("actual") ? "has an invalid value" : issue.message
      return field.length > 0 ? `${field}: ${message}` : message
    }
  }
}

/**
 * Parses one line (its text already decoded from UTF-8) into a record, or explains why it is unusable
 * without echoing any value.
 *
 * @since 0.1.0
 */
export const parseLine = (line: string): Either.Either<NewOutboxRecord, string> => {
  let json: unknown
  try {
    json = JSON.parse(line)
  } catch {
    return Either.left("not JSON (a line must hold one JSON object)")
  }
  const bad = surrogatePath(json, [])
  if (Option.isSome(bad)) {
    return Either.left(`${bad.value.length > 0 ? bad.value : "the line"} is not valid Unicode (a lone surrogate)`)
  }
  const decoded = decodeLine(json)
  if (Either.isLeft(decoded)) {
    return Either.left(ParseResult.ArrayFormatter.formatErrorSync(decoded.left).map(issueText).join("; "))
  }
  const fields = decoded.right
  if ((fields.payload === undefined) === (fields.payloadBase64 === undefined)) {
    return Either.left("give exactly one of payload (a JSON value or a string) and payloadBase64")
  }
  const payload =
    fields.payloadBase64 !== undefined
      ? new Uint8Array(Buffer.from(fields.payloadBase64, "base64"))
      : encoder.encode(typeof fields.payload === "string" ? fields.payload : JSON.stringify(fields.payload))
  return Either.right(
    new NewOutboxRecord(
      {
        partitionKey: fields.partitionKey,
        envelopeId: fields.envelopeId,
        bindingId: fields.bindingId,
        payload,
        ...(fields.id !== undefined ? { id: fields.id } : {}),
        ...(fields.orderingKey !== undefined ? { orderingKey: fields.orderingKey } : {}),
        ...(fields.routeId !== undefined ? { routeId: fields.routeId } : {}),
        ...(fields.address !== undefined ? { address: fields.address } : {}),
        ...(fields.headers !== undefined ? { headers: fields.headers } : {}),
        ...(fields.expiresAt !== undefined ? { expiresAt: fields.expiresAt } : {})
      },
      { disableValidation: true }
    )
  )
}

/**
 * Decodes one raw input line (bytes without the newline): not valid UTF-8 is a rejection, not a silent
 * U+FFFD.
 *
 * @since 0.1.0
 */
export const parseBytes = (bytes: Uint8Array): Either.Either<NewOutboxRecord, string> => {
  let line: string
  try {
    line = utf8.decode(bytes)
  } catch {
    return Either.left("not valid UTF-8 (send binary payloads as payloadBase64)")
  }
  return parseLine(line)
}

/**
 * What `enqueue` did.
 *
 * @since 0.1.0
 */
export interface EnqueueSummary {
  readonly lines: number
  readonly enqueued: number
  readonly duplicates: number
  readonly rejected: number
}

interface Numbered {
  readonly line: number
  readonly record: NewOutboxRecord
}

/**
 * The lines of a byte stream (split at `\n`, a trailing `\r` removed), as raw bytes.
 *
 * @since 0.1.0
 */
export const byteLines = <E>(chunks: Stream.Stream<Uint8Array, E>): Stream.Stream<Uint8Array, E> => {
  let rest: Uint8Array = new Uint8Array(0)
  const trim = (line: Uint8Array): Uint8Array => (line[line.length - 1] === 13 ? line.subarray(0, -1) : line)
  const split = (chunk: Uint8Array): Array<Uint8Array> => {
    const out: Array<Uint8Array> = []
    let data = rest.length === 0 ? chunk : Buffer.concat([rest, chunk])
    let start = 0
    for (let index = data.indexOf(10); index !== -1; index = data.indexOf(10, start)) {
      out.push(trim(data.subarray(start, index)))
      start = index + 1
    }
    data = data.subarray(start)
    rest = new Uint8Array(data)
    return out
  }
  const flush = Stream.suspend(() => (rest.length > 0 ? Stream.make(trim(rest)) : Stream.empty))
  return Stream.concat(Stream.mapConcat(chunks, split), flush)
}

/** A failure that concerns the whole store rather than one record: retrying a smaller batch cannot help. */
const storeWide = (error: unknown): boolean => {
  const code = SqliteFile.errorCode(error)
  return code !== undefined && SqliteFile.reasonOf(code) !== undefined
}

/** The reason told for a failure of a batch: the plain reason of a known store condition, else the message. */
const reasonText = (error: { readonly message: string }): string => {
  const reason = SqliteFile.reasonOf(SqliteFile.errorCode(error))
  return reason !== undefined ? reason : error.message
}

/**
 * Reads lines from `input`, enqueues the good ones in batches of `batchSize`, reports bad ones through
 * `report` (once per line, or once per batch for a store-wide failure such as a full disk) and returns
 * the summary.
 *
 * @since 0.1.0
 */
export const enqueueLines = (
  input: Readable,
  batchSize: number,
  report: (line: number, reason: string) => Effect.Effect<void>
): Effect.Effect<EnqueueSummary, never, Enqueue.Enqueue> =>
  Effect.gen(function* () {
    const service = yield* Enqueue.Enqueue
    const summary = { lines: 0, enqueued: 0, duplicates: 0, rejected: 0 }
    const chunks = Stream.fromAsyncIterable(
      input,
      (error) => new CliFailure({ message: `cannot read stdin: ${errorText(error)}`, exitCode: 1 })
    ).pipe(Stream.map((chunk: unknown) => (typeof chunk === "string" ? encoder.encode(chunk) : toBytes(chunk))))

    const rejectAll = (batch: ReadonlyArray<Numbered>, reason: string): Effect.Effect<void> => {
      summary.rejected += batch.length
      const first = batch[0]?.line ?? 0
      const last = batch[batch.length - 1]?.line ?? first
      return batch.length === 1
        ? report(first, `not enqueued: ${reason}`)
        : report(first, `not enqueued: ${reason} (lines ${first}-${last}, ${batch.length} records)`)
    }

    const enqueueBatch = (batch: ReadonlyArray<Numbered>): Effect.Effect<void> =>
      batch.length === 0
        ? Effect.void
        : service.enqueue(batch.map((item) => item.record)).pipe(
            // a full partition drains while we wait (a relay runs elsewhere); give up after ~30 s
            Effect.retry({
              while: (error) => error._tag === "OutboxFull",
              schedule: Schedule.spaced("1 second"),
              times: 30
            }),
            Effect.matchEffect({
              onSuccess: (persisted) =>
                Effect.sync(() => {
                  summary.enqueued += persisted.persisted.length
                  summary.duplicates += persisted.skipped.length
                }),
              onFailure: (error): Effect.Effect<void> => {
                if (error._tag === "DuplicateRecord") {
                  summary.duplicates += batch.length
                  return Effect.void
                }
                if (error._tag === "InvalidRecord") {
                  const culprit = batch[error.index]
                  if (culprit !== undefined) {
                    summary.rejected += 1
                    return Effect.zipRight(
                      report(culprit.line, `not enqueued: ${error.reason}`),
                      enqueueBatch(batch.filter((_, index) => index !== error.index))
                    )
                  }
                }
                if (batch.length > 1 && error._tag !== "OutboxFull" && !storeWide(error)) {
                  const half = Math.ceil(batch.length / 2)
                  return Effect.zipRight(enqueueBatch(batch.slice(0, half)), enqueueBatch(batch.slice(half)))
                }
                return rejectAll(batch, reasonText(error))
              }
            })
          )

    yield* byteLines(chunks).pipe(
      Stream.zipWithIndex,
      Stream.mapEffect(([bytes, index]) =>
        Effect.gen(function* () {
          const line = index + 1
          summary.lines = line
          if (bytes.every((byte) => byte === 32 || byte === 9)) return Option.none<Numbered>()
          const parsed = parseBytes(bytes)
          if (Either.isLeft(parsed)) {
            summary.rejected += 1
            yield* report(line, parsed.left)
            return Option.none<Numbered>()
          }
          return Option.some({ line, record: parsed.right })
        })
      ),
      Stream.filterMap((item) => item),
      Stream.grouped(batchSize),
      Stream.runForEach((chunk) => enqueueBatch(Chunk.toReadonlyArray(chunk))),
      Effect.catchAll((error) => report(summary.lines, error.message))
    )
    return summary
  })

const toBytes = (chunk: unknown): Uint8Array => (chunk instanceof Uint8Array ? chunk : encoder.encode(String(chunk)))

/**
 * The `enqueue` command.
 *
 * @since 0.1.0
 */
export const command = Command.make(
  "enqueue",
  {
    ...storeOptions,
    batchSize: Options.integer("batch-size").pipe(
      Options.withDescription("Records per persist call (default 500)"),
      Options.withDefault(500)
    ),
    maxDepth: Options.integer("max-depth").pipe(
      Options.withDescription("Pending depth at which a partition refuses records; 0 disables (default 10000)"),
      Options.withDefault(10_000)
    )
  },
  (flags) =>
    Effect.gen(function* () {
      const { store } = yield* resolve(flags)
      const batchSize = Math.max(1, flags.batchSize)
      const started = yield* DateTime.now
      const summary = yield* withStores(
        store,
        enqueueLines(process.stdin, batchSize, (line, reason) => Console.error(`line ${line}: ${reason}`)).pipe(
          Effect.provide(Enqueue.layerWith({ maxOutboxDepth: Math.max(0, flags.maxDepth) }))
        )
      )
      const elapsed = DateTime.distance(started, yield* DateTime.now)
      yield* Console.log(
        `enqueued ${counted(summary.enqueued, "record", "records")} ` +
          `(${counted(summary.duplicates, "duplicate", "duplicates")} skipped, ` +
          `${counted(summary.rejected, "line", "lines")} rejected) from ${counted(summary.lines, "line", "lines")} ` +
          `in ${elapsed} ms`
      )
      if (summary.rejected > 0) {
        return yield* new CliFailure({
          message: `${counted(summary.rejected, "line was", "lines were")} not enqueued`,
          exitCode: 1
        })
      }
    })
).pipe(Command.withDescription("Enqueue JSON-lines records from stdin"))
