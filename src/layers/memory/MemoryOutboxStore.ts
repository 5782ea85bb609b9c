/**
 * The in-memory `OutboxStore` backend (SPEC §3.1): for tests, demos and single-process use. Nothing
 * survives the process.
 *
 * - Every operation reads `Clock` once and does all of its reads and writes in one synchronous step, so
 *   operations are atomic with respect to each other (R-CLAIM-9) and multi-id complete/release are
 *   all-or-nothing (R-DONE-3): if any id is unknown or not claimed by the token, nothing changes and the
 *   error names every mismatching id; repeated ids count once.
 * - Claim selection is `ClaimOrder.select` over per-partition indexes (`MemoryIndex`), fenced with
 *   `Fence.admit` and stamped with `Fence.stampClaimInto` (R-CLAIM-2/4/5). Stale reclaim (R-CLAIM-6) only
 *   when `staleClaimAfter` is given.
 * - Terminal records are evicted `retention` (default 1 hour) after they became terminal, lazily on the
 *   next operation; eviction frees the id and identity. Fence state is never evicted.
 * - Payloads are copied on the way in; records handed out share the stored bytes: treat a returned
 *   payload as read-only.
 *
 * Design notes and measurements: docs/design/memory.md.
 *
 * @since 0.1.0
 */
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as ClaimOrder from "../../domain/ClaimOrder.js"
import * as Fence from "../../domain/Fence.js"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import { type InvalidConfiguration, InvalidRecord, type StaleFencingToken } from "../../domain/OutboxError.js"
import * as OutboxRecord from "../../domain/OutboxRecord.js"
import * as OutboxStore from "../../services/OutboxStore.js"
import { Entry, isLive, Partition, pendingInAgeOrder, type Visits } from "./MemoryIndex.js"

/**
 * Counters describing the work a memory store has done and holds, for tests and benchmarks.
 *
 * @since 0.1.0
 */
export interface Diagnostics {
  /**
   * Index entries visited by claims, queries and expiry sweeps so far (live entries and lazily removed
   * ones alike): the measure of selection cost.
   */
  readonly indexVisits: number
  /** Records held, terminal records awaiting eviction included. */
  readonly records: number
  /** Terminal records awaiting eviction. */
  readonly terminal: number
  /** Partitions known to the store (fence state is never evicted). */
  readonly partitions: number
}

/**
 * A memory store together with a read of its {@link Diagnostics}.
 *
 * @since 0.1.0
 */
export interface Instrumented {
  readonly store: OutboxStore.OutboxStoreService
  readonly diagnostics: Effect.Effect<Diagnostics>
}

const noPayload = new Uint8Array(0)
const noHeaders: OutboxRecord.Headers = {}

const notClaimedByToken = (entry: Entry | undefined, token: LeaseToken.LeaseTokenLike): boolean =>
  entry === undefined ||
  entry.status !== "claimed" ||
  entry.claimVersion !== token.version ||
  Option.isNone(entry.claimedBy) ||
  entry.claimedBy.value !== token.owner

/** The whole state of one memory store: records by id and identity, partitions, the retention FIFO. */
class State {
  readonly visits: Visits = { count: 0 }
  readonly byId = new Map<string, Entry>()
  readonly byIdentity = new Map<string, Entry>()
  readonly partitions = new Map<string, Partition>()
  /** Keys of the partitions with non-terminal records (what `listPartitions` returns). */
  readonly live = new Set<string>()
  /** FIFO of terminal entries for retention, read from `terminalStart`. */
  terminal: Array<Entry> = []
  terminalStart = 0
  /** The last complete/release call (to count repeated ids once). */
  call = 0

  constructor(readonly options: OutboxStore.ValidStoreOptions) {}

  partitionOf(key: string): Partition {
    let partition = this.partitions.get(key)
    if (partition === undefined) {
      partition = new Partition(key, this.visits, this.live)
      this.partitions.set(key, partition)
    }
    return partition
  }

