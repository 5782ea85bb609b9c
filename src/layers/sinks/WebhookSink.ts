/**
 * An HTTP webhook sink on `@effect/platform`'s `HttpClient`: each record is POSTed as JSON with an
 * `Idempotency-Key` header equal to the record id.
 *
 * Classification: 2xx delivered; 408, 429, 5xx, timeouts and connection errors are retryable; every
 * other status is permanent. A `Retry-After` header (seconds or an HTTP date) on a retryable answer
 * becomes `SendError.retryAfterMillis`, a minimum backoff.
 *
 * @since 0.1.0
 */
import * as Headers from "@effect/platform/Headers"
import * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { OutboxRecord } from "../../domain/OutboxRecord.js"
import { SendError, Sink } from "../../services/Sink.js"
import { toJson } from "./StdoutSink.js"

/**
 * Options of the webhook sink.
 *
 * @since 0.1.0
 */
export interface WebhookSinkOptions {
  /** The URL to POST to; when absent, each record's `address` is used. */
  readonly url?: string | undefined
  /** Per-request timeout (default 10 seconds); a timeout is retryable. */
  readonly timeout?: Duration.DurationInput | undefined
  /** Extra request headers (e.g. authorisation); never logged. */
  readonly headers?: Readonly<Record<string, string>> | undefined
}

/**
 * Whether an HTTP status is worth retrying: 408, 429 and every 5xx.
 *
 * @since 0.1.0
 */
export const isRetryableStatus = (status: number): boolean => status === 408 || status === 429 || status >= 500

/**
 * Parses a `Retry-After` value (delta seconds or an HTTP date) into milliseconds from `nowMillis`;
 * `undefined` when absent or unparsable. Never negative.
 *
 * @since 0.1.0
 */
export const parseRetryAfter = (value: string | undefined, nowMillis: number): number | undefined => {
  if (value === undefined) return undefined
  const trimmed = value.trim()
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000
  const at = Date.parse(trimmed)
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMillis)
}

const classifyResponse = (response: HttpClientResponse.HttpClientResponse): Effect.Effect<void, SendError> => {
  const status = response.status
  // drain the body so the connection can be reused; its content is not needed
  const drain = Effect.ignore(response.arrayBuffer)
  if (status >= 200 && status < 300) return drain
  return Effect.gen(function* () {
    yield* drain
    const code = `http-${status}`
    if (!isRetryableStatus(status)) {
      return yield* new SendError({ retryable: false, code, message: `webhook answered ${status}` })
    }
    const now = yield* Clock.currentTimeMillis
    const retryAfterMillis = parseRetryAfter(Option.getOrUndefined(Headers.get(response.headers, "retry-after")), now)
    return yield* new SendError({
      retryable: true,
      code,
      message: `webhook answered ${status}`,
      ...(retryAfterMillis !== undefined ? { retryAfterMillis } : {})
    })
  })
}

const classifyError = (error: HttpClientError.HttpClientError): SendError => {
  if (error._tag === "RequestError") {
    return error.reason === "Transport"
      ? new SendError({ retryable: true, code: "connection", message: error.message })
      : new SendError({
          retryable: false,
          code: error.reason === "Encode" ? "encode" : "invalid-url",
          message: error.message
        })
  }
  return new SendError({ retryable: true, code: "response", message: error.message })
}

/**
 * Builds the sink from the `HttpClient` in context.
 *
 * @since 0.1.0
 */
export const make = (options: WebhookSinkOptions = {}): Effect.Effect<Sink["Type"], never, HttpClient.HttpClient> =>
  Effect.gen(function* () {
    const client = yield* HttpClient.HttpClient
    const timeout = Duration.decode(options.timeout ?? "10 seconds")
    const extra = options.headers ?? {}
    const send = (record: OutboxRecord): Effect.Effect<void, SendError> => {
      const url = options.url ?? record.address
      if (url.length === 0) {
        return Effect.fail(
          new SendError({ retryable: false, code: "no-address", message: `record ${record.id} has no address` })
        )
      }
      const request = HttpClientRequest.post(url).pipe(
        HttpClientRequest.setHeaders(extra),
        HttpClientRequest.setHeader("Idempotency-Key", record.id),
        HttpClientRequest.bodyUnsafeJson(toJson(record))
      )
      return client.execute(request).pipe(
        Effect.mapError(classifyError),
        Effect.flatMap(classifyResponse),
        Effect.timeoutFail({
          duration: timeout,
          onTimeout: () =>
            new SendError({
              retryable: true,
              code: "timeout",
              message: `webhook did not answer within ${Duration.format(timeout)}`
            })
        })
      )
    }
    return Sink.of({ send })
  })

/**
 * The webhook sink with options; requires an `HttpClient` (e.g. `NodeHttpClient.layerUndici`).
 *
 * @since 0.1.0
 */
export const layerWith = (options: WebhookSinkOptions): Layer.Layer<Sink, never, HttpClient.HttpClient> =>
  Layer.effect(Sink, make(options))

/**
 * The webhook sink posting to each record's `address`.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<Sink, never, HttpClient.HttpClient> = layerWith({})
