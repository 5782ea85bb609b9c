/**
 * The webhook receiver (SPEC §12): a route for `@effect/platform`'s `HttpRouter` that takes the requests the
 * webhook sink POSTs, verifies them before anything else, and processes them through the inbox.
 *
 * In this order, each step answering at once when it fails:
 * 1. `X-Outbox-Timestamp` (unix seconds) must be present and within `tolerance` (default 5 minutes) of the
 *    receiver's clock, and `X-Outbox-Signature` must be present as `sha256=<64 hex>` → else 401 (a replayed
 *    old request is refused here);
 * 2. the body is read up to `maxBodyBytes` (default 1 MiB; a larger `Content-Length` is refused unread)
 *    → else 413;
 * 3. the signature is compared in constant time with HMAC-SHA256(secret, `timestamp + "." + body`), the
 *    scheme of `WebhookSink.sign` → else 401;
 * 4. the body is decoded with `Topic.decode` → a `DecodeError` is 400;
 * 5. `Inbox.process` runs the handler: `Processed`, `Duplicate` and `Stale` are 200; a retryable failure is
 *    503 with `Retry-After` (default 5 s; the sink honours it); a permanent one is 422.
 *
 * The webhook sink treats 503 as transient and every other 4xx as permanent, so the relay retries and
 * dead-letters exactly as the disposition says. Answers never echo the body or the secret.
 *
 * @since 0.2.0
 */
import * as Headers from "@effect/platform/Headers"
import type * as HttpApp from "@effect/platform/HttpApp"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import { createHmac, timingSafeEqual } from "node:crypto"
import { InvalidConfiguration } from "../../domain/OutboxError.js"
import * as Topic from "../../domain/Topic.js"
import type * as Inbox from "../../programs/Inbox.js"
import type { InboxStore } from "../../services/InboxStore.js"
import * as Receiver from "./Receiver.js"

/**
 * Options of the webhook receiver.
 *
 * @since 0.2.0
 */
export interface WebhookReceiverOptions<A, I, B, E, R> extends Receiver.ReceiverOptions<A, I, B, E, R> {
  /** The secret the webhook sink signs with (`signingSecret`); required, never logged. */
  readonly signingSecret: Redacted.Redacted<string> | string
  /** How far `X-Outbox-Timestamp` may be from the receiver's clock, either way (default 5 minutes). */
  readonly tolerance?: Duration.DurationInput | undefined
  /** Largest body accepted (default 1 MiB); larger is 413. */
  readonly maxBodyBytes?: number | undefined
  /** `Retry-After` of a 503 (default 5 seconds; whole seconds, at least 1). */
  readonly retryAfter?: Duration.DurationInput | undefined
}

/**
 * The default timestamp tolerance: 5 minutes.
 *
 * @since 0.2.0
 */
export const DefaultTolerance: Duration.Duration = Duration.minutes(5)

/**
 * The default largest body: 1 MiB.
 *
 * @since 0.2.0
 */
export const DefaultMaxBodyBytes = 1024 * 1024

/**
 * Why a request was refused before its body was decoded.
 *
 * @since 0.2.0
 */
export type Refusal =
  | { readonly _tag: "MissingSignature" }
  | { readonly _tag: "BadTimestamp" }
  | { readonly _tag: "TimestampOutOfTolerance" }
  | { readonly _tag: "BadSignature" }
  | { readonly _tag: "TooLarge" }

const signaturePattern = /^sha256=([0-9a-f]{64})$/

/**
 * Checks the signature headers before the body is read: both present, the timestamp a whole number of
 * seconds within `toleranceMillis` of `nowMillis`, the signature of the form `sha256=<64 hex>`. Answers the
 * timestamp and the signature's bytes.
 *
 * @since 0.2.0
 */
export const checkHeaders = (
  timestampHeader: string | undefined,
  signatureHeader: string | undefined,
  nowMillis: number,
  toleranceMillis: number
): Either.Either<{ readonly timestamp: number; readonly signature: Buffer }, Refusal> => {
  if (timestampHeader === undefined || signatureHeader === undefined) {
    return Either.left({ _tag: "MissingSignature" })
  }
  const text = timestampHeader.trim()
  const timestamp = Number(text)
  if (!/^\d{1,15}$/.test(text) || !Number.isSafeInteger(timestamp)) return Either.left({ _tag: "BadTimestamp" })
  if (Math.abs(nowMillis - timestamp * 1000) > toleranceMillis) {
    return Either.left({ _tag: "TimestampOutOfTolerance" })
  }
  const match = signaturePattern.exec(signatureHeader.trim().toLowerCase())
  if (match === null || match[1] === undefined) return Either.left({ _tag: "BadSignature" })
  return Either.right({ timestamp, signature: Buffer.from(match[1], "hex") })
}

/**
 * Whether `signature` (the 32 bytes of `X-Outbox-Signature`) is HMAC-SHA256(secret, `timestamp + "." +
 * body`), compared in constant time.
 *
 * @since 0.2.0
 */
export const verifySignature = (secret: string, timestamp: number, body: Uint8Array, signature: Buffer): boolean => {
  const expected = createHmac("sha256", secret).update(`${timestamp}.`).update(body).digest()
  return expected.length === signature.length && timingSafeEqual(expected, signature)
}

