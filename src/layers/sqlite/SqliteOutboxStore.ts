/**
 * The SQLite `OutboxStore` (SPEC §3.2), the embedded default backend, on `@effect/sql` (provide a
 * `SqlClient`, e.g. with `SqliteDatabase.layer({ filename })`). Runs its own migrations and shares the
 * database with other tables.
 *
 * - Persist joins an enclosing `sql.withTransaction` (R-PERSIST-6).
 * - Claim and expire are one transaction each, fenced by the partition's fence row (R-CLAIM-2, R-EXP-1);
 *   claims select through `ClaimOrder` (R-CLAIM-4/5/6).
 * - Complete/release with several ids apply the matching ones and fail naming the rest (R-DONE-3: not
 *   all-or-nothing); calls of one event-loop turn share a commit unless `groupCommit` is false.
 * - Busy failures are retried briefly outside a caller's transaction; any other SQL failure is
 *   `StoreUnavailable`; an undecodable row fails the operation with `CorruptRecord` (never skipped).
 * - Terminal records are swept after `retention`, at most once per `sweepInterval`.
 * - Stale reclaim (R-CLAIM-6) only when `staleClaimAfter` is given, against this process's clock.
 *
 * Design notes: docs/design/sqlite.md.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as ClaimOrder from "../../domain/ClaimOrder.js"
import * as Fence from "../../domain/Fence.js"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import {
  type CorruptRecord,
  type InvalidConfiguration,
  type StaleFencingToken,
  StoreUnavailable
} from "../../domain/OutboxError.js"
import type * as OutboxRecord from "../../domain/OutboxRecord.js"
import {
  type Backend,
  belowHighWaterMark,
  ClaimBatch,
  make as makeStore,
  notClaimedBy,
  OutboxStore,
  partitionPage as keysetPage,
  type StoreOptions,
  validateStoreOptions
} from "../../services/OutboxStore.js"
import { type GroupMember, groupPerTurn } from "../../services/EventLoop.js"
import * as SqlDialect from "../sql/SqlDialect.js"
import * as SqlOutboxStatements from "../sql/SqlOutboxStatements.js"
import * as SqliteOutboxSchema from "./SqliteOutboxSchema.js"
import * as SqliteOutboxRows from "./SqliteOutboxRows.js"
import * as SqlitePersist from "./SqlitePersist.js"
import { chunksOf, countOf, fenceOf, idsOf, partitionsOf, records, run, select } from "./SqliteStatement.js"
import { busyRetry, isBusy, retryBusy } from "./SqliteSupport.js"

/**
 * Options of the SQLite outbox store.
 *
 * @since 0.1.0
 */
export interface SqliteOutboxStoreOptions extends StoreOptions {
  /** Prefix of every table and index name (letters, digits, `_`). Default none. */
  readonly tablePrefix?: string | undefined
  /** Minimum time between two retention sweeps (default 1 minute). */
  readonly sweepInterval?: Duration.DurationInput | undefined
  /** Rows deleted per sweep statement (default 500); a sweep runs at most 20 of them. */
  readonly sweepChunk?: number | undefined
  /**
   * Group commit of `complete` and `release` (default true): calls made outside a caller's transaction
   * while one is waiting share one transaction, so drainers of several partitions pay one commit (one
   * `fsync` with `synchronous = FULL`) between them instead of one each. Every call still gets its own
   * outcome: its matching ids applied, the others named in its `StaleFencingToken`. False runs each call
   * as its own statement.
   */
  readonly groupCommit?: boolean | undefined
}

/** Ids per guarded UPDATE (keeps the bound values well under SQLite's limit). */
const idChunk = 1000
/** Partition keys per `listPartitions` page. */
const partitionPage = 100
/** Statements per retention sweep. */
const sweepStatements = 20

/** The message of the driver error under an `SqlError`, on one line. */
const causeMessage = (error: SqlError): string => {
  const cause: unknown = error.cause
  const text =
    typeof cause === "object" && cause !== null && "message" in cause && typeof cause.message === "string"
      ? cause.message
      : error.message
  return text.split("\n")[0] ?? text
}

/** A `ROLLBACK` that failed because SQLite had already ended the transaction. */
const rolledBackAlready = (error: SqlError): boolean =>
  /no transaction is active|no such savepoint/.test(causeMessage(error))

/**
 * Lock-failure recognition and retry, shared by the SQLite stores (defined in `SqliteSupport`).
 *
 * @since 0.1.0
 */
