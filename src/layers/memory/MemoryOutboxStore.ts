/**
 * The in-memory `OutboxStore` backend (SPEC §3.1): for tests, demos and single-process use. Nothing
 * survives the process.
 *
 * **State and atomicity.** All state lives in one mutable structure owned by the store instance. Every
 * operation reads `Clock` once and does all of its reads and writes in the same synchronous step (no
 * effect runs in between, so no other fiber can), so operations are atomic with respect to each other
 * (two concurrent claims never hand out the same record, R-CLAIM-9) and multi-id complete/release are
 * all-or-nothing. No lock is needed for that, so none is taken (a semaphore permit added an
 * asynchronous acquire and a release to every call on the drain path). A `Ref` of immutable maps was not
 * used: copying the indexes (or rebuilding persistent trees) on every batch costs several times the target
 * throughput of 100k records/s, while in-place mutation keeps a claim at O(limit · log n).
 *
 * **Indexes (per partition).** Each is a sorted array with binary-search insert, an append fast path
 * (records persisted with `createdAt ≈ now` and increasing `seq` land at the end), lazy removal of
 * terminal records (a head pointer skips them at the front; the array is compacted when removed entries
 * exceed a quarter of the live ones) — so the common drain pattern (persist new, claim oldest, complete
 * roughly in age order) costs amortised O(1) per record outside the selection itself:
 * - keyless non-terminal records, in age order;
 * - one queue per ordering key of its non-terminal records, in age order;
 * - the heads of those queues (the oldest non-terminal record of each key), in age order;
 * - non-terminal records with an `expiresAt`, in expiry order (for `expire`).
 * Claim selection goes through `ClaimOrder.select` over a view of these indexes, so a claim visits the
 * records it returns plus the non-claimable ones it has to step over (records claimed by the current
 * version in front of the backlog), never the whole partition. `countPending`/`countClaimed` are counters.
 *
 * **Stale reclaim.** Version-only reclaim unless `staleClaimAfter` is given (R-CLAIM-6).
 *
 * **Retention.** Terminal records are evicted `retention` (default 1 hour) after they became terminal,
 * measured with `Clock`. Eviction is lazy: every operation first evicts what is due from a FIFO of
 * terminal records (amortised O(1) per record). Eviction frees the record's id and identity. While retained,
 * a terminal record keeps only what the identity and id checks need (its payload and headers are dropped when
 * it becomes terminal, since no operation returns terminal records), about 0.5 KB per record. If the
 * clock moves backwards, eviction of later records waits for the earlier ones. Fence state (the
 * high-water mark and the seq counter of a partition) is never evicted.
 *
 * **Multi-id complete/release** are all-or-nothing (R-DONE-3): if any id is unknown or not claimed by
 * the token, nothing changes and the error names every mismatching id. Repeated ids in one call count
 * once.
 *
 * **Payloads** are copied on the way in, so a producer reusing its buffer never changes what is stored.
 * Records handed out (claim, queryPending) share the stored bytes, which the store itself never changes:
 * treat a returned payload as read-only — writing to it would change what a later claim of the same record
 * returns. (Copying every payload out doubled the cost of a claim, almost all of it garbage collection.)
 *
 * @since 0.1.0
 */
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as ClaimOrder from "../../domain/ClaimOrder.js"
import type * as LeaseToken from "../../domain/LeaseToken.js"
import { InvalidRecord } from "../../domain/OutboxError.js"
import * as OutboxRecord from "../../domain/OutboxRecord.js"
import * as OutboxStore from "../../services/OutboxStore.js"

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

const defaultRetention = Duration.hours(1)

const noPayload = new Uint8Array(0)
const noHeaders: OutboxRecord.Headers = {}

// ---------------------------------------------------------------------------------------------------
// Stored entries
// ---------------------------------------------------------------------------------------------------

