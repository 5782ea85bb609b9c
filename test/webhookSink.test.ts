import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { OutboxRecord } from "../src/domain/OutboxRecord.js"
import * as MemorySink from "../src/layers/sinks/MemorySink.js"
import * as Redact from "../src/layers/sinks/Redact.js"
import * as StdoutSink from "../src/layers/sinks/StdoutSink.js"
import * as WebhookSink from "../src/layers/sinks/WebhookSink.js"
import { Sink } from "../src/services/Sink.js"
import { claimedRecord } from "./support/BrokerRelay.js"

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
  }).pipe(
    Effect.provide(WebhookSink.layerWith({ url, ...options })),
    Effect.catchTag("InvalidConfiguration", (error) => Effect.die(error)),
    Effect.provide(NodeHttpClient.layerUndici)
  )

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

  it.live("classifies other 4xx as permanent", () =>
    Effect.forEach([400, 401, 403, 404, 409, 422], (status) =>
      withServer(respond(status), (url) =>
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
      const at = new Date(DateTime.toEpochMillis(now) + 30_000).toUTCString()
      yield* withServer(respond(429, { "retry-after": at }), (url) =>
        Effect.gen(function* () {
          const error = yield* Effect.flip(sendVia(url))
          expect(error.retryable).toBe(true)
          expect(error.retryAfterMillis).toBeGreaterThan(20_000)
          expect(error.retryAfterMillis).toBeLessThanOrEqual(30_000)
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
          Effect.catchTag("InvalidConfiguration", (error) => Effect.die(error)),
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

/** Log lines (logfmt, as the CLI writes them) emitted while running `effect`. */
const withLogs = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<readonly [A, ReadonlyArray<string>], E> =>
  Effect.suspend(() => {
    const lines: Array<string> = []
    const logger = Logger.map(Logger.logfmtLogger, (line) => {
      lines.push(line)
    })
    return Effect.map(
      effect.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger))),
      (a) => [a, lines] as const
    )
  })

const portOf = (url: string): string => new URL(url).port

/** A server answering `status` with a body of `total` bytes written in 64 KiB chunks; counts bytes written. */
const hugeBody = (status: number, total: number) => {
  const written = { bytes: 0, closed: false }
  const handler: Handler = (_req, res) => {
    res.writeHead(status, { "content-type": "text/plain", "content-length": String(total) })
    const chunk = Buffer.alloc(64 * 1024, "x")
    const pump = (): void => {
      while (written.bytes < total && !res.destroyed) {
        written.bytes += chunk.length
        if (!res.write(chunk)) {
          res.once("drain", pump)
          return
        }
      }
      if (!res.destroyed) res.end()
    }
    res.on("close", () => {
      written.closed = true
    })
    pump()
  }
  return { written, handler }
}

const verifySnippet = (): string => {
  const doc = fs.readFileSync(path.join(import.meta.dirname, "..", "docs", "operations.md"), "utf8")
  const match = /<!-- webhook-verify:start -->\s*```js\n([\s\S]*?)```\s*<!-- webhook-verify:end -->/.exec(doc)
  if (match?.[1] === undefined) throw new Error("docs/operations.md has no webhook-verify snippet")
  return match[1]
}

describe("WebhookSink limits, credentials and signatures", () => {
  it.live("Retry-After is capped at 60 s by default, at the configured cap otherwise, with a WARN (18.2)", () =>
    Effect.gen(function* () {
      const [error, logs] = yield* withLogs(
        withServer(respond(503, { "retry-after": "100000" }), (url) => Effect.flip(sendVia(url)))
      )
      expect(error).toMatchObject({ retryable: true, code: "http-503", retryAfterMillis: 60_000 })
      expect(logs.some((line) => line.includes("level=WARN") && line.includes("capMillis=60000"))).toBe(true)
      const far = new Date(Date.UTC(2100, 0, 1)).toUTCString()
      const dated = yield* withServer(respond(429, { "retry-after": far }), (url) =>
        Effect.flip(sendVia(url, { maxRetryAfter: "5 seconds" }))
      )
      expect(dated).toMatchObject({ retryable: true, retryAfterMillis: 5_000 })
      const [small, quiet] = yield* withLogs(
        withServer(respond(503, { "retry-after": "2" }), (url) => Effect.flip(sendVia(url)))
      )
      expect(small.retryAfterMillis).toBe(2_000)
      expect(quiet.filter((line) => line.includes("level=WARN"))).toEqual([])
    })
  )

  it.live("userinfo is sent as Basic auth and redacted with query values in errors (18.3)", () =>
    Effect.gen(function* () {
      const error = yield* withServer(respond(500), (url) =>
        Effect.flip(sendVia(`http://al%40ice:s3cr%3Dt-pw@127.0.0.1:${portOf(url)}/hook?api_key=k3y-v4lue&x=1`))
      )
      expect(error.retryable).toBe(true)
      expect(error.message).toMatch(
        /^webhook http:\/\/\*\*\*@127\.0\.0\.1:\d+\/hook\?api_key=\*\*\*&x=\*\*\* answered 500/
      )
      for (const secret of ["al@ice", "al%40ice", "s3cr", "k3y-v4lue"]) expect(error.message).not.toContain(secret)
      yield* withServer(respond(204), (url, received) =>
        Effect.gen(function* () {
          yield* sendVia(`http://al%40ice:s3cr%3Dt-pw@127.0.0.1:${portOf(url)}/hook`)
          expect(received[0]?.headers["authorization"]).toBe(
            `Basic ${Buffer.from("al@ice:s3cr=t-pw").toString("base64")}`
          )
        })
      )
    })
  )

  it.live("a refused connection's error names the redacted URL only (18.3)", () =>
    Effect.gen(function* () {
      const url = yield* withServer(respond(200), (u) => Effect.succeed(u))
      const error = yield* Effect.flip(sendVia(url.replace("/hook", "/hook?token=t0ps3cret")))
      expect(error.code).toBe("connection")
      expect(error.message).toContain("token=***")
      expect(error.message).not.toContain("t0ps3cret")
    })
  )

  it.effect("invalid configuration is refused at start, naming the header, not its value (18.3, 18.9)", () =>
    Effect.gen(function* () {
      const build = (options: WebhookSink.WebhookSinkOptions) =>
        Effect.flip(WebhookSink.make(options).pipe(Effect.provide(NodeHttpClient.layerUndici)))
      const crlf = yield* build({ url: "http://127.0.0.1:1/h", headers: { "x-token": "abc\r\nX-Evil: 1" } })
      expect(crlf._tag).toBe("InvalidConfiguration")
      expect(crlf.problems).toEqual(["header x-token has a value with CR, LF or NUL"])
      const badName = yield* build({ url: "http://127.0.0.1:1/h", headers: { "bad name": "v4lue" } })
      expect(badName.problems[0]).toContain('"bad name" is not a valid HTTP header name')
      const reserved = yield* build({ headers: { "Idempotency-Key": "x" } })
      expect(reserved.problems[0]).toContain("set by the sink")
      const both = yield* build({ url: "http://u:pw123@127.0.0.1:1/h", headers: { Authorization: "Bearer t0k3n" } })
      expect(both.problems[0]).toContain("http://***@127.0.0.1:1/h has credentials")
      const notHttp = yield* build({ url: "ftp://127.0.0.1/x" })
      expect(notHttp.problems[0]).toContain("not an http:// or https:// URL")
      for (const error of [crlf, badName, both]) {
        expect(error.message).not.toMatch(/abc|v4lue|t0k3n|pw123/)
      }
    })
  )

  it.live("a 200 MB error body is read only up to 64 KiB; the message carries an excerpt (18.6)", () => {
    const { handler, written } = hugeBody(500, 200 * 1024 * 1024)
    return withServer(handler, (url) =>
      Effect.gen(function* () {
        const error = yield* Effect.flip(sendVia(url))
        expect(error).toMatchObject({ retryable: true, code: "http-500" })
        expect(error.message).toContain(": xxxx")
        expect(error.message.length).toBeLessThan(400)
        yield* Effect.sleep("100 millis")
        expect(written.closed).toBe(true)
        expect(written.bytes).toBeLessThan(32 * 1024 * 1024)
      })
    )
  })

  it.live("a 2xx with a 200 MB body is delivered without reading the body (18.6)", () => {
    const { handler, written } = hugeBody(200, 200 * 1024 * 1024)
    return withServer(handler, (url) =>
      Effect.gen(function* () {
        yield* sendVia(url)
        yield* Effect.sleep("100 millis")
        expect(written.closed).toBe(true)
        expect(written.bytes).toBeLessThan(32 * 1024 * 1024)
      })
    )
  })

  it.live("a 2xx whose body trickles slower than the timeout is delivered (18.7)", () => {
    const timers: Array<NodeJS.Timeout> = []
    const trickle: Handler = (_req, res) => {
      res.writeHead(200, { "content-type": "text/plain" })
      res.write("a")
      timers.push(setInterval(() => res.write("b"), 50))
    }
    return withServer(trickle, (url) =>
      sendVia(url, { timeout: "300 millis", bodyTimeout: "200 millis" }).pipe(
        Effect.ensuring(Effect.sync(() => timers.forEach(clearInterval)))
      )
    )
  })

  it.live("a redirect is not followed: transient, with a WARN naming the redacted location (18.8)", () =>
    Effect.gen(function* () {
      const [error, logs] = yield* withLogs(
        withServer(respond(301, { location: "/moved?sig=l0cs3cret" }), (url, received) =>
          Effect.tap(Effect.flip(sendVia(url)), () => Effect.sync(() => expect(received).toHaveLength(1)))
        )
      )
      expect(error).toMatchObject({ retryable: true, code: "http-301" })
      expect(error.message).toContain("/moved?sig=***")
      const warn = logs.find((line) => line.includes("level=WARN") && line.includes("redirect"))
      expect(warn).toContain("/moved?sig=***")
      expect(logs.join("\n")).not.toContain("l0cs3cret")
    })
  )

  it.live("signs timestamp + body with HMAC-SHA256; the documented receiver snippet verifies it (21.4)", () =>
    Effect.gen(function* () {
      const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-verify-"))
      const file = path.join(directory, "verify.mjs")
      fs.writeFileSync(file, verifySnippet())
      // the module is loaded once imported: its file goes at once
      const module: unknown = yield* Effect.promise(() => import(pathToFileURL(file).href)).pipe(
        Effect.ensuring(Effect.sync(() => fs.rmSync(directory, { recursive: true, force: true })))
      )
      const verify =
        typeof module === "object" && module !== null && "verifyOutboxSignature" in module
          ? module.verifyOutboxSignature
          : undefined
      if (typeof verify !== "function") throw new Error("the snippet exports no verifyOutboxSignature")
      yield* withServer(respond(204), (url, received) =>
        Effect.gen(function* () {
          yield* sendVia(url, { signingSecret: Redacted.make("whsec-test") })
          const request = received[0]
          if (request === undefined) throw new Error("no request")
          const timestamp = Number(request.headers["x-outbox-timestamp"])
          expect(Math.abs(timestamp - Date.now() / 1000)).toBeLessThan(60)
          expect(request.headers["x-outbox-signature"]).toBe(
            `sha256=${crypto.createHmac("sha256", "whsec-test").update(`${timestamp}.${request.body}`).digest("hex")}`
          )
          expect(verify("whsec-test", request.headers, request.body)).toBe(true)
          expect(verify("whsec-test", request.headers, Buffer.from(request.body))).toBe(true)
          expect(verify("other-secret", request.headers, request.body)).toBe(false)
          expect(verify("whsec-test", request.headers, request.body.replace("rec-1", "rec-2"))).toBe(false)
          const stale = { ...request.headers, "x-outbox-timestamp": String(timestamp - 3600) }
          expect(verify("whsec-test", stale, request.body)).toBe(false)
        })
      )
    })
  )

  it("Redact.url masks userinfo and query values and keeps names", () => {
    expect(Redact.url("https://user:pass@example.com:8443/a/b?api_key=k&x=1#frag")).toBe(
      "https://***@example.com:8443/a/b?api_key=***&x=***#…"
    )
    expect(Redact.url("http://example.com/hook")).toBe("http://example.com/hook")
    expect(Redact.url("not a url secret")).toBe("<invalid url>")
    expect(Redact.scrubber("http://u:pa55word@h/x?k=v4lue")("failed http://u:pa55word@h/x?k=v4lue: v4lue")).toBe(
      "failed http://***@h/x?k=***: ***"
    )
  })
})

describe("StdoutSink", () => {
  it.scoped("writes one JSON line per record and waits for the stream", () =>
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

  it.scoped("a write error is a retryable SendError", () =>
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

describe("WebhookSink: records choose hosts only inside what was configured", () => {
  const addressed = (address: string) => claimedRecord("rec-addr", address)
  const sendWith = (options: WebhookSink.WebhookSinkOptions, address: string) =>
    Effect.flatMap(Sink, (sink) => sink.send(addressed(address))).pipe(
      Effect.provide(WebhookSink.layerWith(options)),
      Effect.catchTag("InvalidConfiguration", (error) => Effect.die(error)),
      Effect.provide(NodeHttpClient.layerUndici)
    )

  it.live(
    "configured Authorization and signature go only to allowed origins: another host is permanent origin-not-allowed naming it, and receives nothing",
    () =>
      withServer(respond(204), (allowedUrl, allowed) =>
        withServer(respond(204), (otherUrl, other) =>
          Effect.gen(function* () {
            const options = {
              headers: { authorization: "Bearer S3CRET" },
              signingSecret: "sign-S3CRET",
              allowedOrigins: [new URL(allowedUrl).origin]
            }
            yield* sendWith(options, allowedUrl)
            expect(allowed).toHaveLength(1)
            expect(allowed[0]?.headers["authorization"]).toBe("Bearer S3CRET")
            const refused = yield* Effect.flip(sendWith(options, otherUrl))
            expect(refused).toMatchObject({ retryable: false, code: "origin-not-allowed" })
            expect(refused.message).toContain(`host 127.0.0.1:${portOf(otherUrl)}`)
            expect(refused.message).not.toContain("S3CRET")
            // with credentials and no allowlist, no record address is trusted
            const unlisted = yield* Effect.flip(sendWith({ headers: { authorization: "Bearer S3CRET" } }, otherUrl))
            expect(unlisted).toMatchObject({ retryable: false, code: "origin-not-allowed" })
            const signedOnly = yield* Effect.flip(sendWith({ signingSecret: "sign-S3CRET" }, otherUrl))
            expect(signedOnly).toMatchObject({ retryable: false, code: "origin-not-allowed" })
            expect(other).toHaveLength(0)
          })
        )
      )
  )

  it.live(
    "link-local and metadata addresses are refused (no connection attempted) unless their origin is listed; other hosts still work without credentials",
    () =>
      withServer(respond(204), (url, received) =>
        Effect.gen(function* () {
          yield* sendWith({ timeout: "200 millis" }, url)
          expect(received).toHaveLength(1)
          for (const address of [
            "http://169.254.169.254:9/latest/meta-data/",
            "http://[fe80::1]:9/hook",
            "http://metadata.google.internal:9/computeMetadata/v1/"
          ]) {
            const refused = yield* Effect.flip(sendWith({ timeout: "200 millis" }, address))
            expect(refused, address).toMatchObject({ retryable: false, code: "origin-not-allowed" })
            expect(refused.message).toContain("link-local and metadata addresses must be listed explicitly")
          }
          expect(WebhookSink.isLinkLocalOrMetadata("[fe80::1]")).toBe(true)
          expect(WebhookSink.isLinkLocalOrMetadata("169.254.1.2")).toBe(true)
          expect(WebhookSink.isLinkLocalOrMetadata("127.0.0.1")).toBe(false)
          expect(WebhookSink.isLinkLocalOrMetadata("hooks.example.com")).toBe(false)
        })
      )
  )

  it.effect("an allowed origin that is not an http(s) URL is refused at start", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        WebhookSink.make({ allowedOrigins: ["ftp://files.example.com"] }).pipe(
          Effect.provide(NodeHttpClient.layerUndici)
        )
      )
      expect(error.problems).toEqual(["allowed origin ftp://files.example.com/ is not an http:// or https:// URL"])
    })
  )
})
