/**
 * A local HTTP webhook receiver for the demo (node:http on 127.0.0.1, an ephemeral port). It decodes each
 * POST body with a typed topic (`Topic.decode`), answers according to a {@link FailurePlan} (2xx, a
 * transient 503 or a permanent 400; 400 also for a body the topic cannot decode), and keeps a log of what it
 * accepted so the demo can check delivery, per-key order and duplicates.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as Scope from "effect/Scope"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import type { DecodeError } from "../../domain/OutboxError.js"
import type { Decoded, WebhookRequest } from "../../domain/Topic.js"

/**
 * Decides the status for a decoded request: `attempt` counts this record's requests so far (1 = first).
 *
 * @since 0.1.0
 */
export type FailurePlan<A> = (incoming: Decoded<A>, attempt: number) => 200 | 400 | 503

/**
 * Running totals of the receiver.
 *
 * @since 0.1.0
 */
export interface ReceiverStats {
  requests: number
  /** Records accepted at least once. */
  accepted: number
  /** 2xx answers for a record already accepted (at-least-once redeliveries). */
  duplicates: number
  /** 503 answers given. */
  transient: number
  /** 400 answers given by the plan. */
  permanent: number
  /** Bodies the topic could not decode (answered 400). */
  malformed: number
}

/**
 * A running receiver of the messages of one topic.
 *
 * @since 0.1.0
 */
export interface Receiver<A> {
  readonly url: string
  readonly stats: ReceiverStats
  /** First acceptances in arrival order, decoded. */
  readonly accepted: ReadonlyArray<Decoded<A>>
  /** Record ids accepted at least once. */
  readonly acceptedIds: ReadonlySet<string>
}

/**
 * Starts the receiver in the current scope (closed with it). `decode` is `Topic.decode` of the topic the
 * receiver expects.
 *
 * @since 0.1.0
 */
export const start = <A>(
  decode: (request: WebhookRequest) => Either.Either<Decoded<A>, DecodeError>,
  plan: FailurePlan<A>
): Effect.Effect<Receiver<A>, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<{ readonly server: http.Server; readonly receiver: Receiver<A> }>((resume) => {
      const stats: ReceiverStats = { requests: 0, accepted: 0, duplicates: 0, transient: 0, permanent: 0, malformed: 0 }
      const accepted: Array<Decoded<A>> = []
      const acceptedIds = new Set<string>()
      const attempts = new Map<string, number>()
      const server = http.createServer((request, response) => {
        const chunks: Array<Buffer> = []
        request.on("data", (chunk: Buffer) => chunks.push(chunk))
        request.on("end", () => {
          stats.requests += 1
          const decoded = decode({ body: Buffer.concat(chunks), headers: request.headers })
          if (Either.isLeft(decoded)) {
            stats.malformed += 1
            response.writeHead(400, { "content-type": "text/plain" }).end(decoded.left.reason)
            return
          }
          const incoming = decoded.right
          const id = incoming.metadata.recordId
          const attempt = (attempts.get(id) ?? 0) + 1
          attempts.set(id, attempt)
          const status = plan(incoming, attempt)
          if (status === 503) stats.transient += 1
          else if (status === 400) stats.permanent += 1
          else if (acceptedIds.has(id)) stats.duplicates += 1
          else {
            acceptedIds.add(id)
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