  remove(entry: Entry): void {
    entry.removed = true
    if (this.byId.get(entry.id) === entry) this.byId.delete(entry.id)
    if (this.byIdentity.get(entry.identity) === entry) this.byIdentity.delete(entry.identity)
  }

  /** Evicts the terminal entries whose retention ended at `now`. */
  evictDue(now: number): void {
    const retentionMillis = this.options.retentionMillis
    while (this.terminalStart < this.terminal.length) {
      const entry = this.terminal[this.terminalStart]
      if (entry === undefined) break
      if (!entry.removed) {
        if (entry.terminalAt + retentionMillis > now) break
        this.remove(entry)
      }
      this.terminalStart++
    }
    if (this.terminalStart === this.terminal.length) {
      if (this.terminalStart > 0) {
        this.terminal = []
        this.terminalStart = 0
      }
    } else if (this.terminalStart > 1024 && this.terminalStart * 2 > this.terminal.length) {
      this.terminal = this.terminal.slice(this.terminalStart)
      this.terminalStart = 0
    }
  }

  /** Moves a non-terminal entry to a terminal status, keeping only what identity and id checks need. */
  retire(entry: Entry, status: "completed" | "expired", now: number, completedAt: Option.Option<DateTime.Utc>): void {
    entry.partition.retire(entry, status, now)
    entry.completedAt = completedAt
    entry.payload = noPayload
    entry.headers = noHeaders
    this.terminal.push(entry)
  }

  /** Admits the token against the partition's fence (R-CLAIM-2, R-EXP-1), raising it when above. */
  admit(operation: string, partition: Partition, token: LeaseToken.LeaseTokenLike): StaleFencingToken | undefined {
    switch (Fence.admit(partition.highWaterMark, token.version)) {
      case "stale":
        return OutboxStore.belowHighWaterMark(operation, partition.key, token, partition.highWaterMark)
      case "raise":
        partition.highWaterMark = token.version
        return undefined
      case "keep":
        return undefined
    }
  }

  /** Resolves ids to entries claimed by the token, or the mismatching ids. Repeated ids count once. */
  matching(
    ids: ReadonlyArray<string>,
    token: LeaseToken.LeaseTokenLike
  ): { readonly entries: Array<Entry>; readonly mismatched: Array<string> } {
    const stamp = ++this.call
    const entries: Array<Entry> = []
    let mismatched: Set<string> | undefined
    for (const id of ids) {
      const entry = this.byId.get(id)
      if (entry === undefined || notClaimedByToken(entry, token)) {
        mismatched ??= new Set()
        mismatched.add(id)
      } else if (entry.stamp !== stamp) {
        entry.stamp = stamp
        entries.push(entry)
      }
    }
    return { entries, mismatched: mismatched === undefined ? [] : Array.from(mismatched) }
  }
}

/** Stores a prepared batch (see `OutboxStore.Backend.persist`). */
const persistIn = (
  state: State,
  records: ReadonlyArray<OutboxRecord.PreparedRecord>,
  replaceTerminal: boolean
): Effect.Effect<OutboxStore.PersistReport, InvalidRecord> => {
  // first pass: reject the batch if an id is used by a different identity, changing nothing
  const identities: Array<string> = new Array(records.length)
  for (let index = 0; index < records.length; index++) {
    const record = records[index]
    if (record === undefined) continue
    const identity = OutboxRecord.identityKey(record)
    identities[index] = identity
    const byThisId = state.byId.get(record.id)
    if (byThisId !== undefined && byThisId.identity !== identity) {
      return Effect.fail(
        new InvalidRecord({
          index,
          recordId: record.id,
          partitionKey: record.partitionKey,
          reason: `id ${record.id} is already used by a different record (envelope ${byThisId.envelopeId}, binding ${byThisId.bindingId})`
        })
      )
    }
  }
  // second pass: store. A record stored earlier in this batch is already in `byIdentity`, so a repeated
  // identity is skipped in favour of the first (R-PERSIST-3), and a non-terminal holder is never replaced.
  const persisted: Array<string> = []
  const skipped: Array<string> = []
  const existingIds: Array<string> = []
  for (let index = 0; index < records.length; index++) {
    const record = records[index]
    if (record === undefined) continue
    const identity = identities[index] ?? OutboxRecord.identityKey(record)
    const holder = state.byIdentity.get(identity)
    if (holder !== undefined) {
      if (!replaceTerminal || isLive(holder)) {
        skipped.push(record.id)
        existingIds.push(holder.id)
        continue
      }
      state.remove(holder)
    }
    const partition = state.partitionOf(record.partitionKey)
    partition.seq++
    const entry = new Entry(record, identity, partition.seq, partition)
    state.byId.set(entry.id, entry)
    state.byIdentity.set(identity, entry)
    partition.add(entry)
    persisted.push(entry.id)
  }
  return Effect.succeed({ persisted, skipped, existingIds })
}

