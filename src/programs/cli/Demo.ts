/**
 * The demo `npm start` runs: an embedded SQLite outbox, a producer, two relays and a local webhook
 * receiver that fails some deliveries on purpose — then a check that nothing was lost, nothing was
 * reordered within an ordering key, and how many duplicates at-least-once delivery produced.
 *
 * 1. A fresh database `<dataDir>/demo.db` (WAL) and a receiver on `127.0.0.1:<ephemeral>`.
 * 2. Two relays (`relay-a`, `relay-b`), each leasing at most half of the partitions and delivering
 *    through its own `WebhookSink`.
 * 3. A producer enqueuing `records` records over `partitions` partitions through `Enqueue`; in every
 *    partition every other run of records carries an ordering key.
 * 4. The receiver answers 503 to the first two attempts of every 50th record (transient: released and
 *    retried) and 400 to every 400th record (permanent: dead-lettered).
 * 5. A live progress line (a bar on a TTY, periodic lines otherwise) until every record is delivered
 *    or dead-lettered, then the verification line and a summary table.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import * as fs from "node:fs"
import * as path from "node:path"
import type { DeadLetterEntry } from "../../domain/DeadLetterEntry.js"
import type { InvalidConfiguration } from "../../domain/OutboxError.js"
import { NewOutboxRecord } from "../../domain/OutboxRecord.js"
import * as WebhookSink from "../../layers/sinks/WebhookSink.js"
import { DeadLetterStore } from "../../services/DeadLetterStore.js"
import { LeaseStore } from "../../services/LeaseStore.js"
import { OutboxInspection, type OutboxInspectionService } from "../../services/OutboxInspection.js"
import { OutboxStore, type OutboxStoreService } from "../../services/OutboxStore.js"
import { Sink } from "../../services/Sink.js"
import * as Enqueue from "../Enqueue.js"
import * as Relay from "../Relay.js"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Backends from "./Backends.js"
import * as HttpOptions from "./HttpOptions.js"
import { age, count, table } from "./Format.js"
import { stderrLogger } from "./Logging.js"
import * as Receiver from "./Receiver.js"
import { CliFailure, type StoreSettings } from "./Settings.js"

/**
 * Options of the demo.
 *
 * @since 0.1.0
 */
export interface DemoOptions {
  readonly records: number
  readonly partitions: number
  /** Directory of the demo database and log (created when missing). */
  readonly dataDir: string
  /** Gives up (verification fails) when not done by then. */
  readonly timeoutMillis: number
  /** Where the demo writes its screen. */
  readonly write: (text: string) => void
  /** Redraw one progress line in place (TTY) instead of printing periodic lines. */
  readonly tty: boolean
  /** Record spans (worth it only when they are exported). */
  readonly tracing: boolean
  /** Port of the read-only dashboard on 127.0.0.1 (0 picks a free one; default 0). */
  readonly httpPort?: number | undefined
  /** How long the dashboard keeps serving after the verification (default 0). */
  readonly lingerMillis?: number | undefined
}

/**
 * What the demo found.
 *
 * @since 0.1.0
 */
export interface DemoResult {
  readonly ok: boolean
  readonly enqueued: number
  readonly delivered: number
  readonly deadLettered: number
  readonly duplicates: number
  readonly orderViolations: number
  readonly missing: number
  readonly elapsedMillis: number
}

/** Every 50th record fails transiently twice; every 400th permanently. */
const isTransient = (n: number): boolean => n % 50 === 7
const isPermanent = (n: number): boolean => n % 400 === 123

const plan: Receiver.FailurePlan = (incoming, attempt) =>
  isPermanent(incoming.n) ? 400 : isTransient(incoming.n) && attempt <= 2 ? 503 : 200

const partitionName = (p: number): string => `tenant-${String(p).padStart(2, "0")}`

/** Record `n`: partition `n mod P`; within a partition, runs of 4 alternate keyed / keyless. */
const recordOf = (n: number, partitions: number): NewOutboxRecord => {
  const partition = n % partitions
  const local = Math.floor(n / partitions)
  const keyed = Math.floor(local / 4) % 2 === 0
  return new NewOutboxRecord(
    {
      partitionKey: partitionName(partition),
      envelopeId: `event-${n}`,
      bindingId: "demo-webhook",
      routeId: "demo",
      payload: new TextEncoder().encode(JSON.stringify({ n, type: "order.updated" })),
      ...(keyed ? { orderingKey: `customer-${local % 40}` } : {})
    },
    { disableValidation: true }
  )
}