/** A stored record: mutable, never handed out (callers get `OutboxRecord` snapshots). */
class Entry implements ClaimOrder.ClaimFacts {
  readonly id: string
  readonly partitionKey: string
  readonly envelopeId: string
  readonly bindingId: string
  readonly routeId: string
  readonly address: string
  /** Dropped (set to an empty array) once the record is terminal: terminal records are never handed out. */
  payload: Uint8Array
  /** Dropped like `payload` once the record is terminal. */
  headers: OutboxRecord.Headers
  readonly orderingKey: Option.Option<string>
  readonly createdAt: DateTime.Utc
  readonly expiresAt: Option.Option<DateTime.Utc>
  readonly createdMillis: number
  readonly expiresMillis: number | undefined
  status: OutboxRecord.RecordStatus = "pending"
  claimedBy: Option.Option<string> = Option.none()
  claimVersion = 0
  claimedAt: Option.Option<DateTime.Utc> = Option.none()
  firstAttemptedAt: Option.Option<DateTime.Utc> = Option.none()
  replayCount = 0
  completedAt: Option.Option<DateTime.Utc> = Option.none()
  /** When the record became terminal (epoch ms), for retention. */
  terminalAt = 0
  /** Removed from the id and identity maps (evicted or replaced). */
  removed = false
  /** Its node in the partition's key-head index while it is the head of its key. */
  head: HeadNode | undefined = undefined
  /** The last complete/release call that matched it (to count repeated ids once). */
  stamp = 0

  constructor(
    record: OutboxRecord.PreparedRecord,
    readonly identity: string,
    readonly seq: number,
    readonly partition: Partition
  ) {
    this.id = record.id
    this.partitionKey = record.partitionKey
    this.envelopeId = record.envelopeId
    this.bindingId = record.bindingId
    this.routeId = record.routeId
    this.address = record.address
    this.payload = record.payload.slice()
    this.headers = record.headers
    this.orderingKey = record.orderingKey
    this.createdAt = record.createdAt
    this.expiresAt = record.expiresAt
    this.createdMillis = DateTime.toEpochMillis(record.createdAt)
    this.expiresMillis = Option.isSome(record.expiresAt) ? DateTime.toEpochMillis(record.expiresAt.value) : undefined
  }

  toRecord(): OutboxRecord.OutboxRecord {
    return OutboxRecord.makeUnvalidated(this)
  }
}

/** Membership of an entry in the key-head index (an entry may leave and re-enter it). */
interface HeadNode {
  readonly entry: Entry
  alive: boolean
}

const isLive = (entry: Entry): boolean => entry.status === "pending" || entry.status === "claimed"

/** Age order within one partition: `(createdAt, seq)`; seq is unique per partition. */
const compareEntries = (a: Entry, b: Entry): number =>
  a.createdMillis !== b.createdMillis ? a.createdMillis - b.createdMillis : a.seq - b.seq

const compareHeads = (a: HeadNode, b: HeadNode): number => compareEntries(a.entry, b.entry)

const compareExpiry = (a: Entry, b: Entry): number => {
  const ea = a.expiresMillis ?? 0
  const eb = b.expiresMillis ?? 0
  return ea !== eb ? ea - eb : a.seq - b.seq
}

// ---------------------------------------------------------------------------------------------------
// Sorted index with lazy removal
// ---------------------------------------------------------------------------------------------------

const exhausted: IteratorReturnResult<undefined> = { done: true, value: undefined }

/** Visit counter shared by the indexes of one store. */
interface Visits {
  count: number
}

/**
 * A sorted array with an append fast path, a front-insert fast path, binary-search insert otherwise,
 * and lazy removal: an item stops being live (as decided by `live`) and the owner calls `released`;
 * the head pointer skips dead items at the front and the array is compacted when dead items exceed a
 * quarter of the live ones. Invariant: `dead` counts the non-live items at or after `start`, and the
 * item at `start` (if any) is live.
 */
