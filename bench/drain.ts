/**
 * End-to-end relay benchmark (run: `npx tsx bench/drain.ts`, `--quick` for a short run).
 *
 * One relay drains 8 partitions; in every partition half of the records carry ordering keys (16 keys per
 * partition, every other record keyed), half are keyless. For each backend (memory store with the memory
 * sink; SQLite file with a no-op sink that only counts sends):
 *
 * 1. **Throughput**: a backlog is persisted first, then the relay is started; the round is timed as the raw
 *    baseline's below is, over the claims and completes: from the relay's first claim to the return of the
 *    complete that finished the backlog (records/s of wall time and of this process's CPU time, the statement
 *    clock and the profiler over the same window). The relay's start before its first claim (partition
 *    discovery, lease acquires, the drainers' builds, the first cycle's expiry sweep) is a fixed cost that does
 *    not grow with the backlog: each round reports it apart (`startMillis`), and the time from the start until
 *    the store held none pending or claimed as `recordsPerSecondFromStart` (how the rounds were timed before).
 *    The backlog is persisted as the raw baseline below persists: transactions of 100 records of one
 *    partition, the partitions taking turns, so that relay and baseline find their records laid out alike in
 *    the file.
 * 2. **Latency**: a producer enqueues batches of 100 at a steady pace (half the measured throughput)
 *    while the relay runs; p50/p99 of enqueue-to-delivery (`createdAt` to the sink's delivery time). Producer
 *    and relay share the process's one thread (better-sqlite3 runs every statement and `fsync` on it), so the
 *    run also prints that thread's ceiling: the producer's cost per record (its persists' time in the run), the
 *    relay's (the rest of the busy time), the rate at which both keep the thread busy all the time, and the
 *    relay's cost under the steady producer over its cost in the throughput round, the records per claim, and
 *    the load the pace would put on the thread at the relay's cost of draining records laid out as the producer
 *    lays them out (the interleaved backlog below). On SQLite two loops run at the same pace for comparison:
 *    the raw baseline's (below) and the same loop written on Effect and the store's client
 *    (`@effect/sql-sqlite-node`), which tells whether the goal is within reach of code on that client; the raw
 *    loops run once more at half the raw baseline's own throughput (the goal's rule applied to them: a relay as
 *    fast as the raw loop would be given that producer). The same run follows with the producer in a second OS
 *    process (bench/drainProducer.ts) on the same file and the relay, with `SqliteWakeSignal`, the drainer's
 *    default idle back-off and its WAL checkpointed on a worker thread (as the CLI's SQLite relay runs), alone on
 *    this process's thread; taking turns with the same run with the relay's database checkpointing inline
 *    (SQLite's own way, `SqliteDatabase`'s default): before and after the CLI's relay checkpointed in the background.
 *
 * On SQLite the relay also runs with the store's group commit off (every complete its own commit), with
 * one lane per ordering key (`maxConcurrency` 16), with the backlog interleaved record by record over
 * the partitions (500 per transaction, so each partition's records are spread over eight times as many
 * table pages and every claim or complete writes more of them), and on a backlog with no record keyed
 * against the raw loop on the same backlog (no key order to keep: a batch goes out in one wave, completed in
 * one call), all informational.
 *
 * On SQLite the same run also measures a raw better-sqlite3 baseline of the same work without Effect,
 * leases or a sink: on a backlog persisted untimed in the relay's layout, claim 100 → complete 100 (each its
 * own transaction, two commits a batch) partition by partition with the store's own statements
 * (`SqliteOutboxSchema.statements`), on a file with the same pragmas (WAL, `synchronous = FULL`), reading the
 * claim's rows as better-sqlite3 returns them by default (row objects). In the same rounds, informational, the same
 * loop reading them as arrays of values (better-sqlite3's raw mode), as the store reads them.
 *
 * Raw and relay rounds alternate so that both see the same machine load (nine rounds of each: a round's ratio
 * swings by ±20 % on a shared two-core machine); the ratio is reported best against best and as the median of
 * the per-round ratios. One untimed relay round runs first: the
 * relay's code (Effect's runtime, the store, the drainer) is still partly unoptimised in its first
 * round, while the raw baseline's short loop is optimised within it.
 *
 * In the same rounds, the goal's ceiling for code on the client the store must use: the raw loop written on
 * Effect and `@effect/sql-sqlite-node`, with the relay's order (a key's records sent in waves, each wave
 * completed before the next is sent) and without it (`handWrittenDrain`); and a drain through the store's own
 * `claim` and `complete` calls with nothing else (`storeCallsDrain`): what the store's code costs apart from the
 * drainer — once with one complete a claim, once keeping the order in the relay's shape (a fiber per partition,
 * a complete per wave): the ceiling for a relay with a drainer per partition on the store's calls.
 *
 * Goals (issue #28 item 4): memory ≥ 150k records/s end to end on a quiet machine; SQLite ≥ 0.95× the raw
 * baseline (best against best, and the median of the per-round ratios reported beside it); SQLite latency p99
 * ≤ 250 ms. Writes
 * bench/results/drain.json. `--only=memory` / `--only=sqlite` runs one backend (throughput only) and
 * prints its figures without writing the results file, for profiling (`--only=sqlite` runs the hand-written
 * drains and the store's calls alone beside them, and ends with a raw, a relay, a hand-written and two store-calls
 * rounds with every statement timed, all but the first store-calls round by kind); `--only=sqlite-latency` runs one
 * throughput round, then the latency phase at half of it (or `--rate=N` records/s) with a diagnosis: the
 * two legs of the latency (to the claim, claim to delivery), persist times, the event loop's delay, and, in a
 * second run with every statement timed, SQLite's statements by kind (counts, time, rows per claim), for the
 * relay and for the raw producer and relay at the same pace (the hand-written `@effect/sql` loop runs there too);
 * `--only=sqlite-latency-process` runs one throughput round, then the latency phase with the producer in a
 * second process, twice with each way of checkpointing the relay's database, then once statement-timed
 * (`--producer-checkpoint=background` checkpoints the producer's database in the background too). The full run
 * and `--only=sqlite` also profile three more rounds of each SQLite side (raw,
 * relay, the store's calls in the relay's shape, hand-written; bench/CpuProfile.ts) and break their time down by
 * what ran; `--only=sqlite-profile` runs eight such rounds alone. `--profile-dir=<directory>` also writes each
 * profiled round's whole profile there, function by function (see bench/CpuProfile.ts for line numbers).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as DateTime from "effect/DateTime"
import { defaultScheduler } from "effect/Scheduler"
import * as fs from "node:fs"
import { spawn } from "node:child_process"
import * as os from "node:os"
import * as path from "node:path"
import { monitorEventLoopDelay } from "node:perf_hooks"
import * as v8 from "node:v8"
import * as readline from "node:readline"
import { fileURLToPath } from "node:url"
import * as CpuProfile from "./CpuProfile.js"
import { candidateIds, type RawRows, RawSqlite, type RawStatement } from "./RawSqlite.js"
import {
  formatTimeOrderedId,
  NewOutboxRecord,
  type OutboxRecord,
  type PreparedRecord
} from "../src/domain/OutboxRecord.js"
import * as MemoryLeaseStore from "../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as MemorySink from "../src/layers/sinks/MemorySink.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteLeaseStore from "../src/layers/sqlite/SqliteLeaseStore.js"
import * as SqliteWakeSignal from "../src/layers/sqlite/SqliteWakeSignal.js"
import * as SqlDialect from "../src/layers/sql/SqlDialect.js"
import * as SqlOutboxStatements from "../src/layers/sql/SqlOutboxStatements.js"
import * as SqliteOutboxSchema from "../src/layers/sqlite/SqliteOutboxSchema.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import * as Relay from "../src/programs/Relay.js"
import type { LeaseStore } from "../src/services/LeaseStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { Sink } from "../src/services/Sink.js"
import {
  type Keys,
  keysPerPartition,
  orderingKeyOf,
  pacedPersist,
  partitions,
  payload,
  recordMaker
} from "./DrainRecords.js"
import { median } from "./Stats.js"

const quick = process.argv.includes("--quick")
/** `--only=<mode>` (see the header: memory, sqlite, sqlite-latency, sqlite-latency-process, sqlite-profile) prints without writing results. */
const only = process.argv.find((arg) => arg.startsWith("--only="))?.slice("--only=".length)
const here = path.dirname(fileURLToPath(import.meta.url))
const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-drain-bench-"))
let files = 0
const freshFile = (): string => path.join(directory, `drain-${++files}.db`)

const relayOptions = {
  owner: "bench-relay",
  leaseTtl: "30 seconds",
  discoveryInterval: "20 millis",
  drainer: {
    onExpired: "drop",
    onPermanentFailure: "drop",
    onPoison: "drop",
    batchSize: 100,
    maxBatchSize: 500,
    maxConcurrency: 10,
    idleBackoffMin: "1 millis",
    idleBackoffMax: "10 millis"
  }
} satisfies Relay.RelayOptions

/** The records every run persists (see bench/DrainRecords.ts). */
const makeRecords = recordMaker()

/**
 * How the backlog is persisted: `"partition"` — transactions of 100 records of one partition, the partitions
 * taking turns (as the raw baseline persists); `"interleaved"` — transactions of 500 records spread record by
 * record over the partitions.
 */
type Layout = "partition" | "interleaved"

/** The backlog's persist batches: the same records either way, in the given layout. */
const backlogBatches = (count: number, layout: Layout, keys: Keys = "keyed"): Array<ReadonlyArray<NewOutboxRecord>> => {
  const records = makeRecords(count, keys)
  if (layout === "interleaved") return chunk(records, 500)
  const byPartition = partitions.map((partition) => records.filter((r) => r.partitionKey === partition))
  const batches: Array<ReadonlyArray<NewOutboxRecord>> = []
  const longest = Math.max(...byPartition.map((list) => list.length))
  for (let i = 0; i < longest; i += 100) {
    for (const list of byPartition) if (i < list.length) batches.push(list.slice(i, i + 100))
  }
  return batches
}

const chunk = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

const percentile = (values: ReadonlyArray<number>, p: number): number => {
  if (values.length === 0) return 0
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0
}

const cpuMillis = (): number => {
  const usage = process.cpuUsage()
  return (usage.user + usage.system) / 1000
}

interface Throughput {
  readonly records: number
  readonly wallSeconds: number
  readonly recordsPerSecondWall: number
  readonly recordsPerSecondCpu: number
  /** The 1-minute load average when the run ended. */
  readonly loadAverage1m: number
  /** SQLite's own share of the run, present when the statement clock was on (see {@link statementClock}). */
  readonly statements?: StatementTime | undefined
  /**
   * A relay round: the milliseconds from the relay's start to its first claim (partition discovery, lease
   * acquires, the drainers' builds), outside the round.
   */
  readonly startMillis?: number | undefined
  /** A relay round: records per second from the relay's start until the store held none pending or claimed. */
  readonly recordsPerSecondFromStart?: number | undefined
}

interface Latency {
  readonly records: number
  readonly offeredPerSecond: number
  readonly p50Millis: number
  readonly p99Millis: number
  readonly maxMillis: number
  /** How the process's one thread was shared during the run (see {@link ThreadShare}). */
  readonly thread: ThreadShare
  /**
   * Records per claim in the run: the delivered records grouped by partition and claim time (`claimedAt`, a
   * claim's records share it; two claims of a partition in one millisecond count as one); small claims carry a
   * claim's fixed cost over few records, full ones (the relay behind) a drain's cost.
   */
  readonly recordsPerClaim: number
}

/**
 * The producer and the relay share the process's one thread (better-sqlite3 runs every statement, and its
 * `fsync`, on it). From the run: the event loop's utilization, the producer's share (its persists' wall time
 * over the run's), the rest of the busy time as the relay's, each side's cost per record, and the rate at
 * which the thread would be busy all the time with both (`saturatedPerSecond`): beyond it the backlog can
 * only grow, and near it queueing makes the latency grow without bound.
 */
interface ThreadShare {
  readonly eventLoopUtilization: number
  readonly producerShare: number
  readonly relayShare: number
  readonly producerMicrosPerRecord: number
  readonly relayMicrosPerRecord: number
  readonly saturatedPerSecond: number
  /** Offered rate over `saturatedPerSecond`: the thread's load from this run's own work. */
  readonly offeredToSaturated: number
}

type Stores = Layer.Layer<OutboxStore | LeaseStore>

/** Which sink the relay sends to: the recording memory sink, or a no-op sink that only counts sends. */
type SinkKind = "memory" | "noop"

/** A sink that does nothing but count its sends. */
const countingSink = () => {
  let sent = 0
  return {
    sink: Sink.of({
      send: () =>
        Effect.sync(() => {
          sent += 1
        })
    }),
    sent: () => sent
  }
}

