/**
 * The webhook receiver (SPEC §12) behind a real HTTP server on 127.0.0.1, fed by the real WebhookSink, with
 * the inbox on SQLite: duplicates processed once, a retryable failure answered 503 + Retry-After and then
 * processed, a permanent failure refused for good (4xx, permanent at the sink), a crash between the handler
 * and the commit rolled back and processed once on the retry, stale messages settled without running; and
 * hostile requests (no signature, a wrong secret, a replayed old timestamp, an oversize body declared or
 * streamed, a garbage body) refused before the handler runs.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpServer from "@effect/platform/HttpServer"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"
import type { OutboxRecord } from "../src/domain/OutboxRecord.js"
import * as RecordJson from "../src/layers/sinks/RecordJson.js"
import type * as Receiver from "../src/layers/sinks/Receiver.js"
import * as WebhookReceiver from "../src/layers/sinks/WebhookReceiver.js"
import * as WebhookSink from "../src/layers/sinks/WebhookSink.js"
import { InboxStore } from "../src/services/InboxStore.js"
import { inboxOn, type Order, OrderPlaced, ordersSeen, recordOf, scriptedHandler } from "./support/ReceiverFixtures.js"

const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-webhook-receiver-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))

const secret = "s3cret-webhook-key"
let files = 0

interface Setup {
  readonly failures?: Map<string, number>
  readonly permanent?: ReadonlySet<string>
  readonly dieAfterWrite?: Set<string>
  readonly maxBodyBytes?: number
}

/**
 * Serves the receiver on `POST /hook` of a loopback server over a fresh SQLite inbox and runs `use` with the
 * URL, the handler's run counts and the rejections.
 */
const withReceiver = <A, E>(
  setup: Setup,
  use: (
    url: string,
    runs: Map<string, number>,
    rejected: Array<Receiver.Rejection>
  ) => Effect.Effect<A, E, InboxStore | SqlClient.SqlClient>
) => {
  const { handler, runs } = scriptedHandler(setup)
  const rejected: Array<Receiver.Rejection> = []
  const file = path.join(directory, `inbox-${files++}.db`)
  const served = Layer.unwrapEffect(
    Effect.map(
      WebhookReceiver.router("/hook", {
        consumer: "billing",
        topic: OrderPlaced,
        handler: (order: Order) => handler(order),
        signingSecret: secret,
        retryAfter: "1 second",
        maxBodyBytes: setup.maxBodyBytes,
        onReject: (rejection) => Effect.sync(() => void rejected.push(rejection))
      }),
      (router) => HttpServer.serve(router)
    )
  )
  const layer = Layer.mergeAll(served, HttpServer.layerContext).pipe(
    Layer.provideMerge(NodeHttpServer.layer(() => http.createServer(), { port: 0, host: "127.0.0.1" })),
    Layer.provideMerge(inboxOn(file))
  )
  return Effect.gen(function* () {
    const server = yield* HttpServer.HttpServer
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    return yield* use(`http://127.0.0.1:${port}/hook`, runs, rejected)
  }).pipe(Effect.provide(layer))
}

/** The webhook sink posting to `url` with `signingSecret`. */
const sinkSend = (url: string, record: OutboxRecord, signingSecret = secret) =>
  Effect.gen(function* () {
    const sink = yield* WebhookSink.make({ url, signingSecret, maxRetryAfter: "30 seconds" })
    return yield* Effect.either(sink.send(record))
  }).pipe(Effect.provide(NodeHttpClient.layerUndici), Effect.orDie)

/** A raw POST with the given headers and body; answers the status and the headers. */
const post = (url: string, headers: Record<string, string>, body: string | ReadonlyArray<Buffer>) =>
  Effect.async<{ readonly status: number; readonly headers: http.IncomingHttpHeaders }>((resume) => {
    const request = http.request(url, { method: "POST", headers }, (response) => {
      response.resume()
      response.on("end", () => resume(Effect.succeed({ status: response.statusCode ?? 0, headers: response.headers })))
    })
    // a connection the server dropped: status 0
    request.on("error", () => resume(Effect.succeed({ status: 0, headers: {} })))
    if (typeof body === "string") request.end(body)
    else {
      for (const chunk of body) request.write(chunk)
      request.end()
    }
  })