/** Claims up to `limit` records of a partition at `now` (see `OutboxStore.Backend.claim`). */
const claimIn = (
  state: State,
  now: number,
  partitionKey: string,
  token: LeaseToken.LeaseTokenLike,
  limit: number
): Effect.Effect<OutboxStore.ClaimBatch, StaleFencingToken> => {
  const partition = state.partitionOf(partitionKey)
  const stale = state.admit("claim", partition, token)
  if (stale !== undefined) return Effect.fail(stale)
  if (limit <= 0 || partition.pending + partition.claimed === 0) return Effect.succeed(OutboxStore.ClaimBatch([]))
  const selected = ClaimOrder.select(partition.view, limit, {
    version: token.version,
    nowMillis: now,
    staleClaimAfterMillis: state.options.staleClaimAfterMillis
  })
  const stamp = Fence.claimStamp(token, DateTime.unsafeMake(now))
  const records: Array<OutboxRecord.OutboxRecord> = []
  for (const entry of selected) {
    if (entry.status === "pending") {
      partition.pending--
      partition.claimed++
    }
    entry.status = "claimed"
    Fence.stampClaimInto(entry, stamp)
    records.push(entry.toRecord())
  }
  return Effect.succeed(OutboxStore.ClaimBatch(records))
}

/** Expires the partition's pending records due strictly before `before` (see `OutboxStore.Backend.expire`). */
const expireIn = (
  state: State,
  now: number,
  before: DateTime.DateTime,
  partitionKey: string,
  token: LeaseToken.LeaseTokenLike
): Effect.Effect<number, StaleFencingToken> => {
  const partition = state.partitionOf(partitionKey)
  const stale = state.admit("expire", partition, token)
  if (stale !== undefined) return Effect.fail(stale)
  const beforeMillis = DateTime.toEpochMillis(before)
  const due: Array<Entry> = []
  const candidates = partition.expiring.iterate()
  for (let next = candidates.next(); next.done !== true; next = candidates.next()) {
    const entry = next.value
    if (entry.expiresMillis === undefined || entry.expiresMillis >= beforeMillis) break
    if (entry.status === "pending") due.push(entry)
  }
  const none = Option.none()
  for (const entry of due) state.retire(entry, "expired", now, none)
  return Effect.succeed(due.length)
}

