/**
 * Memory-specific behaviour of MemoryOutboxStore: retention, all-or-nothing multi-id operations,
 * selection cost independent of the backlog, copies in and out, and the indexes checked against the
 * reference selection (`ClaimOrder.selectFrom`) over long random operation sequences.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Equal from "effect/Equal"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import * as ClaimOrder from "../src/domain/ClaimOrder.js"
import { LeaseToken } from "../src/domain/LeaseToken.js"
import { NewOutboxRecord, OutboxRecord } from "../src/domain/OutboxRecord.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import type * as OutboxStore from "../src/services/OutboxStore.js"
import type { OutboxStoreService } from "../src/services/OutboxStore.js"

const token = (version: number, owner = "owner-a"): LeaseToken => new LeaseToken({ owner, version })

const record = (
  envelopeId: string,
  extra: {
    readonly id?: string
    readonly partitionKey?: string
    readonly orderingKey?: string
    readonly createdAt?: DateTime.Utc
    readonly expiresAt?: DateTime.Utc
    readonly payload?: Uint8Array
  } = {}
): NewOutboxRecord =>
  new NewOutboxRecord({
    partitionKey: extra.partitionKey ?? "p",
    envelopeId,
    bindingId: "b",
    payload: extra.payload ?? new Uint8Array([1, 2, 3]),
    ...(extra.id === undefined ? {} : { id: extra.id }),
    ...(extra.orderingKey === undefined ? {} : { orderingKey: extra.orderingKey }),
    ...(extra.createdAt === undefined ? {} : { createdAt: extra.createdAt }),
    ...(extra.expiresAt === undefined ? {} : { expiresAt: extra.expiresAt })
  })

const at = (millis: number): DateTime.Utc => DateTime.unsafeMake(millis)

const range = (n: number): Array<number> => Array.from({ length: n }, (_, i) => i)

/** Persists `n` keyless records in batches of 500, ids `r<offset + i>`, createdAt increasing. */
const persistBacklog = (store: OutboxStoreService, n: number, offset = 0) =>
  Effect.forEach(
    chunks(range(n), 500),
    (batch) =>
      store.persist(batch.map((i) => record(`e${offset + i}`, { id: `r${offset + i}`, createdAt: at(offset + i) }))),
    { discard: true }
  )

const chunks = <A>(as: ReadonlyArray<A>, size: number): Array<Array<A>> => {
  const out: Array<Array<A>> = []
  for (let i = 0; i < as.length; i += size) out.push(as.slice(i, i + size))
  return out
}