/** The signature headers of `body` at `timestamp` (unix seconds). */
const signedHeaders = (body: string, timestamp: number, key = secret): Record<string, string> => ({
  "content-type": "application/json",
  [WebhookSink.TimestampHeader]: String(timestamp),
  [WebhookSink.SignatureHeader]: WebhookSink.sign(key, timestamp, body)
})

const nowSeconds = () => Math.floor(Date.now() / 1000)

const order = (orderId: string, n: number, customer = "ada"): Order => ({ orderId, customer, n })

describe("WebhookReceiver", () => {
  it.live("R-INBOX receiver: the same record delivered twice by the sink is processed once (2xx both times)", () =>
    withReceiver({}, (url, runs) =>
      Effect.gen(function* () {
        const record = recordOf(order("o-1", 1), 1)
        const first = yield* sinkSend(url, record)
        const again = yield* sinkSend(url, record)
        expect(first._tag).toBe("Right")
        expect(again._tag).toBe("Right")
        expect(runs.get("o-1")).toBe(1)
        expect(yield* ordersSeen).toEqual([{ order_id: "o-1", customer: "ada", n: 1 }])
      })
    )
  )

  it.live(
    "R-INBOX receiver: a retryable handler failure is 503 with Retry-After (transient at the sink), then processed",
    () =>
      withReceiver({ failures: new Map([["o-2", 2]]) }, (url, runs) =>
        Effect.gen(function* () {
          const record = recordOf(order("o-2", 2), 1)
          const first = yield* sinkSend(url, record)
          expect(first._tag).toBe("Left")
          if (first._tag === "Left") {
            expect(first.left.retryable).toBe(true)
            expect(first.left.code).toBe("http-503")
            expect(first.left.retryAfterMillis).toBe(1000)
          }
          expect((yield* sinkSend(url, record))._tag).toBe("Left")
          expect(yield* ordersSeen).toEqual([])
          expect((yield* sinkSend(url, record))._tag).toBe("Right")
          expect(runs.get("o-2")).toBe(3)
          expect(yield* ordersSeen).toEqual([{ order_id: "o-2", customer: "ada", n: 2 }])
        })
      )
  )

  it.live(
    "R-INBOX receiver: a permanent handler failure is 422 (permanent at the sink), passed to onReject, not recorded",
    () =>
      withReceiver({ permanent: new Set(["o-3"]) }, (url, runs, rejected) =>
        Effect.gen(function* () {
          const result = yield* sinkSend(url, recordOf(order("o-3", 3), 1))
          expect(result._tag).toBe("Left")
          if (result._tag === "Left") {
            expect(result.left.retryable).toBe(false)
            expect(result.left.code).toBe("http-422")
          }
          expect(runs.get("o-3")).toBe(1)
          expect(rejected.map((r) => r.messageId)).toEqual(["rec-o-3"])
          expect(rejected[0]?.reason).toContain("order o-3 is refused")
          const store = yield* InboxStore
          expect(yield* store.isProcessed("billing", "rec-o-3")).toBe(false)
          expect(yield* ordersSeen).toEqual([])
        })
      )
  )

  it.live(
    "R-INBOX receiver: a crash after the handler's write and before the commit rolls back; the retry processes it once",
    () =>
      withReceiver({ dieAfterWrite: new Set(["o-4"]) }, (url, runs) =>
        Effect.gen(function* () {
          const record = recordOf(order("o-4", 4), 1)
          const first = yield* sinkSend(url, record)
          expect(first._tag === "Left" && first.left.code === "http-503").toBe(true)
          expect(yield* ordersSeen).toEqual([])
          expect((yield* sinkSend(url, record))._tag).toBe("Right")
          expect((yield* sinkSend(url, record))._tag).toBe("Right")
          expect(runs.get("o-4")).toBe(2)
          expect(yield* ordersSeen).toEqual([{ order_id: "o-4", customer: "ada", n: 4 }])
        })
      )
  )

  it.live("R-INBOX receiver: an older message of a key after a newer one is Stale: 2xx, handler not run", () =>
    withReceiver({}, (url, runs) =>
      Effect.gen(function* () {
        expect((yield* sinkSend(url, recordOf(order("o-6", 6), 6)))._tag).toBe("Right")
        expect((yield* sinkSend(url, recordOf(order("o-5", 5), 5)))._tag).toBe("Right")
        expect(runs.has("o-5")).toBe(false)
        expect((yield* ordersSeen).map((row) => row.order_id)).toEqual(["o-6"])
      })
    )
  )

  it.live("hostile: unsigned requests, a wrong secret and a forged signature are 401; nothing runs", () =>
    withReceiver({}, (url, runs) =>
      Effect.gen(function* () {
        const body = RecordJson.encode(recordOf(order("o-7", 7), 1))
        expect((yield* post(url, { "content-type": "application/json" }, body)).status).toBe(401)
        const wrong = yield* sinkSend(url, recordOf(order("o-7", 7), 1), "another-secret")
        expect(wrong._tag === "Left" && wrong.left.code === "http-401" && !wrong.left.retryable).toBe(true)
        const ts = nowSeconds()
        const forged = { ...signedHeaders(body, ts), [WebhookSink.SignatureHeader]: `sha256=${"0".repeat(64)}` }
        expect((yield* post(url, forged, body)).status).toBe(401)
        // a valid signature of another body
        const tampered = body.replace('"seq":1', '"seq":2')
        expect(tampered).not.toBe(body)
        expect((yield* post(url, signedHeaders(body, ts), tampered)).status).toBe(401)
        expect(
          (yield* post(url, { ...signedHeaders(body, ts), [WebhookSink.TimestampHeader]: "soon" }, body)).status
        ).toBe(401)
        expect(runs.size).toBe(0)
        expect(yield* ordersSeen).toEqual([])
      })
    )
  )

  it.live("hostile: a replayed request with an old (or future) timestamp is 401 although its signature is valid", () =>
    withReceiver({}, (url, runs) =>
      Effect.gen(function* () {
        const body = RecordJson.encode(recordOf(order("o-8", 8), 1))
        const old = nowSeconds() - 10 * 60
        expect((yield* post(url, signedHeaders(body, old), body)).status).toBe(401)
        const future = nowSeconds() + 10 * 60
        expect((yield* post(url, signedHeaders(body, future), body)).status).toBe(401)
        expect((yield* post(url, signedHeaders(body, nowSeconds()), body)).status).toBe(200)
        expect(runs.get("o-8")).toBe(1)
      })
    )
  )

  it.live("hostile: a body over maxBodyBytes is 413 when declared, cut off when streamed chunked; nothing runs", () =>
    withReceiver({ maxBodyBytes: 4096 }, (url, runs) =>
      Effect.gen(function* () {
        const big = "x".repeat(10_000)
        const declared = yield* post(url, signedHeaders(big, nowSeconds()), big)
        expect(declared.status).toBe(413)
        const chunks = Array.from({ length: 10 }, () => Buffer.from("y".repeat(1000)))
        const streamed = yield* post(
          url,
          { ...signedHeaders("y".repeat(10_000), nowSeconds()), "transfer-encoding": "chunked" },
          chunks
        )
        // the stream is cut off once it passes the bound: a 413, or the connection dropped while sending
        expect([413, 0]).toContain(streamed.status)
        expect(runs.size).toBe(0)
      })
    )
  )

  it.live("hostile: a signed garbage body is 400 (a DecodeError, permanent at the sink); the handler never runs", () =>
    withReceiver({}, (url, runs, rejected) =>
      Effect.gen(function* () {
        for (const body of ["not json", "{}", JSON.stringify({ id: "x", payload: 5 })]) {
          expect((yield* post(url, signedHeaders(body, nowSeconds()), body)).status).toBe(400)
        }
        expect(runs.size).toBe(0)
        expect(rejected.length).toBe(3)
        expect(rejected.every((r) => r.decodeError !== undefined)).toBe(true)
      })
    )
  )

  it.effect("an empty secret or consumer is InvalidConfiguration naming both, never the value", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        WebhookReceiver.make({
          consumer: "",
          topic: OrderPlaced,
          handler: () => Effect.void,
          signingSecret: "",
          maxBodyBytes: -1
        })
      )
      expect(error._tag).toBe("InvalidConfiguration")
      expect(error.problems).toEqual([
        "the consumer name must be a non-empty string",
        "the signing secret is empty",
        "maxBodyBytes must be a positive integer"
      ])
    })
  )
})
