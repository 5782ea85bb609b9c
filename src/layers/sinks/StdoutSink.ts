/**
 * A sink that writes every record as one JSON line ({@link RecordJson}) to standard output (or any
 * writable stream), for piping a relay into another program.
 *
 * When the reader goes away (`EPIPE`, a destroyed stream, e.g. `relay stdout | head -n 3`), the sink
 * becomes closed: the failed and every later send is a transient `SendError` with code `stdout-closed`
 * (the drainer releases the record), nothing more is written, and `onClosed` runs once so that the
 * program can stop its relay and release its leases. The stream's `error` events are handled while the
 * sink's scope is open, so a closed pipe never crashes the process.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import { SendError, Sink } from "../../services/Sink.js"
import { encode } from "./RecordJson.js"

/**
 * Where the sink writes: anything with a Node-style `write(chunk, callback)`, and optionally the
 * `on`/`off` of an event emitter for its `error` events.
 *
 * @since 0.1.0
 */
export interface LineWriter {
  readonly write: (chunk: string, callback: (error?: Error | null) => void) => unknown
  readonly on?: (event: "error", listener: (error: Error) => void) => unknown
  readonly off?: (event: "error", listener: (error: Error) => void) => unknown
}

/**
 * Options of the stdout sink.
 *
 * @since 0.1.0
 */
export interface StdoutSinkOptions {
  /** The stream to write to (default `process.stdout`). */
  readonly stream?: LineWriter | undefined
  /** Runs once when the reader has gone away (see the module doc). */
  readonly onClosed?: Effect.Effect<void> | undefined
}

/**
 * Whether a write error means the reader has gone away for good.
 *
 * @since 0.1.0
 */
export const isClosedError = (error: unknown): boolean =>
  typeof error === "object" &&
  error !== null &&
  "code" in error &&
  (error.code === "EPIPE" || error.code === "ERR_STREAM_DESTROYED" || error.code === "ERR_STREAM_WRITE_AFTER_END")

/**
 * Builds the sink. Each send writes one line and waits for the stream to accept it; a write error is a
 * transient `SendError` (`stdout-closed` when the reader has gone away, else `write-failed`).
 *
 * @since 0.1.0
 */
export const make = (options: StdoutSinkOptions = {}): Effect.Effect<Sink["Type"], never, Scope.Scope> =>
  Effect.gen(function* () {
    const stream: LineWriter = options.stream ?? process.stdout
    const onClosed = options.onClosed ?? Effect.void
    const runtime = yield* Effect.runtime<never>()
    let closed = false
    const close = (): void => {
      if (closed) return
      closed = true
      Runtime.runFork(runtime)(onClosed)
    }
    const listener = (error: Error): void => {
      if (isClosedError(error)) close()
    }
    yield* Effect.acquireRelease(
      Effect.sync(() => stream.on?.("error", listener)),
      () => Effect.sync(() => stream.off?.("error", listener))
    )
    const closedError = () =>
      new SendError({ retryable: true, code: "stdout-closed", message: "the reader of the output has gone away" })
    return Sink.of({
      send: (record) =>
        Effect.async<void, SendError>((resume) => {
          if (closed) return resume(Effect.fail(closedError()))
          const failed = (error: unknown) => {
            if (isClosedError(error)) {
              close()
              return Effect.fail(closedError())
            }
            const message = error instanceof Error ? error.message : String(error)
            return Effect.fail(new SendError({ retryable: true, code: "write-failed", message }))
          }
          try {
            stream.write(encode(record) + "\n", (error) => {
              resume(error === null || error === undefined ? Effect.void : failed(error))
            })
          } catch (error) {
            resume(failed(error))
          }
        })
    })
  })

/**
 * The stdout sink with options.
 *
 * @since 0.1.0
 */
export const layerWith = (options: StdoutSinkOptions): Layer.Layer<Sink> => Layer.scoped(Sink, make(options))

/**
 * The stdout sink writing to `process.stdout`.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<Sink> = layerWith({})