export { isBusy, retryBusy } from "./SqliteSupport.js"

/** A decoded candidate row with the facts claim selection looks at. */
interface Candidate extends ClaimOrder.ClaimFacts {
  readonly decoded: SqliteOutboxRows.DecodedRow
}

const candidateOf = (decoded: SqliteOutboxRows.DecodedRow): Candidate => {
  const row = decoded.row
  return {
    decoded,
    createdAt: DateTime.unsafeMake(row.created_at),
    seq: row.seq,
    envelopeId: row.envelope_id,
    status: decoded.status,
    orderingKey: Option.fromNullable(row.ordering_key),
    claimVersion: row.claim_version,
    claimedAt: row.claimed_at === null ? Option.none() : Option.some(DateTime.unsafeMake(row.claimed_at))
  }
}

/** One `complete` or `release` call (its ids without duplicates). */
interface SettleCall {
  readonly operation: "complete" | "release"
  readonly ids: ReadonlyArray<string>
  readonly token: LeaseToken.LeaseTokenLike
  /** The caller's clock reading: `completed_at` / `terminal_at` of a complete. */
  readonly now: number
}

/** A call waiting for a group commit, and where its result goes. */
type SettleRequest = GroupMember<SettleCall, Set<string>, SettleFailure>

/** How one complete/release statement can fail before the ids are known. */
type SettleFailure = SqlError | StoreUnavailable

/** Statements of the store's own transactions (never interpolated with values). */
const control = {
  begin: "BEGIN",
  commit: "COMMIT",
  rollback: "ROLLBACK",
  savepoint: "SAVEPOINT outbox_store",
  release: "RELEASE SAVEPOINT outbox_store",
  rollbackSavepoint: "ROLLBACK TO SAVEPOINT outbox_store"
} as const

/**
 * Builds the SQLite outbox store on the `SqlClient` in context, running the migrations first.
 *
 * Statements run on the client's connection directly (`SqlClient.reserve`, or the connection of the
 * caller's `sql.withTransaction`), without the client's per-statement span and scope: every public
 * operation already has one span (from the store core), and a claim or persist issues several
 * statements.
 *
 * @since 0.1.0
 */
