/**
 * Broker sink benchmark (run: `npx tsx bench/brokers.ts`, `--quick` for a short run).
 *
 * For NATS JetStream and RabbitMQ (servers started on 127.0.0.1 by the test harness modules), a backlog
 * of records in 8 partitions (every other record keyed, 8 keys per partition) is persisted untimed in a
 * fresh SQLite file (through `SqliteOutboxStore`, 100 records per transaction); a relay then drains it
 * through the broker sink, timed from its start until the sink has had every record acknowledged and the
 * store holds nothing pending or claimed.
 *
 * The baseline is a hand-written relay in the same process, on the same backlog (a fresh file per round,
 * persisted the same way): raw better-sqlite3 on the file, with the SQLite store's own statements
 * (`SqliteOutboxSchema.statements`, bound as the store binds them) in the store's transaction shapes —
 * claim = raise the fence, select the claimable records, claim them, in one transaction; complete = one
 * statement in its own transaction — and the raw broker client publishing each claimed record with the
 * sink's headers and message id and the same acknowledgements (each JetStream ack / publisher confirm
 * awaited) and the same client options (NATS: `noAsyncTraces`). One loop per partition, all 8 at once:
 * claim a batch (100, doubling after a full batch up to 500, as the drainer's defaults), group it by
 * ordering key in age order (a keyless record is a group of one), publish the groups with 10 in flight
 * (the drainer's `maxConcurrency`; 80 in all), a group's records one after another, each only after the
 * previous one of its key was acknowledged; then complete every acknowledged record of the batch in one
 * statement, and claim the next batch, until a claim finds nothing. It does not complete a keyed record
 * before sending its successor in the same batch, as the drainer must (SPEC §6 step 5: one commit per
 * wave of keyed records), takes no lease and checks none: it is the plain loop a user would write, with
 * no more order than the acknowledgements give. `handWritten` is that baseline; `ratio` is relay against
 * it, best against best, and `ratioMedianOfRounds` the median of the per-round ratios.
 *
 * Information beside it: `handWrittenWaves`, the same hand-written relay completing as the drainer must
 * (SPEC §6 step 5): in waves of the next record of up to 10 groups, the groups taking turns, the records of
 * a wave that have a younger sibling completed in one statement before the next wave, the rest in one
 * complete at the end of the batch — what the per-key guarantee costs a hand-written loop; `rawClient`,
 * the raw client alone (no database) publishing the same messages with the same per-key wait and 80 in
 * flight, and `rawUnordered`, the same without the per-key wait; `relayNoopSink`, the same relay with a
 * sink that accepts every record at once (what the store and the drainer alone reach on this backlog).
 * Rounds alternate (hand-written relay, hand-written relay in waves, raw client, raw client unordered,
 * relay, relay with the no-op sink) after untimed warm-up rounds: three of the relay and two of the hand-written
 * relay (each side until its CPU per record stops falling, see `warmUpRounds`).
 * `cpuMicrosPerRecord` is this process's CPU time per record (the lowest of the rounds); the broker
 * servers run on the same cores.
 *
 * Also for information, `settled`: after the alternating rounds, the relay in four rounds in a row (a new
 * relay each round, as always, but no other code between), the best of the last two, against the best of
 * two hand-written rounds in a row. In the alternating rounds V8 re-optimizes much of the relay's code in
 * every round (about 150–200 TurboFan compilations in a round's timed window against 30–50 in a fourth round
 * in a row, counted with `--trace-opt`; the compilations run on V8's background threads, on the cores the
 * broker uses too), which a relay that keeps running pays once; the hand-written loop is a few module-level
 * functions and settles at once. The goal stays judged on the alternating rounds. Between the two, the relay
 * through a `SinkRouter` whose only route (the default, `*`) is the broker sink, three rounds in a row, the best
 * of the last two: what routing costs a relay (`settled.routed…`).
 *
 * NATS only, for information, `handWrittenAsSink`: the hand-written relay publishing as `NatsSink` does (a plain
 * publish with a reply subject on one subscription of its own, the publish ack read there) instead of the
 * client's `js.publish` (a request per publish: a promise, a timer and an error object each). One round of it
 * follows each alternating round; its ratio is the relay against a loop that publishes as cheaply as the sink.
 *
 * Goal: relay ≥ 0.8× the hand-written relay, best against best and median of rounds. Writes
 * bench/results/brokers.json.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import { connect as amqpConnect } from "amqplib"
import { connect as natsConnect, createInbox, headers as natsHeaders, type NatsConnection } from "nats"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { type RawDatabase, RawSqlite, type RawStatement } from "./RawSqlite.js"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as NatsSink from "../src/layers/sinks/NatsSink.js"
import * as RabbitMqSink from "../src/layers/sinks/RabbitMqSink.js"
import * as SinkRouter from "../src/layers/sinks/SinkRouter.js"
import * as SqlDialect from "../src/layers/sql/SqlDialect.js"
import * as SqlOutboxStatements from "../src/layers/sql/SqlOutboxStatements.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteLeaseStore from "../src/layers/sqlite/SqliteLeaseStore.js"
import * as SqliteOutboxSchema from "../src/layers/sqlite/SqliteOutboxSchema.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import * as Relay from "../src/programs/Relay.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { Sink } from "../src/services/Sink.js"
import { startNats } from "../test/support/NatsServer.js"
import { startRabbitMq } from "../test/support/RabbitMqServer.js"
import * as Delivered from "./Delivered.js"
import { median } from "./Stats.js"

const quick = process.argv.includes("--quick")
const total = quick ? 1_000 : 20_000
/** Consecutive relay rounds of the settled figures (the last two count), then hand-written ones. */
const settledRelayRounds = quick ? 2 : 4
const settledHandWrittenRounds = 2
/** Consecutive rounds of the relay through a `SinkRouter` (the last two count), between those two. */
const settledRoutedRounds = quick ? 2 : 3
const rounds = quick ? 1 : 3
/**
 * Untimed rounds before the timed ones. The relay runs far more distinct code than the hand-written loop
 * (the Effect runtime, the drainer, the store), and V8 takes longer to optimize it: in consecutive rounds
 * from a cold start its CPU per record fell over the first three or four (NATS: 97, 80, 73, 71, 64 µs),
 * the hand-written relay's over the first one or two (75, 71, 70, 67, 66 µs).
 */
