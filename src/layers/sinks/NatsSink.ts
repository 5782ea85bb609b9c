/**
 * A NATS JetStream sink on npm `nats` (SPEC §10): each record's payload is published to a subject with
 * `Nats-Msg-Id` = record id, so the stream's duplicate window removes a relay's re-sends; a send succeeds
 * only on the stream's publish ack.
 *
 * - Subject: the record's `address`, else the configured `subject`; both may hold `{partitionKey}` and
 *   `{routeId}`.
 * - Headers: the record's headers plus the wire metadata of SPEC §11 (`Outbox-Record-Id`, `Outbox-Topic`,
 *   `Outbox-Partition`, `Outbox-Ordering-Key`, `Outbox-Seq`, `Outbox-Created-At`; `Topic.wireHeaders`) and
 *   `Outbox-Envelope-Id`. `NatsMessage.decode` reads a message of a typed topic back.
 * - Records choose subjects only inside what was configured: a `$`-prefixed (system) subject such as
 *   `$JS.API.STREAM.DELETE.X` is refused (`system-subject`), and with `allowedSubjectPrefixes` a record's
 *   address must start with one of them (`subject-not-allowed`); both are permanent, so the record is
 *   dead-lettered with the reason and nothing is published.
 * - Delivered only on a real JetStream publish acknowledgement (a stream name and a sequence number); any
 *   other answer (a core subscriber replying on the subject) is permanent `no-pub-ack`.
 * - Permanent: no stream captures the subject, permission denied, an invalid subject or header, a payload
 *   over the server's limit, a JetStream API error below 500. Transient: timeouts, disconnects,
 *   `503 no responders` while a stream for the subject exists, every other failure.
 * - Publishes are plain publishes with a reply subject; the stream's answers arrive on one subscription of the
 *   sink's own (`_INBOX.<id>.*`, the subjects the client's requests use too), so a publish costs no request
 *   object, timer or error object of the client's. A publish with no answer within `timeout` fails transient
 *   (found by a sweep every quarter of it); a connection not allowed to subscribe there fails every publish
 *   `permission-denied`.
 * - One connection per layer, reconnecting without limit; credentials in the URL are passed to the
 *   client as options and appear in logs only redacted.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import {
  connect,
  createInbox,
  Events,
  headers as natsHeaders,
  type JetStreamManager,
  type Msg,
  type MsgHdrs,
  type NatsConnection
} from "nats"
import { InvalidConfiguration } from "../../domain/OutboxError.js"
import type { OutboxRecord } from "../../domain/OutboxRecord.js"
import * as Topic from "../../domain/Topic.js"
import { fromRegister, type Register, SendError, Sink } from "../../services/Sink.js"
import * as AwaitingSends from "./AwaitingSends.js"
import * as BrokerUrl from "./BrokerUrl.js"

/**
 * Options of the NATS sink.
 *
 * @since 0.1.0
 */
export interface NatsSinkOptions {
  /** The server URL(s), `nats://[user:pass@]host:port` (a lone username is a token). */
  readonly servers: string | ReadonlyArray<string>
  /** The subject when a record has no `address`; may hold `{partitionKey}` and `{routeId}`. */
  readonly subject?: string | undefined
  /** Time to wait for the stream's ack (default 5 seconds); a timeout is transient. */
  readonly timeout?: Duration.DurationInput | undefined
  /** The connection name shown by the server (default `effect-outbox`). */
  readonly name?: string | undefined
  /**
   * Subject prefixes a record's `address` may publish to (e.g. `["orders."]`); when absent, any subject
   * that is not `$`-prefixed. The configured `subject` is not checked against it.
   */
  readonly allowedSubjectPrefixes?: ReadonlyArray<string> | undefined
}

/**
 * Expands `{partitionKey}` and `{routeId}` in a subject template.
 *
 * @since 0.1.0
 */
export const subjectFor = (template: string, record: OutboxRecord): string =>
  template.includes("{")
    ? template.replaceAll("{partitionKey}", record.partitionKey).replaceAll("{routeId}", record.routeId)
    : template

/**
 * Whether a subject can be published to: dot-separated non-empty tokens without whitespace or wildcards.
 *
 * @since 0.1.0
 */
export const isValidSubject = (subject: string): boolean =>
  subject.split(".").every((token) => token.length > 0 && !/[\s*>]/.test(token))

/**
 * Whether a subject is a NATS system subject (`$JS.API…`, `$SYS…`, `$KV…`): records never publish there.
 *
 * @since 0.1.0
 */
