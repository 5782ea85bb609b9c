/**
 * The dashboard routes of the operations endpoint (SPEC §10): `GET /` (the page), `GET /api/partitions`
 * (an `OutboxInspection` snapshot), `GET /api/history` (the ring of snapshots the charts are drawn from,
 * see `History`), `GET /api/dead-letters` (filters of `dlq list`, keyset paging on `(failedAt, id)`; each
 * entry's last error is the sink's own text, cut at 500 characters), `GET /api/dead-letters/count` (how
 * many match a filter, up to 10 000, shown before a bulk action is confirmed), and the mutations
 * `POST /api/dead-letters/redrive` (by id), `POST /api/dead-letters/redrive-matching` (the oldest `expected`
 * entries of a filter) and `POST /api/dead-letters/purge` (a filter, optionally at most `limit`).
 *
 * Mutations are refused with 403 unless `allowMutations` is set, and every POST must carry the page's
 * per-process CSRF token in `x-csrf-token`, a JSON body and, when the browser sends one, an `Origin` whose
 * host is the request's `Host`. Bodies over `maxBodyBytes` are 413; a purge with an unknown key is 400 and
 * deleting everything needs `{"all": true}`; a cursor whose time is out of range is 400. Payloads are shown only with `showPayloads`; header values never.
 *
 * @since 0.1.0
 */
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import {
  DeadLetterCategory,
  type DeadLetterEntry,
  type DeadLetterFilter,
  toJson
} from "../../domain/DeadLetterEntry.js"
import { DeadLetterStore } from "../../services/DeadLetterStore.js"
import { OutboxInspection, type PartitionInspection } from "../../services/OutboxInspection.js"
import * as DashboardPage from "./DashboardPage.js"
import * as History from "./History.js"
import * as RequestGuard from "./RequestGuard.js"

/**
 * Options of the dashboard.
 *
 * @since 0.1.0
 */
export interface DashboardOptions {
  /** The per-process CSRF token (random, at least 16 characters). */
  readonly csrfToken: string
  /** Allow redrive and purge (default false: the page is read-only and POSTs get 403). */
  readonly allowMutations?: boolean | undefined
  /** Show payloads of dead-letter entries (default false). */
  readonly showPayloads?: boolean | undefined
  /** How often the page polls (default 1 s). */
  readonly refreshMillis?: number | undefined
  /** The ring of snapshots the charts are drawn from (default: a new one, sampled every 2 s). */
  readonly history?: History.HistoryOptions | undefined
  /** Largest POST body accepted (default 1 MiB); a larger one is 413, counted as it arrives. */
  readonly maxBodyBytes?: number | undefined
}

const noStore = { "cache-control": "no-store" }

const json = (body: unknown, status = 200) => HttpServerResponse.unsafeJson(body, { status, headers: noStore })

const failure = (status: number, error: string) => json({ error }, status)

const millisOrNull = <A>(fact: Either.Either<Option.Option<A>, unknown>, toMillis: (a: A) => number) =>
  Either.isRight(fact) && Option.isSome(fact.right) ? toMillis(fact.right.value) : null

const numberOrNull = (fact: Either.Either<number, unknown>): number | null => (Either.isRight(fact) ? fact.right : null)

const partitionJson = (p: PartitionInspection, nowMillis: number) => {
  const lease = Either.isRight(p.lease) && Option.isSome(p.lease.right) ? p.lease.right.value : undefined
  const oldestPendingAt = millisOrNull(p.oldestPendingAt, DateTime.toEpochMillis)
  return {
    partitionKey: p.partitionKey,
    pending: numberOrNull(p.pending),
    claimed: numberOrNull(p.claimed),
    oldestPendingAgeMs: oldestPendingAt === null ? null : Math.max(0, nowMillis - oldestPendingAt),
    fence: numberOrNull(p.fence),
    lease:
      lease === undefined
        ? null
        : {
            owner: lease.owner,
            version: lease.version,
            expiresAt: DateTime.formatIso(lease.expiresAt),
            live: DateTime.toEpochMillis(lease.expiresAt) > nowMillis
          },
    stranded: Option.getOrNull(p.stranded)
  }
}

