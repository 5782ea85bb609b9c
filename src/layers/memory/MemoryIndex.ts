/**
 * The indexes of the memory outbox store (see `MemoryOutboxStore`): stored entries, sorted indexes with
 * lazy removal, partitions with their fence state and counters, and the age-ordered merge behind
 * `queryPending`. Internal to the memory backend; design notes in docs/design/memory.md.
 *
 * @since 0.1.0
 */
import * as DateTime from "effect/DateTime"
import * as Option from "effect/Option"
import type * as ClaimOrder from "../../domain/ClaimOrder.js"
import * as OutboxRecord from "../../domain/OutboxRecord.js"

// ---------------------------------------------------------------------------------------------------
// Stored entries
// ---------------------------------------------------------------------------------------------------

/** A stored record: mutable, never handed out (callers get `OutboxRecord` snapshots). */
export class Entry implements ClaimOrder.ClaimFacts {
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

/** True for a pending or claimed entry. */
export const isLive = (entry: Entry): boolean => entry.status === "pending" || entry.status === "claimed"

/** Age order within one partition: `(createdAt, seq)`; seq is unique per partition. */
export const compareEntries = (a: Entry, b: Entry): number =>
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
export interface Visits {
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

/** One partition: its fence state, counters and indexes of non-terminal records. */
export class Partition {
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
    private readonly visits: Visits,
    /** The keys of the partitions holding non-terminal records, kept up to date by `add` and `retire`. */
    private readonly live: Set<string> = new Set()
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
    this.live.add(this.key)
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
    if (this.pending + this.claimed === 0) this.live.delete(this.key)
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

/**
 * At most `limit` pending records of the partition in age order: a k-way merge of the keyless index and
 * the key queues, opening a key's queue when its head comes up in age order.
 */
export const pendingInAgeOrder = (partition: Partition, limit: number): Array<OutboxRecord.OutboxRecord> => {
  const out: Array<OutboxRecord.OutboxRecord> = []
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
  return out
}
