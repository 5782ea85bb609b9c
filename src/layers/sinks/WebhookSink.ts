/**
 * An HTTP webhook sink on `@effect/platform`'s `HttpClient` (SPEC §6, §10): each record is POSTed as
 * JSON ({@link RecordJson}; documented by `schemas/webhook-body.schema.json`) with `Idempotency-Key` = record id
 * and the wire metadata headers of SPEC §11 (`Topic.wireHeaders`; configured headers cannot override them).
 * `Topic.decode(topic, { body })` reads a request of a typed topic back.
 *
 * - Delivery is decided on the status line: 2xx is delivered even if the body then trickles; the body is
 *   read separately, at most `maxBodyBytes` (64 KiB) within `bodyTimeout`, and the connection is dropped
 *   when there is more. Error bodies give an excerpt for the message.
 * - 408, 429, 5xx, timeouts and connection errors are transient; 3xx is transient too (redirects are not
 *   followed; a WARN names the redacted location); every other status is permanent.
 * - `Retry-After` (seconds or an HTTP date) becomes `SendError.retryAfterMillis`, capped at
 *   `maxRetryAfter` (default 60 s) with a WARN when capped.
 * - Credentials in the URL's userinfo are sent as HTTP Basic auth, never in the URL. URLs appear in logs
 *   and errors only redacted (userinfo and query values masked); headers and the signing secret never.
 * - Configured headers are checked when the sink is built: an invalid name, CR/LF in a value or a header
 *   the sink sets itself fails with `InvalidConfiguration`.
 * - Records choose hosts only inside what was configured: without a fixed `url`, a record's address must
 *   have an origin listed in `allowedOrigins`; when that option is absent, any origin is allowed only if
 *   the sink carries no credentials (no configured headers, no signing secret), so configured credentials
 *   and signatures go only to configured hosts. Link-local addresses (169.254.0.0/16, fe80::/10) and cloud
 *   metadata endpoints are refused unless their origin is listed explicitly. A refused address is permanent
 *   `origin-not-allowed`, naming the host; nothing is sent.
 * - With a `signingSecret`, `X-Outbox-Timestamp` (unix seconds) and `X-Outbox-Signature:
 *   sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>` are added.
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
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import { createHmac } from "node:crypto"
import { InvalidConfiguration } from "../../domain/OutboxError.js"
import type { OutboxRecord } from "../../domain/OutboxRecord.js"
import * as Topic from "../../domain/Topic.js"
import { SendError, Sink } from "../../services/Sink.js"
import * as RecordJson from "./RecordJson.js"
import * as Redact from "./Redact.js"

/**
 * Options of the webhook sink.
 *
 * @since 0.1.0
 */
export interface WebhookSinkOptions {
  /** The URL to POST to; when absent, each record's `address` is used. Userinfo becomes Basic auth. */
  readonly url?: string | undefined
  /** Time to wait for the status line (default 10 seconds); a timeout is transient. */
  readonly timeout?: Duration.DurationInput | undefined
  /** Time allowed for reading the (bounded) response body after the status line (default 2 seconds). */
  readonly bodyTimeout?: Duration.DurationInput | undefined
  /** Most bytes of a response body read (default 64 KiB); the connection is dropped when there is more. */
  readonly maxBodyBytes?: number | undefined
  /** Upper bound of a `Retry-After` honoured (default 60 seconds). */
  readonly maxRetryAfter?: Duration.DurationInput | undefined
  /** Extra request headers (e.g. authorisation); validated at start, never logged. */
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** Shared secret for HMAC-SHA256 signatures of each request; never logged. */
  readonly signingSecret?: Redacted.Redacted<string> | string | undefined
  /**
   * Origins (`https://hooks.example.com`, `http://127.0.0.1:8080`) a record's `address` may name when no
   * `url` is fixed. When absent: every origin if the sink carries no headers and no signing secret, none
   * otherwise. Link-local and metadata addresses are allowed only when their origin is listed here.
   */
  readonly allowedOrigins?: ReadonlyArray<string> | undefined
}

