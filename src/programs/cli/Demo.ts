/**
 * The demo `npm start` runs: an embedded SQLite outbox, a producer publishing two typed topics, two relays
 * routing each topic to its own sink through a `SinkRouter` (SPEC §11), and a local webhook receiver that
 * fails some deliveries on purpose — then a check, on the values decoded with `Topic.decode`, that nothing
 * was lost, nothing was reordered within an ordering key, and how many duplicates at-least-once delivery
 * produced.
 *
 * 1. A fresh database `<dataDir>/demo.db` (WAL), a receiver on `127.0.0.1:<ephemeral>` for `order.placed`
 *    and a JSON-lines ledger `<dataDir>/invoices.jsonl` for `invoice.issued`.
 * 2. A producer publishing `records` events over `partitions` partitions through `Topic.enqueueAll`
 *    (Schema-encoded, keys derived from the values, backpressure through `Enqueue`): every fifth event an
 *    invoice, the others orders; in every partition every other run of events carries an ordering key
 *    (the customer for orders, the billing account for invoices).
 * 3. Two relays (`relay-a`, `relay-b`), each leasing at most half of the partitions and delivering through
 *    its own `SinkRouter`: route `orders` → `WebhookSink` to the receiver, route `invoices` → `StdoutSink`
 *    writing JSON lines to the ledger.
 * 4. The receiver answers 503 to the first two attempts of every 50th event (transient: released and
 *    retried) and 400 to every 400th (permanent: dead-lettered); those are always orders.
 * 5. A live progress line (a bar on a TTY, periodic lines otherwise) until every event is delivered or
 *    dead-lettered, then the verification line, a summary table and a few values of each route as decoded.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as fs from "node:fs"
import * as path from "node:path"
import type { DeadLetterEntry } from "../../domain/DeadLetterEntry.js"
import type { InvalidConfiguration } from "../../domain/OutboxError.js"
import * as SinkRouter from "../../layers/sinks/SinkRouter.js"
import * as StdoutSink from "../../layers/sinks/StdoutSink.js"
import * as WebhookSink from "../../layers/sinks/WebhookSink.js"
import { DeadLetterStore } from "../../services/DeadLetterStore.js"
import { LeaseStore } from "../../services/LeaseStore.js"
import { OutboxInspection, type OutboxInspectionService } from "../../services/OutboxInspection.js"
import { OutboxStore, type OutboxStoreService } from "../../services/OutboxStore.js"
import { Sink } from "../../services/Sink.js"
import * as Enqueue from "../Enqueue.js"
import * as Relay from "../Relay.js"
import * as Topic from "../Topic.js"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Backends from "./Backends.js"
import * as HttpOptions from "./HttpOptions.js"
import { age, count, table } from "./Format.js"
import { stderrLogger } from "./Logging.js"
import * as Receiver from "./Receiver.js"
import { CliFailure, type StoreSettings } from "./Settings.js"

/**
 * The demo's order event: route `orders` (the webhook receiver), partitioned by tenant, ordered per
 * customer (guest orders have no customer and no ordering key).
 *
 * @since 0.2.0
 */
export const OrderPlaced = Topic.make({
  name: "order.placed",
  payload: {
    number: Schema.Int,
    tenant: Schema.String,
    customer: Schema.optional(Schema.String),
    totalCents: Schema.Int,
    placedAt: Schema.DateTimeUtc
  },
  partitionKey: (order) => order.tenant,
  orderingKey: (order) => order.customer,
  idempotencyKey: (order) => String(order.number),
  route: "orders"
})

/**
 * The demo's invoice event: route `invoices` (the JSON-lines ledger), partitioned by tenant, ordered per
 * billing account; the amount is a `bigint` (a string on the wire, through the Schema).
 *
 * @since 0.2.0
 */
export const InvoiceIssued = Topic.make({
  name: "invoice.issued",
  payload: {
    number: Schema.Int,
    tenant: Schema.String,
    account: Schema.optional(Schema.String),
    amountCents: Schema.BigInt,
    issuedAt: Schema.DateTimeUtc
  },
  partitionKey: (invoice) => invoice.tenant,
  orderingKey: (invoice) => invoice.account,
  idempotencyKey: (invoice) => String(invoice.number),
  route: "invoices"
})

/** A decoded order. */
type Order = Topic.Type<typeof OrderPlaced>

/** A decoded invoice. */
type Invoice = Topic.Type<typeof InvoiceIssued>

/**
 * Options of the demo.
 *
 * @since 0.1.0
 */
