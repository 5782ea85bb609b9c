/**
 * Requests the operations endpoint must refuse before they reach anything (SPEC §10): a `Host` that is
 * neither loopback nor configured (DNS rebinding) is 421, an oversize body is 413 without being buffered,
 * a purge with an unknown key or without filters is 400 unless `all: true`, an out-of-range cursor is 400,
 * and an unexpected failure is a logged 500. Served on 127.0.0.1 over the memory stores.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpServer from "@effect/platform/HttpServer"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as http from "node:http"
import { DeadLetterEntry } from "../src/domain/DeadLetterEntry.js"
import * as DateTime from "effect/DateTime"
import * as MemoryDeadLetterStore from "../src/layers/memory/MemoryDeadLetterStore.js"
import * as MemoryInspection from "../src/layers/memory/MemoryInspection.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as OpsServer from "../src/programs/ops/OpsServer.js"
import * as RequestGuard from "../src/programs/ops/RequestGuard.js"
import { DeadLetterStore } from "../src/services/DeadLetterStore.js"
import { OutboxInspection } from "../src/services/OutboxInspection.js"

const stores = MemoryInspection.layer.pipe(
  Layer.provideMerge(MemoryDeadLetterStore.layer),
  Layer.provideMerge(MemoryOutboxStore.layer)
)

const entry = (id: string, routeId: string) =>
  new DeadLetterEntry({
    id,
    recordId: `rec-${id}`,
    partitionKey: "p",
    envelopeId: `env-${id}`,
    bindingId: "b",
    payload: new TextEncoder().encode("x"),
    headers: {},
    orderingKey: undefined,
    routeId,
    address: undefined,
    category: "permanent",
    reason: "sink rejected",
    errorCode: "http-400",
    lastError: "400",
    attempts: 1,
    failedAt: DateTime.unsafeMake(1_700_000_000_000)
  })

/** Serves the endpoint with its dashboard on 127.0.0.1 (ephemeral port); yields the port. */
const serveOn = (options: OpsServer.OpsDashboardOptions) =>
  Effect.gen(function* () {
    const server = NodeHttpServer.layer(() => http.createServer(), { port: 0, host: "127.0.0.1" })
    const context = yield* Layer.build(OpsServer.layerWithDashboard(options).pipe(Layer.provideMerge(server)))
    return yield* HttpServer.addressWith((address) =>
      Effect.succeed(address._tag === "TcpAddress" ? address.port : 0)
    ).pipe(Effect.provide(context))
  })

interface Sent {
  readonly method?: string
  readonly path: string
  readonly host?: string
  readonly headers?: Record<string, string>
  /** The body, or chunks written one by one without a Content-Length. */
  readonly body?: string | ReadonlyArray<Buffer>
}

/** One request over loopback with any `Host` header; resolves with the status and body text. */
const send = (port: number, sent: Sent) =>
  Effect.async<{ readonly status: number; readonly body: string }>((resume) => {
    const request = http.request(
      {
        host: "127.0.0.1",
        port,
        method: sent.method ?? "GET",
        path: sent.path,
        headers: { host: sent.host ?? `127.0.0.1:${port}`, ...sent.headers },
        agent: false
      },
      (response) => {
        const chunks: Array<Buffer> = []
        response.on("data", (chunk: Buffer) => chunks.push(chunk))
        response.on("end", () =>
          resume(Effect.succeed({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }))
        )
      }
    )
    request.on("error", (error) => resume(Effect.succeed({ status: -1, body: error.message })))
    const body = sent.body
    if (typeof body === "string") request.end(body)
    else if (body === undefined) request.end()
    else {
      const write = (index: number): void => {
        if (index >= body.length || request.destroyed) return void request.end()
        const chunk = body[index]
        if (chunk === undefined) return void request.end()
        if (request.write(chunk)) write(index + 1)
        else request.once("drain", () => write(index + 1))
      }
      write(0)
    }
  })