/** Waits until no record of the backlog is pending or claimed (every one completed). */
const awaitDrained = (store: OutboxStore["Type"]) =>
  Effect.gen(function* () {
    for (;;) {
      let left = 0
      // the bench's own polls are left out of the per-batch statement counts
      statementClock.perBatch = false
      for (const partition of partitions) {
        left += (yield* store.countPending(partition)) + (yield* store.countClaimed(partition))
      }
      statementClock.perBatch = true
      if (left === 0) return
      yield* Effect.sleep("2 millis")
    }
  })

/**
 * Waits until the recorder holds `total` deliveries: woken by the sink's own count of sends rather than polled (a
 * poll copies every delivery so far, on the relay's thread); the bench's sinks never fail a send.
 */
const awaitDelivered = (recorder: MemorySink.MemorySinkService, total: number): Effect.Effect<void> =>
  Effect.gen(function* () {
    yield* recorder.awaitAttempts(total)
    while ((yield* recorder.deliveredIds).length < total) yield* Effect.sleep("1 millis")
  })

/**
 * Persists a backlog, then runs the relay until the sink has received every record and the store holds
 * none pending or claimed (the last completes included). The round is timed as the raw loop's is, over the
 * relay's claims and completes: from its first claim to the return of the complete that finished the backlog
 * (the store's calls are counted on their way through). The relay's start before its first claim (partition
 * discovery, lease acquires, the drainers' builds, the first cycle's expiry sweep) is reported apart
 * (`startMillis`), and the round from the relay's start until the store held none pending or claimed as
 * `recordsPerSecondFromStart`.
 */
const throughput = (
  stores: Stores,
  count: number,
  sinkKind: SinkKind,
  options: typeof relayOptions = relayOptions,
  layout: Layout = "partition",
  keys: Keys = "keyed"
): Effect.Effect<Throughput> =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    for (const batch of backlogBatches(count, layout, keys)) yield* store.persist(batch)
    const recorder = yield* MemorySink.make()
    const counting = countingSink()
    const sink = sinkKind === "memory" ? recorder.sink : counting.sink
    const window = roundWindow(count)
    const finished = yield* Deferred.make<void>()
    let completed = 0
    const counted = OutboxStore.of({
      ...store,
      claim: (partitionKey, token, limit) =>
        Effect.suspend(() => {
          window.open()
          return store.claim(partitionKey, token, limit)
        }),
      complete: (ids, token) =>
        Effect.map(store.complete(ids, token), () => {
          completed += ids.length
          if (completed < count) return
          window.close()
          Deferred.unsafeDone(finished, Exit.void)
        })
    })
    const startedAt = performance.now()
    const relay = yield* Effect.fork(
      Relay.run(options).pipe(Effect.provideService(Sink, sink), Effect.provideService(OutboxStore, counted))
    )
    yield* Deferred.await(finished)
    if (sinkKind === "memory") yield* awaitDelivered(recorder, count)
    else if (counting.sent() < count) {
      return yield* Effect.dieMessage(`the relay completed ${completed} records but sent ${counting.sent()}`)
    }
    yield* awaitDrained(store)
    const fromStart = (performance.now() - startedAt) / 1000
    const result = window.result()
    yield* Fiber.interrupt(relay)
    return {
      ...result,
      startMillis: Number(((window.openedAt() ?? startedAt) - startedAt).toFixed(1)),
      recordsPerSecondFromStart: Math.round(count / fromStart)
    }
  }).pipe(Effect.provide(stores), Effect.orDie)

/** The CPU profiler of the profiled rounds (see {@link profiledRounds}); a round is profiled only when asked. */
const profiler = CpuProfile.make(
  100,
  process.argv.find((arg) => arg.startsWith("--profile-dir="))?.slice("--profile-dir=".length)
)

/**
 * Where each SQLite side's CPU time goes (see bench/CpuProfile.ts): `rounds` profiled rounds of the raw
 * baseline, the relay, the store's calls in the relay's shape and the hand-written drain, taking turns; the
 * median of the rounds per side. Runs before the statement clock is installed (it wraps every statement).
 */
const profiledRounds = (count: number, rounds: number): Effect.Effect<Record<string, CpuProfile.ProfiledSide>> =>
  Effect.gen(function* () {
    // each round on a file of its own: the sides' effects are made for every round (the store's layers and the
    // hand-written drain pick their file when made)
    const roundOf: Record<CpuProfile.ProfiledSideKey, () => Effect.Effect<unknown>> = {
      raw: () => Effect.sync(() => rawBaseline(count)),
      relay: () => throughput(sqliteStores(), count, "noop"),
      storeCallsInOrder: () => storeCallsDrain(count, true),
      handWritten: () => handWrittenDrain(count)
    }
    for (let r = 0; r < rounds; r++) {
      for (const [side] of CpuProfile.profiledSides) {
        profiler.profileNext(side)
        yield* roundOf[side]()
      }
    }
    profiler.close()
    return Object.fromEntries(
      CpuProfile.profiledSides.map(([side]) => [side, CpuProfile.sideOf(profiler.rounds.get(side) ?? [])])
    )
  })

/**
 * A round timed over a window that the side's own work opens and closes (see {@link startRound}, which opens it
 * at once): the wall and CPU time, the statement clock and the profiler all cover the window.
 */
interface RoundWindow {
  /** Opens the window; a later call does nothing. */
  readonly open: () => void
  /** Closes the window once it is open; a later call does nothing. */
  readonly close: () => void
  /** The round's figures over the window (opened and closed now if that had not happened yet). */
  readonly result: () => Throughput
  /** When the window opened (`performance.now()`), if it has. */
  readonly openedAt: () => number | undefined
}

const roundWindow = (count: number): RoundWindow => {
  const timeStatements = statementClock.installed
  let startWall: number | undefined
  let startCpu = 0
  let closed: { readonly wall: number; readonly cpu: number; readonly statements?: StatementTime } | undefined
  const open = () => {
    if (startWall !== undefined) return
    if (timeStatements) statementClock.start()
    profiler.start()
    startWall = performance.now()
    startCpu = cpuMillis()
  }
  const close = () => {
    if (startWall === undefined || closed !== undefined) return
    const wall = (performance.now() - startWall) / 1000
    const cpu = (cpuMillis() - startCpu) / 1000
    profiler.stop()
    const statements = timeStatements ? statementClock.stop(count) : undefined
    closed = { wall, cpu, ...(statements !== undefined ? { statements } : {}) }
  }
  const result = (): Throughput => {
    open()
    close()
    const { cpu, statements, wall } = closed ?? { wall: 0, cpu: 0 }
    return {
      records: count,
      wallSeconds: Number(wall.toFixed(3)),
      recordsPerSecondWall: Math.round(count / wall),
      recordsPerSecondCpu: Math.round(count / cpu),
      loadAverage1m: Number((os.loadavg()[0] ?? 0).toFixed(2)),
      ...(statements !== undefined ? { statements } : {})
    }
  }
  return { open, close, result, openedAt: () => startWall }
}

/**
 * Starts timing a throughput round of `count` records (and SQLite's statements, when the statement clock is
 * installed); the returned function ends it and gives the round's figures.
 */
const startRound = (count: number): (() => Throughput) => {
  const window = roundWindow(count)
  window.open()
  return window.result
}

/**
 * Where the latency phase's time went (printed by `--only=sqlite-latency`): the two legs of each record's
 * latency, the producer's persists and how late they started, the event loop's blocked time, and, when the
 * statement clock is installed, SQLite's statements by kind.
 */
interface LatencyDiagnosis {
  /** `createdAt` to the claim that took the record (`claimedAt`): p50 / p99 / max. */
  readonly toClaimMillis: readonly [number, number, number]
  /** The claim to the sink's delivery: p50 / p99 / max. */
  readonly claimToDeliveryMillis: readonly [number, number, number]
  /** One producer persist of 100 records, wall time: p50 / p99 / max. */
  readonly persistMillis: readonly [number, number, number]
  /** How late each producer persist started against its schedule: p50 / p99 / max. */
  readonly producerLateMillis: readonly [number, number, number]
  /** The event loop's delay (`monitorEventLoopDelay`, 1 ms resolution): p50 / p99 / max. */
  readonly eventLoopDelayMillis: readonly [number, number, number]
  readonly wallSeconds: number
  readonly cpuSeconds: number
  readonly statements?: StatementTime | undefined
  /** Statement kind → count, total milliseconds, mean rows returned (claim sizes under "claim update"). */
  readonly phases?: Record<string, { count: number; millis: number; meanRows: number }> | undefined
}

const triple = (values: ReadonlyArray<number>): readonly [number, number, number] => [
  Number(percentile(values, 50).toFixed(2)),
  Number(percentile(values, 99).toFixed(2)),
  Number(percentile(values, 100).toFixed(2))
]

/**
 * The producer's cost alone: the latency run's paced persists without a relay, on a fresh store; the busy
 * time of the event loop per record persisted, in microseconds.
 */
const producerCost = (stores: Stores, perSecond: number, seconds: number): Effect.Effect<number> =>
  Effect.gen(function* () {
    const { records, busyMillis } = yield* pacedPersist(yield* OutboxStore, makeRecords, perSecond, seconds)
    return Number(((busyMillis * 1000) / records).toFixed(1))
  }).pipe(Effect.provide(stores), Effect.orDie)

/**
 * Enqueues batches of 100 at `perSecond` for `seconds` while the relay drains; latency percentiles. With
 * `producerMicros` (from {@link producerCost}) the thread's share is split with the producer's measured cost;
 * without, with the persists' wall time (which also counts their waits for the connection).
 */
const latency = (
  stores: Stores,
  perSecond: number,
  seconds: number,
  diagnose?: (diagnosis: LatencyDiagnosis) => void,
  producerMicros?: number
): Effect.Effect<Latency> =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    const recorder = yield* MemorySink.make()
    const relay = yield* Effect.fork(Relay.run(relayOptions).pipe(Effect.provideService(Sink, recorder.sink)))
    const batches = Math.max(1, Math.round((perSecond * seconds) / 100))
    const interval = (seconds * 1000) / batches
    const persistTimes: Array<number> = []
    const late: Array<number> = []
    const loopDelay = monitorEventLoopDelay({ resolution: 1 })
    const timeStatements = diagnose !== undefined && statementClock.installed
    if (timeStatements) statementClock.start()
    if (diagnose !== undefined) loopDelay.enable()
    const startCpu = cpuMillis()
    const utilizationStart = performance.eventLoopUtilization()
    const start = performance.now()
    for (let i = 0; i < batches; i++) {
      const due = start + i * interval
      const wait = due - performance.now()
      if (wait > 0) yield* Effect.sleep(`${Math.ceil(wait)} millis`)
      const before = performance.now()
      late.push(Math.max(0, before - due))
      yield* store.persist(makeRecords(100))
      persistTimes.push(performance.now() - before)
    }
    const total = batches * 100
    yield* awaitDelivered(recorder, total)
    const wall = (performance.now() - start) / 1000
    const cpu = (cpuMillis() - startCpu) / 1000
    const utilization = performance.eventLoopUtilization(utilizationStart).utilization
    loopDelay.disable()
    const producerSeconds =
      producerMicros !== undefined ? (producerMicros * total) / 1e6 : persistTimes.reduce((sum, t) => sum + t, 0) / 1000
    const relaySeconds = Math.max(0, utilization * wall - producerSeconds)
    const producerPerRecord = (producerSeconds * 1e6) / total
    const relayPerRecord = (relaySeconds * 1e6) / total
    const saturated = 1e6 / Math.max(1e-9, producerPerRecord + relayPerRecord)
    const thread: ThreadShare = {
      eventLoopUtilization: Number(utilization.toFixed(3)),
      producerShare: Number((producerSeconds / wall).toFixed(3)),
      relayShare: Number((relaySeconds / wall).toFixed(3)),
      producerMicrosPerRecord: Number(producerPerRecord.toFixed(1)),
      relayMicrosPerRecord: Number(relayPerRecord.toFixed(1)),
      saturatedPerSecond: Math.round(saturated),
      offeredToSaturated: Number((perSecond / saturated).toFixed(3))
    }
    const statementTime = timeStatements ? statementClock.stop(total) : undefined
    yield* Fiber.interrupt(relay)
    const deliveries = yield* recorder.deliveries
    const samples = deliveries.map((d) => d.deliveredAtMillis - DateTime.toEpochMillis(d.record.createdAt))
    // a record's claim time (a delivered record always has one; its delivery time otherwise)
    const claimedAt = (d: MemorySink.Delivery): number =>
      Option.match(d.record.claimedAt, {
        onNone: () => d.deliveredAtMillis,
        onSome: DateTime.toEpochMillis
      })
    if (diagnose !== undefined) {
      const phases = timeStatements ? phasesOf(statementClock.phases) : {}
      diagnose({
        toClaimMillis: triple(deliveries.map((d) => claimedAt(d) - DateTime.toEpochMillis(d.record.createdAt))),
        claimToDeliveryMillis: triple(deliveries.map((d) => d.deliveredAtMillis - claimedAt(d))),
        persistMillis: triple(persistTimes),
        producerLateMillis: triple(late),
        eventLoopDelayMillis: [
          Number((loopDelay.percentile(50) / 1e6).toFixed(2)),
          Number((loopDelay.percentile(99) / 1e6).toFixed(2)),
          Number((loopDelay.max / 1e6).toFixed(2))
        ],
        wallSeconds: Number(wall.toFixed(3)),
        cpuSeconds: Number(cpu.toFixed(3)),
        ...(statementTime !== undefined ? { statements: statementTime, phases } : {})
      })
    }
    const claims = new Set(deliveries.map((d) => `${d.record.partitionKey} ${claimedAt(d)}`))
    return {
      records: total,
      offeredPerSecond: Math.round(perSecond),
      p50Millis: percentile(samples, 50),
      p99Millis: percentile(samples, 99),
      maxMillis: percentile(samples, 100),
      thread,
      recordsPerClaim: Number((deliveries.length / Math.max(1, claims.size)).toFixed(1))
    }
  }).pipe(Effect.provide(stores), Effect.orDie)

