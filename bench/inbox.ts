/**
 * Benchmark of the inbox (SPEC §12; run: `npx tsx bench/inbox.ts`, `--quick` for a short run).
 *
 * `Inbox.process` on SQLite (a file in WAL mode, `synchronous = FULL`: each commit is an fsync) and on
 * PostgreSQL (its own server on 127.0.0.1, fsync on), against a raw loop on the same database engine that
 * does the same work by hand: in one transaction per delivered message, insert the message id if absent
 * (the inbox's own statement), for a message with an ordering key raise the key's mark (the inbox's own
 * conditional upsert), and run the handler's write (`INSERT INTO orders_seen …`). The raw loop uses
 * better-sqlite3 / `pg` directly: no Effect, no validation, no row decoding. A third side writes the same
 * statements by hand on `@effect/sql` (`sql.withTransaction`), which splits the gap into the SQL client's
 * share and the inbox's own.
 *
 * All sides process the same deliveries — half of them with an ordering key (20 keys, rising `seq`), one in
 * ten a redelivery of an earlier message (a `Duplicate`: no handler write) — in the same process, each side on
 * its own database; within a round the sides take turns every 50 deliveries, so all see the same machine load.
 * Figures: messages per second of each round; ratios best against best and the median of the per-round ratios;
 * statements sent and CPU time per message on each side.
 * Goal: inbox ≥ 0.8× the raw loop. The hand-written side is also the ceiling: the handler must run on the
 * application's `SqlClient` in the same transaction, so no code on that client beats the hand-written loop; each
 * backend's result states that ceiling (hand-written / raw) and whether the goal lies within it.
 * Writes bench/results/inbox.json.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as SqlClient from "@effect/sql/SqlClient"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import { RawSqlite } from "./RawSqlite.js"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type { InboxMessage } from "../src/domain/InboxMessage.js"
import * as PostgresInboxStore from "../src/layers/postgres/PostgresInboxStore.js"
import * as SqlInbox from "../src/layers/sql/SqlInbox.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteInboxStore from "../src/layers/sqlite/SqliteInboxStore.js"
import * as Inbox from "../src/programs/Inbox.js"
import type { InboxStore } from "../src/services/InboxStore.js"
import { clientLayer, createDatabase, startPostgres } from "../test/support/PostgresServer.js"
import { progress } from "./Progress.js"

const quick = process.argv.includes("--quick")
const messagesPerRound = quick ? 300 : 1_000
const rounds = quick ? 3 : 5
const consumer = "bench"
const here = path.dirname(fileURLToPath(import.meta.url))
const goal = 0.8

// ---------------------------------------------------------------------------------------------------
// The deliveries both sides process
// ---------------------------------------------------------------------------------------------------

interface Delivery {
  readonly message: InboxMessage
  readonly orderId: string
  readonly customer: string
  readonly totalCents: number
}

let made = 0
const seqByKey = new Map<string, number>()

/** One round's deliveries: fresh messages, half keyed, every tenth a redelivery of an earlier one of the round. */
const makeDeliveries = (count: number): Array<Delivery> => {
  const out: Array<Delivery> = []
  for (let i = 0; i < count; i++) {
    const earlier = out[Math.floor(i / 2)]
    if (i % 10 === 9 && earlier !== undefined) {
      out.push(earlier)
      continue
    }
    const n = ++made
    const key = n % 2 === 0 ? `customer-${n % 20}` : undefined
    const seq = (seqByKey.get(key ?? "") ?? 0) + 1
    seqByKey.set(key ?? "", seq)
    out.push({
      message: {
        messageId: `msg-${n}-${Math.random().toString(36).slice(2, 10)}`,
        partitionKey: `tenant-${n % 4}`,
        ...(key !== undefined ? { orderingKey: key, seq } : { seq })
      },
      orderId: `order-${n}`,
      customer: key ?? "guest",
      totalCents: 100 + (n % 9_000)
    })
  }
  return out
}

const ordersSeenDdl =
  "CREATE TABLE IF NOT EXISTS orders_seen (order_id TEXT PRIMARY KEY, customer TEXT NOT NULL, total_cents INTEGER NOT NULL)"

// ---------------------------------------------------------------------------------------------------
// Statement counting: every better-sqlite3 statement and every pg query of the process (both sides load
// the same modules)
// ---------------------------------------------------------------------------------------------------