interface Snapshot {
  readonly delivered: number
  readonly pending: number
  readonly claimed: number
  readonly deadLettered: number
  readonly atMillis: number
}

const bar = (fraction: number, width: number): string => {
  const filled = Math.max(0, Math.min(width, Math.round(fraction * width)))
  return "█".repeat(filled) + "░".repeat(width - filled)
}

/** The demo's opening lines: what runs where. */
const banner = (facts: {
  readonly store: string
  readonly receiver: string
  readonly total: number
  readonly partitions: number
  readonly perRelay: number
  readonly logs: string
  readonly dashboard: string
}): string =>
  [
    "",
    "effect-outbox demo — a transactional outbox draining into a flaky webhook",
    "",
    `  store     SQLite ${facts.store}`,
    `  receiver  ${facts.receiver}  (503 to the first 2 attempts of every 50th record, 400 to every 400th)`,
    `  producer  ${count(facts.total)} records over ${facts.partitions} partitions through Enqueue, half with ordering keys`,
    `  relays    relay-a and relay-b, up to ${facts.perRelay} partitions each, webhook sink, dead-letter on 4xx`,
    `  logs      ${facts.logs}`,
    `  dashboard ${facts.dashboard}  (read-only; metrics at /metrics)`,
    ""
  ].join("\n") + "\n"

/** The demo's store: a fresh SQLite file. */
const demoSettings = (file: string): StoreSettings => ({
  backend: "sqlite",
  sqliteFile: file,
  // one fsync per commit costs ~8 ms on slow disks; WAL + NORMAL still survives a process crash
  sqliteSynchronous: "NORMAL",
  dynamodbEndpoint: Option.none(),
  dynamodbRegion: "us-east-1",
  dynamodbTable: "effect-outbox",
  dynamodbDeadLetterTable: "effect-outbox-dead-letter",
  dynamodbEnsureTables: false,
  dynamodbLocalClaimIndex: false,
  sqliteTablePrefix: "",
  postgresUrl: Option.none(),
  postgresSchema: "public"
})

/** Enqueues the demo's records in batches of 500, waiting while the outbox is full; counts them in `progress`. */
const produce = (
  total: number,
  partitions: number,
  progress: { produced: number }
): Effect.Effect<void, Enqueue.EnqueueError, OutboxStore> =>
  Effect.gen(function* () {
    const enqueue = yield* Enqueue.make({ maxOutboxDepth: 10_000 })
    const batchSize = 500
    for (let from = 0; from < total; from += batchSize) {
      const batch: Array<NewOutboxRecord> = []
      for (let n = from; n < Math.min(total, from + batchSize); n++) batch.push(recordOf(n, partitions))
      yield* enqueue
        .enqueue(batch)
        .pipe(Effect.retry({ while: (e) => e._tag === "OutboxFull", schedule: Schedule.spaced("200 millis") }))
      progress.produced += batch.length
    }
  })

/** Depths, deliveries and dead letters now (errors read as zero: the progress line must not stop the demo). */
const snapshotOf = (
  store: OutboxStoreService,
  inspection: OutboxInspectionService,
  receiver: Receiver.Receiver,
  partitions: number
): Effect.Effect<Snapshot> =>
  Effect.gen(function* () {
    let pending = 0
    let claimed = 0
    for (let p = 0; p < partitions; p++) {
      pending += yield* store.countPending(partitionName(p)).pipe(Effect.orElseSucceed(() => 0))
      claimed += yield* store.countClaimed(partitionName(p)).pipe(Effect.orElseSucceed(() => 0))
    }
    const dead = yield* inspection.deadLetters.pipe(
      Effect.orElseSucceed(() => ({ poison: 0, permanent: 0, expired: 0 }))
    )
    return {
      delivered: receiver.stats.accepted,
      pending,
      claimed,
      deadLettered: dead.poison + dead.permanent + dead.expired,
      atMillis: yield* Clock.currentTimeMillis
    }
  }).pipe(Effect.withTracerEnabled(false))

