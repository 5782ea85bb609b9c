/**
 * The lease and dead-letter tests every server SQL backend (PostgreSQL, MySQL) runs beyond the shared
 * contracts, written once: acquirers racing on separate connections, lease reads grouped per turn of the
 * event loop, and redrive's single transaction (SPEC §4, §5).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import { DeadLetterStore } from "../../src/services/DeadLetterStore.js"
import { LeaseStore } from "../../src/services/LeaseStore.js"
import { OutboxStore } from "../../src/services/OutboxStore.js"
import { entry } from "../contract/deadletter/DeadLetterSupport.js"

/** What differs per backend. Every `namespace` is a schema (PostgreSQL) or a database (MySQL). */
export interface SqlLeaseDlqOptions {
  /** Backend name as the describe block shows it. */
  readonly name: string
  /** A lease store in `namespace` over a pool of `connections`, with its client. */
  readonly leases: (namespace: string, connections?: number) => Layer.Layer<LeaseStore | SqlClient.SqlClient, unknown>
  /** Dead-letter and outbox stores in `namespace`, with their client. */
  readonly deadLetters: (namespace: string) => Layer.Layer<DeadLetterStore | OutboxStore | SqlClient.SqlClient, unknown>
  /** Installs a trigger on `<namespace>.outbox` that rejects inserts of partition `rb`. */
  readonly rejectPartitionRb: (namespace: string) => Effect.Effect<void, unknown, SqlClient.SqlClient>
  /** Drops that trigger. */
  readonly dropReject: (namespace: string) => Effect.Effect<void, unknown, SqlClient.SqlClient>
}

/** Registers the tests for one backend. */
export const sqlLeaseDlqSuite = (options: SqlLeaseDlqOptions): void => {
  describe(`${options.name} lease and dead-letter stores`, () => {
    it.live("acquirers racing on separate connections: exactly one wins, the rest see LeaseHeld", () =>
      Effect.gen(function* () {
        const results = yield* Effect.forEach(
          Array.from({ length: 8 }, (_, i) => i),
          (i) =>
            Effect.flatMap(LeaseStore, (leases) => leases.acquire("race", `owner-${i}`, "1 minute")).pipe(
              Effect.provide(Layer.orDie(options.leases("racing", 1))),
              Effect.either
            ),
          { concurrency: "unbounded" }
        )
        const won = results.filter(Either.isRight)
        expect(won).toHaveLength(1)
        for (const r of results) if (Either.isLeft(r)) expect(r.left._tag).toBe("LeaseHeld")
        expect(won[0]?.right.token.version).toBe(1)
      })
    )

    it.live(
      "redrive persists and deletes in one transaction: a failure in the middle leaves entries and outbox as they were",
      () =>
        Effect.gen(function* () {
          const dlq = yield* DeadLetterStore
          const outbox = yield* OutboxStore
          yield* dlq.write(entry({ id: "a", partitionKey: "ra", failedAt: 1_700_000_000_000 }))
          yield* dlq.write(entry({ id: "b", partitionKey: "rb", failedAt: 1_700_000_000_000 }))
          // the second entry's persist fails (a trigger rejects partition rb), after the first was redriven
          yield* Effect.orDie(options.rejectPartitionRb("redrive_tx"))
          const error = yield* Effect.flip(dlq.redrive(["a", "b"]))
          expect(error._tag).toBe("StoreUnavailable")
          expect((yield* dlq.list({})).map((e) => e.id)).toEqual(["a", "b"])
          expect(yield* outbox.countPending("ra")).toBe(0)
          yield* Effect.orDie(options.dropReject("redrive_tx"))
          const redriven = yield* dlq.redrive(["a", "b"])
          expect(redriven).toHaveLength(2)
          expect(yield* dlq.list({})).toEqual([])
          expect(yield* outbox.countPending("ra")).toBe(1)
          expect(yield* outbox.countPending("rb")).toBe(1)
        }).pipe(Effect.provide(Layer.orDie(options.deadLetters("redrive_tx"))))
    )

    it.live(
      "current: concurrent reads of several partitions each get their own lease; a read asked after a renew sees it",
      () =>
        Effect.gen(function* () {
          const leases = yield* LeaseStore
          const keys = ["g0", "g1", "g2", "g3"]
          const held = yield* Effect.forEach(keys, (pk, i) => leases.acquire(pk, `owner-${i}`, "1 minute"))
          // asked in the same turn: one group
          const read = yield* Effect.forEach([...keys, "g-none", ...keys], (pk) => Effect.either(leases.current(pk)), {
            concurrency: "unbounded"
          })
          const found = read.map((r) =>
            Either.isRight(r) ? `${r.right.token.owner}@${r.right.token.version}` : r.left._tag
          )
          const owners = keys.map((_, i) => `owner-${i}@1`)
          expect(found).toEqual([...owners, "LeaseNotFound", ...owners])
          // a read asked after a write completed reads after it, also when other reads are under way
          const before = held[2]?.expiresAt
          const renewed = yield* leases.renew("g2", { owner: "owner-2", version: 1 }, "10 minutes")
          const after = yield* Effect.forEach(keys, (pk) => leases.current(pk), { concurrency: "unbounded" })
          expect(after[2]?.expiresAt).toEqual(renewed.expiresAt)
          expect(after[2]?.expiresAt).not.toEqual(before)
          yield* leases.release("g1", { owner: "owner-1", version: 1 })
          expect((yield* Effect.flip(leases.current("g1")))._tag).toBe("LeaseNotFound")
        }).pipe(Effect.provide(Layer.orDie(options.leases("grouped"))))
    )

    it.live(
      "current: a grouped read that fails fails every read of its group as StoreUnavailable of its partition",
      () =>
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const leases = yield* LeaseStore
          yield* leases.acquire("f0", "owner", "1 minute")
          yield* sql.unsafe(`DROP TABLE grouped_fail.outbox_lease`)
          const failed = yield* Effect.forEach(["f0", "f1", "f2"], (pk) => Effect.flip(leases.current(pk)), {
            concurrency: "unbounded"
          })
          expect(failed.map((e) => e._tag)).toEqual(["StoreUnavailable", "StoreUnavailable", "StoreUnavailable"])
          expect(failed.map((e) => (e._tag === "StoreUnavailable" ? e.partitionKey : undefined))).toEqual([
            "f0",
            "f1",
            "f2"
          ])
          // the next group runs again (none is left waiting on the failed one)
          expect((yield* Effect.flip(leases.current("f0")))._tag).toBe("StoreUnavailable")
        }).pipe(Effect.provide(Layer.orDie(options.leases("grouped_fail"))))
    )
  })
}