const requireModule = createRequire(import.meta.url)
const counter = { on: false, count: 0 }
const countOn = <A>(body: () => Promise<A>): Promise<readonly [A, number]> => {
  counter.count = 0
  counter.on = true
  return body().then(
    (a) => {
      counter.on = false
      return [a, counter.count] as const
    },
    (error: unknown) => {
      counter.on = false
      throw error
    }
  )
}
const patch = (prototype: unknown, methods: ReadonlyArray<string>): void => {
  for (const method of methods) {
    const original: unknown =
      typeof prototype === "object" && prototype !== null ? Reflect.get(prototype, method) : undefined
    if (typeof original !== "function") continue
    Reflect.set(Object(prototype), method, function (this: unknown, ...args: Array<unknown>): unknown {
      if (counter.on) counter.count += 1
      return Reflect.apply(original, this, args)
    })
  }
}

{
  const probe = new RawSqlite(":memory:")
  patch(Reflect.getPrototypeOf(probe.prepare("SELECT 1")), ["run", "all", "get", "iterate"])
  probe.close()
}

// pg (typed here: only what the bench uses)
interface RawResult {
  readonly rows: Array<Record<string, unknown>>
}
interface RawClient {
  connect(): Promise<void>
  query(text: string, values?: ReadonlyArray<unknown>): Promise<RawResult>
  end(): Promise<void>
  on(event: "error", listener: (error: unknown) => void): void
}
type RawClientConstructor = new (config: { readonly connectionString: string }) => RawClient
const pgModule: { readonly Client: RawClientConstructor } = requireModule("pg")
patch(Reflect.get(pgModule.Client, "prototype"), ["query"])

// ---------------------------------------------------------------------------------------------------
// The two sides
// ---------------------------------------------------------------------------------------------------

/** One side of a backend: processes a round's deliveries, resolves to how many the handler applied. */
interface Side {
  readonly run: (deliveries: ReadonlyArray<Delivery>) => Promise<number>
  readonly close: () => Promise<void>
}

/** `Inbox.process` for every delivery, the handler's write on the same client, inside one Effect. */
const inboxSide = <E>(layer: Layer.Layer<InboxStore | SqlClient.SqlClient, E>): Side => {
  const runtime = ManagedRuntime.make(layer)
  const ready = runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(ordersSeenDdl)))
  return {
    run: async (deliveries) => {
      await ready
      return runtime.runPromise(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          let applied = 0
          for (const delivery of deliveries) {
            const outcome = yield* Inbox.process(
              consumer,
              delivery.message,
              sql`INSERT INTO orders_seen (order_id, customer, total_cents)
                  VALUES (${delivery.orderId}, ${delivery.customer}, ${delivery.totalCents})`
            )
            if (outcome._tag === "Processed") applied += 1
          }
          return applied
        })
      )
    },
    close: () => runtime.dispose()
  }
}

/**
 * The same work written by hand on the same kind of `SqlClient` (`@effect/sql`): the inbox's statements and the
 * handler's insert in one `sql.withTransaction` — what the inbox replaces in an Effect application; it
 * separates the inbox's own cost from the SQL client's.
 */
const handWrittenSide = <E>(
  layer: Layer.Layer<SqlClient.SqlClient, E>,
  statements: ReturnType<typeof SqlInbox.statements>
): Side => {
  const runtime = ManagedRuntime.make(layer)
  return {
    run: (deliveries) =>
      runtime.runPromise(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          let applied = 0
          for (const { message, orderId, customer, totalCents } of deliveries) {
            const done = yield* sql.withTransaction(
              Effect.gen(function* () {
                const now = Date.now()
                const fresh =
                  (yield* sql.unsafe(statements.record, [consumer, message.messageId, message.partitionKey, now]))
                    .length > 0
                const inOrder =
                  fresh &&
                  (message.orderingKey === undefined ||
                    (yield* sql.unsafe(statements.raise, [
                      consumer,
                      message.partitionKey,
                      message.orderingKey,
                      message.seq ?? 0,
                      now
                    ])).length > 0)
                if (!inOrder) return false
                yield* sql`INSERT INTO orders_seen (order_id, customer, total_cents)
                           VALUES (${orderId}, ${customer}, ${totalCents})`
                return true
              })
            )
            if (done) applied += 1
          }
          return applied
        })
      ),
    close: () => runtime.dispose()
  }
}

