/**
 * A sink that writes every record as one JSON line to standard output (or any writable stream), for
 * piping a relay into another program.
 *
 * @since 0.1.0
 */
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { OutboxRecord } from "../../domain/OutboxRecord.js"
import { SendError, Sink } from "../../services/Sink.js"

/**
 * The JSON form of a delivered record, shared by the line-oriented and HTTP sinks. The payload is
 * base64; instants are ISO-8601 strings.
 *
 * @since 0.1.0
 */
export interface RecordJson {
  readonly id: string
  readonly partitionKey: string
  readonly envelopeId: string
  readonly bindingId: string
  readonly routeId: string
  readonly address: string
  readonly orderingKey: string | null
  readonly headers: Readonly<Record<string, string>>
  readonly payload: string
  readonly createdAt: string
  readonly expiresAt: string | null
  readonly seq: number
  readonly replayCount: number
}

/**
 * Converts a record to its {@link RecordJson} form.
 *
 * @since 0.1.0
 */
export const toJson = (record: OutboxRecord): RecordJson => ({
  id: record.id,
  partitionKey: record.partitionKey,
  envelopeId: record.envelopeId,
  bindingId: record.bindingId,
  routeId: record.routeId,
  address: record.address,
  orderingKey: Option.getOrNull(record.orderingKey),
  headers: record.headers,
  payload: Buffer.from(record.payload).toString("base64"),
  createdAt: DateTime.formatIso(record.createdAt),
  expiresAt: Option.getOrNull(Option.map(record.expiresAt, DateTime.formatIso)),
  seq: record.seq,
  replayCount: record.replayCount
})

/**
 * Where the sink writes: anything with a Node-style `write(chunk, callback)`.
 *
 * @since 0.1.0
 */
export interface LineWriter {
  readonly write: (chunk: string, callback: (error?: Error | null) => void) => unknown
}

/**
 * Options of the stdout sink.
 *
 * @since 0.1.0
 */
export interface StdoutSinkOptions {
  /** The stream to write to (default `process.stdout`). */
  readonly stream?: LineWriter | undefined
}

/**
 * Builds the sink. Each send writes one line and waits for the stream to accept it; a write error is
 * a retryable `SendError` with code `write-failed`.
 *
 * @since 0.1.0
 */
export const make = (options: StdoutSinkOptions = {}): Effect.Effect<Sink["Type"]> =>
  Effect.sync(() => {
    const stream: LineWriter = options.stream ?? process.stdout
    return Sink.of({
      send: (record) =>
        Effect.async<void, SendError>((resume) => {
          const line = JSON.stringify(toJson(record)) + "\n"
          try {
            stream.write(line, (error) => {
              resume(
                error === null || error === undefined
                  ? Effect.void
                  : Effect.fail(new SendError({ retryable: true, code: "write-failed", message: error.message }))
              )
            })
          } catch (error) {
            resume(Effect.fail(new SendError({ retryable: true, code: "write-failed", message: String(error) })))
          }
        })
    })
  })

/**
 * The stdout sink with options.
 *
 * @since 0.1.0
 */
export const layerWith = (options: StdoutSinkOptions): Layer.Layer<Sink> => Layer.effect(Sink, make(options))

/**
 * The stdout sink writing to `process.stdout`.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<Sink> = layerWith({})