/**
 * The default cap of `Retry-After`: 60 seconds.
 *
 * @since 0.1.0
 */
export const DefaultMaxRetryAfter: Duration.Duration = Duration.seconds(60)

/**
 * The default bound of a response body read: 64 KiB.
 *
 * @since 0.1.0
 */
export const DefaultMaxBodyBytes = 64 * 1024

/**
 * The signature header: `sha256=<hex>`.
 *
 * @since 0.1.0
 */
export const SignatureHeader = "X-Outbox-Signature"

/**
 * The timestamp header (unix seconds) covered by the signature.
 *
 * @since 0.1.0
 */
export const TimestampHeader = "X-Outbox-Timestamp"

/**
 * Whether an HTTP status is worth retrying: 3xx (not followed), 408, 429 and every 5xx.
 *
 * @since 0.1.0
 */
export const isRetryableStatus = (status: number): boolean =>
  (status >= 300 && status < 400) || status === 408 || status === 429 || status >= 500

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

/**
 * The signature of a request body: `sha256=` + hex of HMAC-SHA256(secret, `${timestamp}.${body}`).
 *
 * @since 0.1.0
 */
export const sign = (secret: string, timestamp: number, body: string): string =>
  `sha256=${createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex")}`

const headerName = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
const reservedHeaders = new Set([
  "idempotency-key",
  "content-type",
  "content-length",
  "transfer-encoding",
  "host",
  "connection",
  SignatureHeader.toLowerCase(),
  TimestampHeader.toLowerCase(),
  ...Topic.metadataHeaders.map((name) => name.toLowerCase())
])

/**
 * The problems of a set of configured headers (empty when valid): names must be HTTP tokens, values must
 * not hold CR, LF or NUL, and headers the sink sets itself are refused. Values are never quoted.
 *
 * @since 0.1.0
 */
export const headerProblems = (headers: Readonly<Record<string, string>>): ReadonlyArray<string> =>
  Object.entries(headers).flatMap(([name, value]) => {
    if (!headerName.test(name)) return [`header name ${JSON.stringify(name)} is not a valid HTTP header name`]
    if (/[\r\n\0]/.test(value)) return [`header ${name} has a value with CR, LF or NUL`]
    if (reservedHeaders.has(name.toLowerCase())) return [`header ${name} is set by the sink and cannot be configured`]
    return []
  })

/**
 * Whether a URL host names a link-local address (169.254.0.0/16, fe80::/10) or a cloud metadata endpoint
 * (`metadata.google.internal`, `metadata`, `fd00:ec2::254`, `100.100.100.200`). Literal addresses only: a
 * name is not resolved.
 *
 * @since 0.1.0
 */
export const isLinkLocalOrMetadata = (hostname: string): boolean => {
  const host = hostname
    .toLowerCase()
    .replace(/^\[|\]$/g, "")
    .replace(/\.$/, "")
  if (host === "metadata.google.internal" || host === "metadata" || host === "100.100.100.200") return true
  if (/^169\.254\.\d{1,3}\.\d{1,3}$/.test(host)) return true
  if (/^fe[89ab][0-9a-f]?:/.test(host)) return true
  if (host === "fd00:ec2::254") return true
  // IPv4-mapped IPv6 (::ffff:169.254.169.254 is written ::ffff:a9fe:a9fe by the URL parser)
  return /^::ffff:a9fe:[0-9a-f]{1,4}$/.test(host)
}

/**
 * The origin of a URL (`scheme://host[:port]`, lower case, default port omitted), or `undefined` when it
 * does not parse as an http(s) URL.
 *
 * @since 0.1.0
 */
export const originOf = (text: string): string | undefined => {
  try {
    const url = new URL(text)
    return url.protocol === "http:" || url.protocol === "https:" ? url.origin : undefined
  } catch {
    return undefined
  }
}

