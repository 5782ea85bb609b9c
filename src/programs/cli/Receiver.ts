/**
 * A local HTTP webhook receiver for the demo (node:http on 127.0.0.1, an ephemeral port). It answers
 * each POST according to a {@link FailurePlan} (2xx, a transient 503 or a permanent 400), and keeps a
 * log of what it accepted so the demo can check delivery, per-key order and duplicates.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as http from "node:http"
import type { AddressInfo } from "node:net"

/**
 * What the receiver learns from one request body (a `RecordJson` from the webhook sink).
 *
 * @since 0.1.0
 */
export interface Incoming {
  readonly recordId: string
  readonly envelopeId: string
  readonly partitionKey: string
  readonly orderingKey: string | null
  /** The demo's sequence number, from the JSON payload's `n`. */
  readonly n: number
}

/**
 * Decides the status for a request: `attempt` counts this envelope's requests so far (1 = first).
 *
 * @since 0.1.0
 */
export type FailurePlan = (incoming: Incoming, attempt: number) => 200 | 400 | 503

/**
 * Running totals of the receiver.
 *
 * @since 0.1.0
 */
export interface ReceiverStats {
  requests: number
  /** Envelopes accepted at least once. */
  accepted: number
  /** 2xx answers for an envelope already accepted (at-least-once redeliveries). */
  duplicates: number
  /** 503 answers given. */
  transient: number
  /** 400 answers given. */
  permanent: number
  /** Bodies that could not be read. */
  malformed: number
}

/**
 * A running receiver.
 *
 * @since 0.1.0
 */
export interface Receiver {
  readonly url: string
  readonly stats: ReceiverStats
  /** First acceptances in arrival order. */
  readonly accepted: ReadonlyArray<Incoming>
  /** Envelope ids accepted at least once. */
  readonly acceptedIds: ReadonlySet<string>
}

const decodeBody = (text: string): Incoming | undefined => {
  try {
    const body: unknown = JSON.parse(text)
    if (typeof body !== "object" || body === null) return undefined
    const field = (name: string): unknown => Reflect.get(body, name)
    const recordId = field("id")
    const envelopeId = field("envelopeId")
    const partitionKey = field("partitionKey")
    const orderingKey = field("orderingKey")
    const payload = field("payload")
    if (typeof recordId !== "string" || typeof envelopeId !== "string" || typeof partitionKey !== "string") {
      return undefined
    }
    if (typeof payload !== "string") return undefined
    const decoded: unknown = JSON.parse(Buffer.from(payload, "base64").toString("utf8"))
    const n = typeof decoded === "object" && decoded !== null ? Reflect.get(decoded, "n") : undefined
    if (typeof n !== "number") return undefined
    return {
      recordId,
      envelopeId,
      partitionKey,
      orderingKey: typeof orderingKey === "string" ? orderingKey : null,
      n
    }
  } catch {
    return undefined
  }
}

/**
 * Starts the receiver in the current scope (closed with it).
 *
 * @since 0.1.0
 */
export const start = (plan: FailurePlan): Effect.Effect<Receiver, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<{ readonly server: http.Server; readonly receiver: Receiver }>((resume) => {
      const stats: ReceiverStats = { requests: 0, accepted: 0, duplicates: 0, transient: 0, permanent: 0, malformed: 0 }
      const accepted: Array<Incoming> = []
      const acceptedIds = new Set<string>()
      const attempts = new Map<string, number>()
      const server = http.createServer((request, response) => {
        const chunks: Array<Buffer> = []
        request.on("data", (chunk: Buffer) => chunks.push(chunk))
        request.on("end", () => {
          stats.requests += 1
          const incoming = decodeBody(Buffer.concat(chunks).toString("utf8"))
          if (incoming === undefined) {
            stats.malformed += 1
            response.writeHead(400).end()
            return
          }
          const attempt = (attempts.get(incoming.envelopeId) ?? 0) + 1
          attempts.set(incoming.envelopeId, attempt)
          const status = plan(incoming, attempt)
          if (status === 503) stats.transient += 1
          else if (status === 400) stats.permanent += 1
          else if (acceptedIds.has(incoming.envelopeId)) stats.duplicates += 1
          else {
            acceptedIds.add(incoming.envelopeId)
            accepted.push(incoming)
            stats.accepted += 1
          }
          response.writeHead(status, { "content-type": "text/plain" }).end(status === 200 ? "ok" : "no")
        })
      })
      server.keepAliveTimeout = 30_000
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        const port = typeof address === "object" && address !== null ? (address satisfies AddressInfo).port : 0
        resume(
          Effect.succeed({
            server,
            receiver: { url: `http://127.0.0.1:${port}/hook`, stats, accepted, acceptedIds }
          })
        )
      })
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.close(() => resume(Effect.void))
        server.closeAllConnections()
      })
  ).pipe(Effect.map(({ receiver }) => receiver))