const utf8 = new TextDecoder("utf-8", { fatal: false })

/** Longest error text shown per entry (the sink's own words, cut with an ellipsis). */
const maxErrorChars = 500

const bounded = (text: string): string => (text.length <= maxErrorChars ? text : `${text.slice(0, maxErrorChars)}…`)

const entryJson = (entry: DeadLetterEntry, showPayloads: boolean) => ({
  ...toJson(entry),
  lastError: bounded(entry.lastError),
  headerNames: Object.keys(entry.headers).sort(),
  ...(showPayloads ? { payload: utf8.decode(entry.payload.subarray(0, 4096)) } : {})
})

/** The query of `GET /api/dead-letters` and the body of a purge (all optional). */
const FilterFields = Schema.Struct({
  route: Schema.optional(Schema.NonEmptyString),
  category: Schema.optional(DeadLetterCategory),
  since: Schema.optional(Schema.DateTimeUtc),
  before: Schema.optional(Schema.DateTimeUtc)
})

const ListQuery = Schema.Struct({
  ...FilterFields.fields,
  cursor: Schema.optional(Schema.NonEmptyString),
  limit: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 500)))
})

/** Most entries a bulk redrive or a count goes through. */
const maxBulk = 10_000

const CountQuery = FilterFields

const RedriveMatchingBody = Schema.Struct({
  ...FilterFields.fields,
  /** How many the operator confirmed: at most this many, oldest first. */
  expected: Schema.Number.pipe(Schema.int(), Schema.between(1, maxBulk))
})

const RedriveBody = Schema.Struct({
  ids: Schema.Array(Schema.NonEmptyString).pipe(Schema.minItems(1), Schema.maxItems(500))
})

/** The body of a purge: filters, or `all: true` alone to delete every entry. */
const PurgeBody = Schema.Struct({
  ...FilterFields.fields,
  all: Schema.optional(Schema.Literal(true)),
  /** When given, at most this many (the count the operator confirmed), oldest first. */
  limit: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(1, maxBulk)))
})

/** A keyset cursor: the `(failedAt, id)` of the last entry of the previous page (a time DateTime can hold). */
const Cursor = Schema.parseJson(
  Schema.Tuple(Schema.Number.pipe(Schema.int(), Schema.between(-8.64e15, 8.64e15)), Schema.String)
)
const encodeCursor = (entry: DeadLetterEntry): string =>
  Buffer.from(JSON.stringify([DateTime.toEpochMillis(entry.failedAt), entry.id])).toString("base64url")
const decodeCursor = (cursor: string) =>
  Schema.decodeUnknownEither(Cursor)(Buffer.from(cursor, "base64url").toString("utf8"))

const toFilter = (fields: typeof FilterFields.Type): DeadLetterFilter => ({
  ...(fields.route !== undefined ? { routeId: fields.route } : {}),
  ...(fields.category !== undefined ? { category: fields.category } : {}),
  ...(fields.since !== undefined ? { since: fields.since } : {}),
  ...(fields.before !== undefined ? { before: fields.before } : {})
})

/** Checks a POST: mutations allowed, CSRF token, same origin, JSON body. */
const guard = (options: DashboardOptions) =>
  Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    if (options.allowMutations !== true) {
      return Option.some(failure(403, "mutations are disabled (start with --http-allow-mutations)"))
    }
    if (request.headers["x-csrf-token"] !== options.csrfToken) {
      return Option.some(failure(403, "missing or wrong CSRF token"))
    }
    const origin = request.headers["origin"]
    const host = request.headers["host"]
    if (origin !== undefined && (host === undefined || hostOf(origin) !== host)) {
      return Option.some(failure(403, "cross-origin request refused"))
    }
    if (!(request.headers["content-type"] ?? "").startsWith("application/json")) {
      return Option.some(failure(415, "expected an application/json body"))
    }
    return Option.none()
  })

const hostOf = (origin: string): string | undefined => {
  try {
    return new URL(origin).host
  } catch {
    return undefined
  }
}