const warmUpRounds = quick ? { relay: 1, handWritten: 1 } : { relay: 3, handWritten: 2 }
const partitions = Array.from({ length: 8 }, (_, i) => `p${i}`)
/** The drainer's defaults, which the relay runs with and the hand-written relay copies. */
const maxConcurrency = 10
const batchSize = 100
const maxBatchSize = 500
const inFlight = partitions.length * maxConcurrency
const goalRatio = 0.8
const payload = new Uint8Array(256).fill(120)
const here = path.dirname(fileURLToPath(import.meta.url))
const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-brokers-bench-"))
let files = 0
const freshFile = (side: string): string => path.join(directory, `${side}-${++files}.db`)

const backlog = (): ReadonlyArray<NewOutboxRecord> =>
  Array.from({ length: total }, (_, n) => {
    const partitionKey = partitions[n % partitions.length] ?? "p0"
    const i = Math.floor(n / partitions.length)
    return new NewOutboxRecord({
      partitionKey,
      envelopeId: `env-${n}`,
      bindingId: "b",
      payload,
      ...(i % 2 === 0 ? { orderingKey: `k${i % 16}` } : {})
    })
  })

/** The SQLite store over `filename`. */
const storeLayer = (filename: string) => SqliteOutboxStore.layer.pipe(Layer.provide(SqliteDatabase.layer({ filename })))

/** Persists the backlog untimed through the store, 100 records per transaction (both sides alike). */
const persistBacklog = Effect.gen(function* () {
  const store = yield* OutboxStore
  const records = backlog()
  for (let i = 0; i < records.length; i += 100) yield* store.persist(records.slice(i, i + 100))
})

/** The sink layer with a count of its acknowledged sends. */
const counted = (sink: Layer.Layer<Sink, unknown>, acked: { count: number }): Layer.Layer<Sink, unknown> =>
  Delivered.noting(sink, () => {
    acked.count += 1
  })

/** This process's CPU time since `before`, in microseconds per backlog record. */
const cpuPerRecord = (before: NodeJS.CpuUsage): number => {
  const used = process.cpuUsage(before)
  return Number(((used.user + used.system) / total).toFixed(1))
}

/**
 * Records per second of a relay draining the backlog from a fresh SQLite file through `sink`; its CPU time
 * per record is pushed to `cpu`.
 */