export const isSystemSubject = (subject: string): boolean => subject.startsWith("$")

/**
 * Whether an answer to a publish is a JetStream publish acknowledgement: a stream name and a positive
 * sequence number. Anything else (a core subscriber's reply, an API response) is not a delivery.
 *
 * @since 0.1.0
 */
export const isPubAck = (answer: unknown): boolean => {
  if (typeof answer !== "object" || answer === null) return false
  const stream: unknown = Reflect.get(answer, "stream")
  const seq: unknown = Reflect.get(answer, "seq")
  return (
    typeof stream === "string" && stream.length > 0 && typeof seq === "number" && Number.isSafeInteger(seq) && seq > 0
  )
}

interface NatsFailure {
  readonly code: string
  readonly message: string
  readonly apiCode: number | undefined
  readonly permission: boolean
}

const failureOf = (error: unknown): NatsFailure => {
  const message = error instanceof Error ? error.message : String(error)
  if (typeof error !== "object" || error === null)
    return { code: "UNKNOWN", message, apiCode: undefined, permission: false }
  const code = "code" in error && typeof error.code === "string" ? error.code : "UNKNOWN"
  const api =
    "api_error" in error && typeof error.api_error === "object" && error.api_error !== null
      ? error.api_error
      : undefined
  const apiCode = api !== undefined && "code" in api && typeof api.code === "number" ? api.code : undefined
  const permission = code === "PERMISSIONS_VIOLATION" || code === "AUTHORIZATION_VIOLATION"
  return { code, message, apiCode, permission }
}

/** A publish answered by something other than a JetStream publish acknowledgement (permanent). */
const noPubAck = (subject: string): SendError =>
  new SendError({
    retryable: false,
    code: "no-pub-ack",
    message: `NATS publish to ${subject}: the answer was not a JetStream publish acknowledgement`
  })

/** Resumes a send with a permanent failure found before anything was published. */
const refuse = (resume: (result: Effect.Effect<void, SendError>) => void, code: string, message: string): void =>
  resume(Effect.fail(new SendError({ retryable: false, code, message })))

const permanentCodes = new Set(["BAD_SUBJECT", "BAD_HEADER", "BAD_PAYLOAD", "INVALID_PAYLOAD", "MAX_PAYLOAD_EXCEEDED"])

const headersOf = (record: OutboxRecord): MsgHdrs => {
  const h = natsHeaders()
  for (const [name, value] of Object.entries(record.headers)) h.set(name, value)
  // the wire metadata (SPEC §11) overrides a record header of the same name
  for (const [name, value] of Object.entries(Topic.wireHeaders(record))) h.set(name, value)
  h.set(Topic.EnvelopeIdHeader, Topic.encodeHeaderValue(record.envelopeId))
  // the stream's duplicate window keys on it, so no record header may override it
  h.set("Nats-Msg-Id", record.id)
  return h
}

/** The JetStream API error in an answer (`{"error": {"code": 503, "description": "…"}}`), if it holds one. */
const apiErrorOf = (answer: unknown): { readonly code: number; readonly description: string } | undefined => {
  if (typeof answer !== "object" || answer === null) return undefined
  const error: unknown = Reflect.get(answer, "error")
  if (typeof error !== "object" || error === null) return undefined
  const code: unknown = Reflect.get(error, "code")
  const description: unknown = Reflect.get(error, "description")
  return typeof code === "number"
    ? { code, description: typeof description === "string" ? description : `JetStream API error ${code}` }
    : undefined
}

/** A publish awaiting the stream's answer on the sink's reply subscription. */
interface Publish extends AwaitingSends.Awaiting {
  readonly subject: string
}

/**
 * Connects and builds the sink; the connection is closed with the scope. Fails with
 * `InvalidConfiguration` for an invalid URL or subject template.
 *
 * @since 0.1.0
 */