export const make = (
  options: SqliteOutboxStoreOptions = {}
): Effect.Effect<OutboxStore["Type"], StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const names = yield* SqliteOutboxSchema.tableNames(options.tablePrefix ?? "")
    const { retentionMillis, staleClaimAfterMillis: staleMillis } = yield* validateStoreOptions(
      "SqliteOutboxStore",
      options
    )
    const sweepIntervalMillis = Duration.toMillis(Duration.decode(options.sweepInterval ?? Duration.minutes(1)))
    const sweepChunk = Math.max(1, Math.floor(options.sweepChunk ?? 500))
    const groupCommit = options.groupCommit ?? true

    yield* SqliteOutboxSchema.migrate(names).pipe(
      Effect.retry({ schedule: busyRetry, while: isBusy }),
      StoreUnavailable.refail("migrate")
    )

    const st = SqliteOutboxSchema.statements(names, { staleReclaim: staleMillis !== undefined })
    const bind = SqlOutboxStatements.binds(SqlDialect.sqlite)
    const persistPath = SqlitePersist.make(st)
    /** When the last retention sweep ran (plain state: only read and set between effects). */
    let lastSweep = yield* Clock.currentTimeMillis

    /** Runs `f` on the caller's transaction connection when there is one, else on a reserved connection. */
    const withConnection = <A, E>(
      f: (conn: Connection, nested: boolean) => Effect.Effect<A, E>,
      retry: "always" | "outside a caller's transaction"
    ): Effect.Effect<A, E | SqlError> =>
      Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) => {
        if (Option.isNone(outer)) return retryBusy(Effect.scoped(Effect.flatMap(sql.reserve, (conn) => f(conn, false))))
        const inner = f(outer.value[0], true)
        return retry === "always" ? retryBusy(inner) : inner
      })

    /** Undoes a transaction or savepoint after a failure; a failing rollback is logged, the failure kept. */
    const undo = (conn: Connection, nested: boolean): Effect.Effect<void> =>
      (nested
        ? Effect.zipRight(run(conn, control.rollbackSavepoint, []), run(conn, control.release, []))
        : run(conn, control.rollback, [])
      ).pipe(
        Effect.asVoid,
        Effect.catchAll((error) =>
          // after SQLITE_FULL or an I/O error SQLite has already rolled the transaction back itself
          rolledBackAlready(error) ? Effect.void : Effect.logWarning(`outbox rollback failed: ${causeMessage(error)}`)
        )
      )

    /**
     * Runs `body` in a transaction on one connection: `BEGIN … COMMIT`, or a savepoint inside the
     * caller's `sql.withTransaction` (R-PERSIST-6). On any failure (also of `COMMIT`) it is rolled back
     * and the failure returned. The body is a short run of statements and is not interrupted half-way.
     */
    const inTransaction =
      <A, E>(body: (conn: Connection) => Effect.Effect<A, E | SqlError>) =>
      (conn: Connection, nested: boolean): Effect.Effect<A, E | SqlError> =>
        Effect.uninterruptible(
          Effect.flatMap(run(conn, nested ? control.savepoint : control.begin, []), () =>
            Effect.matchCauseEffect(body(conn), {
              onFailure: (cause) => Effect.zipRight(undo(conn, nested), Effect.failCause(cause)),
              onSuccess: (value) =>
                Effect.matchEffect(run(conn, nested ? control.release : control.commit, []), {
                  onFailure: (error) => Effect.zipRight(undo(conn, nested), Effect.fail(error)),
                  onSuccess: () => Effect.succeed(value)
                })
            })
          )
        )

    /**
     * Runs `body` in a transaction (a savepoint inside a caller's transaction), retrying busy failures
     * only when the store owns the transaction, and turns SQL failures into `StoreUnavailable`.
     */
    const transact = <A, E extends { readonly _tag: string }>(
      operation: string,
      partitionKey: string | undefined,
      body: (conn: Connection) => Effect.Effect<A, E | SqlError>
    ): Effect.Effect<A, Exclude<E, { readonly _tag: "SqlError" }> | StoreUnavailable> =>
      withConnection(inTransaction(body), "outside a caller's transaction").pipe(
        StoreUnavailable.refailTag("SqlError", operation, partitionKey)
      )

    /** Runs `body` on a connection outside any transaction of the store's, retrying busy failures. */
    const standalone = <A, E extends { readonly _tag: string }>(
      operation: string,
      partitionKey: string | undefined,
      body: (conn: Connection) => Effect.Effect<A, E | SqlError>
    ): Effect.Effect<A, Exclude<E, { readonly _tag: "SqlError" }> | StoreUnavailable> =>
      withConnection(body, "always").pipe(StoreUnavailable.refailTag("SqlError", operation, partitionKey))

    /** Raises the partition's fence to the token's version, or fails when the token is below it. */
    const raiseFence = (
      conn: Connection,
      operation: string,
      partitionKey: string,
      token: LeaseToken.LeaseTokenLike
    ): Effect.Effect<void, SqlError | StoreUnavailable | StaleFencingToken> =>
      Effect.flatMap(select(fenceOf, operation, conn, st.raiseFence, [partitionKey, token.version]), (accepted) =>
        accepted.length > 0
          ? Effect.void
          : Effect.flatMap(
              select(fenceOf, operation, conn, st.readFence, [partitionKey]),
              (current): Effect.Effect<never, StoreUnavailable | StaleFencingToken> => {
                const mark = current[0] ?? 0
                return Fence.admit(mark, token.version) === "stale"
                  ? Effect.fail(belowHighWaterMark(operation, partitionKey, token, mark))
                  : Effect.fail(
                      new StoreUnavailable({
                        operation,
                        partitionKey,
                        cause: `the fence row rejected version ${token.version} at high-water mark ${mark}`
                      })
                    )
              }
            )
      )

    /** Deletes terminal records older than the retention, at most once per sweep interval. */
    const sweep = (now: number) =>
      Effect.gen(function* () {
        const cutoff = now - retentionMillis
        for (let i = 0; i < sweepStatements; i++) {
          const deleted = yield* standalone("sweep", undefined, (conn) => run(conn, st.sweep, [cutoff, sweepChunk]))
          if (deleted.length < sweepChunk) break
        }
      }).pipe(
        Effect.catchAll((error) => Effect.logWarning("outbox retention sweep failed", error)),
        Effect.annotateLogs("backend", "sqlite")
      )

    const maybeSweep = Effect.flatMap(Clock.currentTimeMillis, (now) => {
      if (now - lastSweep < sweepIntervalMillis) return Effect.void
      lastSweep = now
      return sweep(now)
    })

    const persist: Backend["persist"] = (batch, { replaceTerminal }) =>
      transact("persist", batch[0]?.partitionKey, (conn) => persistPath.persistIn(conn, batch, replaceTerminal))

    const claimIn = (
      conn: Connection,
      partitionKey: string,
      token: LeaseToken.LeaseTokenLike,
      limit: number
    ): Effect.Effect<ClaimBatch, SqlError | StoreUnavailable | StaleFencingToken | CorruptRecord> =>
      Effect.gen(function* () {
        yield* raiseFence(conn, "claim", partitionKey, token)
        if (limit <= 0) return ClaimBatch([])
        const now = yield* Clock.currentTimeMillis
        const staleCutoff = staleMillis === undefined ? undefined : now - staleMillis
        const rows = yield* run(
          conn,
          st.selectClaimable,
          bind.selectClaimable(partitionKey, token.version, staleCutoff, limit)
        )
        const candidates: Array<Candidate> = []
        for (const row of rows) {
          const decoded = SqliteOutboxRows.decodeRowFields(row)
          if (Either.isLeft(decoded)) return yield* decoded.left
          candidates.push(candidateOf(decoded.right))
        }
        // the SQL already applied R-CLAIM-4/5/6; the shared selection makes the final decision
        const chosen = ClaimOrder.selectFrom(candidates, limit, {
          version: token.version,
          nowMillis: now,
          staleClaimAfterMillis: staleMillis
        })
        if (chosen.length === 0) return ClaimBatch([])
        const updated = new Set<string>()
        for (const ids of chunksOf(
          chosen.map((c) => c.decoded.row.id),
          idChunk
        )) {
          const claimedIds = yield* select(
            idsOf,
            "claim",
            conn,
            st.claimUpdate(ids.length),
            bind.claimUpdate(ids, token, now, partitionKey, staleCutoff)
          )
          for (const id of claimedIds) updated.add(id)
        }
        // read back: the candidates were read under this transaction's write lock; the update changed
        // exactly the claim fields, which are applied to them here
        const applied: SqliteOutboxRows.AppliedClaim = {
          owner: token.owner,
          version: token.version,
          at: DateTime.unsafeMake(now)
        }
        const claimed: Array<OutboxRecord.OutboxRecord> = []
        for (const c of chosen) {
          if (updated.has(c.decoded.row.id)) claimed.push(SqliteOutboxRows.toRecord(c.decoded, applied, c.createdAt))
        }
        claimed.sort(ClaimOrder.compareAge)
        return ClaimBatch(claimed)
      })

    const claim: Backend["claim"] = (partitionKey, token, limit) =>
      Effect.zipLeft(
        transact("claim", partitionKey, (conn) => claimIn(conn, partitionKey, token, limit)),
        maybeSweep
      )

    /** Runs the guarded updates of one complete/release call on `conn`; returns the ids they changed. */
    const applySettle = (conn: Connection, request: SettleCall): Effect.Effect<Set<string>, SettleFailure> =>
      Effect.gen(function* () {
        const { now, operation, token } = request
        const matched = new Set<string>()
        for (const chunk of chunksOf(request.ids, idChunk)) {
          const done =
            operation === "complete"
              ? yield* select(idsOf, operation, conn, st.complete(chunk.length), bind.complete(chunk, token, now))
              : yield* select(idsOf, operation, conn, st.release(chunk.length), bind.release(chunk, token))
          for (const id of done) matched.add(id)
        }
        return matched
      })

    /**
     * Runs the waiting calls of one group. One call with one chunk runs as a single autocommitted
     * statement; more share one transaction, each call keeping its own result (a guarded UPDATE is atomic
     * on its own, and a failing statement undoes only itself). A busy failure fails the whole transaction,
     * which is rolled back and retried; a failing `COMMIT` fails every call of the group. Total: every
     * call's deferred is completed, whatever happens.
     */
    const runGroup = (group: ReadonlyArray<SettleRequest>): Effect.Effect<void> => {
      const only = group.length === 1 ? group[0] : undefined
      const results = new Map<SettleRequest, Either.Either<Set<string>, SettleFailure>>()
      const body = (conn: Connection): Effect.Effect<void, SettleFailure> =>
        Effect.forEach(
          group,
          (request) =>
            Effect.flatMap(Effect.either(applySettle(conn, request)), (result) => {
              if (Either.isLeft(result) && isBusy(result.left)) return Effect.fail(result.left)
              results.set(request, result)
              return Effect.void
            }),
          { discard: true }
        )
      const run =
        only !== undefined && only.ids.length <= idChunk
          ? withConnection(body, "always")
          : withConnection(inTransaction(body), "always")
      return Effect.matchCauseEffect(run, {
        onFailure: (cause) =>
          Effect.forEach(group, (request) => Deferred.failCause(request.done, cause), { discard: true }),
        onSuccess: () =>
          Effect.forEach(
            group,
            (request) => {
              const result = results.get(request)
              return result === undefined
                ? Deferred.die(request.done, new Error("group commit left a call without a result"))
                : Deferred.complete(request.done, result)
            },
            { discard: true }
          )
      })
    }

    /**
     * Joins the next group commit and waits for its own result: the calls made in the same turn of the
     * event loop share one transaction ({@link runGroup}).
     */
    const settleGrouped = groupPerTurn<SettleCall, Set<string>, SettleFailure>(runGroup)

    /** The guarded update of complete/release; fails naming the ids that did not match, after committing the rest. */
    const settle = (operation: "complete" | "release", ids: ReadonlyArray<string>, token: LeaseToken.LeaseTokenLike) =>
      Effect.gen(function* () {
        const unique = Array.from(new Set(ids))
        const now = yield* Clock.currentTimeMillis
        const outer = yield* Effect.serviceOption(SqlClient.TransactionConnection)
        const call: SettleCall = { operation, ids: unique, token, now }
        const matched =
          groupCommit && Option.isNone(outer)
            ? yield* settleGrouped(call)
            : // inside a caller's transaction (or without group commit): one guarded UPDATE is atomic on its
              // own; several chunks share one transaction
              yield* withConnection(
                (conn, nested) =>
                  unique.length <= idChunk
                    ? applySettle(conn, call)
                    : inTransaction((c) => applySettle(c, call))(conn, nested),
                unique.length <= idChunk ? "always" : "outside a caller's transaction"
              )
        if (matched.size === unique.length) return
        return yield* notClaimedBy(
          operation,
          token,
          ids.filter((id) => !matched.has(id))
        )
      }).pipe(StoreUnavailable.refailTag("SqlError", operation))

    const expire: Backend["expire"] = (before, partitionKey, token) =>
      transact("expire", partitionKey, (conn) =>
        Effect.gen(function* () {
          yield* raiseFence(conn, "expire", partitionKey, token)
          const now = yield* Clock.currentTimeMillis
          const rows = yield* run(conn, st.expire, [now, partitionKey, DateTime.toEpochMillis(before)])
          return rows.length
        })
      )

    const count = (operation: "countPending" | "countClaimed", text: string) => (partitionKey: string) =>
      standalone(operation, partitionKey, (conn) =>
        Effect.map(select(countOf, operation, conn, text, [partitionKey]), (rows) => rows[0] ?? 0)
      )

    const backend: Backend = {
      name: "sqlite",
      persist,
      claim,
      /**
       * Completes the ids that are claimed by the token, in one transaction, and then fails with
       * `StaleFencingToken` naming the ids that were not: with several ids the matching ones stay completed.
       */
      complete: (ids, token) => settle("complete", ids, token),
      /** Releases like {@link complete} completes: matching ids stay released when others mismatch. */
      release: (ids, token) => settle("release", ids, token),
      expire,
      queryPending: (partitionKey, limit) =>
        standalone("queryPending", partitionKey, (conn) => records(conn, st.queryPending, [partitionKey, limit])),
      countPending: count("countPending", st.countPending),
      countClaimed: count("countClaimed", st.countClaimed),
      listPartitions: Stream.paginateChunkEffect("", (after: string) =>
        standalone("listPartitions", undefined, (conn) =>
          select(partitionsOf, "listPartitions", conn, st.listPartitions, [after, partitionPage])
        ).pipe(Effect.map((keys) => keysetPage(keys, partitionPage)))
      )
    }
    return makeStore(backend)
  })

/**
 * The SQLite outbox store with the given options (`staleClaimAfter`, `retention`, `tablePrefix`,
 * `sweepInterval`). Requires a `SqlClient`; runs the migrations when built.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: SqliteOutboxStoreOptions
): Layer.Layer<OutboxStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> =>
  Layer.effect(OutboxStore, make(options))

/**
 * The SQLite outbox store with default options (no stale reclaim, 1 hour retention, no table prefix).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<OutboxStore, StoreUnavailable | InvalidConfiguration, SqlClient.SqlClient> = layerWith(
  {}
)