const relayRound = (sink: Layer.Layer<Sink, unknown>, cpu: Array<number>): Promise<number> => {
  const acked = { count: 0 }
  return Effect.runPromise(
    Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* persistBacklog
      const drained = Effect.gen(function* () {
        let left = 0
        for (const p of partitions) left += (yield* store.countPending(p)) + (yield* store.countClaimed(p))
        return left === 0
      })
      const started = performance.now()
      const cpuBefore = process.cpuUsage()
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Relay.start({
            owner: "bench",
            discoveryInterval: "50 millis",
            drainer: {
              idleBackoffMax: "20 millis",
              onExpired: "drop",
              onPermanentFailure: "drop",
              onPoison: "drop"
            }
          })
          // the acknowledgements are counted in memory; the store is asked only once they are all in
          // (or every 100 ms, should a record be dropped), so that the wait does not compete for it
          for (let polls = 1; acked.count < total; polls++) {
            if (polls % 50 === 0 && (yield* drained)) break
            yield* Effect.sleep("2 millis")
          }
          while (!(yield* drained)) yield* Effect.sleep("2 millis")
        })
      )
      cpu.push(cpuPerRecord(cpuBefore))
      return total / ((performance.now() - started) / 1000)
    }).pipe(
      Effect.provide(
        Layer.mergeAll(SqliteOutboxStore.layer, SqliteLeaseStore.layer, counted(sink, acked)).pipe(
          Layer.provide(SqliteDatabase.layer({ filename: freshFile("relay") }))
        )
      ),
      Effect.orDie
    )
  )
}

// ---------------------------------------------------------------------------------------------------
// What a publish carries: the sink's message id, headers and payload
// ---------------------------------------------------------------------------------------------------

/** One message as the sinks publish a record: its id, what the wire headers are made of, its payload. */
interface Message {
  readonly id: string
  readonly partitionKey: string
  readonly envelopeId: string
  readonly orderingKey: string | undefined
  readonly seq: number
  readonly createdAtMillis: number
  readonly headers: Readonly<Record<string, string>>
  readonly payload: Uint8Array
}

/** The headers the sinks set on every record: the record's own, the wire metadata, the envelope id. */
const messageHeaders = (message: Message): Record<string, string> => ({
  ...message.headers,
  "Outbox-Record-Id": message.id,
  "Outbox-Partition": message.partitionKey,
  ...(message.orderingKey === undefined ? {} : { "Outbox-Ordering-Key": message.orderingKey }),
  "Outbox-Seq": String(message.seq),
  "Outbox-Created-At": new Date(message.createdAtMillis).toISOString(),
  "Outbox-Envelope-Id": message.envelopeId
})

/** Publishes one message and resolves on its acknowledgement; `side` names the subject or key space. */
type Publish = (side: string, message: Message) => Promise<unknown>

// ---------------------------------------------------------------------------------------------------
// The hand-written relay: raw better-sqlite3 with the store's statements, the raw broker client
// ---------------------------------------------------------------------------------------------------

const names = Either.getOrThrow(SqliteOutboxSchema.tableNames(""))
const statements = SqliteOutboxSchema.statements(names, { staleReclaim: false })
const binds = SqlOutboxStatements.binds(SqlDialect.sqlite)
const token = { owner: "hand-written", version: 1 }

const text = (row: Record<string, unknown>, column: string): string => {
  const value = row[column]
  if (typeof value !== "string") throw new Error(`column ${column} is not text`)
  return value
}
const integer = (row: Record<string, unknown>, column: string): number => {
  const value = row[column]
  if (typeof value !== "number") throw new Error(`column ${column} is not a number`)
  return value
}
const headersOf = (json: string): Record<string, string> => {
  const parsed: unknown = JSON.parse(json)
  const out: Record<string, string> = {}
  if (typeof parsed === "object" && parsed !== null) {
    for (const [name, value] of Object.entries(parsed)) if (typeof value === "string") out[name] = value
  }
  return out
}

/** A claimed row as the message the sinks would publish for it. */
const messageOf = (row: Record<string, unknown>): Message => {
  const orderingKey = row["ordering_key"]
  const bytes = row["payload"]
  if (!(bytes instanceof Uint8Array)) throw new Error("column payload is not a blob")
  return {
    id: text(row, "id"),
    partitionKey: text(row, "partition_key"),
    envelopeId: text(row, "envelope_id"),
    orderingKey: typeof orderingKey === "string" ? orderingKey : undefined,
    seq: integer(row, "seq"),
    createdAtMillis: integer(row, "created_at"),
    headers: headersOf(text(row, "headers")),
    payload: bytes
  }
}