export const make = (options: NatsSinkOptions): Effect.Effect<Sink["Type"], InvalidConfiguration, Scope.Scope> =>
  Effect.gen(function* () {
    const urls = typeof options.servers === "string" ? [options.servers] : options.servers
    const parsed = urls.map((url) => BrokerUrl.parse(url, ["nats:", "tls:"]))
    const problems = parsed.flatMap((each) => (Either.isLeft(each) ? [each.left] : []))
    if (urls.length === 0) problems.push("no NATS server URL given")
    if (options.subject !== undefined && options.subject.trim().length === 0)
      problems.push("the default subject is empty")
    if (options.subject !== undefined && isSystemSubject(options.subject))
      problems.push("the default subject is a $-prefixed system subject")
    const prefixes = options.allowedSubjectPrefixes
    if (prefixes !== undefined) {
      if (prefixes.some((prefix) => prefix.length === 0)) problems.push("an allowed subject prefix is empty")
      if (prefixes.some(isSystemSubject)) problems.push("an allowed subject prefix is a $-prefixed system subject")
    }
    if (problems.length > 0) return yield* new InvalidConfiguration({ component: "NatsSink", problems })
    const servers = parsed.flatMap((each) => (Either.isRight(each) ? [each.right] : []))
    const first = servers[0]
    const user = Option.flatMap(Option.fromNullable(first), (s) => s.username)
    const pass = Option.flatMap(Option.fromNullable(first), (s) => s.password)
    const redacted = servers.map((s) => s.redacted).join(",")
    const auth = Option.isSome(user)
      ? Option.isSome(pass)
        ? { user: user.value, pass: pass.value }
        : { token: user.value }
      : {}
    const timeoutMillis = Duration.toMillis(options.timeout ?? "5 seconds")

    const nc: NatsConnection = yield* Effect.acquireRelease(
      Effect.promise(() =>
        connect({
          servers: servers.map(
            (s) => `${s.url.protocol}//${s.url.hostname}:${s.url.port === "" ? "4222" : s.url.port}`
          ),
          name: options.name ?? "effect-outbox",
          waitOnFirstConnect: true,
          maxReconnectAttempts: -1,
          reconnectTimeWait: 250,
          // no stack capture per request: a publish error is classified by its code, never by its trace
          noAsyncTraces: true,
          ...auth
        })
      ),
      (connection) => Effect.promise(() => connection.close())
    )
    yield* Effect.logInfo("NATS sink connected").pipe(Effect.annotateLogs({ servers: redacted }))
    const jsm: JetStreamManager = yield* Effect.promise(() =>
      nc.jetstreamManager({ checkAPI: false, timeout: timeoutMillis })
    )

    /** After `503 no responders`: permanent when no stream captures the subject, transient otherwise. */
    const noResponders = (subject: string, message: string): Effect.Effect<never, SendError> =>
      Effect.tryPromise({ try: () => jsm.streams.find(subject), catch: (error) => error }).pipe(
        Effect.matchEffect({
          onSuccess: () =>
            Effect.fail(
              new SendError({ retryable: true, code: "no-responders", message: `NATS ${redacted}: ${message}` })
            ),
          onFailure: (error) =>
            failureOf(error).message.includes("no stream matches subject")
              ? Effect.fail(
                  new SendError({
                    retryable: false,
                    code: "no-stream",
                    message: `no JetStream stream captures subject ${subject}`
                  })
                )
              : Effect.fail(
                  new SendError({ retryable: true, code: "no-responders", message: `NATS ${redacted}: ${message}` })
                )
        })
      )

    const classify = (error: unknown, subject: string): Effect.Effect<never, SendError> => {
      const failure = failureOf(error)
      if (failure.code === "503") return noResponders(subject, failure.message)
      const message = `NATS publish to ${subject}: ${failure.message}`
      if (failure.permission)
        return Effect.fail(new SendError({ retryable: false, code: "permission-denied", message }))
      if (permanentCodes.has(failure.code)) {
        return Effect.fail(new SendError({ retryable: false, code: failure.code.toLowerCase(), message }))
      }
      if (failure.apiCode !== undefined) {
        return Effect.fail(
          new SendError({ retryable: failure.apiCode >= 500, code: `jetstream-${failure.apiCode}`, message })
        )
      }
      return Effect.fail(new SendError({ retryable: true, code: failure.code.toLowerCase(), message }))
    }

    // Publishes carry a reply subject on one subscription of the sink's own, and the stream's answers are read
    // there: a request through the client would add a promise, a timer and an error object per publish.
    const decoder = new TextDecoder()
    const inbox = createInbox()
    /** Publishes awaiting the stream's answer, by the last token of their reply subject. */
    const awaiting = yield* AwaitingSends.make<string, Publish>(
      yield* Effect.clock,
      Duration.millis(timeoutMillis),
      (entry, reason) =>
        new SendError({
          retryable: true,
          code: reason,
          message:
            reason === "timeout"
              ? `NATS publish to ${entry.subject}: no answer within ${Duration.format(Duration.millis(timeoutMillis))}`
              : `NATS publish to ${entry.subject}: the sink closed`
        })
    )
    let next = 0

    /** What a publish's answer means: a publish ack, `503 no responders`, a JetStream API error, or neither. */
    const answered = (subject: string, msg: Msg): Effect.Effect<void, SendError> => {
      if (msg.headers?.code === 503) return noResponders(subject, "503 no responders")
      let answer: unknown
      try {
        answer = JSON.parse(decoder.decode(msg.data))
      } catch {
        return Effect.fail(noPubAck(subject))
      }
      if (isPubAck(answer)) return Effect.void
      const api = apiErrorOf(answer)
      return api === undefined
        ? Effect.fail(noPubAck(subject))
        : Effect.fail(
            new SendError({
              retryable: api.code >= 500,
              code: `jetstream-${api.code}`,
              message: `NATS publish to ${subject}: ${api.description}`
            })
          )
    }

    /**
     * The reply subscription, made on the first publish and again after the server refused it (a permission
     * violation closes it; the publishes then awaiting fail as the client's own requests would).
     */
    let subscribed = false
    const subscribe = (): void => {
      nc.subscribe(`${inbox}.*`, {
        callback: (error, msg) => {
          if (error !== null) {
            subscribed = false
            for (const entry of awaiting.takeAll()) entry.resume(classify(error, entry.subject))
            return
          }
          // an answer after the publish timed out finds nothing
          const entry = awaiting.take(msg.subject.slice(inbox.length + 1))
          if (entry !== undefined) entry.resume(answered(entry.subject, msg))
        }
      })
      subscribed = true
    }

    // A publish the server's permissions refuse is answered by an asynchronous protocol error naming its
    // subject, not on the reply subject: it fails the oldest publish awaiting to that subject.
    yield* Effect.forkScoped(
      Effect.promise(async () => {
        for await (const status of nc.status()) {
          const context = status.permissionContext
          if (status.type !== Events.Error || context === undefined || context.operation !== "publish") continue
          const entry = awaiting.takeFirst((each) => each.subject === context.subject)
          if (entry === undefined) continue
          entry.resume(
            Effect.fail(
              new SendError({
                retryable: false,
                code: "permission-denied",
                message: `NATS publish to ${entry.subject}: permissions violation for publish`
              })
            )
          )
        }
      })
    )

    /** The subjects checked with {@link isValidSubject} (a few per sink, usually): each is checked once. */
    const checked = new Map<string, boolean>()
    const validSubject = (subject: string): boolean => {
      let valid = checked.get(subject)
      if (valid === undefined) {
        valid = isValidSubject(subject)
        // bounded: records that address many distinct subjects are checked every time past this many
        if (checked.size < 4_096) checked.set(subject, valid)
      }
      return valid
    }

    /** One publish: refused at once (resumed before it returns), or resumed on the stream's answer. */
    const register: Register = (record, resume) => {
      const template = record.address.length > 0 ? record.address : options.subject
      if (template === undefined) return refuse(resume, "no-address", `record ${record.id} has no subject`)
      const subject = subjectFor(template, record)
      if (isSystemSubject(subject)) {
        return refuse(
          resume,
          "system-subject",
          `record ${record.id}: ${JSON.stringify(subject)} is a $-prefixed NATS system subject; records never publish there`
        )
      }
      if (
        record.address.length > 0 &&
        prefixes !== undefined &&
        !prefixes.some((prefix) => subject.startsWith(prefix))
      ) {
        return refuse(
          resume,
          "subject-not-allowed",
          `record ${record.id}: subject ${JSON.stringify(subject)} is outside the allowed subject prefixes`
        )
      }
      if (!validSubject(subject)) {
        return refuse(
          resume,
          "invalid-subject",
          `record ${record.id}: ${JSON.stringify(subject)} is not a valid NATS subject`
        )
      }
      const token = (next++).toString(36)
      try {
        if (!subscribed) subscribe()
        nc.publish(subject, record.payload, { reply: `${inbox}.${token}`, headers: headersOf(record) })
      } catch (error) {
        return resume(classify(error, subject))
      }
      awaiting.add(token, { subject, deadline: awaiting.deadline(), resume })
    }
    return Sink.of(fromRegister(register))
  })

/**
 * The NATS sink as a layer (one connection, closed when the layer is released).
 *
 * @since 0.1.0
 */
export const layer = (options: NatsSinkOptions): Layer.Layer<Sink, InvalidConfiguration> =>
  Layer.scoped(Sink, make(options))
