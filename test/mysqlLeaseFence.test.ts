/**
 * The MySQL / MariaDB lease fence (SPEC §6 step 5, §13): the shared lease fence tests
 * (test/support/LeaseFenceSuite.ts) over `MysqlLeaseFence`, each test in a fresh database; and the fence
 * over stores with table prefixes of their own.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { inject } from "vitest"
import { LeaseToken } from "../src/domain/LeaseToken.js"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as MysqlLeaseFence from "../src/layers/mysql/MysqlLeaseFence.js"
import * as MysqlLeaseStore from "../src/layers/mysql/MysqlLeaseStore.js"
import * as MysqlOutboxStore from "../src/layers/mysql/MysqlOutboxStore.js"
import { LeaseFence } from "../src/services/LeaseFence.js"
import { LeaseStore } from "../src/services/LeaseStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { leaseFenceSuite } from "./support/LeaseFenceSuite.js"
import { clientLayer, createDatabase } from "./support/MysqlServer.js"

const url = await createDatabase(inject("mysqlUrl"), "lease_fence")

leaseFenceSuite({
  name: "MySQL",
  outbox: (database) => MysqlOutboxStore.layerWith({ database }),
  leases: (database) => MysqlLeaseStore.layerWith({ database }),
  fence: (database) => MysqlLeaseFence.layerWith({ database }),
  client: () => clientLayer(url)
})

describe("MySQL lease fence options", () => {
  it.live("follows the outbox store's table prefix and the lease store's own prefix", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      const leases = yield* LeaseStore
      const fence = yield* LeaseFence
      const p = "f-prefix"
      const lease = yield* leases.acquire(p, "relay-a", "1 minute")
      yield* store.persist(
        ["a", "b"].map(
          (id) =>
            new NewOutboxRecord({ id, partitionKey: p, envelopeId: id, bindingId: "b", payload: new Uint8Array() })
        )
      )
      yield* store.claim(p, lease.token, 10)
      expect(yield* fence.complete(p, ["a", "b"], lease.token)).toEqual({
        _tag: "Held",
        completed: new Set(["a", "b"])
      })
      expect(yield* store.countClaimed(p)).toBe(0)
    }).pipe(
      Effect.provide(
        Layer.mergeAll(
          MysqlOutboxStore.layerWith({ tablePrefix: "app_" }),
          MysqlLeaseStore.layerWith({ tablePrefix: "relay_" }),
          MysqlLeaseFence.layerWith({ tablePrefix: "app_", leaseTablePrefix: "relay_" })
        ).pipe(Layer.provide(clientLayer(url)), Layer.orDie)
      )
    )
  )

  it.effect("a database or prefix that is not a plain name is InvalidConfiguration naming it", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(MysqlLeaseFence.make({ database: "x; DROP", leaseTablePrefix: "bad-prefix" }))
      expect(error._tag).toBe("InvalidConfiguration")
      expect(error.component).toBe("MysqlLeaseFence")
      expect(error.problems.join("\n")).toContain("database")
    }).pipe(Effect.provide(clientLayer(url)), Effect.orDie)
  )

  it.effect("a failing statement (no such table) is StoreUnavailable naming the operation and partition", () =>
    Effect.gen(function* () {
      const fence = yield* MysqlLeaseFence.make({ tablePrefix: "missing_" })
      const error = yield* Effect.flip(fence.complete("p-x", ["a"], new LeaseToken({ owner: "relay-a", version: 1 })))
      expect(error._tag).toBe("StoreUnavailable")
      expect(error.operation).toBe("complete")
      expect(error.partitionKey).toBe("p-x")
    }).pipe(Effect.provide(clientLayer(url)), Effect.orDie)
  )
})
