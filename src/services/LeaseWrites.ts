/**
 * What this process knows about lease writes (SPEC §4, §13), so that a drainer need not read its lease
 * around every wave of sends. A live lease changes hands in only two ways: its owner releases it, or it
 * expires and another owner acquires it. Every acquire, renew and release of a store built by the shared
 * core (`LeaseStore.make`) is counted here per partition key, before and after its write; so when a
 * drainer read its lease as held at count `n`, the count is still `n`, and the lease's `expiresAt` (less a
 * margin) is still ahead of the clock, nothing in this process has touched the lease since that read and
 * no other process can have taken it: the read still stands. Stores not built by the core (wrappers, test
 * doubles) are not tracked, and their leases are always read.
 *
 * Counts are process-wide, per partition key, shared by every store of the process: a write through one
 * store conservatively voids what was learnt through another. One number per partition key touched.
 *
 * @since 0.1.0
 */

const counts = new Map<string, number>()
const tracked = new WeakSet<object>()

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