const sqliteInboxDialect = SqliteInboxStore.dialect("")
const sqliteStatements = SqlInbox.statements(sqliteInboxDialect)

/** A SQLite file with the inbox tables and `orders_seen` (created through the store's own migration). */
const sqliteFile = async (directory: string, name: string): Promise<string> => {
  const filename = path.join(directory, name)
  await Effect.runPromise(
    Effect.gen(function* () {
      yield* SqliteInboxStore.migrate()
      yield* Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(ordersSeenDdl))
    }).pipe(Effect.provide(SqliteDatabase.layer({ filename })))
  )
  return filename
}

/** The raw SQLite loop: the inbox's statements and the handler's insert, one transaction per message. */
const rawSqliteSide = (filename: string): Side => {
  const db = new RawSqlite(filename)
  db.pragma("journal_mode = WAL")
  db.pragma("synchronous = FULL")
  db.pragma("busy_timeout = 5000")
  const begin = db.prepare("BEGIN")
  const commit = db.prepare("COMMIT")
  const rollback = db.prepare("ROLLBACK")
  const record = db.prepare(sqliteStatements.record)
  const raise = db.prepare(sqliteStatements.raise)
  const write = db.prepare("INSERT INTO orders_seen (order_id, customer, total_cents) VALUES (?, ?, ?)")
  return {
    run: async (deliveries) => {
      let applied = 0
      for (const { message, orderId, customer, totalCents } of deliveries) {
        begin.run()
        try {
          const now = Date.now()
          const fresh = record.all(consumer, message.messageId, message.partitionKey, now).length > 0
          const inOrder =
            fresh &&
            (message.orderingKey === undefined ||
              raise.all(consumer, message.partitionKey, message.orderingKey, message.seq ?? 0, now).length > 0)
          if (inOrder) {
            write.run(orderId, customer, totalCents)
            applied += 1
          }
          commit.run()
        } catch (error) {
          rollback.run()
          throw error
        }
      }
      return applied
    },
    close: async () => db.close()
  }
}

const postgresStatements = SqlInbox.statements({
  name: "postgres",
  placeholder: (n) => `$${n}`,
  processedTable: `"public"."inbox_processed"`,
  markTable: `"public"."inbox_mark"`,
  trimStatement: "",
  isBusy: () => false,
  isConflict: () => false
})

/** The raw PostgreSQL loop: the inbox's statements and the handler's insert, one transaction per message. */
const rawPostgresSide = async (url: string): Promise<Side> => {
  const client = new pgModule.Client({ connectionString: url })
  client.on("error", () => undefined)
  await client.connect()
  const statements = postgresStatements
  const write = "INSERT INTO orders_seen (order_id, customer, total_cents) VALUES ($1, $2, $3)"
  return {
    run: async (deliveries) => {
      let applied = 0
      for (const { message, orderId, customer, totalCents } of deliveries) {
        await client.query("BEGIN")
        try {
          const now = Date.now()
          const fresh =
            (await client.query(statements.record, [consumer, message.messageId, message.partitionKey, now])).rows
              .length > 0
          const inOrder =
            fresh &&
            (message.orderingKey === undefined ||
              (
                await client.query(statements.raise, [
                  consumer,
                  message.partitionKey,
                  message.orderingKey,
                  message.seq ?? 0,
                  now
                ])
              ).rows.length > 0)
          if (inOrder) {
            await client.query(write, [orderId, customer, totalCents])
            applied += 1
          }
          await client.query("COMMIT")
        } catch (error) {
          await client.query("ROLLBACK")
          throw error
        }
      }
      return applied
    },
    close: () => client.end()
  }
}

// ---------------------------------------------------------------------------------------------------
// Rounds and figures
// ---------------------------------------------------------------------------------------------------

const round3 = (n: number): number => Math.round(n * 1000) / 1000
const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2
}

type SideName = "inbox" | "raw" | "handWritten"
const sideNames: ReadonlyArray<SideName> = ["raw", "inbox", "handWritten"]

interface Rates {
  readonly messagesPerSecond: ReadonlyArray<number>
  readonly best: number
  readonly median: number
}

interface Ratio {
  readonly bestToBest: number
  readonly medianOfRounds: number
  readonly rounds: ReadonlyArray<number>
}