// ---------------------------------------------------------------------------------------------------
// Raw better-sqlite3 baseline: a backlog persisted untimed, then claim 100 → complete 100 with the store's statements
// ---------------------------------------------------------------------------------------------------

/** Time spent inside better-sqlite3 statements during a measured window. */
interface StatementTime {
  readonly seconds: number
  readonly statements: number
  readonly commits: number
  readonly commitMedianMillis: number
  /** Claimed batches: claim updates that claimed at least one record. */
  readonly batches: number
  /** Statements per claimed batch (claim, completes, lease reads, counts; no persist), `BEGIN`/`COMMIT` included. */
  readonly statementsPerBatch: number
  /** Commits per claimed batch: `COMMIT`s plus writes that ran outside a transaction (each its own commit). */
  readonly commitsPerBatch: number
  /** The same counts per 100 records drained (the relay's batches grow past 100, the raw loop's do not). */
  readonly statementsPer100Records: number
  readonly commitsPer100Records: number
  /** Garbage collection in the window (`v8.GCProfiler`): pauses, and their time per record. */
  readonly gcPauses: number
  readonly gcMicrosPerRecord: number
  /** Effect operations the runtime evaluated in the window (every fiber's run-loop steps), per record. */
  readonly effectOpsPerRecord: number
}

/** Statements of one kind during a measured window: how many, their time, the rows they returned. */
interface PhaseTime {
  count: number
  millis: number
  rows: number
}

