/**
 * What every request to the operations endpoint passes before a route sees it (SPEC §10):
 *
 * - The `Host` header must name a loopback host (`localhost`, `127.x.x.x`, `[::1]`) or one of the
 *   configured hosts, else 421 — checked first, so a page under another name that resolves to 127.0.0.1
 *   (DNS rebinding) reads and changes nothing.
 * - Request bodies are read as a stream and counted: one over `maxBodyBytes` (default 1 MiB) is 413, and
 *   nothing past the limit is kept in memory.
 * - A failure no route answered for is a 500 with a fixed body, logged at ERROR with its cause; an unknown
 *   path stays 404.
 *
 * @since 0.1.0
 */
import type * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"

/**
 * The default largest request body: 1 MiB.
 *
 * @since 0.1.0
 */
export const DefaultMaxBodyBytes = 1024 * 1024

const noStore = { "cache-control": "no-store" }

const failure = (status: number, error: string) =>
  HttpServerResponse.unsafeJson({ error }, { status, headers: noStore })

/** The host name of a `Host` header value, lower case, without the port (IPv6 keeps its brackets). */
const hostName = (host: string): string => {
  const value = host.trim().toLowerCase()
  if (value.startsWith("[")) {
    const end = value.indexOf("]")
    return end < 0 ? value : value.slice(0, end + 1)
  }
  const colon = value.lastIndexOf(":")
  return colon < 0 ? value : value.slice(0, colon)
}

/**
 * Whether a `Host` header value is accepted: a loopback name (`localhost`, `127.x.x.x`, `[::1]`, any
 * port) or one of `allowed` (a bare name matches any port; `name:port` only that port). Case-insensitive.
 *
 * @since 0.1.0
 */
export const isAllowedHost = (host: string | undefined, allowed: ReadonlyArray<string> = []): boolean => {
  if (host === undefined || host.length === 0) return false
  const name = hostName(host)
  if (name === "localhost" || name === "[::1]" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name)) return true
  const full = host.trim().toLowerCase()
  return allowed.some((entry) => {
    const wanted = entry.trim().toLowerCase()
    return wanted === full || wanted === name || `[${wanted}]` === name
  })
}

/**
 * Wraps the operations app: the `Host` check before anything else (421), and a logged 500 for any
 * failure no route answered for (404 for an unknown path).
 *
 * @since 0.1.0
 */
export const guard =
  (allowedHosts: ReadonlyArray<string> = []) =>
  <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R | HttpServerRequest.HttpServerRequest> =>
    Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      if (!isAllowedHost(request.headers["host"], allowedHosts)) {
        return failure(421, "misdirected request: the Host header names neither a loopback host nor a configured host")
      }
      return yield* app.pipe(
        Effect.catchAllCause((cause) => {
          if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause)
          const error = Cause.failureOption(cause)
          if (Option.isSome(error) && isRouteNotFound(error.value)) return Effect.succeed(failure(404, "not found"))
          return Effect.as(
            Effect.logError("operations endpoint request failed", cause).pipe(
              Effect.annotateLogs({ method: request.method, path: pathOf(request.url) })
            ),
            failure(500, "internal error (logged by the relay)")
          )
        })
      )
    })

const isRouteNotFound = (error: unknown): boolean =>
  typeof error === "object" && error !== null && Reflect.get(error, "_tag") === "RouteNotFound"

const pathOf = (url: string): string => {
  const query = url.indexOf("?")
  return query < 0 ? url : url.slice(0, query)
}

/**
 * Why a body was not decoded: over the size limit, or not the expected JSON.
 *
 * @since 0.1.0
 */
export type BodyProblem = "too-large" | "invalid"

/**
 * Reads the request body as JSON decoded with `schema` (excess properties are an error), counting bytes
 * as they arrive: a declared size over `maxBytes` is `too-large` at once; an undeclared (chunked) body is
 * kept only up to `maxBytes`, the rest is counted and dropped, and it is then `too-large`.
 *
 * @since 0.1.0
 */
export const jsonBody = <A, I>(
  schema: Schema.Schema<A, I>,
  maxBytes: number = DefaultMaxBodyBytes
): Effect.Effect<Either.Either<A, BodyProblem>, never, HttpServerRequest.HttpServerRequest> =>
  Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const declared = Number(request.headers["content-length"] ?? "0")
    if (Number.isFinite(declared) && declared > maxBytes) return Either.left<BodyProblem>("too-large")
    // past the limit the rest is read and dropped (closing the stream early would close the connection
    // before the 413 is written): memory stays bounded by the limit
    const read = yield* request.stream.pipe(
      Stream.runFold({ chunks: new Array<Uint8Array>(), size: 0 }, (state, chunk) => {
        const size = state.size + chunk.length
        if (size <= maxBytes) state.chunks.push(chunk)
        return { chunks: state.chunks, size }
      }),
      Effect.either
    )
    if (Either.isLeft(read)) return Either.left<BodyProblem>("invalid")
    if (read.right.size > maxBytes) return Either.left<BodyProblem>("too-large")
    const text = Buffer.concat(read.right.chunks).toString("utf8")
    return Schema.decodeUnknownEither(Schema.parseJson(schema), { onExcessProperty: "error" })(text).pipe(
      Either.mapLeft((): BodyProblem => "invalid")
    )
  })

/**
 * The response for a body problem: 413 naming the limit, or 400 with `invalid`.
 *
 * @since 0.1.0
 */
export const bodyFailure = (problem: BodyProblem, maxBytes: number, invalid: string) =>
  problem === "too-large" ? failure(413, `request body over ${maxBytes} bytes`) : failure(400, invalid)