interface BackendResult {
  readonly database: string
  readonly inbox: Rates
  /** The raw driver loop (better-sqlite3 / pg): the goal's baseline. */
  readonly raw: Rates
  /** The same statements written by hand on `@effect/sql` (what the inbox replaces in an Effect program). */
  readonly handWritten: Rates
  /** Inbox against the raw driver loop: the goal. */
  readonly ratio: Ratio
  /** Inbox against the hand-written `@effect/sql` loop: the inbox's own cost. */
  readonly ratioToHandWritten: Ratio
  /** Hand-written `@effect/sql` against the raw driver loop: the SQL client's cost. */
  readonly handWrittenToRaw: Ratio
  readonly statementsPerMessage: Record<SideName, number>
  /** This process's CPU time per message in each side's turns (user + system). */
  readonly cpuMillisPerMessage: Record<SideName, number>
  readonly applied: Record<SideName, number>
  readonly target: string
  readonly met: boolean
  /** The most the inbox can reach on this client (see {@link ceilingOf}). */
  readonly ceiling: Ceiling
}

/**
 * The ceiling of any code on the `@effect/sql` client: the handler must run on the application's `SqlClient` in the
 * same transaction, so nothing built on that client can beat the hand-written loop, which runs only the statements
 * themselves. Its ratio to the raw driver loop is the most the inbox can reach; the goal is reachable by
 * construction on a backend only where that ratio is at least the goal (best vs best and median of rounds).
 */
interface Ceiling {
  /** Hand-written against raw, best vs best and median of rounds: the most any code on the client can reach. */
  readonly bestToBest: number
  readonly medianOfRounds: number
  /** Whether the goal lies within the ceiling (both ratios >= goal). */
  readonly goalReachable: boolean
  /** The inbox/hand-written ratio (median of rounds) the goal needs at this ceiling. */
  readonly neededInboxToHandWritten: number
  /** The inbox/hand-written ratio (median of rounds) measured. */
  readonly inboxToHandWritten: number
  readonly statement: string
}

const ceilingOf = (label: string, handWrittenToRaw: Ratio, inboxToHandWritten: Ratio): Ceiling => {
  const bestToBest = handWrittenToRaw.bestToBest
  const medianOfRounds = handWrittenToRaw.medianOfRounds
  const ceiling = Math.min(bestToBest, medianOfRounds)
  const goalReachable = ceiling >= goal
  const needed = round3(goal / ceiling)
  const measured = inboxToHandWritten.medianOfRounds
  const statement =
    `${label} ceiling: hand-written @effect/sql / raw = ${medianOfRounds} (median; best/best ${bestToBest}), the most ` +
    `any code running the handler on this SqlClient can reach; ` +
    (goalReachable
      ? `the goal ${goal}x is reachable by construction, needing inbox/hand-written >= about ${needed} (measured ${measured})`
      : `the goal ${goal}x is not reachable by construction (it would need inbox/hand-written ${needed} > 1); ` +
        `inbox/hand-written measured ${measured}`)
  return {
    bestToBest,
    medianOfRounds,
    goalReachable,
    neededInboxToHandWritten: needed,
    inboxToHandWritten: measured,
    statement
  }
}

/** A round's share of one side: wall and CPU milliseconds spent in its turns, statements sent, messages applied. */
interface Tally {
  wallMillis: number
  cpuMillis: number
  statements: number
  applied: number
}

const cpuNow = (): number => {
  const usage = process.cpuUsage()
  return (usage.user + usage.system) / 1000
}

const ratesOf = (values: ReadonlyArray<number>): Rates => ({
  messagesPerSecond: values,
  best: Math.max(...values),
  median: Math.round(median(values))
})

const ratioOf = (top: ReadonlyArray<number>, bottom: ReadonlyArray<number>): Ratio => {
  const rounds = top.map((value, i) => round3(value / (bottom[i] ?? Number.NaN)))
  return {
    bestToBest: round3(Math.max(...top) / Math.max(...bottom)),
    medianOfRounds: round3(median(rounds)),
    rounds
  }
}

const emptyTally = (): Tally => ({ wallMillis: 0, cpuMillis: 0, statements: 0, applied: 0 })

/**
 * One untimed warm-up round per side, then `rounds` timed rounds. Within a round the sides take turns every
 * `turn` deliveries (which side starts rotates per round), so all see the same machine load.
 */