interface Target {
  /** The URL requested (without userinfo). */
  readonly url: string
  /** The URL for logs and messages. */
  readonly redacted: string
  /** `scheme://host[:port]` of the URL. */
  readonly origin: string
  /** The host name of the URL (brackets kept for IPv6). */
  readonly hostname: string
  /** `host[:port]` of the URL, for messages. */
  readonly host: string
  readonly authorization: Option.Option<string>
  readonly scrub: (text: string) => string
}

/** Parses a destination URL; userinfo becomes a Basic `Authorization` value. */
const parseTarget = (text: string): Either.Either<Target, string> => {
  let parsed: URL
  try {
    parsed = new URL(text)
  } catch {
    return Either.left(`${Redact.url(text)} is not a URL`)
  }
  const redacted = Redact.url(text)
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    return Either.left(`${redacted} is not an http:// or https:// URL`)
  }
  const authorization =
    parsed.username === "" && parsed.password === ""
      ? Option.none()
      : Option.some(
          `Basic ${Buffer.from(`${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}`).toString("base64")}`
        )
  parsed.username = ""
  parsed.password = ""
  return Either.right({
    url: parsed.href,
    redacted,
    origin: parsed.origin,
    hostname: parsed.hostname,
    host: parsed.host,
    authorization,
    scrub: Redact.scrubber(text, parsed.href)
  })
}

const hasHeader = (headers: Readonly<Record<string, string>>, name: string): boolean =>
  Object.keys(headers).some((key) => key.toLowerCase() === name)

/** How much of a response is read and how long a Retry-After may pause a partition. */
interface Limits {
  readonly bodyTimeout: Duration.Duration
  readonly maxBodyBytes: number
  readonly maxRetryAfterMillis: number
}

const permanent = (code: string, message: string) => new SendError({ retryable: false, code, message })

/** Reads at most `maxBodyBytes` within `bodyTimeout`; the connection is dropped when more remains. */
const readPrefix = (
  { bodyTimeout, maxBodyBytes }: Limits,
  response: HttpClientResponse.HttpClientResponse
): Effect.Effect<Option.Option<Uint8Array>> =>
  response.stream.pipe(
    Stream.runFoldWhile(
      { chunks: new Array<Uint8Array>(), size: 0 },
      (state) => state.size < maxBodyBytes,
      (state, chunk) => {
        state.chunks.push(chunk)
        return { chunks: state.chunks, size: state.size + chunk.length }
      }
    ),
    Effect.map((state) => Buffer.concat(state.chunks).subarray(0, maxBodyBytes)),
    Effect.timeout(bodyTimeout),
    Effect.option
  )

/** A scrubbed excerpt of a response body for error messages. */
const excerpt = (body: Option.Option<Uint8Array>, target: Target): string =>
  Option.match(body, {
    onNone: () => "",
    onSome: (bytes) => {
      const text = target.scrub(Buffer.from(bytes).toString("utf8").replace(/\s+/g, " ").trim())
      if (text.length === 0) return ""
      return `: ${text.length > 200 ? `${text.slice(0, 200)}…` : text}`
    }
  })

