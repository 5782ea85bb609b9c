import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { OutboxRecord } from "../src/domain/OutboxRecord.js"
import * as MemorySink from "../src/layers/sinks/MemorySink.js"
import * as StdoutSink from "../src/layers/sinks/StdoutSink.js"
import * as WebhookSink from "../src/layers/sinks/WebhookSink.js"
import { Sink } from "../src/services/Sink.js"

interface Received {
  readonly method: string | undefined
  readonly headers: IncomingMessage["headers"]
  readonly body: string
}

type Handler = (req: IncomingMessage, res: ServerResponse) => void

/** A loopback-only HTTP server whose handler is chosen per test; records every request. */
const withServer = <A, E>(
  handler: Handler,
  use: (url: string, received: Array<Received>) => Effect.Effect<A, E>
): Effect.Effect<A, E> =>
  Effect.acquireUseRelease(
    Effect.async<{ server: Server; received: Array<Received> }>((resume) => {
      const received: Array<Received> = []
      const server = createServer((req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          received.push({ method: req.method, headers: req.headers, body: Buffer.concat(chunks).toString("utf8") })
          handler(req, res)
        })
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ server, received })))
    }),
    ({ received, server }) => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? (address satisfies AddressInfo).port : 0
      return use(`http://127.0.0.1:${port}/hook`, received)
    },
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )

const record = new OutboxRecord({
  id: "rec-1",
  partitionKey: "p1",
  envelopeId: "env-1",
  bindingId: "b-1",
  routeId: "route-a",
  address: "",
  payload: new TextEncoder().encode("hello"),
  headers: { "x-trace": "t1" },
  orderingKey: Option.some("k1"),
  createdAt: DateTime.unsafeMake(1_700_000_000_000),
  expiresAt: Option.none(),
  seq: 7,
  status: "claimed",
  claimedBy: Option.some("relay-a"),
  claimVersion: 1,
  claimedAt: Option.none(),
  firstAttemptedAt: Option.none(),
  replayCount: 1,
  completedAt: Option.none()
})

const respond =
  (status: number, headers: Record<string, string> = {}): Handler =>
  (_req, res) => {
    res.writeHead(status, headers)
    res.end("body")
  }

const sendVia = (url: string, options: Omit<WebhookSink.WebhookSinkOptions, "url"> = {}) =>
  Effect.gen(function* () {
    const sink = yield* Sink
    return yield* sink.send(record)
  }).pipe(Effect.provide(WebhookSink.layerWith({ url, ...options })), Effect.provide(NodeHttpClient.layerUndici))