/** What a statement does, from its text (the store's and the raw baseline's statements alike). */
const phaseOf = (sql: string): string => {
  if (/^\s*BEGIN/i.test(sql)) return "begin"
  if (/^\s*COMMIT/i.test(sql)) return "commit"
  if (/^\s*(SAVEPOINT|RELEASE|ROLLBACK TO)/i.test(sql)) return "savepoint"
  if (/seq_counter = seq_counter \+/.test(sql) || /^\s*INSERT INTO \S*outbox \(/i.test(sql)) return "persist"
  if (/SET max_version = excluded/.test(sql)) return "fence"
  if (/SET status = 'claimed'/.test(sql)) return "claim update"
  if (/SET status = 'completed'/.test(sql)) return "complete"
  if (/count\(/i.test(sql)) return "count"
  if (/lease/i.test(sql)) return "lease"
  if (/^\s*SELECT/i.test(sql) && /status/.test(sql)) return "claim select"
  return "other"
}

/**
 * A clock around every better-sqlite3 statement of the process: the raw baseline and the store (through
 * `@effect/sql-sqlite-node`) load the same module, so both are timed alike. Installed only for the
 * informational statement-time round, so the measured rounds run the module untouched. A statement's time
 * includes SQLite's file writes and fsyncs (a `COMMIT` is mostly its fsync).
 */
const statementClock = {
  on: false,
  millis: 0,
  statements: 0,
  commits: [] as Array<number>,
  /** Off while the bench polls the relay's store for the end of a round: the per-batch counts cover the relay's work only. */
  perBatch: true,
  batches: 0,
  batchStatements: 0,
  batchCommits: 0,
  installed: false,
  /** Statements by what they do (see {@link phaseOf}); a `COMMIT` is counted under the work it commits. */
  phases: new Map<string, PhaseTime>(),
  lastPhase: "other",
  /** The window's garbage collections (`v8.GCProfiler`: every pause, with its cost, as it happens). */
  gc: undefined as v8.GCProfiler | undefined,
  effectOps: 0,
  install(): void {
    if (this.installed) return
    this.installed = true
    const clock = this
    // every fiber asks the scheduler once per run-loop step whether to yield: a count of Effect operations
    const shouldYield = defaultScheduler.shouldYield.bind(defaultScheduler)
    defaultScheduler.shouldYield = (fiber) => {
      if (clock.on) clock.effectOps += 1
      return shouldYield(fiber)
    }
    const prototype = (RawSqlite as unknown as { prototype: { prepare(sql: string): RawStatement } }).prototype
    const prepare = prototype.prepare
    prototype.prepare = function (this: unknown, sql: string): RawStatement {
      const database = this as { readonly inTransaction: boolean }
      const statement = prepare.call(this, sql) as RawStatement & Record<string, unknown>
      const commit = /^\s*COMMIT/i.test(sql)
      const write = /^\s*(UPDATE|INSERT|DELETE)/i.test(sql)
      const claimUpdate = /SET status = 'claimed'/.test(sql)
      const phase = phaseOf(sql)
      for (const method of ["run", "all", "get", "iterate"]) {
        const original = statement[method]
        if (typeof original !== "function") continue
        statement[method] = function (this: unknown, ...params: ReadonlyArray<unknown>) {
          if (!clock.on) return original.apply(this, params)
          const autocommit = write && !database.inTransaction
          const start = performance.now()
          let result: unknown
          try {
            result = original.apply(this, params)
            return result
          } finally {
            const millis = performance.now() - start
            clock.millis += millis
            clock.statements += 1
            if (phase !== "begin" && phase !== "commit" && phase !== "savepoint") clock.lastPhase = phase
            const key = phase === "commit" ? `commit after ${clock.lastPhase}` : phase
            const entry = clock.phases.get(key) ?? { count: 0, millis: 0, rows: 0 }
            entry.count += 1
            entry.millis += millis
            if (Array.isArray(result)) entry.rows += result.length
            clock.phases.set(key, entry)
            if (commit) clock.commits.push(millis)
            if (clock.perBatch) {
              clock.batchStatements += 1
              if (commit || autocommit) clock.batchCommits += 1
              if (claimUpdate && Array.isArray(result) && result.length > 0) clock.batches += 1
            }
          }
        }
      }
      return statement
    }
  },
  start(): void {
    this.phases = new Map()
    this.lastPhase = "other"
    this.on = true
    this.millis = 0
    this.statements = 0
    this.commits = []
    this.perBatch = true
    this.batches = 0
    this.batchStatements = 0
    this.batchCommits = 0
    this.effectOps = 0
    this.gc = new v8.GCProfiler()
    this.gc.start()
  },
  stop(records: number): StatementTime {
    this.on = false
    const collections = this.gc?.stop()?.statistics ?? []
    this.gc = undefined
    // `cost` is in microseconds
    const gcMicros = collections.reduce((sum, collection) => sum + collection.cost, 0)
    return {
      seconds: Number((this.millis / 1000).toFixed(3)),
      statements: this.statements,
      commits: this.commits.length,
      commitMedianMillis: Number(median(this.commits).toFixed(3)),
      batches: this.batches,
      statementsPerBatch: Number((this.batchStatements / Math.max(1, this.batches)).toFixed(2)),
      commitsPerBatch: Number((this.batchCommits / Math.max(1, this.batches)).toFixed(3)),
      statementsPer100Records: Number(((this.batchStatements * 100) / Math.max(1, records)).toFixed(2)),
      commitsPer100Records: Number(((this.batchCommits * 100) / Math.max(1, records)).toFixed(3)),
      gcPauses: collections.length,
      gcMicrosPerRecord: Number((gcMicros / Math.max(1, records)).toFixed(2)),
      effectOpsPerRecord: Number((this.effectOps / Math.max(1, records)).toFixed(2))
    }
  }
}
/** The latency run's raw baseline (see {@link rawSteady}). */
interface RawSteady {
  readonly records: number
  readonly offeredPerSecond: number
  readonly p50Millis: number
  readonly p99Millis: number
  readonly maxMillis: number
  readonly eventLoopUtilization: number
  /** The thread's busy time per record, producer and relay together. */
  readonly microsPerRecord: number
}

/**
 * What the steady loops ({@link rawSteady}, {@link handWrittenSteady}) share: the pace, the producer's batches
 * with each record's persist time, the relay's sends (latency samples) and the ids each partition completes
 * in its next claim, and the run's result.
 */
const steadyRun = (perSecond: number, seconds: number, prefix: string) => {
  const batches = Math.max(1, Math.round((perSecond * seconds) / 100))
  const total = batches * 100
  const made = partitions.map(() => 0)
  const persistedAt = new Map<string, number>()
  const samples: Array<number> = []
  let toComplete: Array<Array<string>> = partitions.map(() => [])
  const utilizationStart = performance.eventLoopUtilization()
  const start = performance.now()
  return {
    batches,
    /** When batch `n` is due (`performance.now()` time). */
    dueAt: (n: number): number => start + (n * seconds * 1000) / batches,
    /**
     * Batch `n`: 100 records over the partitions (the `k`-th of a partition keyed as {@link rawRecord} keys
     * it), envelope ids `<prefix>-<n>-<i>`, by partition.
     */
    batch: (n: number): Array<Array<PreparedRecord>> => {
      const now = Date.now()
      const at = performance.now()
      const byPartition: Array<Array<PreparedRecord>> = partitions.map(() => [])
      for (let i = 0; i < 100; i++) {
        const slot = i % partitions.length
        const k = made[slot] ?? 0
        made[slot] = k + 1
        const envelopeId = `${prefix}-${n}-${i}`
        persistedAt.set(envelopeId, at)
        byPartition[slot]?.push(rawRecord(partitions[slot] ?? "p0", k, envelopeId, now, n, i))
      }
      return byPartition
    },
    /** The ids the partition's previous claim left to complete. */
    toComplete: (slot: number): ReadonlyArray<string> => toComplete[slot] ?? [],
    /** Sends one claim's rows (by partition) now: latency samples kept, their ids completed next; whether any. */
    send: (claimed: ReadonlyArray<ReadonlyArray<object>>): boolean => {
      toComplete = partitions.map(() => [])
      const sentAt = performance.now()
      let any = false
      claimed.forEach((rows, slot) => {
        for (const row of rows) {
          any = true
          const at = persistedAt.get(String(Reflect.get(row, "envelope_id")))
          if (at !== undefined) samples.push(sentAt - at)
          toComplete[slot]?.push(String(Reflect.get(row, "id")))
        }
      })
      return any
    },
    /** Every record was sent. */
    done: (): boolean => samples.length >= total,
    result: (): RawSteady => {
      const wall = (performance.now() - start) / 1000
      const utilization = performance.eventLoopUtilization(utilizationStart).utilization
      return {
        records: total,
        offeredPerSecond: Math.round(perSecond),
        p50Millis: Number(percentile(samples, 50).toFixed(1)),
        p99Millis: Number(percentile(samples, 99).toFixed(1)),
        maxMillis: Number(percentile(samples, 100).toFixed(1)),
        eventLoopUtilization: Number(utilization.toFixed(3)),
        microsPerRecord: Number(((utilization * wall * 1e6) / total).toFixed(1))
      }
    }
  }
}

/** The bound values of `allocateSeqs(partitions.length)` for a batch: each partition and its record count. */
const seqCounts = (byPartition: ReadonlyArray<ReadonlyArray<PreparedRecord>>): Array<unknown> => {
  const counts: Array<unknown> = []
  byPartition.forEach((list, slot) => counts.push(partitions[slot], list.length))
  return counts
}

/** The insert's bound values of a batch, from the rows of its `allocateSeqs` (each partition's last seq). */
const batchInsertValues = (
  byPartition: ReadonlyArray<ReadonlyArray<PreparedRecord>>,
  seqRows: ReadonlyArray<object>
): Array<unknown> => {
  const last = new Map<unknown, number>()
  for (const row of seqRows) last.set(Reflect.get(row, "partition_key"), Number(Reflect.get(row, "seq_counter")))
  const values: Array<unknown> = []
  byPartition.forEach((list, slot) => {
    let seq = (last.get(partitions[slot]) ?? 0) - list.length + 1
    for (const record of list) SqliteOutboxSchema.pushInsertValues(values, record, seq++)
  })
  return values
}

/**
 * The latency run of {@link latency} without Effect, the store or the drainer: a raw better-sqlite3 producer and
 * relay on one connection and the one thread, with the store's own statements. The producer persists batches of
 * 100 over the 8 partitions at `perSecond` (one transaction: the seq blocks, one insert); each persist wakes the
 * relay, which claims every partition in one transaction (the completes of its previous claims first, as the
 * store's group commit does), hands the records to a no-op send, and claims again until a claim finds nothing.
 * Latency = the persist's start to the send. It shows what the pace costs the thread when nothing but SQLite
 * and a minimal loop run: the goal's reach on this machine. A lower bound: two records of one ordering key in
 * one claim are sent without the complete between them that the drainer commits (SPEC §6 step 5); at this pace
 * a claim rarely holds two (a partition's keyed records cycle through its 16 keys, 32 records a cycle).
 */
const rawSteady = (perSecond: number, seconds: number): Promise<RawSteady> =>
  new Promise((resolve, reject) => {
    const { db, st, tx } = openRaw()
    const rawToken = { owner: "raw", version: 1 }
    let scheduled = false
    let finished = false
    let n = 0
    const persist = (): void => {
      const byPartition = run.batch(n)
      n++
      tx(() => {
        const seqs = st(statements.allocateSeqs(partitions.length)).all(...seqCounts(byPartition))
        st(statements.insert(100)).all(...batchInsertValues(byPartition, seqs))
      })
      wake()
    }
    const wake = (): void => {
      if (scheduled) return
      scheduled = true
      setImmediate(cycle)
    }
    const cycle = (): void => {
      scheduled = false
      if (finished) return
      try {
        claimOnce()
      } catch (error) {
        finished = true
        reject(error)
      }
    }
    const claimOnce = (): void => {
      const now = Date.now()
      const claimed = tx(() =>
        partitions.map((partitionKey, slot) => {
          const done = run.toComplete(slot)
          if (done.length > 0) st(statements.complete(done.length)).all(...bind.complete(done, rawToken, now))
          st(statements.raiseFence).all(partitionKey, rawToken.version)
          const rows = st(statements.selectClaimable).all(
            ...bind.selectClaimable(partitionKey, rawToken.version, undefined, 500)
          )
          if (rows.length === 0) return rows
          const ids = rows.map((row) => String(row["id"]))
          st(statements.claimUpdate(ids.length)).all(...bind.claimUpdate(ids, rawToken, now, partitionKey, undefined))
          return rows
        })
      )
      const any = run.send(claimed)
      if (run.done()) finish()
      else if (any) wake()
    }
    const run = steadyRun(perSecond, seconds, "raw")
    const finish = (): void => {
      finished = true
      const result = run.result()
      db.close()
      resolve(result)
    }
    let next = 0
    const tick = (): void => {
      if (finished) return
      try {
        persist()
      } catch (error) {
        finished = true
        reject(error)
        return
      }
      next++
      if (next < run.batches) setTimeout(tick, Math.max(0, run.dueAt(next) - performance.now()))
    }
    setTimeout(tick, 0)
  })

/** Runs one of the store's statements with its values on the store's client and returns its rows. */
type Execute = (text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<object>, SqlError>

/**
 * One partition's claim on the store's client with the store's statements: the fence raised to the token's
 * version, up to `limit` claimable records read (oldest first) and claimed at `now`. Returns the rows read.
 */
const claimOnClient = (
  execute: Execute,
  partitionKey: string,
  token: { readonly owner: string; readonly version: number },
  limit: number,
  now: number
) =>
  Effect.gen(function* () {
    yield* execute(statements.raiseFence, [partitionKey, token.version])
    const rows = yield* execute(
      statements.selectClaimable,
      bind.selectClaimable(partitionKey, token.version, undefined, limit)
    )
    if (rows.length > 0) {
      const ids = rows.map((row) => String(Reflect.get(row, "id")))
      yield* execute(statements.claimUpdate(ids.length), bind.claimUpdate(ids, token, now, partitionKey, undefined))
    }
    return rows
  })

/** {@link Execute} through the client's `unsafe` (its span and connection handling per statement). */
const unsafeOn =
  (sql: SqlClient.SqlClient): Execute =>
  (text, params) =>
    sql.unsafe(text, params)

/**
 * The loop of {@link rawSteady} written on Effect and the store's client, as an application would write it:
 * `@effect/sql-sqlite-node` (opened as the store's database is, `SqliteDatabase.layer`), `sql.withTransaction`
 * and `sql.unsafe` with the store's statements, a persist's wake through a `Queue`. No store and no drainer:
 * one transaction claims every partition a wake (the previous claims' completes first) and a no-op send
 * follows, until a claim finds nothing. It tells whether the goal is within reach of code on the client the
 * store must use (a persist joins the application's transaction on it); the same lower bound as the raw loop
 * (a key's records of one claim go out without a complete between them).
 */
const handWrittenSteady = (perSecond: number, seconds: number): Effect.Effect<RawSteady> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    for (const ddl of SqliteOutboxSchema.createStatements(names)) yield* sql.unsafe(ddl)
    const token = { owner: "hand-written", version: 1 }
    const wake = yield* Queue.sliding<void>(1)
    const run = steadyRun(perSecond, seconds, "hand")
    const claimPartition = (partitionKey: string, slot: number, now: number) => {
      const done = run.toComplete(slot)
      return Effect.zipRight(
        done.length > 0 ? sql.unsafe(statements.complete(done.length), bind.complete(done, token, now)) : Effect.void,
        claimOnClient(unsafeOn(sql), partitionKey, token, 500, now)
      )
    }
    /** One claim of every partition, sent; whether it found any record. */
    const claimOnce = Effect.map(
      Effect.suspend(() => {
        const now = Date.now()
        return sql.withTransaction(
          Effect.forEach(partitions, (partitionKey, slot) => claimPartition(partitionKey, slot, now))
        )
      }),
      run.send
    )
    const relay = yield* Effect.fork(
      Effect.forever(
        Effect.zipRight(Queue.take(wake), Effect.iterate(true, { while: (found) => found, body: () => claimOnce }))
      )
    )
    const persist = (n: number) =>
      Effect.suspend(() => {
        const byPartition = run.batch(n)
        return sql.withTransaction(
          Effect.gen(function* () {
            const seqs = yield* sql.unsafe(statements.allocateSeqs(partitions.length), seqCounts(byPartition))
            yield* sql.unsafe(statements.insert(100), batchInsertValues(byPartition, seqs))
          })
        )
      })
    for (let n = 0; n < run.batches; n++) {
      const wait = run.dueAt(n) - performance.now()
      if (wait > 0) yield* Effect.sleep(`${Math.ceil(wait)} millis`)
      yield* persist(n)
      yield* Queue.offer(wake, undefined)
    }
    while (!run.done()) yield* Effect.sleep("1 millis")
    const result = run.result()
    yield* Fiber.interrupt(relay)
    return result
  }).pipe(Effect.provide(SqliteDatabase.layer({ filename: freshFile() })), Effect.orDie)

/** The statement clock's phases as reported: count, total milliseconds, mean rows per statement. */
const phasesOf = (
  timed: ReadonlyMap<string, PhaseTime>
): Record<string, { count: number; millis: number; meanRows: number }> => {
  const phases: Record<string, { count: number; millis: number; meanRows: number }> = {}
  for (const [kind, entry] of timed) {
    phases[kind] = {
      count: entry.count,
      millis: Math.round(entry.millis),
      meanRows: Number((entry.rows / Math.max(1, entry.count)).toFixed(1))
    }
  }
  return phases
}

const names = Either.getOrThrow(SqliteOutboxSchema.tableNames(""))
const statements = SqliteOutboxSchema.statements(names, { staleReclaim: false })
/** The store's own bind lists of those statements. */
const bind = SqlOutboxStatements.binds(SqlDialect.sqlite)

/**
 * A raw better-sqlite3 connection on a fresh file with the store's pragmas (WAL, `synchronous = FULL`) and
 * schema: statements prepared once per text, and `tx`, which runs a body in `BEGIN … COMMIT` (`ROLLBACK` when
 * it throws).
 */
const openRaw = () => {
  const db = new RawSqlite(freshFile())
  db.pragma("journal_mode = WAL")
  db.pragma("synchronous = FULL")
  db.pragma("busy_timeout = 5000")
  for (const ddl of SqliteOutboxSchema.createStatements(names)) db.exec(ddl)
  const cache = new Map<string, RawStatement>()
  const st = (sql: string): RawStatement => {
    let prepared = cache.get(sql)
    if (prepared === undefined) {
      prepared = db.prepare(sql)
      cache.set(sql, prepared)
    }
    return prepared
  }
  const tx = <A>(body: () => A): A => {
    st("BEGIN").run()
    try {
      const result = body()
      st("COMMIT").run()
      return result
    } catch (error) {
      st("ROLLBACK").run()
      throw error
    }
  }
  return { db, st, tx }
}

/**
 * The raw loops' record: the `k`-th record of its partition, keyed as bench/DrainRecords.ts keys it
 * (`orderingKeyOf`); its id is made of `now`, its `batch` and its place `i` in it.
 */
const rawRecord = (
  partitionKey: string,
  k: number,
  envelopeId: string,
  now: number,
  batch: number,
  i: number,
  keys: Keys = "keyed"
) =>
  ({
    id: formatTimeOrderedId(now, i, batch, Math.floor(Math.random() * 0xffffffff)),
    partitionKey,
    envelopeId,
    bindingId: "b",
    routeId: "",
    address: "",
    payload,
    headers: {},
    orderingKey: Option.fromNullable(orderingKeyOf(k, keys)),
    createdAt: DateTime.unsafeMake(now),
    expiresAt: Option.none()
  }) satisfies PreparedRecord

/**
 * The raw loops' backlog, laid out as the relay's (`backlogBatches`, "partition"): batches of 100 records of one
 * partition, the partitions taking turns; envelope ids `<prefix>-<batch>-<i>`.
 */
const rawBacklog = (
  count: number,
  prefix: string,
  keys: Keys = "keyed"
): Array<{ partitionKey: string; records: Array<PreparedRecord> }> => {
  const now = Date.now()
  const batches: Array<{ partitionKey: string; records: Array<PreparedRecord> }> = []
  for (let n = 0; n * 100 < count; n++) {
    const partitionKey = partitions[n % partitions.length] ?? "p0"
    const k = Math.floor(n / partitions.length) * 100
    const records = Array.from({ length: Math.min(100, count - n * 100) }, (_, i) =>
      rawRecord(partitionKey, k + i, `${prefix}-${n}-${i}`, now, n, i, keys)
    )
    batches.push({ partitionKey, records })
  }
  return batches
}

/** The insert's bound values of one backlog batch, from its partition's last seq after `allocateSeqs(1)`. */
const backlogInsertValues = (records: ReadonlyArray<PreparedRecord>, seqRow: object | undefined): Array<unknown> => {
  let seq = Number(seqRow === undefined ? 0 : Reflect.get(seqRow, "seq_counter")) - records.length + 1
  const values: Array<unknown> = []
  for (const record of records) SqliteOutboxSchema.pushInsertValues(values, record, seq++)
  return values
}

const rawBaseline = (count: number, keys: Keys = "keyed", rows: RawRows = "objects"): Throughput => {
  const { db, st, tx } = openRaw()
  const selectValues = rows === "values" ? db.prepare(statements.selectClaimable).raw(true) : undefined
  // the backlog, untimed, in transactions of 100 records of one partition
  for (const { partitionKey, records } of rawBacklog(count, "raw", keys)) {
    tx(() => {
      const [row] = st(statements.allocateSeqs(1)).all(partitionKey, records.length)
      st(statements.insert(records.length)).all(...backlogInsertValues(records, row))
    })
  }
  const version = 1
  const rawToken = { owner: "raw", version }
  const round = startRound(count)
  // the timed loop: claim 100 → complete 100, partition by partition, each in its own transaction
  let done = 0
  for (const partitionKey of partitions) {
    for (;;) {
      const claimed = tx(() => {
        st(statements.raiseFence).all(partitionKey, version)
        const ids = candidateIds(
          st(statements.selectClaimable),
          selectValues,
          bind.selectClaimable(partitionKey, version, undefined, 100)
        )
        if (ids.length === 0) return []
        return st(statements.claimUpdate(ids.length)).all(
          ...bind.claimUpdate(ids, rawToken, Date.now(), partitionKey, undefined)
        )
      })
      if (claimed.length === 0) break
      const ids = claimed.map((row) => String(row["id"]))
      tx(() => st(statements.complete(ids.length)).all(...bind.complete(ids, rawToken, Date.now())))
      done += ids.length
    }
  }
  if (done !== count) throw new Error(`raw baseline completed ${done} of ${count} records`)
  const result = round()
  db.close()
  return result
}

/**
 * Adds a claim's `items` to `waves` as the relay sends them (SPEC §6 step 5): the `w`-th item of each ordering
 * key in wave `w`, an item without a key (`keyOf` gives `undefined`) in the first. Returns `waves`.
 */
const addToWaves = <A>(
  waves: Array<Array<A>>,
  items: ReadonlyArray<A>,
  keyOf: (item: A) => string | undefined
): Array<Array<A>> => {
  const seen = new Map<string, number>()
  for (const item of items) {
    const key = keyOf(item)
    let wave = 0
    if (key !== undefined) {
      wave = seen.get(key) ?? 0
      seen.set(key, wave + 1)
    }
    const list = waves[wave] ?? []
    waves[wave] = list
    list.push(item)
  }
  return waves
}

/**
 * The raw baseline's drain written on Effect and the store's client, keeping the order the relay keeps: the
 * ceiling of the SQLite relay goal for code on the client the store must use. `@effect/sql-sqlite-node` opened as
 * the store's database is (`SqliteDatabase.layer`), used as the store uses it: one connection reserved from the
 * client, the store's statements run on it (`execute`, no span per statement) inside `BEGIN … COMMIT`; the backlog
 * persisted untimed as the raw baseline's. Each round claims 100 records of every partition in one transaction (the
 * last wave's completes of the round before first), then sends the claim in waves — the `w`-th record of each
 * ordering key of a partition in wave `w`, keyless records in the first — each record through an `Effect` (a no-op
 * send, as the relay's bench sink), and completes each wave in a transaction of its own before the next wave is
 * sent (SPEC §6 step 5: a record is complete before its younger sibling is sent), the last wave's with the next
 * claim. No store, drainer, lease, record decoding or metrics: what remains is what any relay on that client must
 * do. With `order` false every claimed record is in the first wave (the raw baseline's loop on the client): what
 * the client and `Effect` cost, apart from the order.
 */
const handWrittenDrain = (count: number, order = true): Effect.Effect<Throughput> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    for (const ddl of SqliteOutboxSchema.createStatements(names)) yield* sql.unsafe(ddl)
    for (const { partitionKey, records } of rawBacklog(count, "hand")) {
      yield* sql.withTransaction(
        Effect.flatMap(sql.unsafe(statements.allocateSeqs(1), [partitionKey, records.length]), ([row]) =>
          sql.unsafe(statements.insert(records.length), backlogInsertValues(records, row))
        )
      )
    }
    // the connection the loop runs on, as the store reserves one (the client's other calls wait for it)
    const conn = yield* sql.reserve
    const execute: Execute = (text, params) => conn.execute(text, params, undefined)
    const transaction = <A>(body: Effect.Effect<A, SqlError>) =>
      Effect.zipLeft(Effect.zipRight(execute("BEGIN", []), body), execute("COMMIT", []))
    const token = { owner: "hand-written", version: 1 }
    let sent = 0
    const send = (_row: object) =>
      Effect.sync(() => {
        sent += 1
      })
    const complete = (ids: ReadonlyArray<string>) =>
      ids.length === 0 ? Effect.void : execute(statements.complete(ids.length), bind.complete(ids, token, Date.now()))
    const claimPartition = (partitionKey: string) => claimOnClient(execute, partitionKey, token, 100, Date.now())
    /** A claimed row's ordering key; none (every row in the first wave) when the order is not kept. */
    const orderingKeyOfRow = (row: object): string | undefined => {
      const key: unknown = Reflect.get(row, "ordering_key")
      return order && typeof key === "string" ? key : undefined
    }
    /** One claim of every partition, the ids left to complete first; the claimed rows in waves. */
    const claimRound = (left: ReadonlyArray<string>) =>
      Effect.map(
        transaction(Effect.zipRight(complete(left), Effect.forEach(partitions, claimPartition))),
        (claimed) => {
          const waves: Array<Array<object>> = []
          for (const rows of claimed) addToWaves(waves, rows, orderingKeyOfRow)
          return waves
        }
      )
    const round = startRound(count)
    let left: ReadonlyArray<string> = []
    for (;;) {
      const waves = yield* claimRound(left)
      if (waves.length === 0) break
      for (const [w, wave] of waves.entries()) {
        yield* Effect.forEach(wave, send, { discard: true })
        const ids = wave.map((row) => String(Reflect.get(row, "id")))
        if (w < waves.length - 1) yield* transaction(complete(ids))
        else left = ids
      }
    }
    const result = round()
    if (sent !== count) return yield* Effect.dieMessage(`the hand-written drain sent ${sent} of ${count} records`)
    return result
  }).pipe(Effect.scoped, Effect.provide(SqliteDatabase.layer({ filename: freshFile() })), Effect.orDie)