/** One progress line: a bar on a terminal, plain figures otherwise. */
const renderProgress = (
  s: Snapshot,
  previous: Snapshot,
  { started, total, tty }: { readonly started: number; readonly total: number; readonly tty: boolean }
): string => {
  const done = s.delivered + s.deadLettered
  const seconds = Math.max(0.001, (s.atMillis - previous.atMillis) / 1000)
  const rate = Math.max(0, (s.delivered - previous.delivered) / seconds)
  const parts = [
    `delivered ${count(s.delivered)}`,
    `pending ${count(s.pending)}`,
    `claimed ${count(s.claimed)}`,
    `dlq ${count(s.deadLettered)}`,
    `${count(rate)} rec/s`,
    age(s.atMillis - started)
  ]
  const percent = `${String(Math.floor((done / total) * 100)).padStart(3)}%`
  return tty ? `${bar(done / total, 24)} ${percent}  ${parts.join(" · ")}` : `${percent}  ${parts.join("  ")}`
}

/** What one demo relay delivered, and from which partitions. */
interface RelayStats {
  delivered: number
  readonly partitions: Set<string>
}

/** Starts relay-a and relay-b in `relayScope`, each with its own webhook sink to the receiver. */
const startRelays = (
  receiverUrl: string,
  perRelay: number,
  relayScope: Scope.CloseableScope
): Effect.Effect<Map<string, RelayStats>, InvalidConfiguration, OutboxStore | LeaseStore | DeadLetterStore> =>
  Effect.gen(function* () {
    const perRelayStats = new Map<string, RelayStats>()
    const httpClient = yield* Layer.build(NodeHttpClient.layerUndici).pipe(Scope.extend(relayScope))
    for (const owner of ["relay-a", "relay-b"]) {
      const webhook = yield* WebhookSink.make({ url: receiverUrl, timeout: "30 seconds" }).pipe(
        Effect.provide(httpClient)
      )
      const stats: RelayStats = { delivered: 0, partitions: new Set<string>() }
      perRelayStats.set(owner, stats)
      const counting = Sink.of({
        send: (record) =>
          Effect.tap(webhook.send(record), () =>
            Effect.sync(() => {
              stats.delivered += 1
              stats.partitions.add(record.partitionKey)
            })
          )
      })
      yield* Relay.start({
        owner,
        maxPartitions: perRelay,
        leaseTtl: "10 seconds",
        discoveryInterval: "200 millis",
        drainer: {
          batchSize: 100,
          // a receiver in the same busy process can be slow: a short timeout would only cause redeliveries
          maxConcurrency: 4,
          sendTimeout: "30 seconds",
          idleBackoffMin: "20 millis",
          idleBackoffMax: "250 millis",
          finalDrainBudget: "5 seconds"
        }
      }).pipe(Effect.provideService(Sink, counting), Scope.extend(relayScope))
    }
    return perRelayStats
  })

/** Checks what the receiver accepted and what was dead-lettered against what the producer enqueued. */
const verify = (
  total: number,
  receiver: Receiver.Receiver,
  entries: ReadonlyArray<DeadLetterEntry>
): {
  readonly missing: number
  readonly expectedDead: number
  readonly wronglyDead: number
  readonly orderViolations: number
  readonly orderingKeys: number
} => {
  const deadIds = new Set(entries.map((entry) => entry.envelopeId))
  let missing = 0
  let expectedDead = 0
  let wronglyDead = 0
  for (let n = 0; n < total; n++) {
    const id = `event-${n}`
    if (isPermanent(n)) {
      expectedDead += 1
      if (!deadIds.has(id)) missing += 1
    } else if (!receiver.acceptedIds.has(id)) missing += 1
    if (!isPermanent(n) && deadIds.has(id)) wronglyDead += 1
  }
  const lastByKey = new Map<string, number>()
  let orderViolations = 0
  for (const incoming of receiver.accepted) {
    if (incoming.orderingKey === null) continue
    const key = `${incoming.partitionKey}/${incoming.orderingKey}`
    const before = lastByKey.get(key)
    if (before !== undefined && incoming.n < before) orderViolations += 1
    lastByKey.set(key, Math.max(before ?? -1, incoming.n))
  }
  return { missing, expectedDead, wronglyDead, orderViolations, orderingKeys: lastByKey.size }
}