describe("WebhookSink", () => {
  it.live("POSTs the record as JSON with Idempotency-Key = record id and accepts 2xx", () =>
    withServer(respond(204), (url, received) =>
      Effect.gen(function* () {
        yield* sendVia(url, { headers: { authorization: "Bearer test" } })
        expect(received).toHaveLength(1)
        const request = received[0]
        expect(request?.method).toBe("POST")
        expect(request?.headers["idempotency-key"]).toBe("rec-1")
        expect(request?.headers["content-type"]).toContain("application/json")
        expect(request?.headers["authorization"]).toBe("Bearer test")
        const body: unknown = JSON.parse(request?.body ?? "null")
        expect(body).toMatchObject({
          id: "rec-1",
          partitionKey: "p1",
          envelopeId: "env-1",
          bindingId: "b-1",
          orderingKey: "k1",
          seq: 7,
          headers: { "x-trace": "t1" },
          payload: Buffer.from("hello").toString("base64"),
          createdAt: "2023-11-14T22:13:20.000Z"
        })
      })
    )
  )

  it.live("classifies 408, 429 and 5xx as retryable", () =>
    Effect.forEach([408, 429, 500, 502, 503], (status) =>
      withServer(respond(status), (url) =>
        Effect.gen(function* () {
          const error = yield* Effect.flip(sendVia(url))
          expect(error.retryable).toBe(true)
          expect(error.code).toBe(`http-${status}`)
        })
      )
    )
  )

  it.live("classifies other 4xx (and redirects) as permanent", () =>
    Effect.forEach([400, 401, 403, 404, 409, 422, 301], (status) =>
      withServer(respond(status, status === 301 ? { location: "http://127.0.0.1:1/elsewhere" } : {}), (url) =>
        Effect.gen(function* () {
          const error = yield* Effect.flip(sendVia(url))
          expect(error.retryable).toBe(false)
          expect(error.code).toBe(`http-${status}`)
        })
      )
    )
  )

  it.live("honours Retry-After in seconds as a minimum backoff", () =>
    withServer(respond(503, { "retry-after": "7" }), (url) =>
      Effect.gen(function* () {
        const error = yield* Effect.flip(sendVia(url))
        expect(error.retryable).toBe(true)
        expect(error.retryAfterMillis).toBe(7000)
      })
    )
  )

  it.live("honours Retry-After given as an HTTP date", () =>
    Effect.gen(function* () {
      const now = yield* DateTime.now
      const at = new Date(DateTime.toEpochMillis(now) + 120_000).toUTCString()
      yield* withServer(respond(429, { "retry-after": at }), (url) =>
        Effect.gen(function* () {
          const error = yield* Effect.flip(sendVia(url))
          expect(error.retryable).toBe(true)
          expect(error.retryAfterMillis).toBeGreaterThan(100_000)
          expect(error.retryAfterMillis).toBeLessThanOrEqual(120_000)
        })
      )
    })
  )

  it.live("a server that never answers is a retryable timeout", () =>
    withServer(
      () => {
        // never respond
      },
      (url) =>
        Effect.gen(function* () {
          const error = yield* Effect.flip(sendVia(url, { timeout: "200 millis" }))
          expect(error.retryable).toBe(true)
          expect(error.code).toBe("timeout")
        })
    )
  )

  it.live("a refused connection is retryable", () =>
    Effect.gen(function* () {
      // bind and close a port so nothing listens on it
      const url = yield* withServer(respond(200), (u) => Effect.succeed(u))
      const error = yield* Effect.flip(sendVia(url))
      expect(error.retryable).toBe(true)
      expect(error.code).toBe("connection")
    })
  )

  it.live("without a configured url the record's address is used; an empty address is permanent", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        Effect.flatMap(Sink, (sink) => sink.send(record)).pipe(
          Effect.provide(WebhookSink.layer),
          Effect.provide(NodeHttpClient.layerUndici)
        )
      )
      expect(error.retryable).toBe(false)
      expect(error.code).toBe("no-address")
    })
  )

  it("parseRetryAfter handles seconds, dates and garbage", () => {
    expect(WebhookSink.parseRetryAfter("3", 0)).toBe(3000)
    expect(WebhookSink.parseRetryAfter(undefined, 0)).toBeUndefined()
    expect(WebhookSink.parseRetryAfter("soon", 0)).toBeUndefined()
    expect(WebhookSink.parseRetryAfter(new Date(10_000).toUTCString(), 20_000)).toBe(0)
  })
})

describe("StdoutSink", () => {
  it.effect("writes one JSON line per record and waits for the stream", () =>
    Effect.gen(function* () {
      const lines: Array<string> = []
      const sink = yield* StdoutSink.make({
        stream: {
          write: (chunk, callback) => {
            lines.push(chunk)
            callback()
            return true
          }
        }
      })
      yield* sink.send(record)
      yield* sink.send(record)
      expect(lines).toHaveLength(2)
      expect(lines[0]?.endsWith("\n")).toBe(true)
      const parsed: unknown = JSON.parse(lines[0] ?? "null")
      expect(parsed).toMatchObject({ id: "rec-1", orderingKey: "k1", payload: Buffer.from("hello").toString("base64") })
    })
  )

  it.effect("a write error is a retryable SendError", () =>
    Effect.gen(function* () {
      const sink = yield* StdoutSink.make({
        stream: { write: (_chunk, callback) => callback(new Error("EPIPE")) }
      })
      const error = yield* Effect.flip(sink.send(record))
      expect(error).toMatchObject({ retryable: true, code: "write-failed" })
    })
  )
})

describe("MemorySink", () => {
  it.effect("records deliveries in order and applies scripted failures per record and per call", () =>
    Effect.gen(function* () {
      const recorder = yield* MemorySink.make()
      const other = new OutboxRecord({ ...record, id: "rec-2" })
      yield* recorder.failRecord("rec-1", { failure: "permanent", code: "nope" })
      yield* recorder.failCalls({ failure: "transient", times: 1, retryAfterMillis: 500 })
      const first = yield* Effect.flip(recorder.sink.send(record))
      expect(first).toMatchObject({ retryable: false, code: "nope" })
      const second = yield* Effect.flip(recorder.sink.send(other))
      expect(second).toMatchObject({ retryable: true, retryAfterMillis: 500 })
      yield* recorder.sink.send(other)
      yield* recorder.sink.send(record)
      expect(yield* recorder.deliveredIds).toEqual(["rec-2", "rec-1"])
      expect(yield* recorder.attempts).toEqual(["rec-1", "rec-2", "rec-2", "rec-1"])
    })
  )
})