const refusalAnswer = (refusal: Refusal): HttpServerResponse.HttpServerResponse => {
  switch (refusal._tag) {
    case "TooLarge":
      return HttpServerResponse.unsafeJson({ error: "the body is too large" }, { status: 413 })
    case "MissingSignature":
      return HttpServerResponse.unsafeJson({ error: "the request is not signed" }, { status: 401 })
    case "BadTimestamp":
      return HttpServerResponse.unsafeJson({ error: "the timestamp is malformed" }, { status: 401 })
    case "TimestampOutOfTolerance":
      return HttpServerResponse.unsafeJson({ error: "the timestamp is outside the tolerance" }, { status: 401 })
    case "BadSignature":
      return HttpServerResponse.unsafeJson({ error: "the signature does not match" }, { status: 401 })
  }
}

/** Reads the body up to `max` bytes; `TooLarge` beyond, `undefined` when the stream failed. */
const readBounded = (
  request: HttpServerRequest.HttpServerRequest,
  max: number
): Effect.Effect<Either.Either<Uint8Array, Refusal> | undefined> =>
  request.stream.pipe(
    Stream.runFoldWhile(
      { chunks: new Array<Uint8Array>(), size: 0 },
      (state) => state.size <= max,
      (state, chunk) => {
        state.chunks.push(chunk)
        return { chunks: state.chunks, size: state.size + chunk.length }
      }
    ),
    Effect.map((state): Either.Either<Uint8Array, Refusal> =>
      state.size > max ? Either.left({ _tag: "TooLarge" }) : Either.right(Buffer.concat(state.chunks))
    ),
    Effect.orElseSucceed(() => undefined)
  )

const dispositionAnswer = (
  disposition: Inbox.Disposition,
  retryAfterSeconds: number,
  decodeFailed: boolean
): HttpServerResponse.HttpServerResponse => {
  switch (disposition._tag) {
    case "Settle":
      return HttpServerResponse.unsafeJson({ outcome: disposition.outcome }, { status: 200 })
    case "Retry":
      return HttpServerResponse.unsafeJson(
        { error: "processing failed; retry later" },
        { status: 503, headers: Headers.fromInput({ "retry-after": String(retryAfterSeconds) }) }
      )
    case "Reject":
      return HttpServerResponse.unsafeJson({ error: disposition.reason }, { status: decodeFailed ? 400 : 422 })
  }
}

/**
 * The receiver as an `HttpApp` (the handler of a POST route). Fails with `InvalidConfiguration` for an
 * empty secret or consumer name, a non-positive `maxBodyBytes` or an invalid duration.
 *
 * @since 0.2.0
 */
export const make = <A, I, B, E, R>(
  options: WebhookReceiverOptions<A, I, B, E, R>
): Effect.Effect<HttpApp.Default<never, R | InboxStore | HttpServerRequest.HttpServerRequest>, InvalidConfiguration> =>
  Effect.gen(function* () {
    const secret =
      typeof options.signingSecret === "string" ? options.signingSecret : Redacted.value(options.signingSecret)
    const problems = [...Receiver.optionProblems({ consumer: options.consumer, retryDelay: options.retryAfter })]
    if (typeof secret !== "string" || secret.length === 0) problems.push("the signing secret is empty")
    const maxBodyBytes = options.maxBodyBytes ?? DefaultMaxBodyBytes
    if (!Number.isSafeInteger(maxBodyBytes) || maxBodyBytes <= 0) {
      problems.push("maxBodyBytes must be a positive integer")
    }
    const tolerance = Duration.decodeUnknown(options.tolerance ?? DefaultTolerance)
    if (Option.isNone(tolerance) || !Duration.isFinite(tolerance.value)) {
      problems.push("tolerance must be a finite duration")
    }
    if (problems.length > 0) return yield* new InvalidConfiguration({ component: "WebhookReceiver", problems })
    const toleranceMillis = Option.match(tolerance, { onNone: () => 0, onSome: Duration.toMillis })
    const retryAfterSeconds = Math.max(1, Math.ceil(Duration.toSeconds(options.retryAfter ?? "5 seconds")))

    return Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      const now = yield* Clock.currentTimeMillis
      const header = (name: string) => Option.getOrUndefined(Headers.get(request.headers, name))
      const checked = checkHeaders(header("x-outbox-timestamp"), header("x-outbox-signature"), now, toleranceMillis)
      if (Either.isLeft(checked)) return refusalAnswer(checked.left)
      const declared = header("content-length")
      if (declared !== undefined && /^\d+$/.test(declared.trim()) && Number(declared) > maxBodyBytes) {
        return refusalAnswer({ _tag: "TooLarge" })
      }
      const body = yield* readBounded(request, maxBodyBytes)
      if (body === undefined)
        return HttpServerResponse.unsafeJson({ error: "the body could not be read" }, { status: 400 })
      if (Either.isLeft(body)) return refusalAnswer(body.left)
      if (!verifySignature(secret, checked.right.timestamp, body.right, checked.right.signature)) {
        return refusalAnswer({ _tag: "BadSignature" })
      }
      const decoded = Topic.decode(options.topic, { body: body.right })
      const disposition = yield* Receiver.receive(options, decoded)
      return dispositionAnswer(disposition, retryAfterSeconds, Either.isLeft(decoded))
    })
  })

/**
 * A router with the receiver on `POST path`; concat it with the application's other routes or serve it with
 * `HttpServer.serve`.
 *
 * @since 0.2.0
 */
export const router = <A, I, B, E, R>(
  path: HttpRouter.PathInput,
  options: WebhookReceiverOptions<A, I, B, E, R>
): Effect.Effect<HttpRouter.HttpRouter<never, R | InboxStore>, InvalidConfiguration> =>
  Effect.map(make(options), (app) => HttpRouter.empty.pipe(HttpRouter.post(path, app)))