/** The demo's closing tables: per relay, then per outcome. */
const summary = (
  perRelayStats: ReadonlyMap<string, RelayStats>,
  receiver: Receiver.Receiver,
  facts: {
    readonly total: number
    readonly deadLettered: number
    readonly orderViolations: number
    readonly elapsed: number
    readonly stopMillis: number
  }
): string => {
  const relays = Array.from(perRelayStats.entries())
  const byRelay = table(
    ["", ...relays.map(([owner]) => owner), "total"],
    [
      [
        "partitions drained",
        ...relays.map(([, s]) => count(s.partitions.size)),
        count(new Set(relays.flatMap(([, s]) => Array.from(s.partitions))).size)
      ],
      [
        "records delivered (2xx)",
        ...relays.map(([, s]) => count(s.delivered)),
        count(relays.reduce((sum, [, s]) => sum + s.delivered, 0))
      ]
    ]
  )
  const byOutcome = table(
    ["outcome", "count"],
    [
      ["records enqueued", count(facts.total)],
      ["delivered", count(receiver.stats.accepted)],
      ["dead-lettered (400, permanent)", count(facts.deadLettered)],
      ["transient failures (503) retried", count(receiver.stats.transient)],
      ["duplicate deliveries", count(receiver.stats.duplicates)],
      ["per-key order violations", count(facts.orderViolations)],
      ["webhook requests", count(receiver.stats.requests)],
      ["elapsed", age(facts.elapsed)],
      ["throughput", `${count((receiver.stats.accepted / Math.max(1, facts.elapsed)) * 1000)} rec/s`],
      ["relay shutdown (leases released)", age(facts.stopMillis)]
    ]
  )
  return `${byRelay}\n\n${byOutcome}\n\n`
}

/**
 * Runs the demo and returns what it verified. Never fails for a verification problem (see `ok`).
 *
 * @since 0.1.0
 */