/**
 * A drain through the store's own calls and nothing else: the goal's ceiling for any relay built on
 * `OutboxStore`. The backlog persisted as the relay's, then every partition at once (as the relay's drainers run,
 * so the store's group commit joins their completes) claims up to the relay's `maxBatchSize` with
 * `OutboxStore.claim`, sends each record through an `Effect` (a no-op, as the relay's bench sink) and completes
 * the whole claim with one `OutboxStore.complete`, until nothing is left. No drainer, lease, wave or metric, and
 * fewer completes than the order needs (a key's records of one claim completed together): a lower bound on what
 * a relay pays in the store's code — row decoding and validation, claim selection, the records built, the
 * transactions — beside its statements.
 *
 * With `order` the drain keeps the order the relay keeps (SPEC §6 step 5), in the relay's shape: a fiber per
 * partition, each claim sent in waves — the `w`-th record of each ordering key in wave `w`, keyless records in the
 * first — and each wave but the last completed with one `OutboxStore.complete` before the next is sent; the last
 * wave's complete and the partition's next claim are made together, so the group commit joins them (as the
 * relay's end-of-batch complete and next claim). No lease, drainer, metric or failure handling: the ceiling of the
 * SQLite relay goal for a relay shaped as SPEC §6 asks (a drainer per partition) on the store's own calls.
 */
const storeCallsDrain = (count: number, order = false): Effect.Effect<Throughput> =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    for (const batch of backlogBatches(count, "partition")) yield* store.persist(batch)
    const token = { owner: "store-calls", version: 1 }
    let sent = 0
    const send = (_record: object) =>
      Effect.sync(() => {
        sent += 1
      })
    const maxBatch = relayOptions.drainer.maxBatchSize
    const orderingKeyOf = (record: OutboxRecord) => Option.getOrUndefined(record.orderingKey)
    const idsOf = (records: ReadonlyArray<OutboxRecord>) => records.map((record) => record.id)
    /** Sends a claim's waves, completing each but the last; then the last's complete beside the next claim. */
    const drainInOrder = (partitionKey: string, records: ReadonlyArray<OutboxRecord>): Effect.Effect<void, unknown> =>
      Effect.gen(function* () {
        for (;;) {
          if (records.length === 0) return
          const waves = addToWaves([], records, orderingKeyOf)
          let last: Array<OutboxRecord> = []
          for (const [w, wave] of waves.entries()) {
            yield* Effect.forEach(wave, send, { discard: true })
            if (w < waves.length - 1) yield* store.complete(idsOf(wave), token)
            else last = wave
          }
          const [, next] = yield* Effect.all(
            [store.complete(idsOf(last), token), store.claim(partitionKey, token, maxBatch)],
            {
              concurrency: "unbounded"
            }
          )
          records = next.records
        }
      })
    const drainPartition = (partitionKey: string): Effect.Effect<void, unknown> =>
      order
        ? Effect.flatMap(store.claim(partitionKey, token, maxBatch), ({ records }) =>
            drainInOrder(partitionKey, records)
          )
        : drainUnordered(partitionKey)
    const drainUnordered = (partitionKey: string): Effect.Effect<void, unknown> =>
      Effect.flatMap(store.claim(partitionKey, token, maxBatch), ({ records }) =>
        records.length === 0
          ? Effect.void
          : Effect.zipRight(
              Effect.zipRight(
                Effect.forEach(records, send, { discard: true }),
                store.complete(
                  records.map((record) => record.id),
                  token
                )
              ),
              Effect.suspend(() => drainUnordered(partitionKey))
            )
      )
    const round = startRound(count)
    yield* Effect.forEach(partitions, drainPartition, { concurrency: "unbounded", discard: true })
    const result = round()
    if (sent !== count) return yield* Effect.dieMessage(`the store-calls drain sent ${sent} of ${count} records`)
    return result
  }).pipe(Effect.provide(sqliteStores()), Effect.orDie)

/**
 * Where the databases of a run checkpoint their WAL (`SqliteDatabase`'s `checkpoint` option): `"background"`, the
 * library's default (a worker thread), or `"inline"`, SQLite's own way (the commit that takes the log past 1000
 * pages copies it into the database file, on the process's thread), as before that default.
 */
type Checkpoint = "background" | "inline"

/** Where the second-process producer's database checkpoints: `--producer-checkpoint=`, else inline (the default). */
const producerCheckpoint: Checkpoint = process.argv.includes("--producer-checkpoint=background")
  ? "background"
  : "inline"

/** The latency run with the producer in a second OS process (see {@link latencyOtherProcess}). */
interface OtherProcessLatency {
  readonly records: number
  readonly offeredPerSecond: number
  readonly p50Millis: number
  readonly p99Millis: number
  readonly maxMillis: number
  /** The relay process's event loop utilization over the run (the relay alone on its thread). */
  readonly relayEventLoopUtilization: number
  /**
   * The relay process's CPU time (user and system, V8's background threads included) per record delivered,
   * in microseconds: the event loop's busy time also counts the time a statement blocks the thread in a
   * commit's fsync, this does not (the store waits for the other process's write lock with its fiber asleep).
   */
  readonly relayCpuMicrosPerRecord: number
  /** The producer process's event loop utilization over its persists. */
  readonly producerEventLoopUtilization: number
  /** The WAL file's size at the run's end: the longest the log grew (SQLite reuses the file from its start). */
  readonly walBytes: number
}

/**
 * The latency run of {@link latency} with the producer in a second OS process (bench/drainProducer.ts)
 * persisting to the same SQLite file at `perSecond`, the relay here (with the library's defaults for a
 * SQLite relay: `SqliteWakeSignal`) alone on this process's thread, as when an application's producers and
 * its relay run in separate processes. Latency = the producer's `createdAt` to the sink's delivery time. The
 * relay runs with the drainer's default idle back-off (100 ms growing to 30 s), as the CLI's SQLite relay
 * does: with the wake signal, the 1-10 ms back-off of the other runs would only add polling claims, each of
 * them a write that queues behind the other process's commits. With `diagnose`, SQLite's statements are timed
 * by kind (see {@link statementClock}) and passed to it. The relay's database checkpoints as `checkpoint` says; the
 * producer's as an application's does by default (inline), or as `--producer-checkpoint=background|inline` says.
 */
const latencyOtherProcess = (
  perSecond: number,
  seconds: number,
  diagnose?: (phases: Record<string, { count: number; millis: number; meanRows: number }>) => void,
  checkpoint: Checkpoint = "background"
): Effect.Effect<OtherProcessLatency> =>
  Effect.gen(function* () {
    const file = freshFile()
    const stores = Layer.mergeAll(SqliteOutboxStore.layer, SqliteLeaseStore.layer, SqliteWakeSignal.layer).pipe(
      Layer.provide(SqliteDatabase.layer({ filename: file, checkpoint })),
      Layer.orDie
    )
    return yield* Effect.gen(function* () {
      const recorder = yield* MemorySink.make()
      const { idleBackoffMin: _min, idleBackoffMax: _max, ...drainer } = relayOptions.drainer
      const relay = yield* Effect.fork(
        Relay.run({ ...relayOptions, drainer }).pipe(Effect.provideService(Sink, recorder.sink))
      )
      const child = spawn(
        process.execPath,
        [
          "--import",
          "tsx",
          path.join(here, "drainProducer.ts"),
          file,
          String(perSecond),
          String(seconds),
          producerCheckpoint
        ],
        { stdio: ["pipe", "pipe", "inherit"] }
      )
      const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]()
      const nextLine = Effect.promise(async () => {
        const line = await lines.next()
        return line.done === true ? "" : String(line.value)
      })
      if ((yield* nextLine) !== "ready") return yield* Effect.dieMessage("the producer process did not start")
      const utilizationStart = performance.eventLoopUtilization()
      const cpuStart = cpuMillis()
      if (diagnose !== undefined) {
        statementClock.install()
        statementClock.start()
      }
      child.stdin.write("go\n")
      const [word, producedText, busyText] = (yield* nextLine).split(" ")
      const total = Number(producedText)
      if (word !== "done" || !(total > 0)) return yield* Effect.dieMessage("the producer process failed")
      yield* awaitDelivered(recorder, total)
      const utilization = performance.eventLoopUtilization(utilizationStart).utilization
      const relayCpuMillis = cpuMillis() - cpuStart
      if (diagnose !== undefined) {
        statementClock.stop(total)
        diagnose(phasesOf(statementClock.phases))
      }
      const walBytes = fs.statSync(`${file}-wal`).size
      yield* Fiber.interrupt(relay)
      const deliveries = yield* recorder.deliveries
      const samples = deliveries.map((d) => d.deliveredAtMillis - DateTime.toEpochMillis(d.record.createdAt))
      const [p50, p99, max] = triple(samples)
      return {
        records: total,
        offeredPerSecond: Math.round(perSecond),
        p50Millis: p50,
        p99Millis: p99,
        maxMillis: max,
        relayEventLoopUtilization: Number(utilization.toFixed(3)),
        relayCpuMicrosPerRecord: Number(((relayCpuMillis * 1000) / total).toFixed(1)),
        producerEventLoopUtilization: Number((Number(busyText) / (seconds * 1000)).toFixed(3)),
        walBytes
      }
    }).pipe(Effect.provide(stores))
  })