/** Raw better-sqlite3 on a file the store made: its statements in its transaction shapes, prepared once. */
class RawOutbox {
  private readonly db: RawDatabase
  private readonly cache = new Map<string, RawStatement>()
  constructor(filename: string) {
    // the pragmas `SqliteDatabase.layer` sets (the file is in WAL mode already)
    this.db = new RawSqlite(filename)
    this.db.pragma("journal_mode = WAL")
    this.db.pragma("synchronous = FULL")
    this.db.pragma("busy_timeout = 5000")
  }
  private statement(sql: string): RawStatement {
    let prepared = this.cache.get(sql)
    if (prepared === undefined) {
      prepared = this.db.prepare(sql)
      this.cache.set(sql, prepared)
    }
    return prepared
  }
  private transaction<A>(body: () => A): A {
    this.statement("BEGIN").run()
    try {
      const result = body()
      this.statement("COMMIT").run()
      return result
    } catch (error) {
      this.statement("ROLLBACK").run()
      throw error
    }
  }
  /** Raise the fence, select, claim: one transaction. The claimed records in age order. */
  claim(partitionKey: string, limit: number): Array<Message> {
    return this.transaction(() => {
      const now = Date.now()
      if (this.statement(statements.raiseFence).all(partitionKey, token.version).length === 0) {
        throw new Error("fenced")
      }
      const candidates = this.statement(statements.selectClaimable).all(
        ...binds.selectClaimable(partitionKey, token.version, undefined, limit)
      )
      if (candidates.length === 0) return []
      const ids = candidates.map((row) => text(row, "id"))
      const claimed = new Set(
        this.statement(statements.claimUpdate(ids.length))
          .all(...binds.claimUpdate(ids, token, now, partitionKey, undefined))
          .map((row) => text(row, "id"))
      )
      return candidates.filter((row) => claimed.has(text(row, "id"))).map(messageOf)
    })
  }
  /** Completes the ids: one statement, its own transaction. */
  complete(ids: ReadonlyArray<string>): void {
    this.transaction(() => {
      const done = this.statement(statements.complete(ids.length)).all(...binds.complete(ids, token, Date.now()))
      if (done.length !== ids.length) throw new Error("complete mismatch")
    })
  }
  /** Records pending or claimed in the partition. */
  left(partitionKey: string): number {
    return (
      Number(this.statement(statements.countPending).all(partitionKey)[0]?.["n"]) +
      Number(this.statement(statements.countClaimed).all(partitionKey)[0]?.["n"])
    )
  }
  close(): void {
    this.db.close()
  }
}

/** A batch grouped by ordering key in age order; a keyless record is a group of one. */
const groupByKey = (batch: ReadonlyArray<Message>): Array<Array<Message>> => {
  const groups: Array<Array<Message>> = []
  const byKey = new Map<string, Array<Message>>()
  for (const message of batch) {
    if (message.orderingKey === undefined) {
      groups.push([message])
      continue
    }
    const group = byKey.get(message.orderingKey)
    if (group === undefined) {
      const fresh = [message]
      byKey.set(message.orderingKey, fresh)
      groups.push(fresh)
    } else group.push(message)
  }
  return groups
}

/**
 * How the hand-written relay completes a batch: `"batch"` — every record in one complete after the whole
 * batch was acknowledged (the baseline); `"waves"` — as the drainer must (SPEC §6 step 5): in waves of the
 * next record of up to `maxConcurrency` groups (the groups taking turns), a record with a younger sibling
 * completed (one statement for the wave) before that sibling is sent, the rest in one complete at the end.
 */
type Completion = "batch" | "waves"

/** Publishes a batch's groups with `maxConcurrency` in flight, each group's records one after another. */
const publishBatch = async (batch: ReadonlyArray<Message>, publish: Publish): Promise<void> => {
  const groups = groupByKey(batch)
  let next = 0
  await Promise.all(
    Array.from({ length: Math.min(maxConcurrency, groups.length) }, async () => {
      for (let group = groups[next++]; group !== undefined; group = groups[next++]) {
        // a keyed record only after the previous one of its key was acknowledged
        for (const message of group) await publish("hand", message)
      }
    })
  )
}

/** Publishes a batch in waves, completing each record with a younger sibling before that sibling is sent. */
const publishInWaves = async (outbox: RawOutbox, batch: ReadonlyArray<Message>, publish: Publish): Promise<void> => {
  const queue = groupByKey(batch).map((group) => ({ group, next: 0 }))
  const last: Array<string> = []
  while (queue.length > 0) {
    const wave = queue.splice(0, maxConcurrency).flatMap((lane) => {
      const message = lane.group[lane.next]
      return message === undefined ? [] : [{ lane, message }]
    })
    await Promise.all(wave.map(({ message }) => publish("hand", message)))
    const heads: Array<string> = []
    for (const { lane, message } of wave) {
      lane.next += 1
      if (lane.next < lane.group.length) {
        heads.push(message.id)
        queue.push(lane)
      } else last.push(message.id)
    }
    if (heads.length > 0) outbox.complete(heads)
  }
  if (last.length > 0) outbox.complete(last)
}