class SortedIndex<T> {
  private items: Array<T> = []
  private start = 0
  private dead = 0

  constructor(
    private readonly compare: (a: T, b: T) => number,
    private readonly live: (item: T) => boolean,
    private readonly visits: Visits
  ) {}

  /** Live items. */
  get size(): number {
    return this.items.length - this.start - this.dead
  }

  /** The oldest live item. */
  first(): T | undefined {
    return this.items[this.start]
  }

  insert(item: T): void {
    const items = this.items
    const n = items.length
    if (n === this.start) {
      if (this.start > 0) {
        this.items = [item]
        this.start = 0
        this.dead = 0
      } else {
        items.push(item)
      }
      return
    }
    const last = items[n - 1]
    if (last !== undefined && this.compare(last, item) < 0) {
      items.push(item)
      return
    }
    const first = items[this.start]
    if (this.start > 0 && first !== undefined && this.compare(item, first) < 0) {
      this.start--
      items[this.start] = item
      return
    }
    items.splice(this.lowerBound(item), 0, item)
  }

  /** Must be called once each time an item of this index stops being live. */
  released(): void {
    this.dead++
    const items = this.items
    while (this.start < items.length) {
      const first = items[this.start]
      if (first !== undefined && this.live(first)) break
      this.start++
      this.dead--
    }
    if (this.start === items.length) {
      this.items = []
      this.start = 0
      this.dead = 0
    } else if (this.dead > 32 && this.dead * 4 > this.size) {
      this.compact()
    } else if (this.start > 1024 && this.start * 2 > items.length) {
      this.items = items.slice(this.start)
      this.start = 0
    }
  }

  /** Iterates the live items in order. The index must not change while the iterator is in use. */
  iterate(): Iterator<T> {
    const items = this.items
    const live = this.live
    const visits = this.visits
    let i = this.start
    // one result object per iterator: consumers read `value` before calling `next` again
    let result: IteratorYieldResult<T> | undefined
    return {
      next: (): IteratorResult<T> => {
        while (i < items.length) {
          const item = items[i++]
          visits.count++
          if (item !== undefined && live(item)) {
            if (result === undefined) result = { done: false, value: item }
            else result.value = item
            return result
          }
        }
        return exhausted
      }
    }
  }

  /** The next live item after `item` (which must be in the index). */
  after(item: T): T | undefined {
    const items = this.items
    for (let i = this.lowerBound(item) + 1; i < items.length; i++) {
      const next = items[i]
      this.visits.count++
      if (next !== undefined && this.live(next)) return next
    }
    return undefined
  }

  private lowerBound(item: T): number {
    const items = this.items
    let lo = this.start
    let hi = items.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      const m = items[mid]
      if (m !== undefined && this.compare(m, item) < 0) lo = mid + 1
      else hi = mid
    }
    return lo
  }

  private compact(): void {
    const kept: Array<T> = []
    const items = this.items
    for (let i = this.start; i < items.length; i++) {
      const item = items[i]
      if (item !== undefined && this.live(item)) kept.push(item)
    }
    this.items = kept
    this.start = 0
    this.dead = 0
  }
}

// ---------------------------------------------------------------------------------------------------
// Partitions
// ---------------------------------------------------------------------------------------------------

class Partition {
  /** Fence high-water mark: the highest version any accepted claim or expire presented. */
  highWaterMark = 0
  /** Last seq assigned. */
  seq = 0
  pending = 0
  claimed = 0
  readonly keyless: SortedIndex<Entry>
  readonly keys = new Map<string, SortedIndex<Entry>>()
  readonly heads: SortedIndex<HeadNode>
  readonly expiring: SortedIndex<Entry>
  readonly view: ClaimOrder.PartitionView<Entry>