const tokenOf = (port: number) =>
  Effect.map(send(port, { path: "/" }), (page) => /name="csrf-token" content="([0-9a-f]+)"/.exec(page.body)?.[1] ?? "")

const postJson = (port: number, token: string, path: string, body: string | ReadonlyArray<Buffer>, host?: string) =>
  send(port, {
    method: "POST",
    path,
    ...(host !== undefined ? { host } : {}),
    headers: { "content-type": "application/json", "x-csrf-token": token },
    body
  })

const seeded = Effect.gen(function* () {
  const deadLetters = yield* DeadLetterStore
  yield* deadLetters.write(entry("d1", "billing"))
  yield* deadLetters.write(entry("d2", "audit"))
  return deadLetters
})

describe("operations endpoint: requests refused before they reach anything", () => {
  it.live(
    "a Host naming neither a loopback host nor a configured one is 421 on every path, before the CSRF check, and purges nothing (DNS rebinding)",
    () =>
      Effect.gen(function* () {
        const deadLetters = yield* seeded
        const port = yield* serveOn({ allowMutations: true, allowedHosts: ["ops.internal"] })
        const token = yield* tokenOf(port)
        expect(token).toHaveLength(32)
        const rebound = `attacker.example:${port}`
        for (const path of ["/", "/metrics", "/healthz", "/api/partitions", "/api/dead-letters", "/nope"]) {
          const answer = yield* send(port, { path, host: rebound })
          expect(answer.status, path).toBe(421)
          expect(answer.body).not.toContain(token)
        }
        const purge = yield* postJson(port, token, "/api/dead-letters/purge", '{"all":true}', rebound)
        expect(purge.status).toBe(421)
        expect(yield* deadLetters.list({})).toHaveLength(2)
        for (const host of [
          `127.0.0.1:${port}`,
          `localhost:${port}`,
          `[::1]:${port}`,
          `ops.internal:${port}`,
          "OPS.internal"
        ]) {
          expect((yield* send(port, { path: "/healthz", host })).status, host).toBe(200)
        }
        expect(RequestGuard.isAllowedHost("ops.internal:9464", ["ops.internal:9464"])).toBe(true)
        expect(RequestGuard.isAllowedHost("ops.internal:80", ["ops.internal:9464"])).toBe(false)
        expect(RequestGuard.isAllowedHost("127.0.0.1.attacker.example", [])).toBe(false)
        expect(RequestGuard.isAllowedHost("localhost.attacker.example:80", [])).toBe(false)
      }).pipe(Effect.scoped, Effect.provide(stores))
  )

  it.live(
    "a body over the limit is 413 whether its length is declared or it comes in chunks without one, and the endpoint keeps serving",
    () =>
      Effect.gen(function* () {
        const deadLetters = yield* seeded
        const port = yield* serveOn({ allowMutations: true, maxBodyBytes: 64 * 1024 })
        const token = yield* tokenOf(port)
        const big = `{"route":"${"x".repeat(200 * 1024)}"}`
        const declared = yield* postJson(port, token, "/api/dead-letters/purge", big)
        expect(declared.status).toBe(413)
        expect(JSON.parse(declared.body)).toEqual({ error: "request body over 65536 bytes" })
        // 32 MiB in chunks without a Content-Length: refused once the count passes the limit
        const chunk = Buffer.alloc(1024 * 1024, "x")
        const chunked = yield* postJson(
          port,
          token,
          "/api/dead-letters/redrive",
          Array.from({ length: 32 }, () => chunk)
        )
        expect(chunked.status).toBe(413)
        expect((yield* send(port, { path: "/healthz" })).status).toBe(200)
        expect(yield* deadLetters.list({})).toHaveLength(2)
        const small = yield* postJson(port, token, "/api/dead-letters/purge", '{"route":"audit"}')
        expect(small).toMatchObject({ status: 200 })
        expect(JSON.parse(small.body)).toEqual({ deleted: 1 })
      }).pipe(Effect.scoped, Effect.provide(stores))
  )

  it.live(
    "purge: an unknown filter key or an empty filter is 400 and deletes nothing; deleting everything needs all: true alone",
    () =>
      Effect.gen(function* () {
        const deadLetters = yield* seeded
        const port = yield* serveOn({ allowMutations: true })
        const token = yield* tokenOf(port)
        const purge = (body: string) => postJson(port, token, "/api/dead-letters/purge", body)
        const typo = yield* purge('{"rout":"typo"}')
        expect(typo.status).toBe(400)
        expect(typo.body).toContain("other keys are refused")
        const empty = yield* purge("{}")
        expect(empty.status).toBe(400)
        expect(empty.body).toContain('needs {\\"all\\": true}')
        expect((yield* purge('{"all":false}')).status).toBe(400)
        expect((yield* purge('{"all":true,"route":"audit"}')).status).toBe(400)
        expect((yield* postJson(port, token, "/api/dead-letters/redrive", '{"ids":["d1"],"x":1}')).status).toBe(400)
        expect(yield* deadLetters.list({})).toHaveLength(2)
        const all = yield* purge('{"all":true}')
        expect(all.status).toBe(200)
        expect(JSON.parse(all.body)).toEqual({ deleted: 2 })
      }).pipe(Effect.scoped, Effect.provide(stores))
  )

  it.live('a cursor whose time is out of the date range ([1e400, "x"]) is 400 with a reason', () =>
    Effect.gen(function* () {
      yield* seeded
      const port = yield* serveOn({})
      const cursor = (value: string) => Buffer.from(value).toString("base64url")
      for (const bad of ['[1e400,"x"]', '[9e15,"x"]', '[1.5,"x"]', "nonsense"]) {
        const answer = yield* send(port, { path: `/api/dead-letters?cursor=${cursor(bad)}` })
        expect(answer.status, bad).toBe(400)
        expect(answer.body).toContain("invalid cursor")
      }
      const good = yield* send(port, { path: `/api/dead-letters?limit=1` })
      const next: unknown = JSON.parse(good.body)
      const nextCursor = typeof next === "object" && next !== null ? Reflect.get(next, "nextCursor") : null
      expect(typeof nextCursor).toBe("string")
      expect((yield* send(port, { path: `/api/dead-letters?cursor=${String(nextCursor)}` })).status).toBe(200)
    }).pipe(Effect.scoped, Effect.provide(stores))
  )

  it.live("an unexpected failure in a route is a 500 with a fixed body, logged at ERROR with its cause", () => {
    const lines: Array<string> = []
    const capture = Logger.map(Logger.logfmtLogger, (line) => {
      lines.push(line)
    })
    return Effect.gen(function* () {
      const failing = Layer.effect(
        OutboxInspection,
        Effect.map(MemoryInspection.make, (real) =>
          OutboxInspection.of({ ...real, snapshot: () => Effect.die(new Error("inspection exploded")) })
        )
      )
      const port = yield* serveOn({}).pipe(
        Effect.provide(
          failing.pipe(Layer.provideMerge(MemoryDeadLetterStore.layer), Layer.provideMerge(MemoryOutboxStore.layer))
        )
      )
      const answer = yield* send(port, { path: "/api/partitions" })
      expect(answer.status).toBe(500)
      expect(JSON.parse(answer.body)).toEqual({ error: "internal error (logged by the relay)" })
      expect(answer.body).not.toContain("exploded")
      const logged = lines.find((line) => line.includes("operations endpoint request failed"))
      expect(logged).toContain("level=ERROR")
      expect(logged).toContain("path=/api/partitions")
      expect(logged).toContain("inspection exploded")
      expect((yield* send(port, { path: "/nope" })).status).toBe(404)
    }).pipe(Effect.scoped, Effect.provide(Logger.replace(Logger.defaultLogger, capture)))
  })
})