/** Drains one partition: claim, publish with `maxConcurrency` groups in flight, complete, until empty. */
const drainPartition = async (
  outbox: RawOutbox,
  partitionKey: string,
  publish: Publish,
  completion: Completion
): Promise<number> => {
  let limit = batchSize
  let drained = 0
  for (;;) {
    const batch = outbox.claim(partitionKey, limit)
    if (batch.length === 0) return drained
    if (completion === "waves") await publishInWaves(outbox, batch, publish)
    else {
      await publishBatch(batch, publish)
      outbox.complete(batch.map((message) => message.id))
    }
    drained += batch.length
    limit = batch.length >= limit ? Math.min(limit * 2, maxBatchSize) : limit
  }
}

/**
 * Records per second of the hand-written relay draining the backlog from a fresh SQLite file through
 * `publish`; its CPU time per record is pushed to `cpu`.
 */
const handWrittenRound = async (
  publish: Publish,
  cpu: Array<number>,
  completion: Completion = "batch"
): Promise<number> => {
  const filename = freshFile("hand")
  await Effect.runPromise(persistBacklog.pipe(Effect.provide(storeLayer(filename)), Effect.orDie))
  const outbox = new RawOutbox(filename)
  try {
    const started = performance.now()
    const cpuBefore = process.cpuUsage()
    const drained = await Promise.all(partitions.map((p) => drainPartition(outbox, p, publish, completion)))
    const seconds = (performance.now() - started) / 1000
    cpu.push(cpuPerRecord(cpuBefore))
    const sent = drained.reduce((a, b) => a + b, 0)
    const left = partitions.reduce((sum, p) => sum + outbox.left(p), 0)
    if (sent !== total || left !== 0) throw new Error(`hand-written relay drained ${sent} of ${total}, ${left} left`)
    return total / seconds
  } finally {
    outbox.close()
  }
}

// ---------------------------------------------------------------------------------------------------
// The raw client alone (no database), for information
// ---------------------------------------------------------------------------------------------------

const rawMessages: ReadonlyArray<Message> = backlog().map((record, n) => ({
  id: `${n}`,
  partitionKey: record.partitionKey,
  envelopeId: record.envelopeId,
  orderingKey: record.orderingKey,
  seq: Math.floor(n / partitions.length) + 1,
  createdAtMillis: Date.now(),
  headers: {},
  payload
}))
let rawRun = 0

/**
 * Records per second of `publish` over the backlog's messages with `inFlight` lanes, each awaiting its
 * ack; `ordered`: a keyed message waits for the ack of the previous message of its key. Its CPU time per
 * record is pushed to `cpu`.
 */
const rawRound = async (publish: Publish, ordered: boolean, cpu: Array<number>): Promise<number> => {
  let next = 0
  const prefix = `raw-${++rawRun}-`
  const lastOfKey = new Map<string, Promise<unknown>>()
  const started = performance.now()
  const cpuBefore = process.cpuUsage()
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      for (;;) {
        const each = rawMessages[next++]
        if (each === undefined) return
        // a message id unique across rounds, so the stream's duplicate window keeps every message
        const message = { ...each, id: prefix + each.id }
        if (!ordered || message.orderingKey === undefined) {
          await publish("raw", message)
          continue
        }
        const key = `${message.partitionKey}/${message.orderingKey}`
        const previous = lastOfKey.get(key)
        const sent = previous === undefined ? publish("raw", message) : previous.then(() => publish("raw", message))
        lastOfKey.set(key, sent)
        await sent
      }
    })
  )
  const seconds = (performance.now() - started) / 1000
  cpu.push(cpuPerRecord(cpuBefore))
  return total / seconds
}

// ---------------------------------------------------------------------------------------------------
// Rounds and figures
// ---------------------------------------------------------------------------------------------------

