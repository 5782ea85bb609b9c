/**
 * The relay options of the PostgreSQL bench's throughput and process rounds (bench/postgres.ts,
 * bench/postgresRelayWorker.ts): claims of exactly 100 records (as the raw loop claims), discovery every
 * second (the first round runs at start, and the backlog's partitions exist by then), the default idle
 * back-off (a drainer idles only once its partition is empty), no dead-letter store.
 */
import type * as Relay from "../src/programs/Relay.js"

/** Records per claim, on both sides of the relay comparison. */
export const relayBatch = 100

/** The options of a bench relay. */
export const relayOptions = (owner: string, maxPartitions = 64) =>
  ({
    owner,
    leaseTtl: "30 seconds",
    maxPartitions,
    discoveryInterval: "1 second",
    drainer: {
      batchSize: relayBatch,
      maxBatchSize: relayBatch,
      maxConcurrency: 10,
      onExpired: "drop",
      onPermanentFailure: "drop",
      onPoison: "drop"
    }
  }) satisfies Relay.RelayOptions
