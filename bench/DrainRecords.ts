/**
 * The records of the relay benchmark (bench/drain.ts) and of its producer process (bench/drainProducer.ts):
 * 8 partitions, in each every other record keyed (16 keys per partition), a 64-byte payload.
 */
import * as Effect from "effect/Effect"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import type { OutboxStoreService } from "../src/services/OutboxStore.js"

/** The partitions the records are spread over. */
export const partitions = Array.from({ length: 8 }, (_, i) => `p${i}`)
/** Ordering keys per partition. */
export const keysPerPartition = 16
/** Every record's payload. */
export const payload = new Uint8Array(64).fill(7)

/**
 * Whether records carry the bench's ordering keys (`"keyed"`: see {@link orderingKeyOf}) or none (`"none"`: the
 * same records without a key, so no record waits for an older one).
 */
export type Keys = "keyed" | "none"

/**
 * The ordering key of a partition's `k`-th record: every other record is keyed (`k` even), cycling through
 * `keysPerPartition` keys, so each partition is half keyed, over all of its keys; `undefined` for the others,
 * and for every record with `keys` `"none"`.
 */
export const orderingKeyOf = (k: number, keys: Keys = "keyed"): string | undefined =>
  keys === "keyed" && k % 2 === 0 ? `k${(k >> 1) % keysPerPartition}` : undefined

/**
 * A maker of records: `count` records spread round-robin over the partitions, keyed by {@link orderingKeyOf}
 * (none with `keys` `"none"`). Envelope ids are `<prefix><n>`, counted per maker.
 */
export const recordMaker = (prefix = "e"): ((count: number, keys?: Keys) => Array<NewOutboxRecord>) => {
  let envelope = 0
  const madePerPartition = partitions.map(() => 0)
  return (count, keys = "keyed") =>
    Array.from({ length: count }, (_, i) => {
      const n = envelope++
      const slot = i % partitions.length
      const partitionKey = partitions[slot] ?? "p0"
      const k = madePerPartition[slot] ?? 0
      madePerPartition[slot] = k + 1
      const orderingKey = orderingKeyOf(k, keys)
      return new NewOutboxRecord(
        {
          partitionKey,
          envelopeId: `${prefix}${n}`,
          bindingId: "b",
          payload,
          ...(orderingKey !== undefined ? { orderingKey } : {})
        },
        true
      )
    })
}

/**
 * Persists batches of 100 from `makeRecords` at `perSecond` for `seconds` (each batch due at its slot of
 * the schedule, never before); returns the records persisted and the event loop's busy milliseconds
 * meanwhile.
 */
export const pacedPersist = (
  store: OutboxStoreService,
  makeRecords: (count: number) => Array<NewOutboxRecord>,
  perSecond: number,
  seconds: number
) =>
  Effect.gen(function* () {
    const batches = Math.max(1, Math.round((perSecond * seconds) / 100))
    const interval = (seconds * 1000) / batches
    const utilizationStart = performance.eventLoopUtilization()
    const start = performance.now()
    for (let i = 0; i < batches; i++) {
      const wait = start + i * interval - performance.now()
      if (wait > 0) yield* Effect.sleep(`${Math.ceil(wait)} millis`)
      yield* store.persist(makeRecords(100))
    }
    return { records: batches * 100, busyMillis: performance.eventLoopUtilization(utilizationStart).active }
  })