interface Figures {
  readonly relay: Array<number>
  readonly handWritten: Array<number>
  /** The hand-written relay completing in waves, as the drainer must (information). */
  readonly handWrittenWaves: Array<number>
  readonly rawClient: Array<number>
  readonly rawUnordered: Array<number>
  readonly relayNoopSink: Array<number>
  /** The relay in consecutive rounds after the alternating ones, no other code between (information). */
  readonly relaySettled: Array<number>
  /** The relay through a `SinkRouter` (one route, the broker sink), in consecutive rounds after those (information). */
  readonly relayRouted: Array<number>
  /** The hand-written relay in consecutive rounds after those (information). */
  readonly handWrittenSettled: Array<number>
  /** The hand-written relay publishing as the sink does, when that differs from `publish` (information). */
  readonly handWrittenAsSink: Array<number>
  /** This process's CPU time per record (µs) in each round. */
  readonly cpu: {
    readonly relay: Array<number>
    readonly handWritten: Array<number>
    readonly handWrittenWaves: Array<number>
    readonly rawClient: Array<number>
    readonly relayNoopSink: Array<number>
    readonly relaySettled: Array<number>
    readonly relayRouted: Array<number>
    readonly handWrittenSettled: Array<number>
  }
}

/** `sink` as the only route (the default, `*`) of a `SinkRouter`. */
const routed = (sink: Layer.Layer<Sink, unknown>): Layer.Layer<Sink, unknown> =>
  SinkRouter.layer(Effect.all({ [SinkRouter.DefaultRoute]: SinkRouter.sinkOf(sink) }))

/** A sink that accepts every record at once: the relay's own ceiling on this backlog (store and drainer). */
const noopSink: Layer.Layer<Sink> = Layer.succeed(Sink, Sink.of({ send: () => Effect.void }))

const measure = async (
  sink: Layer.Layer<Sink, unknown>,
  publish: Publish,
  publishAsSink?: Publish
): Promise<Figures> => {
  const figures: Figures = {
    relay: [],
    handWritten: [],
    handWrittenWaves: [],
    rawClient: [],
    rawUnordered: [],
    relayNoopSink: [],
    relaySettled: [],
    relayRouted: [],
    handWrittenSettled: [],
    handWrittenAsSink: [],
    cpu: {
      relay: [],
      handWritten: [],
      handWrittenWaves: [],
      rawClient: [],
      relayNoopSink: [],
      relaySettled: [],
      relayRouted: [],
      handWrittenSettled: []
    }
  }
  // untimed warm-up rounds, each side until its CPU per record stops falling (see `warmUpRounds`)
  for (let round = 0; round < warmUpRounds.relay; round++) await relayRound(sink, [])
  for (let round = 0; round < warmUpRounds.handWritten; round++) await handWrittenRound(publish, [])
  for (let round = 0; round < rounds; round++) {
    figures.handWritten.push(await handWrittenRound(publish, figures.cpu.handWritten))
    figures.handWrittenWaves.push(await handWrittenRound(publish, figures.cpu.handWrittenWaves, "waves"))
    figures.rawClient.push(await rawRound(publish, true, figures.cpu.rawClient))
    figures.rawUnordered.push(await rawRound(publish, false, []))
    figures.relay.push(await relayRound(sink, figures.cpu.relay))
    figures.relayNoopSink.push(await relayRound(noopSink, figures.cpu.relayNoopSink))
    if (publishAsSink !== undefined) figures.handWrittenAsSink.push(await handWrittenRound(publishAsSink, []))
    const last = (values: ReadonlyArray<number>) => values.at(-1)?.toFixed(0)
    console.log(
      `round ${round + 1}/${rounds}: hand-written relay ${last(figures.handWritten)}/s (in waves ${last(figures.handWrittenWaves)}/s), relay ${last(figures.relay)}/s ` +
        `(raw client ${last(figures.rawClient)}/s, unordered ${last(figures.rawUnordered)}/s; relay, no-op sink ${last(figures.relayNoopSink)}/s` +
        (publishAsSink === undefined
          ? ")"
          : `; hand-written relay publishing as the sink ${last(figures.handWrittenAsSink)}/s)`)
    )
  }
  // the settled rounds: the relay several times in a row, then the hand-written relay, nothing between
  for (let round = 0; round < settledRelayRounds; round++) {
    figures.relaySettled.push(await relayRound(sink, figures.cpu.relaySettled))
  }
  for (let round = 0; round < settledRoutedRounds; round++) {
    figures.relayRouted.push(await relayRound(routed(sink), figures.cpu.relayRouted))
  }
  for (let round = 0; round < settledHandWrittenRounds; round++) {
    figures.handWrittenSettled.push(await handWrittenRound(publish, figures.cpu.handWrittenSettled))
  }
  console.log(
    `settled: relay ${figures.relaySettled.map((r) => r.toFixed(0)).join(", ")}/s, ` +
      `through a SinkRouter ${figures.relayRouted.map((r) => r.toFixed(0)).join(", ")}/s, ` +
      `hand-written relay ${figures.handWrittenSettled.map((r) => r.toFixed(0)).join(", ")}/s`
  )
  return figures
}