export interface DemoOptions {
  /** Events to publish (orders and invoices together). */
  readonly records: number
  readonly partitions: number
  /** Directory of the demo database, ledger and log (created when missing). */
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
 * What one route delivered, counted on the values decoded at its destination.
 *
 * @since 0.2.0
 */
export interface RouteResult {
  /** Events published to the route's topic. */
  readonly published: number
  /** Distinct events that arrived and decoded. */
  readonly delivered: number
  /** Repeated arrivals of an event already delivered (at-least-once). */
  readonly duplicates: number
  /** Arrivals the topic could not decode (0 when all is well). */
  readonly malformed: number
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
  /** Per route: `orders` (webhook) and `invoices` (JSON lines). */
  readonly routes: { readonly orders: RouteResult; readonly invoices: RouteResult }
}

/** Every fifth event is an invoice; the failures below only ever hit orders (n ≡ 2 or 3 mod 5). */
const isInvoice = (n: number): boolean => n % 5 === 4

/** Every 50th event fails transiently twice; every 400th permanently. */
const isTransient = (n: number): boolean => n % 50 === 7
const isPermanent = (n: number): boolean => n % 400 === 123

const plan: Receiver.FailurePlan<Order> = (incoming, attempt) =>
  isPermanent(incoming.value.number) ? 400 : isTransient(incoming.value.number) && attempt <= 2 ? 503 : 200

const partitionName = (p: number): string => `tenant-${String(p).padStart(2, "0")}`

/** Event `n`: partition `n mod P`; within a partition, runs of 4 alternate keyed / keyless. */
const eventOf = (
  n: number,
  partitions: number,
  now: DateTime.Utc
): { readonly _tag: "order"; readonly order: Order } | { readonly _tag: "invoice"; readonly invoice: Invoice } => {
  const partition = n % partitions
  const local = Math.floor(n / partitions)
  const keyed = Math.floor(local / 4) % 2 === 0
  const tenant = partitionName(partition)
  const who = local % 40
  if (isInvoice(n)) {
    return {
      _tag: "invoice",
      invoice: {
        number: n,
        tenant,
        ...(keyed ? { account: `account-${who}` } : {}),
        amountCents: BigInt(1_000 + ((n * 7_919) % 90_000)),
        issuedAt: now
      }
    }
  }
  return {
    _tag: "order",
    order: {
      number: n,
      tenant,
      ...(keyed ? { customer: `customer-${who}` } : {}),
      totalCents: 500 + ((n * 104_729) % 50_000),
      placedAt: now
    }
  }
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
  readonly ledger: string
  readonly total: number
  readonly partitions: number
  readonly perRelay: number
  readonly logs: string
  readonly dashboard: string
}): string =>
  [
    "",
    "effect-outbox demo — two typed topics, one outbox, routed to two sinks (one of them flaky)",
    "",
    `  store     SQLite ${facts.store}`,
    `  topics    ${OrderPlaced.name} → route ${OrderPlaced.route} → webhook ${facts.receiver}`,
    `            (503 to the first 2 attempts of every 50th event, 400 to every 400th)`,
    `            ${InvoiceIssued.name} → route ${InvoiceIssued.route} → JSON lines ${facts.ledger}`,
    `  producer  ${count(facts.total)} records over ${facts.partitions} partitions through Topic.enqueueAll ` +
      `(every fifth an invoice), half with ordering keys`,
    `  relays    relay-a and relay-b, up to ${facts.perRelay} partitions each, a SinkRouter each, dead-letter on 4xx`,
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
  postgresSchema: "public",
  mysqlUrl: Option.none(),
  mysqlDatabase: Option.none()
})

/**
 * Publishes the demo's events in batches of 500 through the topics, waiting while the outbox is full;
 * counts them in `progress`.
 */
const produce = (
  total: number,
  partitions: number,
  progress: { produced: number }
): Effect.Effect<void, Topic.EnqueueTopicError, OutboxStore> =>
  Effect.gen(function* () {
    const whileFull = <A>(publish: Effect.Effect<A, Topic.EnqueueTopicError, Enqueue.Enqueue>) =>
      publish.pipe(Effect.retry({ while: (e) => e._tag === "OutboxFull", schedule: Schedule.spaced("200 millis") }))
    const batchSize = 500
    for (let from = 0; from < total; from += batchSize) {
      const now = yield* DateTime.now
      const orders: Array<Order> = []
      const invoices: Array<Invoice> = []
      for (let n = from; n < Math.min(total, from + batchSize); n++) {
        const event = eventOf(n, partitions, now)
        if (event._tag === "order") orders.push(event.order)
        else invoices.push(event.invoice)
      }
      yield* whileFull(Topic.enqueueAll(OrderPlaced, orders))
      yield* whileFull(Topic.enqueueAll(InvoiceIssued, invoices))
      progress.produced += orders.length + invoices.length
    }
  }).pipe(Effect.provideServiceEffect(Enqueue.Enqueue, Enqueue.make({ maxOutboxDepth: 10_000 })))