const unavailable = (error: { readonly message: string }) => Effect.succeed(failure(503, error.message))

/** An argument the store refuses: its message names the argument, never the value. */
const invalid = (error: { readonly message: string }) => Effect.succeed(failure(400, error.message))

/**
 * The dashboard routes.
 *
 * @since 0.1.0
 */
export const router = (
  options: DashboardOptions
): Effect.Effect<HttpRouter.HttpRouter, never, OutboxInspection | DeadLetterStore | Scope.Scope> =>
  Effect.gen(function* () {
    const inspection = yield* OutboxInspection
    const deadLetters = yield* DeadLetterStore
    const history = History.make(Option.some(inspection), options.history)
    yield* history.sample
    yield* history.run
    const showPayloads = options.showPayloads === true
    const maxBodyBytes = options.maxBodyBytes ?? RequestGuard.DefaultMaxBodyBytes
    const page = DashboardPage.render({
      csrfToken: options.csrfToken,
      allowMutations: options.allowMutations === true,
      refreshMillis: options.refreshMillis ?? 1000
    })

    const partitions = Effect.gen(function* () {
      const snapshot = yield* inspection.snapshot()
      const now = DateTime.toEpochMillis(snapshot.at)
      return json({
        backend: snapshot.backend,
        at: DateTime.formatIso(snapshot.at),
        notes: snapshot.notes,
        partitions: snapshot.partitions.map((p) => partitionJson(p, now)),
        deadLetters: snapshot.deadLetters
      })
    }).pipe(Effect.catchTag("StoreUnavailable", unavailable))

    const list = Effect.gen(function* () {
      const query = yield* Effect.either(HttpServerRequest.schemaSearchParams(ListQuery))
      if (Either.isLeft(query)) return failure(400, "invalid filter: route, category, since, before, cursor, limit")
      const limit = query.right.limit ?? 20
      const filter = toFilter(query.right)
      let after: readonly [number, string] | undefined
      if (query.right.cursor !== undefined) {
        const decoded = decodeCursor(query.right.cursor)
        if (Either.isLeft(decoded)) {
          return failure(400, "invalid cursor: expected a cursor from nextCursor (its time must be a valid date)")
        }
        after = decoded.right
      }
      const since = after === undefined ? filter.since : DateTime.unsafeMake(after[0])
      // entries sharing the cursor's failedAt are read again and skipped up to the cursor's id
      const fetched = yield* deadLetters.list({ ...filter, since, limit: limit + 1 + 100 })
      const cursor = after
      const rest =
        cursor === undefined
          ? fetched
          : fetched.filter((e) => {
              const at = DateTime.toEpochMillis(e.failedAt)
              return at > cursor[0] || (at === cursor[0] && e.id > cursor[1])
            })
      const pageEntries = rest.slice(0, limit)
      const last = pageEntries[pageEntries.length - 1]
      return json({
        entries: pageEntries.map((e) => entryJson(e, showPayloads)),
        nextCursor: rest.length > limit && last !== undefined ? encodeCursor(last) : null
      })
    }).pipe(Effect.catchTags({ InvalidArgument: invalid, StoreUnavailable: unavailable }))

    const redrive = Effect.gen(function* () {
      const refused = yield* guard(options)
      if (Option.isSome(refused)) return refused.value
      const body = yield* RequestGuard.jsonBody(RedriveBody, maxBodyBytes)
      if (Either.isLeft(body)) return RequestGuard.bodyFailure(body.left, maxBodyBytes, 'expected {"ids": [entry ids]}')
      const recordIds = yield* deadLetters.redrive(body.right.ids)
      yield* Effect.logWarning("dead-letter entries redriven from the dashboard").pipe(
        Effect.annotateLogs({ entries: body.right.ids.length })
      )
      return json({ recordIds })
    }).pipe(
      Effect.catchTags({
        NotFound: (error) => Effect.succeed(failure(404, error.message)),
        InvalidRecord: (error) => Effect.succeed(failure(400, error.message)),
        InvalidArgument: invalid,
        StoreUnavailable: unavailable
      })
    )

    const purge = Effect.gen(function* () {
      const refused = yield* guard(options)
      if (Option.isSome(refused)) return refused.value
      const body = yield* RequestGuard.jsonBody(PurgeBody, maxBodyBytes)
      if (Either.isLeft(body)) {
        return RequestGuard.bodyFailure(
          body.left,
          maxBodyBytes,
          'invalid purge: filters route, category, since, before (and limit), or {"all": true}; other keys are refused'
        )
      }
      const { all, limit, ...filters } = body.right
      const filtered = Object.keys(toFilter(filters)).length > 0
      if (all === true && filtered) return failure(400, '{"all": true} deletes every entry: give it without filters')
      if (all !== true && !filtered) {
        return failure(400, 'deleting every dead-letter entry needs {"all": true} (the CLI needs --all)')
      }
      const deleted = yield* deadLetters.deleteWhere({
        ...toFilter(filters),
        ...(limit !== undefined ? { limit } : {})
      })
      yield* Effect.logWarning("dead-letter entries purged from the dashboard").pipe(Effect.annotateLogs({ deleted }))
      return json({ deleted })
    }).pipe(Effect.catchTags({ InvalidArgument: invalid, StoreUnavailable: unavailable }))

    const count = Effect.gen(function* () {
      const query = yield* Effect.either(HttpServerRequest.schemaSearchParams(CountQuery))
      if (Either.isLeft(query)) return failure(400, "invalid filter: route, category, since, before")
      const found = yield* deadLetters.list({ ...toFilter(query.right), limit: maxBulk + 1 })
      return json({ count: Math.min(found.length, maxBulk), capped: found.length > maxBulk })
    }).pipe(Effect.catchTags({ InvalidArgument: invalid, StoreUnavailable: unavailable }))

    const redriveMatching = Effect.gen(function* () {
      const refused = yield* guard(options)
      if (Option.isSome(refused)) return refused.value
      const body = yield* RequestGuard.jsonBody(RedriveMatchingBody, maxBodyBytes)
      if (Either.isLeft(body)) {
        return RequestGuard.bodyFailure(
          body.left,
          maxBodyBytes,
          "invalid redrive: filters route, category, since, before and the confirmed count expected"
        )
      }
      // the oldest `expected` entries: ones dead-lettered after the operator's count are newer and stay
      const entries = yield* deadLetters.list({ ...toFilter(body.right), limit: body.right.expected })
      let redriven = 0
      for (let start = 0; start < entries.length; start += 500) {
        const ids = entries.slice(start, start + 500).map((e) => e.id)
        redriven += (yield* deadLetters.redrive(ids)).length
      }
      yield* Effect.logWarning("dead-letter entries redriven from the dashboard by filter").pipe(
        Effect.annotateLogs({ entries: redriven })
      )
      return json({ redriven })
    }).pipe(
      Effect.catchTags({
        NotFound: (error) => Effect.succeed(failure(404, error.message)),
        InvalidRecord: (error) => Effect.succeed(failure(400, error.message)),
        InvalidArgument: invalid,
        StoreUnavailable: unavailable
      })
    )

    const historyJson = Effect.map(history.points, (points) =>
      json({ intervalMillis: history.intervalMillis, windowMillis: history.windowMillis, points })
    )

    return HttpRouter.empty.pipe(
      HttpRouter.get(
        "/",
        Effect.succeed(
          HttpServerResponse.text(page, {
            contentType: "text/html; charset=utf-8",
            headers: {
              ...noStore,
              "content-security-policy":
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self'",
              "x-frame-options": "DENY",
              "referrer-policy": "no-referrer"
            }
          })
        )
      ),
      HttpRouter.get("/api/partitions", partitions),
      HttpRouter.get("/api/dead-letters", list),
      HttpRouter.post("/api/dead-letters/redrive", redrive),
      HttpRouter.post("/api/dead-letters/purge", purge),
      HttpRouter.get("/api/dead-letters/count", count),
      HttpRouter.post("/api/dead-letters/redrive-matching", redriveMatching),
      HttpRouter.get("/api/history", historyJson)
    )
  })