/**
 * The latency run's one-thread ceiling, as a sentence: the producer's and the relay's cost per record, the
 * rate that keeps the thread busy all the time, and the offered rate's share of it.
 */
const latencyCeiling = (run: Latency): string =>
  `sqlite latency ceiling: producer ${run.thread.producerMicrosPerRecord} µs + relay ${run.thread.relayMicrosPerRecord} µs ` +
  `of the one thread per record (event loop ${Math.round(run.thread.eventLoopUtilization * 100)} % busy); ` +
  `both together saturate it at ${run.thread.saturatedPerSecond} rec/s, the offered ${run.offeredPerSecond} rec/s is ` +
  `${Math.round(run.thread.offeredToSaturated * 100)} % of that`

/**
 * Where the latency run's load comes from: the pace is half the relay's throughput round (`drainPerSecond`), so
 * the relay needs half the thread at its drain cost `R` per record, and the producer adds its cost `P` (its
 * persists' time in the run): the load would be ½ + ½ · P / R if the relay claimed a steady producer's records
 * at its drain cost. The producer lays its records out as the interleaved backlog does (each persist of 100
 * spread record by record over the partitions), which the relay drains at `I` per record
 * (`interleavedPerSecond`): at that cost the load would be (P + I) / 2R. `relayOverDrain` = the relay's cost
 * in the run over `R`.
 */
const latencyFloor = (run: Latency, drainPerSecond: number, interleavedPerSecond: number) => {
  const relayDrainMicrosPerRecord = Number((1e6 / drainPerSecond).toFixed(1))
  const producerToRelayDrain = Number((run.thread.producerMicrosPerRecord / relayDrainMicrosPerRecord).toFixed(3))
  const lowestLoad = Number((0.5 + producerToRelayDrain / 2).toFixed(3))
  const relayOverDrain = Number((run.thread.relayMicrosPerRecord / relayDrainMicrosPerRecord).toFixed(2))
  const interleavedDrainMicrosPerRecord = Number((1e6 / interleavedPerSecond).toFixed(1))
  const loadAtInterleavedCost = Number(
    ((run.thread.producerMicrosPerRecord + interleavedDrainMicrosPerRecord) / (2 * relayDrainMicrosPerRecord)).toFixed(
      3
    )
  )
  const relayOverInterleaved = Number((run.thread.relayMicrosPerRecord / interleavedDrainMicrosPerRecord).toFixed(2))
  return {
    relayDrainMicrosPerRecord,
    producerToRelayDrain,
    lowestLoad,
    relayOverDrain,
    interleavedDrainMicrosPerRecord,
    loadAtInterleavedCost,
    relayOverInterleaved,
    statement:
      `sqlite latency floor: the pace is half the relay's throughput round (${relayDrainMicrosPerRecord} µs a record); the ` +
      `producer's persists took ${run.thread.producerMicrosPerRecord} µs a record (${producerToRelayDrain}× that), so with ` +
      `every record claimed at the drain's cost the thread would be ${Math.round(lowestLoad * 100)} % busy; the relay cost ` +
      `${run.thread.relayMicrosPerRecord} µs a record under the steady producer, ${relayOverDrain}× its drain cost, in claims ` +
      `of ${run.recordsPerClaim} records on average; the producer's records lie interleaved over the partitions, and the ` +
      `relay drains such a backlog at ${interleavedDrainMicrosPerRecord} µs a record: at that cost the thread would be ` +
      `${Math.round(loadAtInterleavedCost * 100)} % busy (the relay's cost in the run ${relayOverInterleaved}× that)`
  }
}

const memoryStores: () => Stores = () => Layer.mergeAll(MemoryOutboxStore.layer, MemoryLeaseStore.layer)
const sqliteStores = (options: SqliteOutboxStore.SqliteOutboxStoreOptions = {}): Stores =>
  Layer.mergeAll(SqliteOutboxStore.layerWith(options), SqliteLeaseStore.layer).pipe(
    Layer.provide(SqliteDatabase.layer({ filename: freshFile() })),
    Layer.orDie
  )

const best = (runs: ReadonlyArray<Throughput>): Throughput =>
  runs.reduce((a, b) => (b.recordsPerSecondWall > a.recordsPerSecondWall ? b : a))

/** The pace of a latency-only run: `--rate=N` records/s, else half of one SQLite throughput round's. */
const latencyPace = (count: number): Effect.Effect<number> =>
  Effect.gen(function* () {
    const rateArgument = process.argv.find((arg) => arg.startsWith("--rate="))?.slice("--rate=".length)
    if (rateArgument !== undefined) return Number(rateArgument)
    const measured = yield* throughput(sqliteStores(), count, "noop")
    console.log("sqlite relay", measured)
    return measured.recordsPerSecondWall / 2
  })