  constructor(
    readonly key: string,
    private readonly visits: Visits
  ) {
    this.keyless = new SortedIndex(compareEntries, isLive, visits)
    this.heads = new SortedIndex(compareHeads, (node) => node.alive, visits)
    this.expiring = new SortedIndex(compareExpiry, isLive, visits)
    this.view = {
      keyless: () => this.keyless.iterate(),
      keyHeads: () => {
        const nodes = this.heads.iterate()
        let result: IteratorYieldResult<Entry> | undefined
        return {
          next: (): IteratorResult<Entry> => {
            const node = nodes.next()
            if (node.done === true) return exhausted
            if (result === undefined) result = { done: false, value: node.value.entry }
            else result.value = node.value.entry
            return result
          }
        }
      },
      nextInKey: (entry) =>
        Option.isSome(entry.orderingKey) ? this.keys.get(entry.orderingKey.value)?.after(entry) : undefined
    }
  }

  add(entry: Entry): void {
    this.pending++
    if (entry.expiresMillis !== undefined) this.expiring.insert(entry)
    if (Option.isNone(entry.orderingKey)) {
      this.keyless.insert(entry)
      return
    }
    const key = entry.orderingKey.value
    let queue = this.keys.get(key)
    if (queue === undefined) {
      queue = new SortedIndex(compareEntries, isLive, this.visits)
      this.keys.set(key, queue)
    }
    const oldHead = queue.first()
    queue.insert(entry)
    if (oldHead === undefined) {
      this.makeHead(entry)
    } else if (compareEntries(entry, oldHead) < 0) {
      this.dropHead(oldHead)
      this.makeHead(entry)
    }
  }

  /** Moves a non-terminal entry to a terminal status and out of every index. */
  retire(entry: Entry, status: "completed" | "expired", now: number): void {
    if (entry.status === "pending") this.pending--
    else this.claimed--
    entry.status = status
    entry.terminalAt = now
    if (entry.expiresMillis !== undefined) this.expiring.released()
    if (Option.isNone(entry.orderingKey)) {
      this.keyless.released()
      return
    }
    const key = entry.orderingKey.value
    const queue = this.keys.get(key)
    if (queue === undefined) return
    queue.released()
    if (entry.head !== undefined) {
      this.dropHead(entry)
      const next = queue.first()
      if (next !== undefined) this.makeHead(next)
    }
    if (queue.size === 0) this.keys.delete(key)
  }

  private makeHead(entry: Entry): void {
    const node: HeadNode = { entry, alive: true }
    entry.head = node
    this.heads.insert(node)
  }

  private dropHead(entry: Entry): void {
    if (entry.head === undefined) return
    entry.head.alive = false
    entry.head = undefined
    this.heads.released()
  }
}

// ---------------------------------------------------------------------------------------------------
// Small binary heap (queryPending's merge of the key queues)
// ---------------------------------------------------------------------------------------------------

interface Cursor {
  current: Entry
  readonly rest: Iterator<Entry>
}

const pushCursor = (heap: Array<Cursor>, cursor: Cursor): void => {
  heap.push(cursor)
  let i = heap.length - 1
  while (i > 0) {
    const parent = (i - 1) >> 1
    const p = heap[parent]
    if (p === undefined || compareEntries(p.current, cursor.current) <= 0) break
    heap[i] = p
    i = parent
  }
  heap[i] = cursor
}

const popCursor = (heap: Array<Cursor>): Cursor | undefined => {
  const top = heap[0]
  const last = heap.pop()
  if (heap.length === 0 || last === undefined) return top
  let i = 0
  for (;;) {
    const l = 2 * i + 1
    const r = l + 1
    let smallest = last
    let at = i
    const left = heap[l]
    if (left !== undefined && compareEntries(left.current, smallest.current) < 0) {
      smallest = left
      at = l
    }
    const right = heap[r]
    if (right !== undefined && compareEntries(right.current, smallest.current) < 0) {
      smallest = right
      at = r
    }
    if (at === i) break
    heap[i] = smallest
    i = at
  }
  heap[i] = last
  return top
}

