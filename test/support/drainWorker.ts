/**
 * One OS process of the multi-process drain tests (test/sqliteMultiProcess.test.ts,
 * test/postgresMultiProcess.test.ts, test/mysqlMultiProcess.test.ts).
 *
 * Usage: `node --import tsx test/support/drainWorker.ts sqlite|postgres|mysql <dbFile|databaseUrl> <workerIndex> <workers> <partitions…>`
 *
 * The worker waits until every worker has registered (so they really run at the same time), then
 * loops: pick the next partition round-robin, take a fresh version from the shared `drain_version`
 * counter (so versions rise and earlier owners get fenced out), claim a batch, pretend to work, and
 * complete the batch together with its completion-log rows in ONE transaction (so the log order is
 * the commit order). A `StaleFencingToken` is counted and the worker moves on; a conflict of that
 * transaction (a deadlock, a serialization failure, SQLite's busy lock) runs it again, up to five times:
 * inside a caller's transaction every store returns such failures to the caller. It stops when no partition holds a non-terminal record, and prints
 * one JSON summary line.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import * as Schema from "effect/Schema"
import * as PostgresOutboxSchema from "../../src/layers/postgres/PostgresOutboxSchema.js"
import * as PostgresOutboxStore from "../../src/layers/postgres/PostgresOutboxStore.js"
import * as SqliteDatabase from "../../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteOutboxStore from "../../src/layers/sqlite/SqliteOutboxStore.js"
import { isBusy } from "../../src/layers/sqlite/SqliteSupport.js"
import { OutboxStore } from "../../src/services/OutboxStore.js"
import { clientLayer } from "./PostgresServer.js"
import * as MysqlOutboxSchema from "../../src/layers/mysql/MysqlOutboxSchema.js"
import * as MysqlOutboxStore from "../../src/layers/mysql/MysqlOutboxStore.js"
import { clientLayer as mysqlClientLayer } from "./MysqlServer.js"

const [backend, target, indexArg, workersArg, ...partitions] = process.argv.slice(2)
if (
  (backend !== "sqlite" && backend !== "postgres" && backend !== "mysql") ||
  target === undefined ||
  indexArg === undefined ||
  workersArg === undefined ||
  partitions.length === 0
) {
  process.stderr.write(
    "usage: drainWorker sqlite|postgres|mysql <dbFile|databaseUrl> <workerIndex> <workers> <partitions…>\n"
  )
  process.exit(2)
}
const workerIndex = Number(indexArg)
const workers = Number(workersArg)
const owner = `worker-${workerIndex}`
const deadlineMillis = 90_000

const VersionRow = Schema.Struct({ v: Schema.Number })
const CountRow = Schema.Struct({ n: Schema.Number })

interface Summary {
  worker: number
  rounds: number
  claims: number
  claimed: number
  completed: number
  staleClaims: number
  staleCompletes: number
  /** Conflicts of the complete's transaction, each run again up to five times (see {@link isConflict}). */
  conflictRetries: number
  errors: Array<string>
}

/**
 * A conflict of the worker's own transaction: a deadlock or serialization failure (PostgreSQL), a deadlock or
 * lock-wait timeout (MySQL), another connection's lock after the busy timeout (SQLite). Inside a caller's
 * transaction every store returns these to the caller (the transaction is doomed), wrapped in
 * `StoreUnavailable` or as the bare `SqlError` of the caller's own statements; the caller runs its transaction
 * again, as an application does.
 */
const isConflict = (error: unknown): boolean => {
  const tag: unknown = typeof error === "object" && error !== null ? Reflect.get(error, "_tag") : undefined
  const sqlError: unknown = tag === "StoreUnavailable" ? Reflect.get(Object(error), "cause") : error
  if (backend === "postgres") return PostgresOutboxSchema.isConflict(sqlError)
  if (backend === "mysql") return MysqlOutboxSchema.isConflict(sqlError)
  return isBusy(sqlError)
}

/**
 * What lies under a store error, for the summary: the causes' messages and the driver's SQLSTATE (`code`),
 * so a failed run says whether it was a deadlock, a serialization failure or a lost connection.
 */
const causeOf = (error: unknown): string => {
  const parts: Array<string> = []
  let cause: unknown = typeof error === "object" && error !== null ? Reflect.get(error, "cause") : undefined
  for (let depth = 0; depth < 4 && typeof cause === "object" && cause !== null; depth++) {
    const message: unknown = Reflect.get(cause, "message")
    const code: unknown = Reflect.get(cause, "code")
    parts.push(
      `${typeof message === "string" ? message : String(cause)}${typeof code === "string" ? ` [${code}]` : ""}`
    )
    cause = Reflect.get(cause, "cause")
  }
  return parts.length === 0 ? "" : ` (cause: ${parts.join(" <- ")})`
}