const measure = async (label: string, database: string, sides: Record<SideName, Side>): Promise<BackendResult> => {
  progress(`${label} warm-up`)
  const warmUp = makeDeliveries(Math.min(200, messagesPerRound))
  for (const name of sideNames) await sides[name].run(warmUp)
  const rates: Record<SideName, Array<number>> = { inbox: [], raw: [], handWritten: [] }
  const total: Record<SideName, Tally> = { inbox: emptyTally(), raw: emptyTally(), handWritten: emptyTally() }
  let messages = 0
  const turn = 50
  for (let round = 1; round <= rounds; round++) {
    progress(`${label} round ${round}/${rounds}`)
    const deliveries = makeDeliveries(messagesPerRound)
    const tallies: Record<SideName, Tally> = { inbox: emptyTally(), raw: emptyTally(), handWritten: emptyTally() }
    const order = sideNames.map((_, i) => sideNames[(i + round) % sideNames.length] ?? "inbox")
    for (let from = 0; from < deliveries.length; from += turn) {
      const chunk = deliveries.slice(from, from + turn)
      for (const name of order) {
        const tally = tallies[name]
        const cpu = cpuNow()
        const started = performance.now()
        const [count, sent] = await countOn(() => sides[name].run(chunk))
        tally.wallMillis += performance.now() - started
        tally.cpuMillis += cpuNow() - cpu
        tally.statements += sent
        tally.applied += count
      }
    }
    messages += deliveries.length
    for (const name of sideNames) {
      rates[name].push(Math.round((deliveries.length / tallies[name].wallMillis) * 1000))
      total[name].cpuMillis += tallies[name].cpuMillis
      total[name].statements += tallies[name].statements
      total[name].applied += tallies[name].applied
    }
    console.log(
      `${label} round ${round}: ` +
        sideNames
          .map(
            (name) =>
              `${name} ${rates[name][round - 1]} msg/s (CPU ${round3(tallies[name].cpuMillis / deliveries.length)} ms/msg)`
          )
          .join("   ")
    )
  }
  if (total.inbox.applied !== total.raw.applied || total.handWritten.applied !== total.raw.applied) {
    throw new Error(
      `${label}: messages applied differ (inbox ${total.inbox.applied}, raw ${total.raw.applied}, ` +
        `hand-written ${total.handWritten.applied})`
    )
  }
  const ratio = ratioOf(rates.inbox, rates.raw)
  const ratioToHandWritten = ratioOf(rates.inbox, rates.handWritten)
  const handWrittenToRaw = ratioOf(rates.handWritten, rates.raw)
  const perMessage = (pick: (tally: Tally) => number): Record<SideName, number> => ({
    inbox: round3(pick(total.inbox) / messages),
    raw: round3(pick(total.raw) / messages),
    handWritten: round3(pick(total.handWritten) / messages)
  })
  return {
    database,
    inbox: ratesOf(rates.inbox),
    raw: ratesOf(rates.raw),
    handWritten: ratesOf(rates.handWritten),
    ratio,
    ratioToHandWritten,
    handWrittenToRaw,
    statementsPerMessage: perMessage((tally) => tally.statements),
    cpuMillisPerMessage: perMessage((tally) => tally.cpuMillis),
    applied: { inbox: total.inbox.applied, raw: total.raw.applied, handWritten: total.handWritten.applied },
    target: `inbox >= ${goal}x the raw driver loop (best vs best and median of rounds)`,
    met: ratio.bestToBest >= goal && ratio.medianOfRounds >= goal,
    ceiling: ceilingOf(label, handWrittenToRaw, ratioToHandWritten)
  }
}

/**
 * The CPU cost of the inbox's one span per message (`InboxStore.process`, `captureStackTrace: false`, three
 * attributes) against the same effect without it and against a span with the default stack capture, in
 * microseconds per call (the span's own cost: creating it, making it the parent of the unit's spans, ending it).
 */
const spanCost = (): { readonly spanMicros: number; readonly defaultSpanMicros: number } => {
  const calls = 20_000
  const time = (make: (i: number) => Effect.Effect<void>): number => {
    const loop = Effect.gen(function* () {
      for (let i = 0; i < calls; i++) yield* make(i)
    })
    Effect.runSync(loop)
    const started = cpuNow()
    Effect.runSync(loop)
    return ((cpuNow() - started) * 1000) / calls
  }
  const attributes = (i: number) => ({ "inbox.consumer": consumer, "inbox.partition": `p-${i}`, "inbox.backend": "x" })
  const plain = time(() => Effect.void)
  return {
    spanMicros: round3(
      time((i) => Effect.withSpan(Effect.void, "s", { attributes: attributes(i), captureStackTrace: false })) - plain
    ),
    defaultSpanMicros: round3(time((i) => Effect.withSpan(Effect.void, "s", { attributes: attributes(i) })) - plain)
  }
}