/**
 * The invoices' destination: the JSON lines a `StdoutSink` writes, appended to a file and decoded with
 * `Topic.decode` as they arrive.
 */
interface Ledger {
  readonly file: string
  readonly writer: StdoutSink.LineWriter
  readonly accepted: Array<Topic.Decoded<Invoice>>
  readonly acceptedIds: Set<string>
  readonly stats: { lines: number; duplicates: number; malformed: number }
  readonly close: Effect.Effect<void>
}

const openLedger = (file: string): Ledger => {
  const out = fs.createWriteStream(file, { flags: "w" })
  const accepted: Array<Topic.Decoded<Invoice>> = []
  const acceptedIds = new Set<string>()
  const stats = { lines: 0, duplicates: 0, malformed: 0 }
  return {
    file,
    accepted,
    acceptedIds,
    stats,
    writer: {
      write: (chunk, callback) =>
        out.write(chunk, (error) => {
          if (error === null || error === undefined) {
            stats.lines += 1
            Either.match(Topic.decode(InvoiceIssued, { body: chunk }), {
              onLeft: () => {
                stats.malformed += 1
              },
              onRight: (decoded) => {
                if (acceptedIds.has(decoded.metadata.recordId)) stats.duplicates += 1
                else {
                  acceptedIds.add(decoded.metadata.recordId)
                  accepted.push(decoded)
                }
              }
            })
          }
          callback(error)
        })
    },
    close: Effect.async<void>((resume) => {
      out.end(() => resume(Effect.void))
    })
  }
}