describe("MemoryOutboxStore", () => {
  describe("retention", () => {
    it.effect("evicts a completed record after retention and frees its identity", () =>
      Effect.gen(function* () {
        const { diagnostics, store } = yield* MemoryOutboxStore.makeInstrumented({ retention: "10 minutes" })
        yield* store.persist([record("e1", { id: "r1" })])
        const batch = yield* store.claim("p", token(1), 10)
        expect(batch.records.map((r) => r.id)).toEqual(["r1"])
        yield* store.complete(["r1"], token(1))

        // still retained: the identity is taken
        yield* TestClock.adjust(Duration.subtract(Duration.minutes(10), Duration.millis(1)))
        const duplicate = yield* Effect.flip(store.persist([record("e1", { id: "r2" })]))
        expect(duplicate._tag).toBe("DuplicateRecord")
        expect((yield* diagnostics).records).toBe(1)

        // retention elapsed: evicted, identity and id free again
        yield* TestClock.adjust(Duration.millis(1))
        const report = yield* store.persist([record("e1", { id: "r2" })])
        expect(report.persisted).toEqual(["r2"])
        const reused = yield* store.persist([record("e9", { id: "r1" })])
        expect(reused.persisted).toEqual(["r1"])
        const after = yield* diagnostics
        expect(after.records).toBe(2)
        expect(after.terminal).toBe(0)
      })
    )

    it.effect("evicts expired records after retention, measured from expiry", () =>
      Effect.gen(function* () {
        const { diagnostics, store } = yield* MemoryOutboxStore.makeInstrumented({ retention: "1 minute" })
        yield* store.persist([record("e1", { expiresAt: at(100) }), record("e2")])
        yield* TestClock.adjust("30 seconds")
        expect(yield* store.expire(at(1_000), "p", token(1))).toBe(1)
        yield* TestClock.adjust("59 seconds")
        expect((yield* diagnostics).records).toBe(2)
        yield* TestClock.adjust("1 second")
        expect((yield* diagnostics).records).toBe(1)
        const report = yield* store.persist([record("e1")])
        expect(report.persisted).toHaveLength(1)
      })
    )

    it.effect("defaults to one hour", () =>
      Effect.gen(function* () {
        const { diagnostics, store } = yield* MemoryOutboxStore.makeInstrumented()
        yield* store.persist([record("e1", { id: "r1" })])
        yield* store.claim("p", token(1), 1)
        yield* store.complete(["r1"], token(1))
        yield* TestClock.adjust("59 minutes")
        expect((yield* diagnostics).records).toBe(1)
        yield* TestClock.adjust("1 minute")
        expect((yield* diagnostics).records).toBe(0)
      })
    )

    it.effect("keeps fence state after eviction: the high-water mark still fences and seq keeps growing", () =>
      Effect.gen(function* () {
        const { diagnostics, store } = yield* MemoryOutboxStore.makeInstrumented({ retention: "1 second" })
        yield* store.persist([record("e1", { id: "r1" }), record("e2", { id: "r2" })])
        const first = yield* store.claim("p", token(5), 10)
        expect(first.records.map((r) => r.seq)).toEqual([1, 2])
        yield* store.complete(["r1", "r2"], token(5))
        yield* TestClock.adjust("2 seconds")
        expect((yield* diagnostics).records).toBe(0)

        const stale = yield* Effect.flip(store.claim("p", token(4), 10))
        expect(stale._tag).toBe("StaleFencingToken")
        if (stale._tag === "StaleFencingToken") expect(stale.highWaterMark).toBe(5)

        yield* store.persist([record("e1", { id: "r3" })])
        const again = yield* store.claim("p", token(5), 10)
        expect(again.records.map((r) => [r.id, r.seq])).toEqual([["r3", 3]])
      })
    )

    it.effect("a replaced terminal record is not evicted later in place of its replacement", () =>
      Effect.gen(function* () {
        const { diagnostics, store } = yield* MemoryOutboxStore.makeInstrumented({ retention: "1 minute" })
        yield* store.persist([record("e1", { id: "r1" })])
        yield* store.claim("p", token(1), 1)
        yield* store.complete(["r1"], token(1))
        const redriven = yield* store.persist([record("e1", { id: "r2" })], { replaceTerminal: true })
        expect(redriven.persisted).toEqual(["r2"])
        yield* TestClock.adjust("2 minutes")
        const diag = yield* diagnostics
        expect(diag.records).toBe(1)
        expect(yield* store.countPending("p")).toBe(1)
        const duplicate = yield* Effect.flip(store.persist([record("e1", { id: "r3" })]))
        expect(duplicate._tag).toBe("DuplicateRecord")
        expect((yield* store.claim("p", token(1), 5)).records.map((r) => r.id)).toEqual(["r2"])
      })
    )
  })

  describe("multi-id complete and release are all-or-nothing", () => {
    it.effect("complete with one mismatching id changes nothing and names only the mismatching ids", () =>
      Effect.gen(function* () {
        const store = yield* MemoryOutboxStore.make()
        yield* store.persist([record("e1", { id: "r1" }), record("e2", { id: "r2" }), record("e3", { id: "r3" })])
        yield* store.claim("p", token(1), 2)
        const error = yield* Effect.flip(store.complete(["r1", "nope", "r2", "r3"], token(1)))
        expect(error._tag).toBe("StaleFencingToken")
        if (error._tag === "StaleFencingToken") expect(error.recordIds).toEqual(["nope", "r3"])
        expect(yield* store.countClaimed("p")).toBe(2)
        expect(yield* store.countPending("p")).toBe(1)
        yield* store.complete(["r1", "r2"], token(1))
        expect(yield* store.countClaimed("p")).toBe(0)
      })
    )

    it.effect("release with an id held by another owner changes nothing", () =>
      Effect.gen(function* () {
        const store = yield* MemoryOutboxStore.make()
        yield* store.persist([record("e1", { id: "r1" }), record("e2", { id: "r2", partitionKey: "q" })])
        yield* store.claim("p", token(1), 1)
        yield* store.claim("q", token(1, "owner-b"), 1)
        const error = yield* Effect.flip(store.release(["r1", "r2"], token(1)))
        expect(error._tag === "StaleFencingToken" ? error.recordIds : undefined).toEqual(["r2"])
        expect(yield* store.countClaimed("p")).toBe(1)
        expect(yield* store.countClaimed("q")).toBe(1)
        // r1 is still claimed: a claim at the same version does not return it
        expect((yield* store.claim("p", token(1), 5)).records).toEqual([])
      })
    )

    it.effect("repeated ids in one call count once", () =>
      Effect.gen(function* () {
        const store = yield* MemoryOutboxStore.make()
        yield* store.persist([record("e1", { id: "r1" }), record("e2", { id: "r2" })])
        yield* store.claim("p", token(1), 2)
        yield* store.complete(["r1", "r1"], token(1))
        expect(yield* store.countClaimed("p")).toBe(1)
        expect(yield* store.countPending("p")).toBe(0)
        yield* store.release(["r2", "r2"], token(1))
        expect(yield* store.countPending("p")).toBe(1)
        expect(yield* store.countClaimed("p")).toBe(0)
      })
    )
  })

  describe("claim cost does not depend on the backlog", () => {
    const visitsOfClaim = (store: OutboxStoreService, diagnostics: Effect.Effect<MemoryOutboxStore.Diagnostics>) =>
      Effect.gen(function* () {
        const before = (yield* diagnostics).indexVisits
        const batch = yield* store.claim("p", token(1), 10)
        const after = (yield* diagnostics).indexVisits
        return { visits: after - before, ids: batch.records.map((r) => r.id) }
      })

    it.effect("a claim of 10 visits the same number of index entries at 1k and at 20k pending", () =>
      Effect.gen(function* () {
        const small = yield* MemoryOutboxStore.makeInstrumented()
        const large = yield* MemoryOutboxStore.makeInstrumented()
        yield* persistBacklog(small.store, 1_000)
        yield* persistBacklog(large.store, 20_000)
        const a = yield* visitsOfClaim(small.store, small.diagnostics)
        const b = yield* visitsOfClaim(large.store, large.diagnostics)
        expect(a.ids).toEqual(range(10).map((i) => `r${i}`))
        expect(b.ids).toEqual(a.ids)
        expect(b.visits).toBe(a.visits)
        expect(b.visits).toBeLessThanOrEqual(12)
      })
    )

    it.effect("completed records in front of a 10k backlog are not visited again", () =>
      Effect.gen(function* () {
        const { diagnostics, store } = yield* MemoryOutboxStore.makeInstrumented()
        yield* persistBacklog(store, 10_000)
        // drain the first 5k, completing each batch in reverse order
        for (let i = 0; i < 10; i++) {
          const batch = yield* store.claim("p", token(1), 500)
          yield* store.complete(batch.records.map((r) => r.id).reverse(), token(1))
        }
        const { ids, visits } = yield* visitsOfClaim(store, diagnostics)
        expect(ids).toEqual(range(10).map((i) => `r${5_000 + i}`))
        expect(visits).toBeLessThanOrEqual(12)
      })
    )

    it.effect("records completed out of order in the middle are compacted away", () =>
      Effect.gen(function* () {
        const { diagnostics, store } = yield* MemoryOutboxStore.makeInstrumented()
        yield* persistBacklog(store, 10_000)
        // hold the first 10 (claimed by version 1), complete the next 5k in scattered order
        const held = yield* store.claim("p", token(1), 10)
        const middle = yield* store.claim("p", token(1), 5_000)
        const ids = middle.records.map((r) => r.id)
        const scattered = [...ids.filter((_, i) => i % 2 === 0), ...ids.filter((_, i) => i % 2 === 1)]
        for (const batch of chunks(scattered, 100)) yield* store.complete(batch, token(1))
        // the claim steps over the 10 held records, not over 5k removed ones
        const { ids: next, visits } = yield* visitsOfClaim(store, diagnostics)
        expect(next).toEqual(range(10).map((i) => `r${5_010 + i}`))
        expect(visits).toBeLessThanOrEqual(10 + 10 + 5_000 / 4)
        expect(held.records).toHaveLength(10)
      })
    )

    it.effect("a claim over 2k ordering keys visits O(limit) entries", () =>
      Effect.gen(function* () {
        const { diagnostics, store } = yield* MemoryOutboxStore.makeInstrumented()
        for (const batch of chunks(range(20_000), 500)) {
          yield* store.persist(
            batch.map((i) => record(`e${i}`, { id: `r${i}`, orderingKey: `k${i % 2_000}`, createdAt: at(i) }))
          )
        }
        const { ids, visits } = yield* visitsOfClaim(store, diagnostics)
        expect(ids).toEqual(range(10).map((i) => `r${i}`))
        expect(visits).toBeLessThanOrEqual(40)
      })
    )
  })

  describe("indexes", () => {
    it.effect("records persisted out of age order are claimed in age order", () =>
      Effect.gen(function* () {
        const store = yield* MemoryOutboxStore.make()
        const times = [50, 10, 30, 20, 40, 5, 60, 0]
        yield* store.persist(times.map((t) => record(`e${t}`, { id: `r${t}`, createdAt: at(t) })))
        const keyed = [35, 15, 25]
        yield* store.persist(keyed.map((t) => record(`k${t}`, { id: `k${t}`, orderingKey: "k", createdAt: at(t) })))
        const batch = yield* store.claim("p", token(1), 100)
        expect(batch.records.map((r) => r.id)).toEqual([
          "r0",
          "r5",
          "r10",
          "k15",
          "r20",
          "k25",
          "r30",
          "k35",
          "r40",
          "r50",
          "r60"
        ])
      })
    )

    it.effect("an older record of a key persisted later becomes the head and blocks the previous head", () =>
      Effect.gen(function* () {
        const store = yield* MemoryOutboxStore.make()
        yield* store.persist([record("young", { id: "young", orderingKey: "k", createdAt: at(100) })])
        yield* store.persist([record("old", { id: "old", orderingKey: "k", createdAt: at(10) })])
        const first = yield* store.claim("p", token(1), 1)
        expect(first.records.map((r) => r.id)).toEqual(["old"])
        expect((yield* store.claim("p", token(1), 1)).records).toEqual([])
        yield* store.complete(["old"], token(1))
        expect((yield* store.claim("p", token(1), 1)).records.map((r) => r.id)).toEqual(["young"])
      })
    )

    it.effect("queryPending merges keyless records and key queues in age order", () =>
      Effect.gen(function* () {
        const store = yield* MemoryOutboxStore.make()
        yield* store.persist([
          record("a", { id: "a", createdAt: at(1) }),
          record("b", { id: "b", orderingKey: "x", createdAt: at(2) }),
          record("c", { id: "c", orderingKey: "y", createdAt: at(3) }),
          record("d", { id: "d", orderingKey: "x", createdAt: at(4) }),
          record("e", { id: "e", createdAt: at(5) }),
          record("f", { id: "f", orderingKey: "y", createdAt: at(6) })
        ])
        yield* store.claim("p", token(1), 1)
        const preview = yield* store.queryPending("p", 4)
        expect(preview.map((r) => r.id)).toEqual(["b", "c", "d", "e"])
        expect(preview.every((r) => r.status === "pending")).toBe(true)
        expect((yield* store.queryPending("p", 100)).map((r) => r.id)).toEqual(["b", "c", "d", "e", "f"])
        expect(yield* store.queryPending("nothing-here", 10)).toEqual([])
      })
    )

    it.effect("expire walks the expiry index: only pending records due strictly before `before`", () =>
      Effect.gen(function* () {
        const { diagnostics, store } = yield* MemoryOutboxStore.makeInstrumented()
        yield* store.persist([
          record("e1", { id: "r1", expiresAt: at(10) }),
          record("e2", { id: "r2", expiresAt: at(20) }),
          record("e3", { id: "r3", expiresAt: at(30), orderingKey: "k" }),
          record("e4", { id: "r4" })
        ])
        yield* persistBacklog(store, 5_000, 100)
        yield* store.claim("p", token(1), 1)
        const before = (yield* diagnostics).indexVisits
        expect(yield* store.expire(at(30), "p", token(1))).toBe(1)
        expect((yield* diagnostics).indexVisits - before).toBeLessThanOrEqual(4)
        expect(yield* store.countClaimed("p")).toBe(1)
        expect((yield* store.queryPending("p", 2)).map((r) => r.id)).toEqual(["r3", "r4"])
      })
    )

    it.effect("listPartitions lists only partitions holding non-terminal records", () =>
      Effect.gen(function* () {
        const store = yield* MemoryOutboxStore.make()
        yield* store.persist([record("e1", { id: "r1" }), record("e2", { id: "r2", partitionKey: "q" })])
        yield* store.claim("empty", token(1), 10)
        yield* store.claim("q", token(1), 10)
        const listed = Chunk.toArray(yield* Stream.runCollect(store.listPartitions)).sort()
        expect(listed).toEqual(["p", "q"])
        yield* store.complete(["r2"], token(1))
        expect(Chunk.toArray(yield* Stream.runCollect(store.listPartitions))).toEqual(["p"])
      })
    )
  })

  describe("copies", () => {
    it.effect("payloads are copied in: a producer reusing its buffer does not change what is stored", () =>
      Effect.gen(function* () {
        const store = yield* MemoryOutboxStore.make()
        const payload = new Uint8Array([1, 2, 3])
        yield* store.persist([record("e1", { id: "r1", payload })])
        payload[0] = 99
        const claimed = yield* store.claim("p", token(1), 1)
        expect(claimed.records[0]?.payload).toEqual(new Uint8Array([1, 2, 3]))
        expect((yield* store.queryPending("p", 1)).length).toBe(0)
        yield* store.release(["r1"], token(1))
        expect((yield* store.queryPending("p", 1))[0]?.payload).toEqual(new Uint8Array([1, 2, 3]))
      })
    )

    it.effect("returned records are OutboxRecord instances, equal to constructor-built ones and schema-valid", () =>
      Effect.gen(function* () {
        const store = yield* MemoryOutboxStore.make()
        yield* store.persist([record("e1", { id: "r1", orderingKey: "k", expiresAt: at(10_000) })])
        const [claimed] = (yield* store.claim("p", token(3), 1)).records
        expect(claimed).toBeInstanceOf(OutboxRecord)
        expect(claimed === undefined ? false : Schema.is(OutboxRecord)(claimed)).toBe(true)
        if (claimed !== undefined) {
          expect(Equal.equals(claimed, new OutboxRecord({ ...claimed }, true))).toBe(true)
          expect(Object.keys(claimed)).toEqual(Object.keys(new OutboxRecord({ ...claimed }, true)))
        }
        expect(claimed?.claimVersion).toBe(3)
        expect(claimed?.orderingKey).toEqual(Option.some("k"))
      })
    )

    it.effect("returned records are snapshots: later transitions do not change them", () =>
      Effect.gen(function* () {
        const store = yield* MemoryOutboxStore.make()
        yield* store.persist([record("e1", { id: "r1" })])
        const batch = yield* store.claim("p", token(1), 1)
        yield* store.complete(["r1"], token(1))
        expect(batch.records[0]?.status).toBe("claimed")
        expect(batch.records[0]?.completedAt).toEqual(Option.none())
      })
    )
  })

  describe("atomicity", () => {
    it.effect("R-CLAIM-9 concurrent claims never hand out one record twice", () =>
      Effect.gen(function* () {
        const store = yield* MemoryOutboxStore.make()
        yield* persistBacklog(store, 1_000)
        const batches = yield* Effect.all(
          range(40).map(() => store.claim("p", token(1), 30)),
          { concurrency: "unbounded" }
        )
        const ids = batches.flatMap((b) => b.records.map((r) => r.id))
        expect(ids).toHaveLength(1_000)
        expect(new Set(ids).size).toBe(1_000)
      })
    )

    it.effect("id used by a different identity fails the batch and stores nothing of it", () =>
      Effect.gen(function* () {
        const store = yield* MemoryOutboxStore.make()
        yield* store.persist([record("e1", { id: "r1" })])
        const error = yield* Effect.flip(
          store.persist([record("e2", { id: "r2" }), record("e3", { id: "r1", partitionKey: "q" })])
        )
        expect(error._tag).toBe("InvalidRecord")
        if (error._tag === "InvalidRecord") expect(error.index).toBe(1)
        expect(yield* store.countPending("p")).toBe(1)
        expect(yield* store.countPending("q")).toBe(0)
        expect((yield* store.persist([record("e2", { id: "r2" })])).persisted).toEqual(["r2"])
      })
    )
  })

  describe("indexes agree with the reference selection over random operations", () => {
    const modelRun = (seed: number, staleClaimAfterMillis: number | undefined) =>
      Effect.gen(function* () {
        const store = yield* MemoryOutboxStore.make(
          staleClaimAfterMillis === undefined ? {} : { staleClaimAfter: Duration.millis(staleClaimAfterMillis) }
        )
        let state = seed
        const rand = (n: number): number => {
          state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0
          return (state >>> 8) % n
        }
        interface Model extends ClaimOrder.ClaimFacts {
          readonly id: string
          readonly expiresMillis: number | undefined
          status: ClaimOrder.ClaimFacts["status"]
          claimVersion: number
          claimedAt: Option.Option<DateTime.Utc>
          claimedBy: string | undefined
        }
        const model: Array<Model> = []
        let seq = 0
        let version = 1
        let clock = 0
        let nextId = 0
        const keys = ["a", "b", "c", "d"]
        const current = () => model.filter(ClaimOrder.isNonTerminal)
        for (let step = 0; step < 1_500; step++) {
          const op = rand(100)
          if (op < 35) {
            const size = 1 + rand(8)
            const fresh = range(size).map(() => {
              const i = nextId++
              const key = rand(3) === 0 ? undefined : keys[rand(keys.length)]
              const expires = rand(5) === 0 ? clock + rand(400) : undefined
              return {
                i,
                key,
                expires,
                createdAt: at(Math.max(0, clock + 200 - rand(300)))
              }
            })
            yield* store.persist(
              fresh.map((f) =>
                record(`e${f.i}`, {
                  id: `r${f.i}`,
                  createdAt: f.createdAt,
                  ...(f.key === undefined ? {} : { orderingKey: f.key }),
                  ...(f.expires === undefined ? {} : { expiresAt: at(f.expires) })
                })
              )
            )
            for (const f of fresh) {
              model.push({
                id: `r${f.i}`,
                envelopeId: `e${f.i}`,
                createdAt: f.createdAt,
                seq: ++seq,
                status: "pending",
                orderingKey: Option.fromNullable(f.key),
                claimVersion: 0,
                claimedAt: Option.none(),
                claimedBy: undefined,
                expiresMillis: f.expires
              })
            }
          } else if (op < 60) {
            if (rand(15) === 0) version++
            const limit = rand(25)
            const rule = { version, nowMillis: clock, staleClaimAfterMillis }
            const expected = ClaimOrder.selectFrom(current(), limit, rule)
            const batch = yield* store.claim("p", token(version), limit)
            expect(batch.records.map((r) => r.id)).toEqual(expected.map((m) => m.id))
            expect(batch.records.map((r) => r.seq)).toEqual(expected.map((m) => m.seq))
            for (const m of expected) {
              m.status = "claimed"
              m.claimVersion = version
              m.claimedAt = Option.some(at(clock))
              m.claimedBy = "owner-a"
            }
          } else if (op < 85) {
            const claimed = current().filter((m) => m.status === "claimed")
            const picked = claimed.filter(() => rand(3) === 0)
            const ids = picked.map((m) => m.id)
            const valid = picked.every((m) => m.claimVersion === version)
            const complete = rand(3) !== 0
            const result = yield* Effect.either(
              complete ? store.complete(ids, token(version)) : store.release(ids, token(version))
            )
            expect(result._tag).toBe(valid ? "Right" : "Left")
            if (valid) {
              for (const m of picked) {
                if (complete) {
                  m.status = "completed"
                } else {
                  m.status = "pending"
                  m.claimedAt = Option.none()
                  m.claimedBy = undefined
                }
              }
            }
          } else if (op < 90) {
            const before = clock + rand(200)
            const due = current().filter(
              (m) => m.status === "pending" && m.expiresMillis !== undefined && m.expiresMillis < before
            )
            expect(yield* store.expire(at(before), "p", token(version))).toBe(due.length)
            for (const m of due) m.status = "expired"
          } else if (op < 95) {
            const pending = current()
              .filter((m) => m.status === "pending")
              .sort(ClaimOrder.compareAge)
            const limit = 1 + rand(10)
            const preview = yield* store.queryPending("p", limit)
            expect(preview.map((r) => r.id)).toEqual(pending.slice(0, limit).map((m) => m.id))
          } else {
            const delta = rand(150)
            clock += delta
            yield* TestClock.adjust(Duration.millis(delta))
          }
          const live = current()
          expect(yield* store.countPending("p")).toBe(live.filter((m) => m.status === "pending").length)
          expect(yield* store.countClaimed("p")).toBe(live.filter((m) => m.status === "claimed").length)
        }
        return model.length
      })

    it.effect("version-only reclaim", () =>
      Effect.gen(function* () {
        for (const seed of [1, 2, 3]) expect(yield* modelRun(seed, undefined)).toBeGreaterThan(1_000)
      })
    )

    it.effect("with wall-clock stale reclaim", () =>
      Effect.gen(function* () {
        for (const seed of [4, 5, 6]) expect(yield* modelRun(seed, 300)).toBeGreaterThan(1_000)
      })
    )
  })
  describe("options", () => {
    const invalid: ReadonlyArray<readonly [string, OutboxStore.StoreOptions]> = [
      ["a zero staleClaimAfter", { staleClaimAfter: 0 }],
      ["a negative staleClaimAfter", { staleClaimAfter: "-5 seconds" }],
      ["a NaN staleClaimAfter", { staleClaimAfter: Number.NaN }],
      ["an infinite staleClaimAfter", { staleClaimAfter: Duration.infinity }],
      ["a zero retention", { retention: 0 }],
      ["an infinite retention", { retention: Number.POSITIVE_INFINITY }]
    ]
    for (const [label, options] of invalid) {
      it.effect(`${label} fails the layer with InvalidConfiguration`, () =>
        Effect.gen(function* () {
          const error = yield* Effect.flip(MemoryOutboxStore.make(options))
          expect(error._tag).toBe("InvalidConfiguration")
          expect(error.component).toBe("MemoryOutboxStore")
          expect(error.problems).toHaveLength(1)
        })
      )
    }

    it.effect("valid options build a store", () =>
      Effect.gen(function* () {
        const store = yield* MemoryOutboxStore.make({ staleClaimAfter: "30 seconds", retention: "1 minute" })
        expect(yield* store.countPending("p")).toBe(0)
      })
    )
  })
})
