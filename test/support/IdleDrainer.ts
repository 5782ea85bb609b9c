/**
 * A drainer parked in a long idle pause, for the wake-up tests: only a wake-up (the `WakeHub`, a
 * `WakeSignal`), never its back-off, can bring a record forward while a test runs.
 */
import * as Effect from "effect/Effect"
import * as Drainer from "../../src/programs/Drainer.js"
import { LeaseStore } from "../../src/services/LeaseStore.js"

/**
 * Acquires the lease of `partitionKey` for `owner` and forks the loop of a drainer of it whose idle back-off
 * is 10 minutes from the first pause; returns the loop's fiber. The caller lets it reach its pause (its
 * first claim comes back empty) as its clock requires.
 */
export const idleDrainer = (partitionKey: string, owner: string) =>
  Effect.gen(function* () {
    const leases = yield* LeaseStore
    yield* leases.acquire(partitionKey, owner, "1 hour")
    const drainer = yield* Drainer.make({
      partitionKey,
      owner,
      idleBackoffMin: "10 minutes",
      idleBackoffMax: "10 minutes",
      onExpired: "drop",
      onPermanentFailure: "drop",
      onPoison: "drop"
    })
    return yield* Effect.fork(drainer.run)
  })
