/**
 * The records of the relay benchmark (bench/drain.ts) and of its producer process (bench/drainProducer.ts):
 * 8 partitions, in each every other record keyed (16 keys per partition), a 64-byte payload.
 */
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"

/** The partitions the records are spread over. */
export const partitions = Array.from({ length: 8 }, (_, i) => `p${i}`)
/** Ordering keys per partition. */
export const keysPerPartition = 16
/** Every record's payload. */
export const payload = new Uint8Array(64).fill(7)

/**
 * A maker of records: `count` records spread round-robin over the partitions; within each partition every
 * other record has an ordering key, cycling through `keysPerPartition` keys (so each partition is half
 * keyed, over all of its keys). Envelope ids are `<prefix><n>`, counted per maker.
 */
export const recordMaker = (prefix = "e"): ((count: number) => Array<NewOutboxRecord>) => {
  let envelope = 0
  const madePerPartition = partitions.map(() => 0)
  return (count) =>
    Array.from({ length: count }, (_, i) => {
      const n = envelope++
      const slot = i % partitions.length
      const partitionKey = partitions[slot] ?? "p0"
      const k = madePerPartition[slot] ?? 0
      madePerPartition[slot] = k + 1
      return new NewOutboxRecord(
        {
          partitionKey,
          envelopeId: `${prefix}${n}`,
          bindingId: "b",
          payload,
          ...(k % 2 === 0 ? { orderingKey: `k${(k >> 1) % keysPerPartition}` } : {})
        },
        true
      )
    })
}