export const run = (options: DemoOptions): Effect.Effect<DemoResult, CliFailure> =>
  Effect.gen(function* () {
    const total = Math.max(1, Math.floor(options.records))
    const partitions = Math.max(1, Math.floor(options.partitions))
    const dataDir = path.resolve(options.dataDir)
    const firstRun = !fs.existsSync(dataDir)
    fs.mkdirSync(dataDir, { recursive: true })
    const file = path.join(dataDir, "demo.db")
    for (const suffix of ["", "-wal", "-shm"]) fs.rmSync(file + suffix, { force: true })
    const logFile = path.join(dataDir, "demo.log")
    const log = fs.createWriteStream(logFile, { flags: "w" })
    const out = options.write
    const shown = path.relative(process.cwd(), file) || file

    const perRelay = Math.ceil(partitions / 2)

    const program = Effect.gen(function* () {
      const store = yield* OutboxStore
      const dlq = yield* DeadLetterStore
      const inspection = yield* OutboxInspection
      const receiver = yield* Receiver.start(plan)
      const httpSettings = {
        port: Option.some(options.httpPort ?? 0),
        host: "127.0.0.1",
        allowMutations: false,
        showPayloads: false,
        allowedHosts: []
      }
      const dashboard = yield* HttpOptions.serveScoped(httpSettings, HttpOptions.opsApp(httpSettings, {}))
      out(
        banner({
          store: `${shown} (WAL, synchronous=NORMAL)${firstRun ? ` (created ${path.relative(process.cwd(), dataDir) || dataDir}/)` : ""}`,
          receiver: receiver.url,
          total,
          partitions,
          perRelay,
          logs: path.relative(process.cwd(), logFile) || logFile,
          dashboard: Option.getOrElse(dashboard, () => "off")
        })
      )

      // two relays in their own scope, so they can be shut down (leases released) before the check
      const relayScope = yield* Scope.make()
      const perRelayStats = yield* startRelays(receiver.url, perRelay, relayScope)
      const started = yield* Clock.currentTimeMillis
      const progress = { produced: 0 }
      const producer = yield* Effect.forkScoped(produce(total, partitions, progress))
      const snapshot = snapshotOf(store, inspection, receiver, partitions)
      const render = (now: Snapshot, previous: Snapshot): string =>
        renderProgress(now, previous, { started, total, tty: options.tty })

      let previous: Snapshot = { delivered: 0, pending: 0, claimed: 0, deadLettered: 0, atMillis: started }
      let lastPrinted = started
      let finished = false
      let last = previous
      const interval = options.tty ? 200 : 500
      while (!finished) {
        yield* Effect.sleep(interval)
        const s = yield* snapshot
        last = s
        finished =
          progress.produced >= total && s.pending === 0 && s.claimed === 0 && s.delivered + s.deadLettered >= total
        const timedOut = s.atMillis - started > options.timeoutMillis
        if (options.tty) {
          out(`\r${render(s, previous)}\u001b[K`)
          previous = s
        } else if (s.atMillis - lastPrinted >= 2000 || finished || timedOut) {
          out(`${render(s, previous)}\n`)
          previous = s
          lastPrinted = s.atMillis
        }
        if (timedOut) break
      }
      if (options.tty) out("\n")
      const elapsed = last.atMillis - started
      yield* Fiber.interrupt(producer)

      // shut the relays down: drainers finish or release, leases are released
      const stopStarted = yield* Clock.currentTimeMillis
      yield* Scope.close(relayScope, Exit.void)
      const stopMillis = (yield* Clock.currentTimeMillis) - stopStarted

      // verification
      const entries = yield* dlq.list({}).pipe(Effect.orElseSucceed(() => []))
      const { missing, expectedDead, wronglyDead, orderViolations, orderingKeys } = verify(total, receiver, entries)
      const leftover = yield* snapshot
      const ok =
        missing === 0 &&
        wronglyDead === 0 &&
        orderViolations === 0 &&
        leftover.pending === 0 &&
        leftover.claimed === 0 &&
        entries.length === expectedDead

      out("\n")
      out(
        ok
          ? `✔ verified: ${count(receiver.stats.accepted)} delivered + ${count(entries.length)} dead-lettered = ` +
              `${count(total)} enqueued; per-key order held over ${count(orderingKeys)} ordering keys; ` +
              `${count(receiver.stats.duplicates)} duplicates (at-least-once)\n`
          : `✘ verification failed: ${count(missing)} missing, ${count(wronglyDead)} dead-lettered by mistake, ` +
              `${count(orderViolations)} per-key order violations, ${count(leftover.pending)} pending and ` +
              `${count(leftover.claimed)} claimed left, ${count(entries.length)}/${count(expectedDead)} dead letters\n`
      )
      out("\n")
      out(
        summary(perRelayStats, receiver, {
          total,
          deadLettered: entries.length,
          orderViolations,
          elapsed,
          stopMillis
        })
      )
      out(
        `Look inside: npx effect-outbox inspect --sqlite-file ${shown}\n` +
          `             npx effect-outbox dlq list --sqlite-file ${shown}\n`
      )
      const linger = Math.max(0, Math.floor(options.lingerMillis ?? 0))
      if (linger > 0 && Option.isSome(dashboard)) {
        out(`Dashboard: ${dashboard.value} (serving for ${Math.round(linger / 1000)} s more; Ctrl-C to stop)\n`)
        yield* Effect.sleep(linger)
      }
      return {
        ok,
        enqueued: total,
        delivered: receiver.stats.accepted,
        deadLettered: entries.length,
        duplicates: receiver.stats.duplicates,
        orderViolations,
        missing,
        elapsedMillis: elapsed
      } satisfies DemoResult
    })

    const fileLogger = Logger.map(Logger.logfmtLogger, (line) => {
      log.write(line + "\n")
    })
    return yield* Effect.scoped(program).pipe(
      Effect.provide(Backends.layer(demoSettings(file))),
      // spans cost a stack capture each; keep them only when they are exported
      Effect.withTracerEnabled(options.tracing),
      Effect.provide(Logger.replace(stderrLogger, fileLogger)),
      Effect.provide(Logger.replace(Logger.defaultLogger, fileLogger)),
      Effect.ensuring(
        Effect.async<void>((resume) => {
          log.end(() => resume(Effect.void))
        })
      ),
      Effect.mapError((error) =>
        error instanceof CliFailure ? error : new CliFailure({ message: `demo failed: ${error.message}`, exitCode: 1 })
      )
    )
  })