/** The storage primitives of a memory store over `state`, each one atomic step. */
const backendOf = (state: State): OutboxStore.Backend => {
  /** Runs `f` in one synchronous step with the clock's time, after evicting what retention lets go. */
  const atomically = <A, E>(f: (now: number) => Effect.Effect<A, E>): Effect.Effect<A, E> =>
    Effect.clockWith((clock) => {
      const now = clock.unsafeCurrentTimeMillis()
      state.evictDue(now)
      return f(now)
    })
  return {
    name: "memory",
    persist: (records, { replaceTerminal }) => atomically(() => persistIn(state, records, replaceTerminal)),
    claim: (partitionKey, token, limit) => atomically((now) => claimIn(state, now, partitionKey, token, limit)),
    complete: (ids, token) =>
      atomically((now) => {
        const { entries, mismatched } = state.matching(ids, token)
        if (mismatched.length > 0) return Effect.fail(OutboxStore.notClaimedBy("complete", token, mismatched))
        const completedAt = Option.some(DateTime.unsafeMake(now))
        for (const entry of entries) state.retire(entry, "completed", now, completedAt)
        return Effect.void
      }),
    release: (ids, token) =>
      atomically(() => {
        const { entries, mismatched } = state.matching(ids, token)
        if (mismatched.length > 0) return Effect.fail(OutboxStore.notClaimedBy("release", token, mismatched))
        for (const entry of entries) {
          entry.status = "pending"
          entry.claimedBy = Option.none()
          entry.claimedAt = Option.none()
          entry.partition.claimed--
          entry.partition.pending++
        }
        return Effect.void
      }),
    expire: (before, partitionKey, token) => atomically((now) => expireIn(state, now, before, partitionKey, token)),
    queryPending: (partitionKey, limit) =>
      atomically(() => {
        const partition = state.partitions.get(partitionKey)
        return Effect.succeed(
          partition === undefined || partition.pending === 0 ? [] : pendingInAgeOrder(partition, limit)
        )
      }),
    countPending: (partitionKey) => atomically(() => Effect.succeed(state.partitions.get(partitionKey)?.pending ?? 0)),
    countClaimed: (partitionKey) => atomically(() => Effect.succeed(state.partitions.get(partitionKey)?.claimed ?? 0)),
    listPartitions: Stream.fromIterableEffect(
      // O(partitions with work), however many partitions ever stored a record (R-READ-3)
      atomically(() => Effect.succeed(Array.from(state.live)))
    )
  }
}

/** Builds a memory store with options already validated. */
const build = (options: OutboxStore.ValidStoreOptions): Effect.Effect<Instrumented> =>
  Effect.sync(() => {
    const state = new State(options)
    const diagnostics: Effect.Effect<Diagnostics> = Effect.clockWith((clock) =>
      Effect.sync(() => {
        state.evictDue(clock.unsafeCurrentTimeMillis())
        return {
          indexVisits: state.visits.count,
          records: state.byId.size,
          terminal: state.terminal.length - state.terminalStart,
          partitions: state.partitions.size
        }
      })
    )
    return { store: OutboxStore.make(backendOf(state)), diagnostics }
  })

/**
 * Builds a memory store and a read of its {@link Diagnostics}. Fails with `InvalidConfiguration` on
 * invalid options (`OutboxStore.validateStoreOptions`).
 *
 * @since 0.1.0
 */
export const makeInstrumented = (
  options: OutboxStore.StoreOptions = {}
): Effect.Effect<Instrumented, InvalidConfiguration> =>
  Effect.flatMap(OutboxStore.validateStoreOptions("MemoryOutboxStore", options), build)

/**
 * Builds a memory `OutboxStoreService` with the given options (`staleClaimAfter`: wall-clock stale
 * reclaim, off by default; `retention`: how long terminal records are kept, default 1 hour).
 *
 * @since 0.1.0
 */
export const make = (
  options: OutboxStore.StoreOptions = {}
): Effect.Effect<OutboxStore.OutboxStoreService, InvalidConfiguration> =>
  Effect.map(makeInstrumented(options), (instrumented) => instrumented.store)

/**
 * A memory `OutboxStore` layer with the given options.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: OutboxStore.StoreOptions
): Layer.Layer<OutboxStore.OutboxStore, InvalidConfiguration> => Layer.effect(OutboxStore.OutboxStore, make(options))

/**
 * A memory `OutboxStore` layer with the defaults: version-only reclaim, 1 hour retention.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<OutboxStore.OutboxStore> = Layer.effect(
  OutboxStore.OutboxStore,
  Effect.map(
    build({ staleClaimAfterMillis: undefined, retentionMillis: OutboxStore.defaultRetentionMillis }),
    (instrumented) => instrumented.store
  )
)