const main = async (): Promise<void> => {
  const loadBefore = os.loadavg()[0] ?? 0
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-inbox-bench-"))
  let sqlite: BackendResult
  try {
    const inboxFile = await sqliteFile(directory, "inbox.db")
    const rawFile = await sqliteFile(directory, "raw.db")
    const handFile = await sqliteFile(directory, "hand.db")
    const sides = {
      inbox: inboxSide(Layer.provideMerge(SqliteInboxStore.layer, SqliteDatabase.layer({ filename: inboxFile }))),
      raw: rawSqliteSide(rawFile),
      handWritten: handWrittenSide(SqliteDatabase.layer({ filename: handFile }), sqliteStatements)
    }
    try {
      sqlite = await measure("sqlite", "SQLite file, WAL, synchronous = FULL (one fsync per commit)", sides)
    } finally {
      for (const side of Object.values(sides)) await side.close()
    }
  } finally {
    fs.rmSync(directory, { recursive: true, force: true })
  }

  const server = await startPostgres()
  let postgres: BackendResult
  try {
    const inboxUrl = await createDatabase(server.url, "inbox_bench")
    const rawUrl = await createDatabase(server.url, "inbox_raw")
    const handUrl = await createDatabase(server.url, "inbox_hand")
    // the raw and hand-written databases get the inbox tables through the store's own migration
    for (const url of [rawUrl, handUrl]) {
      await Effect.runPromise(
        Effect.gen(function* () {
          yield* PostgresInboxStore.migrate()
          yield* Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(ordersSeenDdl))
        }).pipe(Effect.provide(clientLayer(url, 1)))
      )
    }
    const sides = {
      inbox: inboxSide(Layer.provideMerge(PostgresInboxStore.layer, clientLayer(inboxUrl, 4))),
      raw: await rawPostgresSide(rawUrl),
      handWritten: handWrittenSide(clientLayer(handUrl, 4), postgresStatements)
    }
    try {
      postgres = await measure("postgres", "PostgreSQL on 127.0.0.1, fsync on, READ COMMITTED", sides)
    } finally {
      for (const side of Object.values(sides)) await side.close()
    }
  } finally {
    await server.stop()
  }

  const result = {
    date: new Date().toISOString(),
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    cores: os.cpus().length,
    loadAverage1m: { before: round3(loadBefore), after: round3(os.loadavg()[0] ?? 0) },
    quick,
    messagesPerRound,
    rounds,
    workload:
      "one transaction per delivered message: insert the id if absent, raise the key's mark (half the messages have an " +
      "ordering key), the handler's INSERT INTO orders_seen; one in ten deliveries is a redelivery (Duplicate, no write)",
    span: spanCost(),
    sqlite,
    postgres
  }
  fs.mkdirSync(path.join(here, "results"), { recursive: true })
  fs.writeFileSync(path.join(here, "results", "inbox.json"), `${JSON.stringify(result, null, 2)}\n`)
  for (const [name, r] of [
    ["sqlite", sqlite],
    ["postgres", postgres]
  ] as const) {
    console.log(
      `${name.padEnd(9)} inbox best ${r.inbox.best} msg/s   raw best ${r.raw.best} msg/s   ` +
        `hand-written best ${r.handWritten.best} msg/s   inbox/raw best/best ${r.ratio.bestToBest} ` +
        `median ${r.ratio.medianOfRounds}   inbox/hand-written median ${r.ratioToHandWritten.medianOfRounds}   ` +
        `hand-written/raw median ${r.handWrittenToRaw.medianOfRounds}   ` +
        `statements/message inbox ${r.statementsPerMessage.inbox} raw ${r.statementsPerMessage.raw}   ` +
        `goal ${r.met ? "met" : "not met"}`
    )
    console.log(r.ceiling.statement)
  }
  console.log(
    `the inbox's span costs ${result.span.spanMicros} µs of CPU per message (captureStackTrace: false; with the ` +
      `default stack capture ${result.span.defaultSpanMicros} µs)`
  )
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
