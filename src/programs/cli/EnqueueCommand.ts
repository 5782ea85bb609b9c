/**
 * `effect-outbox enqueue`: reads JSON lines from stdin, one record per line, and enqueues them through
 * `Enqueue` (with its backpressure check). A bad line is reported on stderr with its line number and
 * skipped; the good lines are still enqueued. Exit code 0 when every line was accepted, 1 otherwise.
 *
 * A line: `{"partitionKey": "…", "envelopeId": "…", "bindingId": "…", "payload": <JSON value or
 * string>, "id"?, "orderingKey"?, "routeId"?, "address"?, "headers"?: {…}, "expiresAt"?: ISO-8601}`.
 * A string payload is stored as its UTF-8 bytes; any other JSON value as its JSON text.
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
import * as readline from "node:readline"
import type { Readable } from "node:stream"
import { NewOutboxRecord } from "../../domain/OutboxRecord.js"
import * as Enqueue from "../Enqueue.js"
import { count } from "./Format.js"
import { CliFailure, errorText } from "./Settings.js"
import { resolve, storeOptions, withStores } from "./StoreOptions.js"

/**
 * The schema of one input line.
 *
 * @since 0.1.0
 */
export const InputLine = Schema.Struct({
  id: Schema.optional(Schema.NonEmptyString),
  partitionKey: Schema.NonEmptyString,
  envelopeId: Schema.NonEmptyString,
  bindingId: Schema.NonEmptyString,
  payload: Schema.Unknown.pipe(
    Schema.filter((value) => value !== undefined, { message: () => "payload is required (a JSON value or a string)" })
  ),
  orderingKey: Schema.optional(Schema.String),
  routeId: Schema.optional(Schema.String),
  address: Schema.optional(Schema.String),
  headers: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  expiresAt: Schema.optional(Schema.DateTimeUtc)
})

const decodeLine = Schema.decodeUnknownEither(InputLine, { onExcessProperty: "error" })
const encoder = new TextEncoder()

/**
 * Parses one line into a record, or explains why it is unusable.
 *
 * @since 0.1.0
 */
export const parseLine = (text: string): Either.Either<NewOutboxRecord, string> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    return Either.left(`not JSON: ${errorText(error)}`)
  }
  return Either.mapBoth(decodeLine(json), {
    onLeft: (error) =>
      ParseResult.ArrayFormatter.formatErrorSync(error)
        .map((issue) => (issue.path.length > 0 ? `${issue.path.join(".")}: ${issue.message}` : issue.message))
        .join("; "),
    onRight: (line) =>
      new NewOutboxRecord(
        {
          partitionKey: line.partitionKey,
          envelopeId: line.envelopeId,
          bindingId: line.bindingId,
          payload: encoder.encode(typeof line.payload === "string" ? line.payload : JSON.stringify(line.payload)),
          ...(line.id !== undefined ? { id: line.id } : {}),
          ...(line.orderingKey !== undefined ? { orderingKey: line.orderingKey } : {}),
          ...(line.routeId !== undefined ? { routeId: line.routeId } : {}),
          ...(line.address !== undefined ? { address: line.address } : {}),
          ...(line.headers !== undefined ? { headers: line.headers } : {}),
          ...(line.expiresAt !== undefined ? { expiresAt: line.expiresAt } : {})
        },
        { disableValidation: true }
      )
  })
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
 * Reads lines from `input`, enqueues the good ones in batches of `batchSize`, reports bad ones through
 * `report` and returns the summary.
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
    const lines = Stream.fromAsyncIterable(
      readline.createInterface({ input, crlfDelay: Infinity }),
      (error) => new CliFailure({ message: `cannot read stdin: ${errorText(error)}`, exitCode: 1 })
    )
    const enqueueBatch = (batch: ReadonlyArray<Numbered>): Effect.Effect<void> =>
      service.enqueue(batch.map((item) => item.record)).pipe(
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
          onFailure: (error) => {
            if (error._tag === "DuplicateRecord") {
              summary.duplicates += batch.length
              return Effect.void
            }
            summary.rejected += batch.length
            return Effect.forEach(batch, (item) => report(item.line, `not enqueued: ${error.message}`), {
              discard: true
            })
          }
        })
      )
    yield* lines.pipe(
      Stream.zipWithIndex,
      Stream.mapEffect(([text, index]) =>
        Effect.gen(function* () {
          const line = index + 1
          summary.lines = line
          if (text.trim().length === 0) return Option.none<Numbered>()
          const parsed = parseLine(text)
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
        `enqueued ${count(summary.enqueued)} records (${count(summary.duplicates)} duplicates skipped, ` +
          `${count(summary.rejected)} lines rejected) from ${count(summary.lines)} lines in ${elapsed} ms`
      )
      if (summary.rejected > 0) {
        return yield* new CliFailure({ message: `${summary.rejected} lines were not enqueued`, exitCode: 1 })
      }
    })
).pipe(Command.withDescription("Enqueue JSON-lines records from stdin"))