/** Delivered on a 2xx status line; a redirect or retryable status is transient, any other permanent. */
const classifyResponse = (
  limits: Limits,
  response: HttpClientResponse.HttpClientResponse,
  target: Target
): Effect.Effect<void, SendError> =>
  Effect.gen(function* () {
    const status = response.status
    const body = yield* readPrefix(limits, response)
    if (status >= 200 && status < 300) return
    const code = `http-${status}`
    const answered = `webhook ${target.redacted} answered ${status}${excerpt(body, target)}`
    if (status >= 300 && status < 400) {
      const location = Option.getOrUndefined(Headers.get(response.headers, "location"))
      const redactedLocation = location === undefined ? "(no location)" : Redact.url(resolve(location, target.url))
      yield* Effect.logWarning("webhook answered a redirect; redirects are not followed, fix the URL").pipe(
        Effect.annotateLogs({ url: target.redacted, status, location: redactedLocation })
      )
      return yield* new SendError({
        retryable: true,
        code,
        message: `webhook ${target.redacted} redirected (${status}) to ${redactedLocation}; not followed`
      })
    }
    if (!isRetryableStatus(status)) return yield* permanent(code, answered)
    const now = yield* Clock.currentTimeMillis
    const asked = parseRetryAfter(Option.getOrUndefined(Headers.get(response.headers, "retry-after")), now)
    if (asked !== undefined && asked > limits.maxRetryAfterMillis) {
      yield* Effect.logWarning("webhook Retry-After above the cap; capped").pipe(
        Effect.annotateLogs({
          url: target.redacted,
          status,
          retryAfterMillis: asked,
          capMillis: limits.maxRetryAfterMillis
        })
      )
    }
    const retryAfterMillis = asked === undefined ? undefined : Math.min(asked, limits.maxRetryAfterMillis)
    return yield* new SendError({
      retryable: true,
      code,
      message: answered,
      ...(retryAfterMillis !== undefined ? { retryAfterMillis } : {})
    })
  })

/** Transport failures are transient; a request that cannot be encoded or addressed is permanent. */
const classifyError = (error: HttpClientError.HttpClientError, target: Target): SendError => {
  const cause = "cause" in error && error.cause !== undefined ? causeText(error.cause) : error.reason
  const message = `webhook ${target.redacted}: ${target.scrub(cause)}`
  if (error._tag === "RequestError") {
    return error.reason === "Transport"
      ? new SendError({ retryable: true, code: "connection", message })
      : permanent(error.reason === "Encode" ? "encode" : "invalid-url", message)
  }
  return new SendError({ retryable: true, code: "response", message })
}

/** The request with the timestamp and signature headers when a secret is configured. */
const signed = (secret: Option.Option<string>, request: HttpClientRequest.HttpClientRequest, body: string) =>
  Option.match(secret, {
    onNone: () => Effect.succeed(request),
    onSome: (key) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const timestamp = Math.floor(now / 1000)
        return HttpClientRequest.setHeaders(request, {
          [TimestampHeader]: String(timestamp),
          [SignatureHeader]: sign(key, timestamp, body)
        })
      })
  })

/**
 * Builds the sink from the `HttpClient` in context; fails with `InvalidConfiguration` for an invalid
 * URL or header, or a URL with userinfo together with a configured `Authorization` header.
 *
 * @since 0.1.0
 */