const program = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const store = yield* OutboxStore
  const summary: Summary = {
    worker: workerIndex,
    rounds: 0,
    claims: 0,
    claimed: 0,
    completed: 0,
    conflictRetries: 0,
    staleClaims: 0,
    staleCompletes: 0,
    errors: []
  }
  const started = yield* Clock.currentTimeMillis

  // start barrier
  yield* sql`INSERT INTO drain_ready (worker) VALUES (${workerIndex})`
  for (;;) {
    const ready = yield* Effect.flatMap(
      backend === "mysql"
        ? sql`SELECT count(*) AS n FROM drain_ready`
        : sql`SELECT CAST(count(*) AS INTEGER) AS n FROM drain_ready`,
      Schema.decodeUnknown(Schema.Array(CountRow))
    )
    if ((ready[0]?.n ?? 0) >= workers) break
    yield* Effect.sleep("5 millis")
  }

  const nextVersion = Effect.flatMap(
    backend === "mysql"
      ? // no RETURNING: read the row back in the transaction that changed it
        sql.withTransaction(Effect.zipRight(sql`UPDATE drain_version SET v = v + 1`, sql`SELECT v FROM drain_version`))
      : sql`UPDATE drain_version SET v = v + 1 RETURNING v`,
    Schema.decodeUnknown(Schema.Array(VersionRow))
  ).pipe(Effect.map((rows) => rows[0]?.v ?? 0))

  const remaining = Effect.forEach(partitions, (pk) =>
    Effect.zipWith(store.countPending(pk), store.countClaimed(pk), (a, b) => a + b)
  ).pipe(Effect.map((counts) => counts.reduce((a, b) => a + b, 0)))

  const note = (error: { readonly _tag: string; readonly message: string }) =>
    Effect.sync(() => {
      summary.errors.push(`${error._tag}: ${error.message}${causeOf(error)}`)
    })

  for (let round = 0; ; round++) {
    summary.rounds = round + 1
    const now = yield* Clock.currentTimeMillis
    if (now - started > deadlineMillis) {
      summary.errors.push("deadline passed before the outbox was drained")
      break
    }
    const pk = partitions[round % partitions.length] ?? ""
    const version = yield* nextVersion
    const token = { owner, version }
    const limit = yield* Random.nextIntBetween(1, 40)
    const claimed = yield* store.claim(pk, token, limit).pipe(
      Effect.map(Option.some),
      Effect.catchTag("StaleFencingToken", () =>
        Effect.sync(() => {
          summary.staleClaims++
          return Option.none()
        })
      ),
      Effect.catchAll((error) => Effect.as(note(error), Option.none()))
    )
    if (Option.isNone(claimed)) continue
    summary.claims++
    const records = claimed.value.records
    summary.claimed += records.length
    if (records.length === 0) {
      if ((yield* remaining.pipe(Effect.catchAll((error) => Effect.as(note(error), 1)))) === 0) break
      continue
    }
    // pretend to send
    yield* Effect.sleep(`${yield* Random.nextIntBetween(0, 3)} millis`)
    const done = yield* sql
      .withTransaction(
        Effect.gen(function* () {
          yield* store.complete(
            records.map((r) => r.id),
            token
          )
          for (const r of records) {
            yield* sql`INSERT INTO drain_log (worker, record_id, partition_key, ordering_key, created_at, seq, version)
              VALUES (${workerIndex}, ${r.id}, ${r.partitionKey}, ${Option.getOrNull(r.orderingKey)},
                      ${r.createdAt.epochMillis}, ${r.seq}, ${version})`
          }
        })
      )
      .pipe(
        Effect.tapError((error) =>
          Effect.sync(() => {
            if (isConflict(error)) summary.conflictRetries++
          })
        ),
        Effect.retry({ while: isConflict, times: 5 }),
        Effect.as(true),
        Effect.catchTag("StaleFencingToken", () =>
          Effect.sync(() => {
            summary.staleCompletes++
            return false
          })
        ),
        Effect.catchAll((error) => Effect.as(note(error), false))
      )
    if (done) summary.completed += records.length
  }
  return summary
})

const layer: Layer.Layer<OutboxStore | SqlClient.SqlClient, unknown> =
  backend === "postgres"
    ? Layer.provideMerge(PostgresOutboxStore.layer, clientLayer(target))
    : backend === "mysql"
      ? Layer.provideMerge(MysqlOutboxStore.layer, mysqlClientLayer(target))
      : Layer.provideMerge(SqliteOutboxStore.layer, SqliteDatabase.layer({ filename: target }))

Effect.runPromise(program.pipe(Effect.provide(layer))).then(
  (summary) => {
    process.stdout.write(`${JSON.stringify(summary)}\n`)
    process.exit(summary.errors.length === 0 ? 0 : 1)
  },
  (error: unknown) => {
    process.stderr.write(`worker ${workerIndex} failed: ${String(error)}\n`)
    process.exit(3)
  }
)
