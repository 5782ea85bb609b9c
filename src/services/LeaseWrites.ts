/**
 * What this process knows about lease writes (SPEC §4, §13), so that a drainer need not read its lease
 * around every wave of sends. A live lease changes hands in only two ways: its owner releases it, or it
 * expires and another owner acquires it. Every acquire, renew and release of a store built by the shared
 * core (`LeaseStore.make`) is counted here per partition key, before and after its write; so when a
 * drainer read its lease as held at count `n`, the count is still `n`, and the lease's `expiresAt` (less a
 * margin) is still ahead of the clock, nothing in this process has touched the lease since that read and
 * no other process can have taken it: the read still stands. A renew this process wrote stands in for such
 * a read (it found the lease held at its version and moved the expiry): it is noted with the end of its
 * write, per store, and stands while no other write of the partition follows it. Stores not built by the core (wrappers, test
 * doubles) are not tracked, and their leases are always read.
 *
 * Counts are process-wide, per partition key, shared by every store of the process: a write through one
 * store conservatively voids what was learnt through another. One number per partition key touched.
 *
 * @since 0.1.0
 */
import type { LeaseToken } from "../domain/LeaseToken.js"

const counts = new Map<string, number>()
const tracked = new WeakSet<object>()
/** The last renew written per store (a renew says nothing of another store's lease of the same key). */
const renewals = new WeakMap<object, Map<string, Renewal>>()

/**
 * A renew by this process that was written: the lease it extended (owner, version, new expiry) and the
 * partition's write count once that write ended. While the count is unchanged, the renew stands in for a
 * read that found the lease held at that version until its new expiry (less {@link marginMillis}).
 *
 * @since 0.1.0
 */
export interface Renewal {
  /** The renewed lease's token (its owner and version). */
  readonly token: LeaseToken
  readonly expiresAtMillis: number
  /** The partition's write count once the renew's write ended. */
  readonly writes: number
}

/**
 * How long before a lease's `expiresAt` a read of it stops standing in for a fresh one: room for the
 * clock skew between this process and another that would take the lease over at its expiry.
 *
 * @since 0.1.0
 */
export const marginMillis = 1_000

/**
 * Marks a store built by the shared core: its writes are counted.
 *
 * @since 0.1.0
 */
export const track = <A extends object>(store: A): A => {
  tracked.add(store)
  return store
}

/**
 * Counts one lease write (its start or its end) on the partition.
 *
 * @since 0.1.0
 */
export const note = (partitionKey: string): void => {
  counts.set(partitionKey, (counts.get(partitionKey) ?? 0) + 1)
}

/**
 * The partition's write count, or `undefined` when `store` is not tracked (its lease must always be read).
 *
 * @since 0.1.0
 */
export const count = (store: object, partitionKey: string): number | undefined =>
  tracked.has(store) ? (counts.get(partitionKey) ?? 0) : undefined

/**
 * Notes a renew written through `store`, together with the end of its write ({@link note}): one step, so
 * no other write of the partition can fall between the two.
 *
 * @since 0.1.0
 */
export const noteRenewed = (store: object, partitionKey: string, token: LeaseToken, expiresAtMillis: number): void => {
  note(partitionKey)
  let byKey = renewals.get(store)
  if (byKey === undefined) {
    byKey = new Map()
    renewals.set(store, byKey)
  }
  byKey.set(partitionKey, { token, expiresAtMillis, writes: counts.get(partitionKey) ?? 0 })
}

/**
 * The last renew this process wrote through `store` on the partition, while no lease write of the process
 * came after it; `undefined` otherwise, or when `store` is not tracked.
 *
 * @since 0.1.0
 */
export const lastRenewal = (store: object, partitionKey: string): Renewal | undefined => {
  if (!tracked.has(store)) return undefined
  const renewal = renewals.get(store)?.get(partitionKey)
  return renewal !== undefined && renewal.writes === (counts.get(partitionKey) ?? 0) ? renewal : undefined
}