export const make = (
  options: WebhookSinkOptions = {}
): Effect.Effect<Sink["Type"], InvalidConfiguration, HttpClient.HttpClient> =>
  Effect.gen(function* () {
    const client = yield* HttpClient.HttpClient
    const timeout = Duration.decode(options.timeout ?? "10 seconds")
    const bodyTimeout = Duration.decode(options.bodyTimeout ?? "2 seconds")
    const maxBodyBytes = Math.max(0, Math.floor(options.maxBodyBytes ?? DefaultMaxBodyBytes))
    const maxRetryAfterMillis = Duration.toMillis(options.maxRetryAfter ?? DefaultMaxRetryAfter)
    const limits: Limits = { bodyTimeout, maxBodyBytes, maxRetryAfterMillis }
    const extra = options.headers ?? {}
    const secret = Option.map(Option.fromNullable(options.signingSecret), (value) =>
      typeof value === "string" ? value : Redacted.value(value)
    )
    const configuredAuthorization = hasHeader(extra, "authorization")

    const problems = [...headerProblems(extra)]
    const fixed = Option.flatMap(Option.fromNullable(options.url), (url) =>
      Either.match(parseTarget(url), {
        onLeft: (problem) => {
          problems.push(problem)
          return Option.none()
        },
        onRight: (target) => {
          if (Option.isSome(target.authorization) && configuredAuthorization) {
            problems.push(`${target.redacted} has credentials and an Authorization header is configured too`)
          }
          return Option.some(target)
        }
      })
    )
    if (Option.isSome(secret) && secret.value.length === 0) problems.push("the signing secret is empty")
    const allowedOrigins = new Set<string>()
    for (const origin of options.allowedOrigins ?? []) {
      const parsed = originOf(origin)
      if (parsed === undefined) problems.push(`allowed origin ${Redact.url(origin)} is not an http:// or https:// URL`)
      else allowedOrigins.add(parsed)
    }
    const carriesCredentials = Object.keys(extra).length > 0 || Option.isSome(secret)
    const anyOrigin = options.allowedOrigins === undefined && !carriesCredentials
    if (problems.length > 0) return yield* new InvalidConfiguration({ component: "WebhookSink", problems })

    const targetOf = (record: OutboxRecord): Either.Either<Target, SendError> => {
      if (Option.isSome(fixed)) return Either.right(fixed.value)
      if (record.address.length === 0) {
        return Either.left(permanent("no-address", `record ${record.id} has no address`))
      }
      return parseTarget(record.address).pipe(
        Either.mapLeft((problem) => permanent("invalid-url", `record ${record.id}: ${problem}`)),
        Either.filterOrLeft(
          (target) => allowedOrigins.has(target.origin) || (anyOrigin && !isLinkLocalOrMetadata(target.hostname)),
          (target) =>
            permanent(
              "origin-not-allowed",
              `record ${record.id}: host ${target.host} is not an allowed webhook origin` +
                (isLinkLocalOrMetadata(target.hostname)
                  ? " (link-local and metadata addresses must be listed explicitly)"
                  : anyOrigin
                    ? ""
                    : " (allowed origins: sink url, allowedOrigins)")
            )
        ),
        Either.filterOrLeft(
          (target) => Option.isNone(target.authorization) || !configuredAuthorization,
          (target) =>
            permanent(
              "invalid-url",
              `record ${record.id}: ${target.redacted} has credentials and an Authorization header is configured too`
            )
        )
      )
    }

    const send = (record: OutboxRecord): Effect.Effect<void, SendError> =>
      Either.match(targetOf(record), {
        onLeft: (error) => Effect.fail(error),
        onRight: (target) =>
          Effect.gen(function* () {
            const body = RecordJson.encode(record)
            const base = HttpClientRequest.post(target.url).pipe(
              HttpClientRequest.setHeaders(extra),
              HttpClientRequest.setHeader("Idempotency-Key", record.id),
              HttpClientRequest.setHeaders(Topic.wireHeaders(record)),
              HttpClientRequest.bodyText(body, "application/json")
            )
            const authorized = Option.match(target.authorization, {
              onNone: () => base,
              onSome: (value) => HttpClientRequest.setHeader(base, "Authorization", value)
            })
            const request = yield* signed(secret, authorized, body)
            const response = yield* client.execute(request).pipe(
              Effect.mapError((error) => classifyError(error, target)),
              Effect.timeoutFail({
                duration: timeout,
                onTimeout: () =>
                  new SendError({
                    retryable: true,
                    code: "timeout",
                    message: `webhook ${target.redacted} did not answer within ${Duration.format(timeout)}`
                  })
              })
            )
            return yield* classifyResponse(limits, response, target)
          })
      })
    return Sink.of({ send })
  })

const resolve = (location: string, base: string): string => {
  try {
    return new URL(location, base).href
  } catch {
    return location
  }
}

const causeText = (cause: unknown): string => {
  if (cause instanceof Error) {
    const inner = "cause" in cause && cause.cause instanceof Error ? ` (${cause.cause.message})` : ""
    return `${cause.message}${inner}`
  }
  return String(cause)
}

/**
 * The webhook sink with options; requires an `HttpClient` (e.g. `NodeHttpClient.layerUndici`).
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: WebhookSinkOptions
): Layer.Layer<Sink, InvalidConfiguration, HttpClient.HttpClient> => Layer.effect(Sink, make(options))

/**
 * The webhook sink posting to each record's `address`.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<Sink, InvalidConfiguration, HttpClient.HttpClient> = layerWith({})