/** Depths, deliveries and dead letters now (errors read as zero: the progress line must not stop the demo). */
const snapshotOf = (
  store: OutboxStoreService,
  inspection: OutboxInspectionService,
  delivered: () => number,
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
      delivered: delivered(),
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

/**
 * Starts relay-a and relay-b in `relayScope`, each with its own `SinkRouter`: route `orders` to a webhook
 * sink of its own, route `invoices` to the shared JSON-lines sink of the ledger.
 */
const startRelays = (
  receiverUrl: string,
  ledger: Ledger,
  perRelay: number,
  relayScope: Scope.CloseableScope
): Effect.Effect<Map<string, RelayStats>, InvalidConfiguration, OutboxStore | LeaseStore | DeadLetterStore> =>
  Effect.gen(function* () {
    const perRelayStats = new Map<string, RelayStats>()
    const httpClient = yield* Layer.build(NodeHttpClient.layerUndici).pipe(Scope.extend(relayScope))
    const jsonLines = yield* StdoutSink.make({ stream: ledger.writer }).pipe(Scope.extend(relayScope))
    for (const owner of ["relay-a", "relay-b"]) {
      const webhook = yield* WebhookSink.make({ url: receiverUrl, timeout: "30 seconds" }).pipe(
        Effect.provide(httpClient)
      )
      const router = yield* SinkRouter.make({ [OrderPlaced.route]: webhook, [InvoiceIssued.route]: jsonLines })
      const stats: RelayStats = { delivered: 0, partitions: new Set<string>() }
      perRelayStats.set(owner, stats)
      const counting = Sink.of({
        send: (record) =>
          Effect.tap(router.send(record), () =>
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

/** First arrivals out of `seq` order within a partition and ordering key. */
const orderViolationsOf = <A>(arrivals: ReadonlyArray<Topic.Decoded<A>>): { violations: number; keys: Set<string> } => {
  const lastByKey = new Map<string, number>()
  let violations = 0
  for (const { metadata } of arrivals) {
    if (Option.isNone(metadata.orderingKey)) continue
    const key = `${metadata.partitionKey}/${metadata.orderingKey.value}`
    const before = lastByKey.get(key)
    if (before !== undefined && metadata.seq < before) violations += 1
    lastByKey.set(key, Math.max(before ?? -1, metadata.seq))
  }
  return { violations, keys: new Set(lastByKey.keys()) }
}

/** Checks what each route's destination decoded and what was dead-lettered against what was published. */
const verify = (
  total: number,
  receiver: Receiver.Receiver<Order>,
  ledger: Ledger,
  entries: ReadonlyArray<DeadLetterEntry>
): {
  readonly missing: number
  readonly expectedDead: number
  readonly wronglyDead: number
  readonly orderViolations: number
  readonly orderingKeys: number
} => {
  const deadIds = new Set(entries.map((entry) => entry.envelopeId))
  const orders = new Set(receiver.accepted.map((incoming) => incoming.value.number))
  const invoices = new Set(ledger.accepted.map((incoming) => incoming.value.number))
  let missing = 0
  let expectedDead = 0
  let wronglyDead = 0
  for (let n = 0; n < total; n++) {
    if (isInvoice(n)) {
      if (!invoices.has(n)) missing += 1
      if (deadIds.has(Topic.envelopeId(InvoiceIssued.name, String(n)))) wronglyDead += 1
      continue
    }
    const dead = deadIds.has(Topic.envelopeId(OrderPlaced.name, String(n)))
    if (isPermanent(n)) {
      expectedDead += 1
      if (!dead) missing += 1
    } else {
      if (!orders.has(n)) missing += 1
      if (dead) wronglyDead += 1
    }
  }
  const byOrders = orderViolationsOf(receiver.accepted)
  const byInvoices = orderViolationsOf(ledger.accepted)
  return {
    missing,
    expectedDead,
    wronglyDead,
    orderViolations: byOrders.violations + byInvoices.violations,
    orderingKeys: byOrders.keys.size + byInvoices.keys.size
  }
}

/** The demo's closing tables: per relay, then per outcome. */
const summary = (
  perRelayStats: ReadonlyMap<string, RelayStats>,
  receiver: Receiver.Receiver<Order>,
  ledger: Ledger,
  facts: {
    readonly total: number
    readonly delivered: number
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
      ["delivered", count(facts.delivered)],
      [`  ${OrderPlaced.name} → webhook`, count(receiver.stats.accepted)],
      [`  ${InvoiceIssued.name} → JSON lines`, count(ledger.accepted.length)],
      ["dead-lettered (400, permanent)", count(facts.deadLettered)],
      ["transient failures (503) retried", count(receiver.stats.transient)],
      ["duplicate deliveries", count(receiver.stats.duplicates + ledger.stats.duplicates)],
      ["per-key order violations", count(facts.orderViolations)],
      ["webhook requests", count(receiver.stats.requests)],
      ["elapsed", age(facts.elapsed)],
      ["throughput", `${count((facts.delivered / Math.max(1, facts.elapsed)) * 1000)} rec/s`],
      ["relay shutdown (leases released)", age(facts.stopMillis)]
    ]
  )
  return `${byRelay}\n\n${byOutcome}\n\n`
}

const money = (cents: bigint): string => {
  const whole = cents / 100n
  const rest = cents % 100n
  return `${whole.toLocaleString("en-US")}.${String(rest).padStart(2, "0")}`
}

const describeMetadata = (metadata: Topic.MessageMetadata): string =>
  `record ${metadata.recordId}, ${metadata.partitionKey} seq ${metadata.seq}` +
  Option.match(metadata.orderingKey, { onNone: () => "", onSome: (key) => `, key ${key}` })

/** A few values of each route, as `Topic.decode` gave them back. */
const decodedSamples = (receiver: Receiver.Receiver<Order>, ledger: Ledger, shown: { readonly ledger: string }) => {
  const lines: Array<string> = ["What arrived, decoded with Topic.decode:", ""]
  lines.push(`  route ${OrderPlaced.route} (webhook ${receiver.url}): ${OrderPlaced.name}`)
  for (const { value, metadata } of receiver.accepted.slice(0, 2)) {
    lines.push(
      `    #${value.number} ${value.tenant} ${value.customer ?? "guest"} ${money(BigInt(value.totalCents))}` +
        ` placed ${DateTime.formatIso(value.placedAt)}  (${describeMetadata(metadata)})`
    )
  }
  lines.push(`  route ${InvoiceIssued.route} (JSON lines ${shown.ledger}): ${InvoiceIssued.name}`)
  for (const { value, metadata } of ledger.accepted.slice(0, 2)) {
    lines.push(
      `    #${value.number} ${value.tenant} ${value.account ?? "no account"} ${money(value.amountCents)}` +
        ` issued ${DateTime.formatIso(value.issuedAt)}  (${describeMetadata(metadata)})`
    )
  }
  return lines.join("\n") + "\n\n"
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
    const ledgerFile = path.join(dataDir, "invoices.jsonl")
    const out = options.write
    const relative = (target: string): string => path.relative(process.cwd(), target) || target
    const shown = relative(file)

    const perRelay = Math.ceil(partitions / 2)

    const program = Effect.gen(function* () {
      const store = yield* OutboxStore
      const dlq = yield* DeadLetterStore
      const inspection = yield* OutboxInspection
      const receiver = yield* Receiver.start((request) => Topic.decode(OrderPlaced, request), plan)
      const ledger = yield* Effect.acquireRelease(
        Effect.sync(() => openLedger(ledgerFile)),
        (opened) => opened.close
      )
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
          store: `${shown} (WAL, synchronous=NORMAL)${firstRun ? ` (created ${relative(dataDir)}/)` : ""}`,
          receiver: receiver.url,
          ledger: relative(ledgerFile),
          total,
          partitions,
          perRelay,
          logs: relative(logFile),
          dashboard: Option.getOrElse(dashboard, () => "off")
        })
      )

      // two relays in their own scope, so they can be shut down (leases released) before the check
      const relayScope = yield* Scope.make()
      const perRelayStats = yield* startRelays(receiver.url, ledger, perRelay, relayScope)
      const started = yield* Clock.currentTimeMillis
      const progress = { produced: 0 }
      const producer = yield* Effect.forkScoped(produce(total, partitions, progress))
      const delivered = (): number => receiver.stats.accepted + ledger.accepted.length
      const snapshot = snapshotOf(store, inspection, delivered, partitions)
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
      const { missing, expectedDead, wronglyDead, orderViolations, orderingKeys } = verify(
        total,
        receiver,
        ledger,
        entries
      )
      const leftover = yield* snapshot
      const malformed = receiver.stats.malformed + ledger.stats.malformed
      const ok =
        missing === 0 &&
        wronglyDead === 0 &&
        orderViolations === 0 &&
        malformed === 0 &&
        leftover.pending === 0 &&
        leftover.claimed === 0 &&
        entries.length === expectedDead
      const duplicates = receiver.stats.duplicates + ledger.stats.duplicates
      const deliveredTotal = delivered()

      out("\n")
      out(
        ok
          ? `✔ verified: ${count(deliveredTotal)} delivered + ${count(entries.length)} dead-lettered = ` +
              `${count(total)} enqueued; per-key order held over ${count(orderingKeys)} ordering keys; ` +
              `${count(duplicates)} duplicates (at-least-once)\n`
          : `✘ verification failed: ${count(missing)} missing, ${count(wronglyDead)} dead-lettered by mistake, ` +
              `${count(orderViolations)} per-key order violations, ${count(malformed)} undecodable, ` +
              `${count(leftover.pending)} pending and ${count(leftover.claimed)} claimed left, ` +
              `${count(entries.length)}/${count(expectedDead)} dead letters\n`
      )
      out("\n")
      out(
        summary(perRelayStats, receiver, ledger, {
          total,
          delivered: deliveredTotal,
          deadLettered: entries.length,
          orderViolations,
          elapsed,
          stopMillis
        })
      )
      out(decodedSamples(receiver, ledger, { ledger: relative(ledgerFile) }))
      out(
        `Look inside: npx effect-outbox inspect --sqlite-file ${shown}\n` +
          `             npx effect-outbox dlq list --sqlite-file ${shown}\n`
      )
      const linger = Math.max(0, Math.floor(options.lingerMillis ?? 0))
      if (linger > 0 && Option.isSome(dashboard)) {
        out(`Dashboard: ${dashboard.value} (serving for ${Math.round(linger / 1000)} s more; Ctrl-C to stop)\n`)
        yield* Effect.sleep(linger)
      }
      let invoicesPublished = 0
      for (let n = 0; n < total; n++) if (isInvoice(n)) invoicesPublished += 1
      return {
        ok,
        enqueued: total,
        delivered: deliveredTotal,
        deadLettered: entries.length,
        duplicates,
        orderViolations,
        missing,
        elapsedMillis: elapsed,
        routes: {
          orders: {
            published: total - invoicesPublished,
            delivered: receiver.stats.accepted,
            duplicates: receiver.stats.duplicates,
            malformed: receiver.stats.malformed
          },
          invoices: {
            published: invoicesPublished,
            delivered: ledger.accepted.length,
            duplicates: ledger.stats.duplicates,
            malformed: ledger.stats.malformed
          }
        }
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