const ratio2 = (a: number, b: number): number => Number((a / b).toFixed(2))

/**
 * The settled figures: the best of the relay's last two consecutive rounds (its first ones in a row still
 * re-optimize) against the best consecutive hand-written round, and the CPU time per record of those rounds.
 */
const settledSummary = (figures: Figures) => {
  const counted = figures.relaySettled.slice(-2)
  const countedCpu = figures.cpu.relaySettled.slice(-2)
  const relay = Math.max(...counted)
  const handWritten = Math.max(...figures.handWrittenSettled)
  const routedRelay = Math.max(...figures.relayRouted.slice(-2))
  return {
    relayRecordsPerSecond: Math.round(relay),
    handWrittenRecordsPerSecond: Math.round(handWritten),
    ratio: ratio2(relay, handWritten),
    routedRecordsPerSecond: Math.round(routedRelay),
    routedToRelay: ratio2(routedRelay, relay),
    cpuMicrosPerRecord: {
      relay: Math.min(...countedCpu),
      handWritten: Math.min(...figures.cpu.handWrittenSettled),
      routed: Math.min(...figures.cpu.relayRouted.slice(-2))
    }
  }
}

const summary = (figures: Figures) => {
  const relay = Math.max(...figures.relay)
  const handWritten = Math.max(...figures.handWritten)
  const rawClient = Math.max(...figures.rawClient)
  const ratioPerRound = figures.relay.map((r, i) => ratio2(r, figures.handWritten[i] ?? Number.NaN))
  const ratio = ratio2(relay, handWritten)
  const ratioMedianOfRounds = Number(median(ratioPerRound).toFixed(2))
  return {
    relayRecordsPerSecond: Math.round(relay),
    handWrittenRecordsPerSecond: Math.round(handWritten),
    ratio,
    ratioMedianOfRounds,
    ratioPerRound,
    // judged on the unrounded ratios: 0.795 is shown as 0.80 but does not meet 0.8
    met:
      relay / handWritten >= goalRatio &&
      median(figures.relay.map((r, i) => r / (figures.handWritten[i] ?? Number.NaN))) >= goalRatio,
    handWrittenWavesRecordsPerSecond: Math.round(Math.max(...figures.handWrittenWaves)),
    rawClientRecordsPerSecond: Math.round(rawClient),
    rawUnorderedRecordsPerSecond: Math.round(Math.max(...figures.rawUnordered)),
    relayNoopSinkRecordsPerSecond: Math.round(Math.max(...figures.relayNoopSink)),
    ...(figures.handWrittenAsSink.length === 0
      ? {}
      : {
          handWrittenAsSink: {
            recordsPerSecond: Math.round(Math.max(...figures.handWrittenAsSink)),
            ratio: ratio2(relay, Math.max(...figures.handWrittenAsSink)),
            ratioMedianOfRounds: Number(
              median(figures.relay.map((r, i) => r / (figures.handWrittenAsSink[i] ?? Number.NaN))).toFixed(2)
            )
          }
        }),
    settled: settledSummary(figures),
    cpuMicrosPerRecord: {
      relay: Math.min(...figures.cpu.relay),
      handWritten: Math.min(...figures.cpu.handWritten),
      handWrittenWaves: Math.min(...figures.cpu.handWrittenWaves),
      rawClient: Math.min(...figures.cpu.rawClient),
      relayNoopSink: Math.min(...figures.cpu.relayNoopSink)
    },
    rounds: figures
  }
}

/**
 * JetStream publishes as `NatsSink` makes them: a plain publish with a reply subject on one subscription of
 * the publisher's own, the answer read there (a publish ack), with no request object per publish.
 */