const main = Effect.gen(function* () {
  const rounds = quick ? 1 : 3
  // the goal's rounds: more of them, as the machine's run-to-run spread is large (best against best)
  const sqliteRounds = quick ? 1 : 9
  // the memory relay is CPU-bound and its first rounds still run partly unoptimised code: more rounds,
  // best taken (every round is in the results)
  const memoryRounds = quick ? 1 : 5
  const memoryCount = quick ? 20_000 : 100_000
  const sqliteCount = quick ? 4_000 : 20_000
  const loadBefore = os.loadavg()[0] ?? 0
  console.log("load average (1 min)", loadBefore.toFixed(2))
  if (only === "memory") {
    for (let r = 0; r < memoryRounds; r++)
      console.log("memory throughput", yield* throughput(memoryStores(), memoryCount, "memory"))
    return
  }
  if (only === "sqlite-latency") {
    // the latency phase alone, with its diagnosis, at `latencyPace`: a latency run without and one with
    // every statement timed
    const rate = yield* latencyPace(sqliteCount)
    const seconds = quick ? 2 : 3
    const show = (label: string) => (diagnosis: LatencyDiagnosis) =>
      console.log(label, JSON.stringify(diagnosis, null, 1))
    const producerMicros = yield* producerCost(sqliteStores(), rate, seconds)
    console.log(`sqlite producer alone at ${Math.round(rate)} rec/s: ${producerMicros} µs of the thread per record`)
    console.log("sqlite latency", yield* latency(sqliteStores(), rate, seconds, show("diagnosis")))
    console.log("sqlite latency, raw producer and relay", yield* Effect.promise(() => rawSteady(rate, seconds)))
    console.log("sqlite latency, hand-written on @effect/sql-sqlite-node", yield* handWrittenSteady(rate, seconds))
    statementClock.install()
    statementClock.start()
    const rawTimed = yield* Effect.promise(() => rawSteady(rate, seconds))
    statementClock.stop(rawTimed.records)
    console.log("sqlite latency, raw producer and relay, statements timed", rawTimed)
    console.log("raw statements by kind", JSON.stringify(phasesOf(statementClock.phases), null, 1))
    console.log("sqlite latency, statements timed", yield* latency(sqliteStores(), rate, seconds, show("diagnosis")))
    return
  }
  if (only === "sqlite-latency-process") {
    // the second-process latency run alone, at `latencyPace`
    const rate = yield* latencyPace(sqliteCount)
    const diagnosis = (phases: Record<string, { count: number; millis: number; meanRows: number }>) =>
      console.log("statements of the relay process", JSON.stringify(phases, null, 1))
    // checkpoints inline (before the background default) and on a worker thread, taking turns
    for (let r = 0; r < (quick ? 1 : 2); r++) {
      for (const checkpoint of ["inline", "background"] as const) {
        console.log(
          `sqlite latency, producer in a second process, checkpoints ${checkpoint}`,
          yield* latencyOtherProcess(rate, quick ? 1 : 3, undefined, checkpoint)
        )
      }
    }
    console.log(
      "sqlite latency, producer in a second process, statements timed",
      yield* latencyOtherProcess(rate, quick ? 1 : 3, diagnosis)
    )
    return
  }
  if (only === "sqlite-profile") {
    // the profiled rounds alone (see profiledRounds), more of them
    yield* throughput(sqliteStores(), sqliteCount, "noop")
    const sides = yield* profiledRounds(sqliteCount, quick ? 1 : 8)
    console.log("sqlite CPU time by category (profiled rounds, median)", JSON.stringify(sides, null, 1))
    return
  }
  if (only === "sqlite") {
    console.log("sqlite relay, warm-up (not counted)", yield* throughput(sqliteStores(), sqliteCount, "noop"))
    for (let r = 0; r < sqliteRounds; r++) {
      console.log("raw sqlite", rawBaseline(sqliteCount))
      console.log("raw sqlite, claims read as values", rawBaseline(sqliteCount, "keyed", "values"))
      console.log("sqlite relay", yield* throughput(sqliteStores(), sqliteCount, "noop"))
      console.log("sqlite hand-written drain", yield* handWrittenDrain(sqliteCount))
      console.log("sqlite hand-written drain, order not kept", yield* handWrittenDrain(sqliteCount, false))
      console.log("sqlite store calls alone", yield* storeCallsDrain(sqliteCount))
      console.log("sqlite store calls alone, order kept", yield* storeCallsDrain(sqliteCount, true))
    }
    console.log(
      "sqlite CPU time by category (profiled rounds, median)",
      JSON.stringify(yield* profiledRounds(sqliteCount, 3), null, 1)
    )
    statementClock.install()
    console.log("raw sqlite, statements counted", rawBaseline(sqliteCount).statements)
    console.log("raw sqlite, statements by kind", JSON.stringify(phasesOf(statementClock.phases), null, 1))
    console.log("sqlite relay, statements counted", (yield* throughput(sqliteStores(), sqliteCount, "noop")).statements)
    console.log("sqlite relay, statements by kind", JSON.stringify(phasesOf(statementClock.phases), null, 1))
    console.log("sqlite hand-written drain, statements counted", (yield* handWrittenDrain(sqliteCount)).statements)
    console.log(
      "sqlite hand-written drain, statements by kind",
      JSON.stringify(phasesOf(statementClock.phases), null, 1)
    )
    const storeCalls = yield* storeCallsDrain(sqliteCount)
    console.log("sqlite store calls alone, statements timed", storeCalls)
    const storeCallsOrdered = yield* storeCallsDrain(sqliteCount, true)
    console.log("sqlite store calls alone, order kept, statements timed", storeCallsOrdered)
    console.log(
      "sqlite store calls alone, order kept, statements by kind",
      JSON.stringify(phasesOf(statementClock.phases), null, 1)
    )
    return
  }

  const memoryRuns: Array<Throughput> = []
  for (let r = 0; r < memoryRounds; r++) {
    memoryRuns.push(yield* throughput(memoryStores(), memoryCount, "memory"))
    console.log("memory throughput", memoryRuns[memoryRuns.length - 1])
  }
  const memory = best(memoryRuns)
  const memoryLatency = yield* latency(memoryStores(), Math.min(25_000, memory.recordsPerSecondWall / 2), quick ? 1 : 3)
  console.log("memory latency", memoryLatency)

  // SQLite: raw and relay alternate so both see the same machine load; the relay also runs with the
  // store's group commit off, to show what sharing one commit between the partitions' drainers gains
  const rawRuns: Array<Throughput> = []
  const rawValuesRuns: Array<Throughput> = []
  const sqliteRuns: Array<Throughput> = []
  const ungroupedRuns: Array<Throughput> = []
  const handRuns: Array<Throughput> = []
  const handUnorderedRuns: Array<Throughput> = []
  const storeCallsRuns: Array<Throughput> = []
  const storeCallsOrderedRuns: Array<Throughput> = []
  // untimed: the SQLite store's code runs for the first time here (see the header)
  const warmUp = yield* throughput(sqliteStores(), sqliteCount, "noop")
  console.log("sqlite relay, warm-up (not counted)", warmUp)
  for (let r = 0; r < sqliteRounds; r++) {
    rawRuns.push(rawBaseline(sqliteCount))
    console.log("raw sqlite", rawRuns[rawRuns.length - 1])
    rawValuesRuns.push(rawBaseline(sqliteCount, "keyed", "values"))
    console.log("raw sqlite, claims read as values", rawValuesRuns[rawValuesRuns.length - 1])
    sqliteRuns.push(yield* throughput(sqliteStores(), sqliteCount, "noop"))
    console.log("sqlite relay", sqliteRuns[sqliteRuns.length - 1])
    ungroupedRuns.push(yield* throughput(sqliteStores({ groupCommit: false }), sqliteCount, "noop"))
    console.log("sqlite relay, group commit off", ungroupedRuns[ungroupedRuns.length - 1])
    handRuns.push(yield* handWrittenDrain(sqliteCount))
    console.log("sqlite hand-written drain", handRuns[handRuns.length - 1])
    handUnorderedRuns.push(yield* handWrittenDrain(sqliteCount, false))
    console.log("sqlite hand-written drain, order not kept", handUnorderedRuns[handUnorderedRuns.length - 1])
    storeCallsRuns.push(yield* storeCallsDrain(sqliteCount))
    console.log("sqlite store calls alone", storeCallsRuns[storeCallsRuns.length - 1])
    storeCallsOrderedRuns.push(yield* storeCallsDrain(sqliteCount, true))
    console.log("sqlite store calls alone, order kept", storeCallsOrderedRuns[storeCallsOrderedRuns.length - 1])
  }
  const raw = best(rawRuns)
  const sqlite = best(sqliteRuns)
  const latencyRate = sqlite.recordsPerSecondWall / 2
  // the producer alone (paced, on a fresh store): informational; the thread is split with the persists' own time
  // in the latency run, as a producer that waits between batches on an idle thread costs more per record
  const producerAloneMicros = yield* producerCost(sqliteStores(), latencyRate, quick ? 1 : 3)
  const sqliteLatency = yield* latency(sqliteStores(), latencyRate, quick ? 1 : 3)
  console.log("sqlite latency", sqliteLatency)
  console.log(latencyCeiling(sqliteLatency))
  const rawLatency = yield* Effect.promise(() => rawSteady(latencyRate, quick ? 1 : 3))
  console.log("sqlite latency, raw producer and relay", rawLatency)
  // the goal's rule applied to the raw loops: their pace at half the raw baseline's own throughput
  const rawOwnPace = yield* Effect.promise(() => rawSteady(raw.recordsPerSecondWall / 2, quick ? 1 : 3))
  console.log("sqlite latency, raw producer and relay at half the raw baseline's throughput", rawOwnPace)
  const handWrittenLatency = yield* handWrittenSteady(latencyRate, quick ? 1 : 3)
  console.log("sqlite latency, hand-written on @effect/sql-sqlite-node", handWrittenLatency)
  // before and after the background checkpoints, taking turns: inline first
  const otherProcessInline = yield* latencyOtherProcess(latencyRate, quick ? 1 : 3, undefined, "inline")
  console.log("sqlite latency, producer in a second process, checkpoints inline", otherProcessInline)
  const sqliteLatencyOtherProcess = yield* latencyOtherProcess(latencyRate, quick ? 1 : 3)
  console.log("sqlite latency, producer in a second process", sqliteLatencyOtherProcess)
  const otherProcessInlineAgain = yield* latencyOtherProcess(latencyRate, quick ? 1 : 3, undefined, "inline")
  console.log("sqlite latency, producer in a second process, checkpoints inline again", otherProcessInlineAgain)
  const otherProcessAgain = yield* latencyOtherProcess(latencyRate, quick ? 1 : 3)
  console.log("sqlite latency, producer in a second process, again", otherProcessAgain)

  // the same with one lane per ordering key (maxConcurrency = keys per partition): shows how much of the
  // gap is the keyed chain (a complete, i.e. a commit, per wave of keyed records) rather than the drainer
  const laneOptions = {
    ...relayOptions,
    drainer: { ...relayOptions.drainer, maxConcurrency: keysPerPartition }
  } satisfies Relay.RelayOptions
  // and, with the goal's options, a backlog interleaved record by record over the partitions: shows what the
  // layout of the records in the file costs the relay (the raw baseline always persists by partition); and the
  // goal's backlog without ordering keys, against the raw loop on such a backlog:
  // shows how much of the gap is the order of keyed records (SPEC §6: a record completed before its younger
  // sibling is sent, so a batch goes out in as many waves as its longest key chain; the raw loop keeps no order)
  const laneRawRuns: Array<Throughput> = []
  const laneRuns: Array<Throughput> = []
  const interleavedRuns: Array<Throughput> = []
  const unkeyedRawRuns: Array<Throughput> = []
  const unkeyedRuns: Array<Throughput> = []
  for (let r = 0; r < rounds; r++) {
    laneRawRuns.push(rawBaseline(sqliteCount))
    console.log("raw sqlite", laneRawRuns[laneRawRuns.length - 1])
    laneRuns.push(yield* throughput(sqliteStores(), sqliteCount, "noop", laneOptions))
    console.log(`sqlite relay, maxConcurrency ${keysPerPartition}`, laneRuns[laneRuns.length - 1])
    interleavedRuns.push(yield* throughput(sqliteStores(), sqliteCount, "noop", relayOptions, "interleaved"))
    console.log("sqlite relay, backlog interleaved", interleavedRuns[interleavedRuns.length - 1])
    unkeyedRawRuns.push(rawBaseline(sqliteCount, "none"))
    console.log("raw sqlite, no ordering keys", unkeyedRawRuns[unkeyedRawRuns.length - 1])
    unkeyedRuns.push(yield* throughput(sqliteStores(), sqliteCount, "noop", relayOptions, "partition", "none"))
    console.log("sqlite relay, no ordering keys", unkeyedRuns[unkeyedRuns.length - 1])
  }
  const floor = latencyFloor(sqliteLatency, sqlite.recordsPerSecondWall, best(interleavedRuns).recordsPerSecondWall)
  console.log(floor.statement)

  // where each side's CPU time goes, by category, before the statement clock wraps the statements
  const cpuProfile = yield* profiledRounds(sqliteCount, quick ? 1 : 3)
  console.log("sqlite CPU time by category (profiled rounds, median)", JSON.stringify(cpuProfile, null, 1))

  // last (it patches the module): where the SQLite relay's time goes, SQLite's own work against the rest
  statementClock.install()
  const timedRaw = rawBaseline(sqliteCount)
  console.log("raw sqlite, statements timed", timedRaw)
  const timedRelay = yield* throughput(sqliteStores(), sqliteCount, "noop")
  console.log("sqlite relay, statements timed", timedRelay)
  const timedHand = yield* handWrittenDrain(sqliteCount)
  console.log("sqlite hand-written drain, statements timed", timedHand)
  const timedStoreCalls = yield* storeCallsDrain(sqliteCount)
  console.log("sqlite store calls alone, statements timed", timedStoreCalls)
  const timedStoreCallsOrdered = yield* storeCallsDrain(sqliteCount, true)
  console.log("sqlite store calls alone, order kept, statements timed", timedStoreCallsOrdered)
  const timedUnkeyed = yield* throughput(sqliteStores(), sqliteCount, "noop", relayOptions, "partition", "none")
  console.log("sqlite relay, no ordering keys, statements timed", timedUnkeyed)
  const relayStatementSeconds = timedRelay.statements?.seconds ?? 0
  console.log(
    `sqlite statements per claimed batch: relay ${timedRelay.statements?.statementsPerBatch} (commits ${timedRelay.statements?.commitsPerBatch}), ` +
      `raw ${timedRaw.statements?.statementsPerBatch} (commits ${timedRaw.statements?.commitsPerBatch})`
  )

  const ratioCpu = Number((sqlite.recordsPerSecondCpu / raw.recordsPerSecondCpu).toFixed(3))
  /** A statement-timed round's wall time outside SQLite statements, in microseconds per record. */
  const outsideStatementsMicros = (run: Throughput): number =>
    Number((((run.wallSeconds - (run.statements?.seconds ?? 0)) * 1e6) / run.records).toFixed(2))
  /**
   * The relay's rate over the raw baseline's if its statements took what they took in the timed round and the
   * rest `micros` a record (another round's time outside statements).
   */
  const ceilingWithOutside = (micros: number): number | undefined =>
    relayStatementSeconds > 0
      ? Number((timedRaw.wallSeconds / (relayStatementSeconds + (micros * sqliteCount) / 1e6)).toFixed(3))
      : undefined
  /** Each round's ratio (wall clock, or CPU with `rate`) to the round of `against` it alternated with. */
  const perRoundRatios = (
    runs: ReadonlyArray<Throughput>,
    against: ReadonlyArray<Throughput>,
    rate: "recordsPerSecondWall" | "recordsPerSecondCpu" = "recordsPerSecondWall"
  ) => runs.map((run, r) => Number((run[rate] / (against[r]?.[rate] ?? 1)).toFixed(3)))
  /** `runs` against `baseline`'s rounds: best against best, round by round, and the median of the rounds. */
  const ratiosAgainst = (runs: ReadonlyArray<Throughput>, baseline: ReadonlyArray<Throughput>) => {
    const perRound = perRoundRatios(runs, baseline)
    return {
      ratioWall: Number((best(runs).recordsPerSecondWall / best(baseline).recordsPerSecondWall).toFixed(3)),
      ratioWallPerRound: perRound,
      ratioWallMedianOfRounds: median(perRound)
    }
  }
  /**
   * A variant's rounds (run beside the goal's, round by round) against the raw baseline: its best round, every
   * round, best against best, each round's ratio to the raw round it alternated with, and their median.
   */
  const againstRawRounds = (runs: ReadonlyArray<Throughput>) => ({
    throughput: best(runs),
    runs,
    ...ratiosAgainst(runs, rawRuns)
  })
  // the goal's figures: best against best and the median of the per-round ratios
  const goal = ratiosAgainst(sqliteRuns, rawRuns)
  // the relay against the hand-written drain it alternated with, round by round
  const relayToHandWritten = ratiosAgainst(sqliteRuns, handRuns)
  const ratioWall = goal.ratioWall
  const medianWall = goal.ratioWallMedianOfRounds
  // each round's ratios, wall (the goal's) and CPU
  const cpuPerRound = perRoundRatios(sqliteRuns, rawRuns, "recordsPerSecondCpu")
  const perRound = goal.ratioWallPerRound.map((wall, r) => ({ wall, cpu: cpuPerRound[r] ?? 0 }))
  // the same rounds timed from the relay's start (see `throughput`): only their rate, for the ratios
  const fromStartRuns = sqliteRuns.map((run) => ({ ...run, recordsPerSecondWall: run.recordsPerSecondFromStart ?? 0 }))
  const starts = sqliteRuns.map((run) => run.startMillis ?? 0)
  const result = {
    date: new Date().toISOString(),
    node: process.version,
    platform: `${os.platform()} ${os.arch()}, ${os.cpus().length} cores`,
    loadAverage1m: { before: Number(loadBefore.toFixed(2)), after: Number((os.loadavg()[0] ?? 0).toFixed(2)) },
    quick,
    note:
      "End to end through Relay.run: 8 partitions, in each half the records keyed (16 keys per partition, every other record). " +
      "Memory store with the memory sink; SQLite file with a no-op sink. " +
      "Throughput = backlog persisted first (SQLite: in transactions of 100 records of one partition, as the raw baseline persists), then drained until every record is completed, " +
      "timed from the relay's first claim to the return of the complete that finished the backlog (the raw baseline's rounds span its claims and completes alike); " +
      "startMillis = the relay's start before its first claim, outside the round; recordsPerSecondFromStart = from the relay's start until the store held none pending or claimed; " +
      "best of the rounds (memory 5; SQLite 9, after one untimed relay round, raw and relay alternating). " +
      "wall = records per second of elapsed time; " +
      "cpu = records per second of this process's CPU time (steadier when other processes compete for the cores). " +
      "Latency = createdAt to delivery with a paced producer at half the measured throughput.",
    relay: relayOptions,
    memory: {
      throughput: memory,
      runs: memoryRuns,
      latency: memoryLatency,
      target: "≥ 150000 records/s end to end (on a quiet machine)",
      met: memory.recordsPerSecondWall >= 150_000
    },
    sqlite: {
      throughput: sqlite,
      runs: sqliteRuns,
      latency: sqliteLatency,
      latencyGoal: {
        target: "p99 ≤ 250 ms with a steady producer at half the measured throughput, in the relay's process",
        met: sqliteLatency.p99Millis <= 250,
        ceiling: latencyCeiling(sqliteLatency),
        floor: { ...floor, producerAloneMicrosPerRecord: producerAloneMicros },
        rawBaseline: {
          ...rawLatency,
          note:
            "the same pace without Effect, the store or the drainer: a raw better-sqlite3 producer (batches of 100, one transaction each) and " +
            "a raw relay (every partition claimed in one transaction a wake, the previous claims' completes first, a no-op send) on one " +
            "connection and the one thread, the store's own statements; latency = the persist's start to the send; a lower bound: " +
            "two records of one key in one claim are sent without a complete between them (rare at this pace)"
        },
        rawBaselineAtItsOwnPace: {
          ...rawOwnPace,
          note:
            "the raw producer and relay above at half the raw baseline's throughput (best round) instead of half the relay's: " +
            "the goal's rule applied to the raw loops themselves: a relay that drained a backlog as fast as the raw loop would be " +
            "given that producer, and how busy the raw loops keep the thread at that pace is the room left even at their cost"
        },
        handWrittenBaseline: {
          ...handWrittenLatency,
          note:
            "the raw baseline's loop written on Effect and the store's client, as an application would write it: @effect/sql-sqlite-node " +
            "opened as the store's database (SqliteDatabase.layer), sql.withTransaction and sql.unsafe with the store's statements, a " +
            "persist's wake through a Queue; no store and no drainer (every partition claimed in one transaction a wake); whether the " +
            "goal is within reach of code on the client the store must use; the same lower bound as the raw baseline"
        },
        note:
          "producer and relay share the process's one thread (better-sqlite3 runs every statement and fsync on it): " +
          "producerMicrosPerRecord is the producer's persists' wall time in the run (an upper bound: their waits for the connection included), relayMicrosPerRecord the rest of the busy time; " +
          "floor.producerAloneMicrosPerRecord is the same paced producer alone on a fresh store (more per record: it waits between batches on an idle thread); " +
          "saturatedPerSecond = the rate at which both keep the thread busy all the time"
      },
      latencyOtherProcess: {
        ...sqliteLatencyOtherProcess,
        again: otherProcessAgain,
        target: "p99 ≤ 250 ms with a steady producer at half the measured throughput, the producer in a second process",
        met: sqliteLatencyOtherProcess.p99Millis <= 250 && otherProcessAgain.p99Millis <= 250,
        checkpointsInline: { first: otherProcessInline, again: otherProcessInlineAgain },
        note:
          "the same paced producer (batches of 100) in a second OS process on the same file, the relay (with SqliteWakeSignal and the drainer's default idle back-off, as the CLI's SQLite relay runs) alone on its process's thread; " +
          "createdAt (the producer's clock) to the sink's delivery time; both databases checkpoint on a worker thread (SqliteDatabase's default); " +
          'checkpointsInline: the same runs with both databases checkpointing as SQLite does by itself (checkpoint: "inline", as before that default), ' +
          "taking turns with them (inline, background, inline, background); met: both background runs"
      },
      rawBaseline: {
        best: raw,
        runs: rawRuns,
        work: "a backlog persisted untimed as the relay's, then claim 100 → complete 100 partition by partition (two commits a batch), store statements, no Effect"
      },
      ratioWall,
      ratioCpu,
      ratioPerRound: perRound,
      ratioWallMedianOfRounds: medianWall,
      fromStart: {
        best: best(fromStartRuns).recordsPerSecondWall,
        ...ratiosAgainst(fromStartRuns, rawRuns),
        startMillis: { min: Math.min(...starts), median: median(starts), max: Math.max(...starts) },
        note:
          "the same relay rounds timed from the relay's start (before its first claim: partition discovery, lease acquires, the drainers' " +
          "builds, the first cycle's expiry sweep) until the store held none pending or claimed, as the rounds were timed before; " +
          "startMillis: the start before the first claim; informational"
      },
      target: "≥ 0.95 × the raw better-sqlite3 claim → complete loop, best against best and median of rounds",
      // the goal holds best against best and for the median of the per-round ratios
      met: ratioWall >= 0.95 && medianWall >= 0.95,
      rawBaselineReadingValues: {
        best: best(rawValuesRuns),
        runs: rawValuesRuns,
        ...ratiosAgainst(sqliteRuns, rawValuesRuns),
        note:
          "the raw baseline reading its claims' rows as arrays of values (better-sqlite3's raw mode), as the store reads them, " +
          "instead of row objects (better-sqlite3's default, which builds each row through V8's API a property at a time and " +
          "costs the claim about twice the time); in the same rounds, the relay against it; informational"
      },
      withoutGroupCommit: {
        ...againstRawRounds(ungroupedRuns),
        note: "the same relay with SqliteOutboxStore groupCommit: false (every complete its own commit); informational"
      },
      handWrittenDrain: {
        ...againstRawRounds(handRuns),
        relayToHandWritten: {
          bestToBest: relayToHandWritten.ratioWall,
          medianOfRounds: relayToHandWritten.ratioWallMedianOfRounds
        },
        note:
          "what code on the client the store must use reaches when it keeps the relay's order: the raw baseline's drain written on Effect and " +
          "@effect/sql-sqlite-node used as the store uses it (SqliteDatabase.layer, one reserved connection, the store's statements run " +
          "on it inside BEGIN … COMMIT, no span per statement), 100 records of " +
          "every partition claimed in one transaction, each record sent through an Effect (no-op), sent in waves with each wave " +
          "completed in a transaction of its own before the next is sent (a record complete before its younger sibling is sent, SPEC §6 " +
          "step 5), the last wave's completes with the next claim; no store, drainer, lease, record decoding or metrics; in the same rounds"
      },
      handWrittenDrainWithoutOrder: {
        ...againstRawRounds(handUnorderedRuns),
        note:
          "the same hand-written drain with every claimed record in one wave (a key's records of one claim sent without a complete " +
          "between them, as the raw baseline sends them): what the client and Effect cost apart from the order; informational"
      },
      storeCallsDrain: {
        ...againstRawRounds(storeCallsRuns),
        note:
          "a drain through the store's own calls and nothing else: every partition at once claims up to maxBatchSize (500) with " +
          "OutboxStore.claim on the relay's SQLite store, sends each record through an Effect (no-op) and completes the claim with one " +
          "OutboxStore.complete; no drainer, lease, wave or metric, and fewer completes than the order needs (a key's records of one claim " +
          "completed together): what the store's own code and statements cost at the relay's batch sizes; informational"
      },
      storeCallsDrainInOrder: {
        ...againstRawRounds(storeCallsOrderedRuns),
        // the relay against it, round by round: what the drainer costs beyond the store's calls in its shape
        relayAgainstIt: ratiosAgainst(sqliteRuns, storeCallsOrderedRuns),
        note:
          "the store-calls drain keeping the relay's order in the relay's shape: a fiber per partition claiming up to maxBatchSize (500) " +
          "with OutboxStore.claim, each claim sent in waves (the w-th record of each ordering key in wave w) and every wave but the last " +
          "completed with one OutboxStore.complete before the next is sent, the last wave's complete made beside the next claim (one group " +
          "commit); no lease, drainer, metric or failure handling: the ceiling for a relay with a drainer per partition (SPEC §6) on the " +
          "store's own calls; relayAgainstIt = the relay's rounds against these (best against best, per round, median)"
      },
      cpuProfile: {
        sampleIntervalMicros: profiler.intervalMicros,
        sides: cpuProfile,
        note:
          "CPU time of profiled rounds by what was running (V8's sampling profiler, every 100 µs, from a round's start to its end; " +
          "the median of the rounds, milliseconds per round of the goal's backlog): SQLite = better-sqlite3's native statement " +
          "calls, and the JavaScript frames that call them directly (V8 credits to such a frame most of the time a read spends " +
          "making its rows' values); @effect/sql client = the rest of @effect/sql and @effect/sql-sqlite-node's JavaScript; " +
          "Effect runtime = the effect package (the run loop, fibers, and code it inlines); library = src/; the profiler's own " +
          "cost is in every side; sides: the raw baseline, the relay, the store's calls in the relay's shape " +
          "(storeCallsDrainInOrder), the hand-written drain; informational"
      },
      statementTime: {
        raw: timedRaw,
        relay: timedRelay,
        handWritten: timedHand,
        storeCalls: timedStoreCalls,
        storeCallsInOrder: timedStoreCallsOrdered,
        // the relay's rate if nothing but its SQLite statements took time, over the raw baseline's rate
        ceilingRatio:
          relayStatementSeconds > 0 ? Number((timedRaw.wallSeconds / relayStatementSeconds).toFixed(3)) : undefined,
        outsideStatementsMicrosPerRecord: {
          relay: outsideStatementsMicros(timedRelay),
          handWritten: outsideStatementsMicros(timedHand),
          storeCalls: outsideStatementsMicros(timedStoreCalls),
          storeCallsInOrder: outsideStatementsMicros(timedStoreCallsOrdered),
          relayWithoutKeys: outsideStatementsMicros(timedUnkeyed)
        },
        relayWithoutKeys: timedUnkeyed,
        // the relay's rate if its statements took what they took and the rest what the same relay's rest took on
        // the backlog without keys (no waves), over the raw baseline's rate: the most that making the waves cost
        // nothing outside SQLite (all partitions waved together at no cost) could reach
        wavelessCeilingRatio: ceilingWithOutside(outsideStatementsMicros(timedUnkeyed)),
        // the relay's rate if its statements took what they took and the rest what the hand-written loop's
        // rest took, over the raw baseline's rate
        clientCeilingRatio: ceilingWithOutside(outsideStatementsMicros(timedHand)),
        note:
          "one more raw and relay round with every better-sqlite3 statement timed (both sides load the same module; a COMMIT is mostly its fsync); " +
          "ceilingRatio = raw wall seconds / relay statement seconds, the ratio the relay would reach if nothing outside SQLite took time; " +
          "statements.gcMicrosPerRecord = the time of V8's garbage-collection pauses in the round (v8.GCProfiler) per record; " +
          "statements.effectOpsPerRecord = the run-loop steps of every fiber in the round (the scheduler's yield checks) per record; " +
          "outsideStatementsMicrosPerRecord = wall time outside SQLite statements per record (the relay's; the hand-written drain's, with the order kept; " +
          "the store's own calls alone, storeCallsDrain's: the part of the relay's time outside statements that is the store's code); " +
          "clientCeilingRatio = raw wall seconds / (relay statement seconds + the hand-written drain's time outside statements), the ratio the relay " +
          "would reach if its code took no more than that loop's on the client the store must use (the goal's ceiling for such code); " +
          "relayWithoutKeys = a relay round on the backlog with no record keyed (every batch in one wave), statements timed; " +
          "wavelessCeilingRatio = raw wall seconds / (relay statement seconds + that round's time outside statements), the ratio the relay " +
          "would reach if its waves cost nothing outside SQLite (its statements, which SPEC §6 step 5's completes need, kept): the most that " +
          "waving all partitions together could gain; " +
          "statementsPerBatch / commitsPerBatch = statements (BEGIN and COMMIT included) and commits (COMMITs plus writes outside a transaction) per claimed batch, " +
          "the bench's own drained-polls left out; the relay's batches grow to maxBatchSize 500, the raw loop's are 100; informational"
      },
      warmUp: {
        throughput: warmUp,
        note: "the untimed first SQLite relay round (the store's code still partly unoptimised); not in the goal's figures"
      },
      interleavedBacklog: {
        throughput: best(interleavedRuns),
        runs: interleavedRuns,
        rawRuns: laneRawRuns,
        ...ratiosAgainst(interleavedRuns, laneRawRuns),
        note:
          "informational: the goal's options with the backlog persisted 500 records per transaction, spread record by record over the 8 partitions " +
          "(each partition's records on eight times as many table pages; every claim and complete writes more pages), against the raw baseline, which persists by partition"
      },
      oneLanePerKey: {
        maxConcurrency: keysPerPartition,
        throughput: best(laneRuns),
        runs: laneRuns,
        rawRuns: laneRawRuns,
        ...ratiosAgainst(laneRuns, laneRawRuns),
        note: "informational, not the goal's configuration (the goal uses the default maxConcurrency 10)"
      },
      withoutOrderingKeys: {
        throughput: best(unkeyedRuns),
        runs: unkeyedRuns,
        rawRuns: unkeyedRawRuns,
        ...ratiosAgainst(unkeyedRuns, unkeyedRawRuns),
        note:
          "informational: the goal's options and backlog layout with no record keyed, against the raw loop on the same backlog " +
          "(raw and relay alternating): every claimed record goes out in one wave, so the relay completes a batch in one call; " +
          "with keys, SPEC §6 completes a record before its younger sibling is sent, so a batch takes as many waves (each with " +
          "its complete) as its longest key chain, a cost the raw loop, which keeps no order, does not pay"
      }
    }
  }
  fs.mkdirSync(path.join(here, "results"), { recursive: true })
  fs.writeFileSync(path.join(here, "results", "drain.json"), JSON.stringify(result, null, 2) + "\n")
  console.log(JSON.stringify({ memory: result.memory.met, sqlite: result.sqlite.met, ratioWall, ratioCpu }))
})

Effect.runPromise(
  Effect.scoped(main).pipe(Effect.ensuring(Effect.sync(() => fs.rmSync(directory, { recursive: true, force: true }))))
).catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