const cursorOf = (iterator: Iterator<Entry>): Cursor | undefined => {
  const first = iterator.next()
  return first.done === true ? undefined : { current: first.value, rest: iterator }
}

// ---------------------------------------------------------------------------------------------------
// The store
// ---------------------------------------------------------------------------------------------------

const notClaimedByToken = (entry: Entry | undefined, token: LeaseToken.LeaseTokenLike): boolean =>
  entry === undefined ||
  entry.status !== "claimed" ||
  entry.claimVersion !== token.version ||
  Option.isNone(entry.claimedBy) ||
  entry.claimedBy.value !== token.owner

/**
 * Builds a memory store and a read of its {@link Diagnostics}.
 *
 * @since 0.1.0
 */
export const makeInstrumented = (options: OutboxStore.StoreOptions = {}): Effect.Effect<Instrumented> =>
  Effect.gen(function* () {
    const staleClaimAfterMillis =
      options.staleClaimAfter === undefined ? undefined : Duration.toMillis(Duration.decode(options.staleClaimAfter))
    const retentionMillis = Duration.toMillis(Duration.decode(options.retention ?? defaultRetention))

    const visits: Visits = { count: 0 }
    const byId = new Map<string, Entry>()
    const byIdentity = new Map<string, Entry>()
    const partitions = new Map<string, Partition>()
    // FIFO of terminal entries for retention, with a head pointer
    let terminal: Array<Entry> = []
    let terminalStart = 0

    const partitionOf = (key: string): Partition => {
      let partition = partitions.get(key)
      if (partition === undefined) {
        partition = new Partition(key, visits)
        partitions.set(key, partition)
      }
      return partition
    }

    const remove = (entry: Entry): void => {
      entry.removed = true
      if (byId.get(entry.id) === entry) byId.delete(entry.id)
      if (byIdentity.get(entry.identity) === entry) byIdentity.delete(entry.identity)
    }

    const evictDue = (now: number): void => {
      while (terminalStart < terminal.length) {
        const entry = terminal[terminalStart]
        if (entry === undefined) break
        if (!entry.removed) {
          if (entry.terminalAt + retentionMillis > now) break
          remove(entry)
        }
        terminalStart++
      }
      if (terminalStart === terminal.length) {
        if (terminalStart > 0) {
          terminal = []
          terminalStart = 0
        }
      } else if (terminalStart > 1024 && terminalStart * 2 > terminal.length) {
        terminal = terminal.slice(terminalStart)
        terminalStart = 0
      }
    }

    const retire = (
      entry: Entry,
      status: "completed" | "expired",
      now: number,
      completedAt: Option.Option<DateTime.Utc>
    ): void => {
      entry.partition.retire(entry, status, now)
      entry.completedAt = completedAt
      // a terminal record is never handed out again: keep only what identity and id checks need
      entry.payload = noPayload
      entry.headers = noHeaders
      terminal.push(entry)
    }

    /**
     * Runs `f` in one synchronous step with the clock's time, after evicting what retention lets go: the
     * step is atomic with respect to every other operation (see the module documentation).
     */
    const atomically = <A, E>(f: (now: number) => Effect.Effect<A, E>): Effect.Effect<A, E> =>
      Effect.clockWith((clock) => {
        const now = clock.unsafeCurrentTimeMillis()
        evictDue(now)
        return f(now)
      })

    const persist: OutboxStore.Backend["persist"] = (records, { replaceTerminal }) =>
      atomically(() => {
        // first pass: reject the batch if an id is used by a different identity, changing nothing
        const identities: Array<string> = new Array(records.length)
        for (let index = 0; index < records.length; index++) {
          const record = records[index]
          if (record === undefined) continue
          const identity = OutboxRecord.identityKey(record)
          identities[index] = identity
          const byThisId = byId.get(record.id)
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
          const holder = byIdentity.get(identity)
          if (holder !== undefined) {
            if (!replaceTerminal || isLive(holder)) {
              skipped.push(record.id)
              existingIds.push(holder.id)
              continue
            }
            remove(holder)
          }
          const partition = partitionOf(record.partitionKey)
          partition.seq++
          const entry = new Entry(record, identity, partition.seq, partition)
          byId.set(entry.id, entry)
          byIdentity.set(identity, entry)
          partition.add(entry)
          persisted.push(entry.id)
        }
        return Effect.succeed({ persisted, skipped, existingIds })
      })

    const claim: OutboxStore.Backend["claim"] = (partitionKey, token, limit) =>
      atomically((now) => {
        const partition = partitionOf(partitionKey)
        if (token.version < partition.highWaterMark) {
          return Effect.fail(OutboxStore.belowHighWaterMark("claim", partitionKey, token, partition.highWaterMark))
        }
        partition.highWaterMark = token.version
        if (limit <= 0 || partition.pending + partition.claimed === 0) {
          return Effect.succeed(OutboxStore.ClaimBatch([]))
        }
        const selected = ClaimOrder.select(partition.view, limit, {
          version: token.version,
          nowMillis: now,
          staleClaimAfterMillis
        })
        const claimedAt = Option.some(DateTime.unsafeMake(now))
        const claimedBy = Option.some(token.owner)
        const records: Array<OutboxRecord.OutboxRecord> = []
        for (const entry of selected) {
          if (entry.status === "pending") {
            partition.pending--
            partition.claimed++
          }
          entry.status = "claimed"
          entry.claimedBy = claimedBy
          entry.claimVersion = token.version
          entry.claimedAt = claimedAt
          if (Option.isNone(entry.firstAttemptedAt)) entry.firstAttemptedAt = claimedAt
          entry.replayCount++
          records.push(entry.toRecord())
        }
        return Effect.succeed(OutboxStore.ClaimBatch(records))
      })

    let call = 0
    /** Resolves ids to entries claimed by the token, or the mismatching ids. Repeated ids count once. */
    const matching = (
      ids: ReadonlyArray<string>,
      token: LeaseToken.LeaseTokenLike
    ): { readonly entries: Array<Entry>; readonly mismatched: Array<string> } => {
      const stamp = ++call
      const entries: Array<Entry> = []
      let mismatched: Set<string> | undefined
      for (const id of ids) {
        const entry = byId.get(id)
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

    const complete: OutboxStore.Backend["complete"] = (ids, token) =>
      atomically((now) => {
        const { entries, mismatched } = matching(ids, token)
        if (mismatched.length > 0) return Effect.fail(OutboxStore.notClaimedBy("complete", token, mismatched))
        const completedAt = Option.some(DateTime.unsafeMake(now))
        for (const entry of entries) retire(entry, "completed", now, completedAt)
        return Effect.void
      })

    const release: OutboxStore.Backend["release"] = (ids, token) =>
      atomically(() => {
        const { entries, mismatched } = matching(ids, token)
        if (mismatched.length > 0) return Effect.fail(OutboxStore.notClaimedBy("release", token, mismatched))
        for (const entry of entries) {
          entry.status = "pending"
          entry.claimedBy = Option.none()
          entry.claimedAt = Option.none()
          entry.partition.claimed--
          entry.partition.pending++
        }
        return Effect.void
      })

    const expire: OutboxStore.Backend["expire"] = (before, partitionKey, token) =>
      atomically((now) => {
        const partition = partitionOf(partitionKey)
        if (token.version < partition.highWaterMark) {
          return Effect.fail(OutboxStore.belowHighWaterMark("expire", partitionKey, token, partition.highWaterMark))
        }
        partition.highWaterMark = token.version
        const beforeMillis = DateTime.toEpochMillis(before)
        const due: Array<Entry> = []
        const candidates = partition.expiring.iterate()
        for (let next = candidates.next(); next.done !== true; next = candidates.next()) {
          const entry = next.value
          if (entry.expiresMillis === undefined || entry.expiresMillis >= beforeMillis) break
          if (entry.status === "pending") due.push(entry)
        }
        const none = Option.none()
        for (const entry of due) retire(entry, "expired", now, none)
        return Effect.succeed(due.length)
      })

    const queryPending: OutboxStore.Backend["queryPending"] = (partitionKey, limit) =>
      atomically(() => {
        const partition = partitions.get(partitionKey)
        const out: Array<OutboxRecord.OutboxRecord> = []
        if (partition === undefined || partition.pending === 0) return Effect.succeed(out)
        // k-way merge of the keyless index and the key queues, opening a key's queue when its head
        // comes up in age order
        const heap: Array<Cursor> = []
        const keyless = cursorOf(partition.keyless.iterate())
        if (keyless !== undefined) pushCursor(heap, keyless)
        const heads = partition.heads.iterate()
        let nextHead = heads.next()
        while (out.length < limit) {
          const top = heap[0]
          if (nextHead.done !== true && (top === undefined || compareEntries(nextHead.value.entry, top.current) < 0)) {
            const key = nextHead.value.entry.orderingKey
            const queue = Option.isSome(key) ? partition.keys.get(key.value) : undefined
            const cursor = queue === undefined ? undefined : cursorOf(queue.iterate())
            if (cursor !== undefined) pushCursor(heap, cursor)
            nextHead = heads.next()
            continue
          }
          const cursor = popCursor(heap)
          if (cursor === undefined) break
          if (cursor.current.status === "pending") out.push(cursor.current.toRecord())
          const next = cursor.rest.next()
          if (next.done !== true) {
            cursor.current = next.value
            pushCursor(heap, cursor)
          }
        }
        return Effect.succeed(out)
      })

    const countPending: OutboxStore.Backend["countPending"] = (partitionKey) =>
      atomically(() => Effect.succeed(partitions.get(partitionKey)?.pending ?? 0))

    const countClaimed: OutboxStore.Backend["countClaimed"] = (partitionKey) =>
      atomically(() => Effect.succeed(partitions.get(partitionKey)?.claimed ?? 0))

    const listPartitions: OutboxStore.Backend["listPartitions"] = Stream.fromIterableEffect(
      atomically(() => {
        const keys: Array<string> = []
        for (const partition of partitions.values()) {
          if (partition.pending + partition.claimed > 0) keys.push(partition.key)
        }
        return Effect.succeed(keys)
      })
    )

    const backend: OutboxStore.Backend = {
      name: "memory",
      persist,
      claim,
      complete,
      release,
      expire,
      queryPending,
      countPending,
      countClaimed,
      listPartitions
    }

    const diagnostics: Effect.Effect<Diagnostics> = atomically(() =>
      Effect.succeed({
        indexVisits: visits.count,
        records: byId.size,
        terminal: terminal.length - terminalStart,
        partitions: partitions.size
      })
    )

    return { store: OutboxStore.make(backend), diagnostics }
  })

/**
 * Builds a memory `OutboxStoreService` with the given options (`staleClaimAfter`: wall-clock stale
 * reclaim, off by default; `retention`: how long terminal records are kept, default 1 hour).
 *
 * @since 0.1.0
 */
export const make = (options: OutboxStore.StoreOptions = {}): Effect.Effect<OutboxStore.OutboxStoreService> =>
  Effect.map(makeInstrumented(options), (instrumented) => instrumented.store)

/**
 * A memory `OutboxStore` layer with the given options.
 *
 * @since 0.1.0
 */
export const layerWith = (options: OutboxStore.StoreOptions): Layer.Layer<OutboxStore.OutboxStore> =>
  Layer.effect(OutboxStore.OutboxStore, make(options))

/**
 * A memory `OutboxStore` layer with the defaults: version-only reclaim, 1 hour retention.
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<OutboxStore.OutboxStore> = layerWith({})