const replyPublisher = (nc: NatsConnection) => {
  const inbox = createInbox()
  const awaiting = new Map<string, { readonly resolve: () => void; readonly reject: (error: Error) => void }>()
  const decoder = new TextDecoder()
  let next = 0
  nc.subscribe(`${inbox}.*`, {
    callback: (error, msg) => {
      if (error !== null) return
      const token = msg.subject.slice(inbox.length + 1)
      const entry = awaiting.get(token)
      if (entry === undefined) return
      awaiting.delete(token)
      const answer: unknown = JSON.parse(decoder.decode(msg.data))
      if (NatsSink.isPubAck(answer)) entry.resolve()
      else entry.reject(new Error(`not a publish ack: ${decoder.decode(msg.data)}`))
    }
  })
  return (subject: string, message: Message): Promise<void> =>
    new Promise((resolve, reject) => {
      const h = natsHeaders()
      for (const [name, value] of Object.entries(messageHeaders(message))) h.set(name, value)
      h.set("Nats-Msg-Id", message.id)
      const token = (next++).toString(36)
      nc.publish(subject, message.payload, { reply: `${inbox}.${token}`, headers: h })
      awaiting.set(token, { resolve, reject })
    })
}

const loadBefore = os.loadavg()[0] ?? 0

console.log("NATS JetStream …")
const nats = await startNats()
const natsFigures = await (async () => {
  const nc = await natsConnect({ servers: nats.url, noAsyncTraces: true })
  try {
    const jsm = await nc.jetstreamManager()
    await jsm.streams.add({ name: "bench", subjects: ["bench.>"], duplicate_window: 120_000_000_000 })
    const js = nc.jetstream()
    const asSink = replyPublisher(nc)
    return await measure(
      NatsSink.layer({ servers: nats.url, subject: "bench.relay.{partitionKey}" }),
      (side, message) => {
        const h = natsHeaders()
        for (const [name, value] of Object.entries(messageHeaders(message))) h.set(name, value)
        return js.publish(`bench.${side}.${message.partitionKey}`, message.payload, { msgID: message.id, headers: h })
      },
      (side, message) => asSink(`bench.${side}.${message.partitionKey}`, message)
    )
  } finally {
    await nc.close()
  }
})().finally(() => nats.dispose())

console.log("RabbitMQ …")
const rabbit = await startRabbitMq()
const rabbitFigures = await (async () => {
  const model = await amqpConnect(rabbit.url)
  try {
    const channel = await model.createConfirmChannel()
    await channel.assertQueue("bench", { durable: true })
    const purge = setInterval(() => void channel.purgeQueue("bench").catch(() => undefined), 1_000)
    try {
      return await measure(
        RabbitMqSink.layer({ url: rabbit.url, routingKey: "bench" }),
        (_side, message) =>
          new Promise<void>((resolve, reject) =>
            channel.publish(
              "",
              "bench",
              Buffer.from(message.payload),
              { persistent: true, mandatory: true, messageId: message.id, headers: messageHeaders(message) },
              (error: unknown) => (error === null || error === undefined ? resolve() : reject(error))
            )
          )
      )
    } finally {
      clearInterval(purge)
    }
  } finally {
    await model.close()
  }
})().finally(() => rabbit.dispose())

const result = {
  generatedAt: new Date().toISOString(),
  quick,
  records: total,
  partitions: partitions.length,
  inFlight,
  batch: { size: batchSize, max: maxBatchSize, maxConcurrency },
  warmUpRounds,
  goal: `relay ≥ ${goalRatio}× hand-written relay (best against best and median of rounds)`,
  baseline:
    "hand-written relay in the same process: raw better-sqlite3 claim with the SQLite store's statements and transaction shape, " +
    "the raw broker client publishing each claimed record (same headers, message id, acknowledgements; a keyed record only after " +
    "the previous one of its key was acknowledged; 10 groups in flight per partition, 8 partitions at once), then one raw complete " +
    "of the batch; batches of 100 doubling to 500",
  platform: `${os.platform()} ${os.arch()}, ${os.cpus().length} cores`,
  loadAverage1m: { before: Number(loadBefore.toFixed(2)), after: Number((os.loadavg()[0] ?? 0).toFixed(2)) },
  nats: summary(natsFigures),
  rabbitmq: summary(rabbitFigures)
}
fs.rmSync(directory, { recursive: true, force: true })
fs.mkdirSync(path.join(here, "results"), { recursive: true })
fs.writeFileSync(path.join(here, "results", "brokers.json"), JSON.stringify(result, null, 2) + "\n")
console.log(
  `NATS relay/hand-written ${result.nats.ratio}× (median ${result.nats.ratioMedianOfRounds}×), ` +
    `RabbitMQ relay/hand-written ${result.rabbitmq.ratio}× (median ${result.rabbitmq.ratioMedianOfRounds}×) (goal ≥ ${goalRatio}×)`
)
