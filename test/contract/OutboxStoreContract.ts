/**
 * The shared `OutboxStore` contract suite (SPEC §2), written once and run against every backend.
 *
 * Each test builds its own layer with `makeLayer(...)` and uses its own unique partition keys, so a
 * backend may share one table or database across the tests of a file. Tests run with `it.effect`
 * (TestClock): time only moves when a test moves it.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as DateTime from "effect/DateTime"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import { randomBytes } from "node:crypto"
import type { LeaseTokenLike } from "../../src/domain/LeaseToken.js"
import { NewOutboxRecord, type OutboxRecord } from "../../src/domain/OutboxRecord.js"
import { type ClaimBatch, OutboxStore, type OutboxStoreService } from "../../src/services/OutboxStore.js"

/**
 * What a backend can do beyond the common contract; tests of a capability run only where it holds.
 */
export interface ContractCapabilities {
  /** backend honours staleClaimAfter (R-CLAIM-6) */
  readonly staleReclaim: boolean
  /** backend stamps firstAttemptedAt */
  readonly firstAttempt: boolean
  /** complete/release with several ids is all-or-nothing (memory only) */
  readonly multiIdAtomic: boolean
  /** payload size limit of the backend, if any (for an InvalidRecord test) */
  readonly maxPayloadBytes?: number
}

/**
 * Options a test asks of the layer factory.
 */
export interface ContractLayerOptions {
  readonly staleClaimAfter?: Duration.DurationInput
}

/** The invalid tokens every fenced operation must reject before touching state (R-CLAIM-1, R-DONE-1). */
const invalidTokens: ReadonlyArray<LeaseTokenLike> = [
  { owner: "", version: 1 },
  { owner: "x", version: 0 },
  { owner: "", version: 0 },
  { owner: "x", version: -1 },
  { owner: "x", version: 1.5 },
  { owner: "", version: 7 }
]

const START = 1_700_000_000_000

const token = (owner: string, version: number): LeaseTokenLike => ({ owner, version })

const payloadOf = (text: string): Uint8Array => new TextEncoder().encode(text)

const millisOf = (value: Option.Option<DateTime.Utc>): number | undefined =>
  Option.getOrUndefined(Option.map(value, DateTime.toEpochMillis))

const idsOf = (batch: ClaimBatch): ReadonlyArray<string> => batch.records.map((record) => record.id)

interface RecordSpec {
  readonly env: string
  readonly binding?: string
  readonly id?: string
  readonly key?: string
  readonly createdAt?: number
  readonly expiresAt?: number
  readonly payload?: Uint8Array
}

/**
 * Registers the contract suite for one backend.
 *
 * @param name suite name (also used in partition keys)
 * @param makeLayer builds a fresh store layer for one test
 * @param capabilities what the backend supports beyond the common contract
 */
export const outboxStoreContract = (
  name: string,
  makeLayer: (options: ContractLayerOptions) => Layer.Layer<OutboxStore, unknown>,
  capabilities: ContractCapabilities
): void => {
  const runId = randomBytes(4).toString("hex")
  const prefix = name.replace(/[^A-Za-z0-9]/g, "_")
  let counter = 0
  /** A partition key no other test of this run uses. */
  const freshPartition = (label: string): string => `${prefix}-${label}-${runId}-${++counter}`

  /** The id a record spec gets in partition `pk` (unique across the run because `pk` is). */
  const idFor = (pk: string, spec: RecordSpec): string => spec.id ?? `${pk}.${spec.env}.${spec.binding ?? "b"}`

  const record = (pk: string, spec: RecordSpec): NewOutboxRecord =>
    new NewOutboxRecord({
      id: idFor(pk, spec),
      partitionKey: pk,
      envelopeId: spec.env,
      bindingId: spec.binding ?? "b",
      payload: spec.payload ?? payloadOf(`payload of ${spec.env}`),
      ...(spec.key !== undefined ? { orderingKey: spec.key } : {}),
      ...(spec.createdAt !== undefined ? { createdAt: DateTime.unsafeMake(spec.createdAt) } : {}),
      ...(spec.expiresAt !== undefined ? { expiresAt: DateTime.unsafeMake(spec.expiresAt) } : {})
    })

  const records = (pk: string, specs: ReadonlyArray<RecordSpec | string>): Array<NewOutboxRecord> =>
    specs.map((spec) => record(pk, typeof spec === "string" ? { env: spec } : spec))

  /** Persists envelopes `envs` (keyless unless given as specs) and returns their ids in order. */
  const seed = (store: OutboxStoreService, pk: string, specs: ReadonlyArray<RecordSpec | string>) =>
    Effect.gen(function* () {
      const batch = records(pk, specs)
      yield* store.persist(batch)
      return batch.map((r) => r.id ?? "")
    })

  const pendingIds = (store: OutboxStoreService, pk: string) =>
    Effect.map(store.queryPending(pk, 1000), (rows) => rows.map((r) => r.id))

  /** An observable summary of a partition: pending ids in age order with their claim facts, and counts. */
  const snapshot = (store: OutboxStoreService, pk: string) =>
    Effect.gen(function* () {
      const pending = yield* store.queryPending(pk, 1000)
      return {
        pending: pending.map((r) => ({
          id: r.id,
          status: r.status,
          claimVersion: r.claimVersion,
          replayCount: r.replayCount,
          claimedBy: Option.getOrUndefined(r.claimedBy)
        })),
        countPending: yield* store.countPending(pk),
        countClaimed: yield* store.countClaimed(pk)
      }
    })

  const findPending = (store: OutboxStoreService, pk: string, id: string) =>
    Effect.map(store.queryPending(pk, 1000), (rows) => rows.find((r) => r.id === id))

  /** Runs a test body against a fresh store, with the clock set to a realistic instant. */
  const withStore = <A, E>(
    body: (store: OutboxStoreService) => Effect.Effect<A, E>,
    options: ContractLayerOptions = {}
  ) =>
    Effect.gen(function* () {
      yield* TestClock.setTime(START)
      const store = yield* OutboxStore
      return yield* body(store)
    }).pipe(Effect.provide(makeLayer(options)))

  const stale = { staleClaimAfter: "30 seconds" } as const

  describe(`OutboxStore contract: ${name}`, () => {
    // ---------------------------------------------------------------- persist

    describe("persist", () => {
      it.effect("R-PERSIST-2 an empty batch succeeds and stores nothing", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("empty")
            const report = yield* store.persist([])
            expect(report.persisted).toEqual([])
            expect(report.skipped).toEqual([])
            expect(yield* store.countPending(pk)).toBe(0)
          })
        )
      )

      it.effect("R-PERSIST-1 a new batch is stored as pending and reported as persisted", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("new")
            const batch = records(pk, ["a", "b", "c"])
            const report = yield* store.persist(batch)
            expect(report.persisted).toEqual(batch.map((r) => r.id))
            expect(report.skipped).toEqual([])
            expect(report.existingIds).toEqual([])
            expect(yield* store.countPending(pk)).toBe(3)
            expect(yield* pendingIds(store, pk)).toEqual(batch.map((r) => r.id))
          })
        )
      )

      it.effect(
        "R-PERSIST-1 partial overlap stores the new records and keeps the original id of the existing one",
        () =>
          withStore((store) =>
            Effect.gen(function* () {
              const pk = freshPartition("overlap")
              const [a, b] = yield* seed(store, pk, ["a", "b"])
              const again = record(pk, { env: "b", id: `${pk}.b.second` })
              const fresh = record(pk, { env: "c" })
              const report = yield* store.persist([again, fresh])
              expect(report.persisted).toEqual([fresh.id])
              expect(report.skipped).toEqual([again.id])
              expect(report.existingIds).toEqual([b])
              const stored = yield* pendingIds(store, pk)
              expect(stored).toEqual([a, b, fresh.id])
              expect(stored).not.toContain(again.id)
            })
          )
      )

      it.effect("R-PERSIST-1 an existing identity is never overwritten (payload and fields stay)", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("nooverwrite")
            yield* store.persist([record(pk, { env: "a", payload: payloadOf("first") })])
            yield* store.persist([
              record(pk, { env: "a", id: `${pk}.other`, payload: payloadOf("second"), key: "K" }),
              record(pk, { env: "z" })
            ])
            const stored = yield* findPending(store, pk, `${pk}.a.b`)
            expect(stored).toBeDefined()
            expect(new TextDecoder().decode(stored?.payload)).toBe("first")
            expect(Option.isNone(stored?.orderingKey ?? Option.some("missing"))).toBe(true)
          })
        )
      )

      it.effect("R-PERSIST-1 identity is scoped to the partition", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const p1 = freshPartition("scope1")
            const p2 = freshPartition("scope2")
            const r1 = record(p1, { env: "same", binding: "bind" })
            const r2 = record(p2, { env: "same", binding: "bind" })
            expect((yield* store.persist([r1])).persisted).toEqual([r1.id])
            expect((yield* store.persist([r2])).persisted).toEqual([r2.id])
            expect(yield* store.countPending(p1)).toBe(1)
            expect(yield* store.countPending(p2)).toBe(1)
          })
        )
      )

      it.effect("R-PERSIST-1 identity includes the binding: one envelope fans out to several bindings", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("fanout")
            const batch = records(pk, [
              { env: "e", binding: "one" },
              { env: "e", binding: "two" },
              { env: "e", binding: "three" }
            ])
            const report = yield* store.persist(batch)
            expect(report.persisted).toHaveLength(3)
            expect(yield* store.countPending(pk)).toBe(3)
          })
        )
      )

      it.effect("R-PERSIST-1 a completed record's identity is still skipped", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("terminaldup")
            const [a] = yield* seed(store, pk, ["a"])
            const t = token("owner", 1)
            yield* store.claim(pk, t, 10)
            yield* store.complete([a ?? ""], t)
            const error = yield* Effect.flip(store.persist([record(pk, { env: "a", id: `${pk}.again` })]))
            expect(error._tag).toBe("DuplicateRecord")
            expect(yield* store.countPending(pk)).toBe(0)
          })
        )
      )

      it.effect("R-PERSIST-1 replaceTerminal (redrive, SPEC §5) replaces a completed record of the identity", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("replacecompleted")
            const [a] = yield* seed(store, pk, [{ env: "a", key: "K" }])
            const t = token("o", 1)
            yield* store.claim(pk, t, 10)
            yield* store.complete([a ?? ""], t)
            yield* TestClock.adjust("5 seconds")
            const again = record(pk, { env: "a", id: `${pk}.redriven`, key: "K" })
            const report = yield* store.persist([again], { replaceTerminal: true })
            expect(report.persisted).toEqual([again.id])
            expect(report.skipped).toEqual([])
            const stored = yield* findPending(store, pk, `${pk}.redriven`)
            expect(stored?.replayCount).toBe(0)
            expect(stored?.claimVersion).toBe(0)
            expect(DateTime.toEpochMillis(stored?.createdAt ?? DateTime.unsafeMake(0))).toBe(START + 5_000)
            expect(yield* pendingIds(store, pk)).toEqual([again.id])
            const batch = yield* store.claim(pk, t, 10)
            expect(idsOf(batch)).toEqual([again.id])
            expect(batch.records[0]?.replayCount).toBe(1)
          })
        )
      )

      it.effect("R-PERSIST-1 replaceTerminal replaces an expired record too", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("replaceexpired")
            yield* seed(store, pk, [{ env: "a", expiresAt: START + 1 }])
            expect(yield* store.expire(DateTime.unsafeMake(START + 2), pk, token("o", 1))).toBe(1)
            const again = record(pk, { env: "a", id: `${pk}.redriven` })
            expect((yield* store.persist([again], { replaceTerminal: true })).persisted).toEqual([again.id])
            expect(yield* store.countPending(pk)).toBe(1)
          })
        )
      )

      it.effect(
        "R-PERSIST-1 replaceTerminal never hands the id of the record it replaces to another identity (InvalidRecord, nothing stored)",
        () =>
          withStore((store) =>
            Effect.gen(function* () {
              const pk = freshPartition("replacereuse")
              const [a] = yield* seed(store, pk, ["a"])
              const t = token("o", 1)
              yield* store.claim(pk, t, 10)
              yield* store.complete([a ?? ""], t)
              // "a" is replaced by a new record; a second identity tries to take over the old id
              const batch = [record(pk, { env: "a", id: `${pk}.redriven` }), record(pk, { env: "z", id: a ?? "" })]
              const error = yield* Effect.flip(store.persist(batch, { replaceTerminal: true }))
              expect(error._tag).toBe("InvalidRecord")
              expect(yield* store.countPending(pk)).toBe(0)
              // the batch without the offending record goes through
              const report = yield* store.persist(batch.slice(0, 1), { replaceTerminal: true })
              expect(report.persisted).toEqual([`${pk}.redriven`])
              expect(yield* pendingIds(store, pk)).toEqual([`${pk}.redriven`])
            })
          )
      )

      it.effect(
        "R-PERSIST-1 replaceTerminal checks the id of an in-batch repeat too: an old id of a replaced record is InvalidRecord",
        () =>
          withStore((store) =>
            Effect.gen(function* () {
              const pk = freshPartition("replacerepeat")
              const [a, b] = yield* seed(store, pk, ["a", "b"])
              const t = token("o", 1)
              yield* store.claim(pk, t, 1)
              yield* store.complete([a ?? ""], t)
              // "a" (completed) is replaced; "b" is live, so its first copy is skipped and the repeat of "b"
              // would be skipped too — but the repeat carries the id of the replaced "a"
              const batch = [
                record(pk, { env: "a", id: `${pk}.a2` }),
                record(pk, { env: "b", id: `${pk}.b2` }),
                record(pk, { env: "b", id: a ?? "" })
              ]
              const error = yield* Effect.flip(store.persist(batch, { replaceTerminal: true }))
              expect(error._tag).toBe("InvalidRecord")
              if (error._tag === "InvalidRecord") {
                expect(error.index).toBe(2)
                expect(error.recordId).toBe(a)
              }
              // nothing of the batch was stored: "a" is still the completed record, not replaced
              expect(yield* pendingIds(store, pk)).toEqual([b])
              expect(yield* store.countPending(pk)).toBe(1)
              const report = yield* store.persist(batch.slice(0, 2), { replaceTerminal: true })
              expect(report.persisted).toEqual([`${pk}.a2`])
            })
          )
      )

      it.effect("R-PERSIST-1 replaceTerminal still skips a non-terminal holder, keeping its id", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("replacelive")
            const [pending, claimed] = yield* seed(store, pk, ["p", "c"])
            const t = token("o", 1)
            // one pending and one claimed holder
            expect(idsOf(yield* store.claim(pk, t, 2))).toEqual([pending, claimed])
            yield* store.release([pending ?? ""], t)
            const batch = [record(pk, { env: "p", id: `${pk}.p2` }), record(pk, { env: "c", id: `${pk}.c2` })]
            const error = yield* Effect.flip(store.persist(batch, { replaceTerminal: true }))
            expect(error._tag).toBe("DuplicateRecord")
            const withNew = [...batch, record(pk, { env: "n" })]
            const report = yield* store.persist(withNew, { replaceTerminal: true })
            expect(report.skipped).toEqual([`${pk}.p2`, `${pk}.c2`])
            expect(report.existingIds).toEqual([pending, claimed])
            expect(yield* store.countPending(pk)).toBe(2)
            expect(yield* store.countClaimed(pk)).toBe(1)
          })
        )
      )

      it.effect("R-PERSIST-2 a batch whose every record exists fails with DuplicateRecord naming the ids", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("alldup")
            yield* seed(store, pk, ["a", "b"])
            const again = [record(pk, { env: "a", id: `${pk}.a2` }), record(pk, { env: "b", id: `${pk}.b2` })]
            const error = yield* Effect.flip(store.persist(again))
            expect(error._tag).toBe("DuplicateRecord")
            if (error._tag === "DuplicateRecord") {
              expect([...error.ids].sort()).toEqual([`${pk}.a2`, `${pk}.b2`].sort())
            }
            expect(yield* store.countPending(pk)).toBe(2)
          })
        )
      )

      it.effect("R-PERSIST-2 re-persisting the very same records (same ids) fails with DuplicateRecord", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("samerecords")
            const batch = records(pk, ["a", "b"])
            yield* store.persist(batch)
            const error = yield* Effect.flip(store.persist(batch))
            expect(error._tag).toBe("DuplicateRecord")
            expect(yield* store.countPending(pk)).toBe(2)
          })
        )
      )

      it.effect("R-PERSIST-3 an in-batch duplicate keeps the first record and reports the original id", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("inbatch")
            const first = record(pk, { env: "d", id: `${pk}.first` })
            const second = record(pk, { env: "d", id: `${pk}.second` })
            const other = record(pk, { env: "e" })
            const report = yield* store.persist([first, second, other])
            expect(report.persisted).toEqual([first.id, other.id])
            expect(report.skipped).toEqual([second.id])
            expect(report.existingIds).toEqual([first.id])
            expect(yield* pendingIds(store, pk)).toEqual([first.id, other.id])
          })
        )
      )

      it.effect("R-PERSIST-4 seq strictly increases in batch order and across batches", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("seq")
            const first = yield* seed(store, pk, ["e", "d", "c"])
            const second = yield* seed(store, pk, ["b", "a"])
            const rows = yield* store.queryPending(pk, 1000)
            const seqById = new Map(rows.map((r) => [r.id, r.seq]))
            const seqs = [...first, ...second].map((id) => seqById.get(id) ?? -1)
            expect(seqs.every((s) => s >= 0)).toBe(true)
            for (let i = 1; i < seqs.length; i++) {
              expect(seqs[i] ?? -1).toBeGreaterThan(seqs[i - 1] ?? Infinity)
            }
          })
        )
      )

      it.effect("R-PERSIST-4 createdAt is stamped from Clock when absent and kept when given", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("createdAt")
            yield* TestClock.setTime(START + 12_345)
            yield* store.persist([record(pk, { env: "now" }), record(pk, { env: "given", createdAt: START - 5_000 })])
            const rows = yield* store.queryPending(pk, 10)
            const byEnv = new Map(rows.map((r) => [r.envelopeId, r]))
            expect(DateTime.toEpochMillis(byEnv.get("now")?.createdAt ?? DateTime.unsafeMake(0))).toBe(START + 12_345)
            expect(DateTime.toEpochMillis(byEnv.get("given")?.createdAt ?? DateTime.unsafeMake(0))).toBe(START - 5_000)
          })
        )
      )

      it.effect("R-PERSIST-4 a stored record is pending, never claimed, and keeps every field it was given", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("fields")
            const input = new NewOutboxRecord({
              id: `${pk}.full`,
              partitionKey: pk,
              envelopeId: "env#1%x",
              bindingId: "bind#2",
              payload: new Uint8Array([0, 1, 2, 254, 255]),
              headers: { "content-type": "application/json", trace: "abc" },
              orderingKey: "order-1",
              address: "https://example.invalid/hook",
              routeId: "route-7",
              expiresAt: DateTime.unsafeMake(START + 60_000)
            })
            yield* store.persist([input])
            const stored = yield* findPending(store, pk, `${pk}.full`)
            expect(stored).toBeDefined()
            if (stored === undefined) return
            expect(stored.status).toBe("pending")
            expect(stored.partitionKey).toBe(pk)
            expect(stored.envelopeId).toBe("env#1%x")
            expect(stored.bindingId).toBe("bind#2")
            expect(Array.from(stored.payload)).toEqual([0, 1, 2, 254, 255])
            expect(stored.headers).toEqual({ "content-type": "application/json", trace: "abc" })
            expect(Option.getOrUndefined(stored.orderingKey)).toBe("order-1")
            expect(stored.address).toBe("https://example.invalid/hook")
            expect(stored.routeId).toBe("route-7")
            expect(millisOf(stored.expiresAt)).toBe(START + 60_000)
            expect(DateTime.toEpochMillis(stored.createdAt)).toBe(START)
            expect(stored.claimVersion).toBe(0)
            expect(stored.replayCount).toBe(0)
            expect(Option.isNone(stored.claimedBy)).toBe(true)
            expect(Option.isNone(stored.claimedAt)).toBe(true)
            expect(Option.isNone(stored.firstAttemptedAt)).toBe(true)
            expect(Option.isNone(stored.completedAt)).toBe(true)
          })
        )
      )

      it.effect("R-PERSIST-4 a record without an id gets a generated one", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("genid")
            const input = new NewOutboxRecord({
              partitionKey: pk,
              envelopeId: "e",
              bindingId: "b",
              payload: payloadOf("x")
            })
            const report = yield* store.persist([input])
            expect(report.persisted).toHaveLength(1)
            const id = report.persisted[0] ?? ""
            expect(id.length).toBeGreaterThan(0)
            expect(yield* pendingIds(store, pk)).toEqual([id])
          })
        )
      )

      const invalidCases: ReadonlyArray<readonly [string, (pk: string) => NewOutboxRecord]> = [
        [
          "empty id",
          (pk) =>
            new NewOutboxRecord(
              { id: "", partitionKey: pk, envelopeId: "bad", bindingId: "b", payload: payloadOf("x") },
              { disableValidation: true }
            )
        ],
        [
          "empty partition",
          (pk) =>
            new NewOutboxRecord(
              { id: `${pk}.bad`, partitionKey: "", envelopeId: "bad", bindingId: "b", payload: payloadOf("x") },
              { disableValidation: true }
            )
        ],
        [
          "empty envelopeId",
          (pk) =>
            new NewOutboxRecord(
              { id: `${pk}.bad`, partitionKey: pk, envelopeId: "", bindingId: "b", payload: payloadOf("x") },
              { disableValidation: true }
            )
        ],
        [
          "empty bindingId",
          (pk) =>
            new NewOutboxRecord(
              { id: `${pk}.bad`, partitionKey: pk, envelopeId: "bad", bindingId: "", payload: payloadOf("x") },
              { disableValidation: true }
            )
        ],
        [
          "a plain object with an empty envelopeId",
          (pk) => {
            const plain: NewOutboxRecord = {
              id: `${pk}.bad`,
              partitionKey: pk,
              envelopeId: "",
              bindingId: "b",
              payload: payloadOf("x")
            }
            return plain
          }
        ]
      ]

      for (const [label, makeBad] of invalidCases) {
        it.effect(`R-PERSIST-5 ${label} fails with InvalidRecord and nothing of the batch is stored`, () =>
          withStore((store) =>
            Effect.gen(function* () {
              const pk = freshPartition("invalid")
              const good = record(pk, { env: "good" })
              const error = yield* Effect.flip(store.persist([good, makeBad(pk)]))
              expect(error._tag).toBe("InvalidRecord")
              if (error._tag === "InvalidRecord") {
                expect(error.index).toBe(1)
                expect(error.reason.length).toBeGreaterThan(0)
              }
              expect(yield* store.countPending(pk)).toBe(0)
              expect((yield* store.persist([good])).persisted).toEqual([good.id])
            })
          )
        )
      }

      it.effect("R-PERSIST-5 one id used for two different records of a batch fails with InvalidRecord", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("idtwice")
            const first = record(pk, { env: "a", id: `${pk}.shared` })
            const second = record(pk, { env: "b", id: `${pk}.shared` })
            const error = yield* Effect.flip(store.persist([first, second]))
            expect(error._tag).toBe("InvalidRecord")
            expect(yield* store.countPending(pk)).toBe(0)
          })
        )
      )

      it.effect("R-PERSIST-5 an id already used by another stored record fails with InvalidRecord", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("idtaken")
            const [a] = yield* seed(store, pk, ["a"])
            const fresh = record(pk, { env: "fresh" })
            const clash = record(pk, { env: "other", id: a ?? "" })
            const error = yield* Effect.flip(store.persist([fresh, clash]))
            expect(error._tag).toBe("InvalidRecord")
            expect(yield* pendingIds(store, pk)).toEqual([a])
            const stored = yield* findPending(store, pk, a ?? "")
            expect(stored?.envelopeId).toBe("a")
          })
        )
      )

      if (capabilities.maxPayloadBytes !== undefined) {
        const limit = capabilities.maxPayloadBytes
        it.effect("R-PERSIST-5 a payload over the backend's limit fails with InvalidRecord; nothing is stored", () =>
          withStore((store) =>
            Effect.gen(function* () {
              const pk = freshPartition("toolarge")
              const good = record(pk, { env: "good" })
              const big = record(pk, { env: "big", payload: new Uint8Array(limit + 1) })
              const error = yield* Effect.flip(store.persist([good, big]))
              expect(error._tag).toBe("InvalidRecord")
              if (error._tag === "InvalidRecord") expect(error.recordId).toBe(big.id)
              expect(yield* store.countPending(pk)).toBe(0)
            })
          )
        )
      }
    })

    // ---------------------------------------------------------------- claim

    describe("claim", () => {
      for (const bad of invalidTokens) {
        it.effect(
          `R-CLAIM-1 invalid token ${JSON.stringify(bad)} fails with StaleFencingToken and changes nothing`,
          () =>
            withStore((store) =>
              Effect.gen(function* () {
                const pk = freshPartition("claimbadtoken")
                yield* seed(store, pk, ["a", "b"])
                const before = yield* snapshot(store, pk)
                const error = yield* Effect.flip(store.claim(pk, bad, 10))
                expect(error._tag).toBe("StaleFencingToken")
                expect(yield* snapshot(store, pk)).toEqual(before)
                // the rejected token did not raise the high-water mark: version 1 is still accepted
                expect(idsOf(yield* store.claim(pk, token("good", 1), 10))).toHaveLength(2)
              })
            )
        )
      }

      it.effect("R-CLAIM-2 a token below the high-water mark fails and claims nothing", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("belowhwm")
            const [a] = yield* seed(store, pk, ["a"])
            yield* store.claim(pk, token("new", 3), 0)
            const error = yield* Effect.flip(store.claim(pk, token("old", 2), 10))
            expect(error._tag).toBe("StaleFencingToken")
            if (error._tag === "StaleFencingToken") expect(error.partitionKey).toBe(pk)
            expect(yield* pendingIds(store, pk)).toEqual([a])
            expect(yield* store.countClaimed(pk)).toBe(0)
          })
        )
      )

      it.effect("R-CLAIM-2 an empty claim raises the high-water mark", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("emptyclaimhwm")
            const batch = yield* store.claim(pk, token("a", 4), 10)
            expect(batch.records).toEqual([])
            const error = yield* Effect.flip(store.claim(pk, token("b", 3), 10))
            expect(error._tag).toBe("StaleFencingToken")
          })
        )
      )

      it.effect("R-CLAIM-2 a claim at the high-water mark itself is accepted", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("athwm")
            const [a, b] = yield* seed(store, pk, ["a", "b"])
            expect(idsOf(yield* store.claim(pk, token("o", 2), 1))).toEqual([a])
            expect(idsOf(yield* store.claim(pk, token("o", 2), 1))).toEqual([b])
          })
        )
      )

      it.effect("R-CLAIM-2 the high-water mark is per partition", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const p1 = freshPartition("hwm1")
            const p2 = freshPartition("hwm2")
            const [b] = yield* seed(store, p2, ["b"])
            yield* store.claim(p1, token("o", 9), 10)
            expect(idsOf(yield* store.claim(p2, token("o", 1), 10))).toEqual([b])
          })
        )
      )

      it.effect("R-CLAIM-2 two owners interleaving versions 5 and 6: the lower one is fenced out", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("interleave")
            const [a, b] = yield* seed(store, pk, ["a", "b"])
            const five = token("five", 5)
            const six = token("six", 6)
            expect(idsOf(yield* store.claim(pk, five, 1))).toEqual([a])
            expect(idsOf(yield* store.claim(pk, six, 10))).toEqual([a, b])
            expect((yield* Effect.flip(store.claim(pk, five, 10)))._tag).toBe("StaleFencingToken")
            expect((yield* Effect.flip(store.complete([a ?? ""], five)))._tag).toBe("StaleFencingToken")
            expect((yield* Effect.flip(store.expire(DateTime.unsafeMake(START + 1), pk, five)))._tag).toBe(
              "StaleFencingToken"
            )
            yield* store.complete([a ?? ""], six)
            yield* store.complete([b ?? ""], six)
            expect(yield* store.countClaimed(pk)).toBe(0)
            expect(yield* store.countPending(pk)).toBe(0)
          })
        )
      )

      for (const limit of [0, -1]) {
        it.effect(`R-CLAIM-3 limit ${limit} claims nothing and raises the high-water mark`, () =>
          withStore((store) =>
            Effect.gen(function* () {
              const pk = freshPartition("limitnoop")
              const ids = yield* seed(store, pk, ["a", "b"])
              const batch = yield* store.claim(pk, token("o", 5), limit)
              expect(batch.records).toEqual([])
              expect(yield* pendingIds(store, pk)).toEqual(ids)
              expect(yield* store.countClaimed(pk)).toBe(0)
              expect((yield* Effect.flip(store.claim(pk, token("o", 4), 10)))._tag).toBe("StaleFencingToken")
              expect(idsOf(yield* store.claim(pk, token("o", 5), 10))).toEqual(ids)
            })
          )
        )
      }

      it.effect("R-CLAIM-4 returns the oldest N in age order, not key or id order", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("oldestn")
            // envelope ids and record ids sort inversely to age: a key-order store must fail
            const specs: Array<RecordSpec> = []
            for (let i = 0; i < 8; i++) {
              specs.push({ env: `env-${9 - i}`, id: `${pk}.id-${9 - i}`, createdAt: START - 10_000 + i * 100 })
            }
            for (const spec of specs) yield* store.persist([record(pk, spec)])
            const batch = yield* store.claim(pk, token("o", 1), 3)
            expect(idsOf(batch)).toEqual([`${pk}.id-9`, `${pk}.id-8`, `${pk}.id-7`])
            expect(idsOf(yield* store.claim(pk, token("o", 1), 100))).toEqual(specs.slice(3).map((s) => s.id))
          })
        )
      )

      it.effect("R-CLAIM-4 age is createdAt first: a record persisted later with an older createdAt comes first", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("createdfirst")
            yield* store.persist([record(pk, { env: "late", createdAt: START - 1_000 })])
            yield* store.persist([record(pk, { env: "early", createdAt: START - 9_000 })])
            yield* store.persist([record(pk, { env: "middle", createdAt: START - 5_000 })])
            const batch = yield* store.claim(pk, token("o", 1), 2)
            expect(batch.records.map((r) => r.envelopeId)).toEqual(["early", "middle"])
          })
        )
      )

      it.effect("R-CLAIM-4 equal createdAt is tie-broken by persist order (seq)", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("tie")
            // every record stamped at the same instant; envelope ids sort inversely to persist order
            const first = yield* seed(store, pk, ["zz", "yy", "xx"])
            const second = yield* seed(store, pk, ["ww", "vv"])
            expect(idsOf(yield* store.claim(pk, token("o", 1), 4))).toEqual([...first, ...second].slice(0, 4))
          })
        )
      )

      it.effect("R-CLAIM-4 equal createdAt across ordering keys and keyless records is still persist order", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("tiekeys")
            const ids = yield* seed(store, pk, [
              { env: "zz", key: "K" },
              { env: "yy" },
              { env: "xx", key: "J" },
              { env: "ww" },
              { env: "vv", key: "K" }
            ])
            expect(idsOf(yield* store.claim(pk, token("o", 1), 10))).toEqual(ids)
          })
        )
      )

      it.effect("R-CLAIM-4 a claim stamps owner, version, claimedAt = now and counts the claim", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("stamp")
            yield* seed(store, pk, ["a"])
            yield* TestClock.adjust("7 seconds")
            const [claimed] = (yield* store.claim(pk, token("owner-1", 3), 10)).records
            expect(claimed).toBeDefined()
            if (claimed === undefined) return
            expect(claimed.status).toBe("claimed")
            expect(Option.getOrUndefined(claimed.claimedBy)).toBe("owner-1")
            expect(claimed.claimVersion).toBe(3)
            expect(millisOf(claimed.claimedAt)).toBe(START + 7_000)
            expect(claimed.replayCount).toBe(1)
            expect(DateTime.toEpochMillis(claimed.createdAt)).toBe(START)
            expect(yield* store.countPending(pk)).toBe(0)
            expect(yield* store.countClaimed(pk)).toBe(1)
          })
        )
      )

      it.effect("R-CLAIM-4 a claim at the same version does not take records already claimed", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("sameversion")
            const [a, b] = yield* seed(store, pk, ["a", "b"])
            expect(idsOf(yield* store.claim(pk, token("one", 1), 1))).toEqual([a])
            expect(idsOf(yield* store.claim(pk, token("two", 1), 10))).toEqual([b])
            expect(idsOf(yield* store.claim(pk, token("one", 1), 10))).toEqual([])
          })
        )
      )

      it.effect("R-CLAIM-4 pre-emption: a higher version takes claimed records (replayCount 2)", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("preempt")
            const [a, b] = yield* seed(store, pk, ["a", "b"])
            const old = token("old", 1)
            expect(idsOf(yield* store.claim(pk, old, 1))).toEqual([a])
            yield* TestClock.adjust("1 second")
            const batch = yield* store.claim(pk, token("new", 2), 10)
            expect(idsOf(batch)).toEqual([a, b])
            const [first, second] = batch.records
            expect(first?.replayCount).toBe(2)
            expect(first?.claimVersion).toBe(2)
            expect(Option.getOrUndefined(first?.claimedBy ?? Option.none())).toBe("new")
            expect(millisOf(first?.claimedAt ?? Option.none())).toBe(START + 1_000)
            expect(second?.replayCount).toBe(1)
            // the pre-empted holder can no longer complete or release
            expect((yield* Effect.flip(store.complete([a ?? ""], old)))._tag).toBe("StaleFencingToken")
            expect((yield* Effect.flip(store.release([a ?? ""], old)))._tag).toBe("StaleFencingToken")
            expect(yield* store.countClaimed(pk)).toBe(2)
          })
        )
      )

      it.effect("R-CLAIM-4 terminal records are never claimed", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("terminal")
            const [a, b, c] = yield* seed(store, pk, ["a", { env: "b", expiresAt: START + 10 }, { env: "c" }])
            const t = token("o", 1)
            expect(idsOf(yield* store.claim(pk, t, 1))).toEqual([a])
            yield* store.complete([a ?? ""], t)
            expect(yield* store.expire(DateTime.unsafeMake(START + 11), pk, t)).toBe(1)
            expect(idsOf(yield* store.claim(pk, token("o", 2), 10))).toEqual([c])
            expect(b).toBeDefined()
          })
        )
      )

      it.effect("R-CLAIM-5 a stranded claimed head blocks its younger siblings", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("stranded")
            const [k1, k2, k3] = yield* seed(store, pk, [
              { env: "k1", key: "K" },
              { env: "k2", key: "K" },
              { env: "k3", key: "K" }
            ])
            const t = token("o", 1)
            expect(idsOf(yield* store.claim(pk, t, 1))).toEqual([k1])
            expect(idsOf(yield* store.claim(pk, t, 10))).toEqual([])
            expect(idsOf(yield* store.claim(pk, token("other", 1), 10))).toEqual([])
            expect(yield* pendingIds(store, pk)).toEqual([k2, k3])
          })
        )
      )

      it.effect("R-CLAIM-5 other keys and keyless records are unaffected by a stranded head", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("independent")
            const [k1, , x1, j1, x2, j2] = yield* seed(store, pk, [
              { env: "k1", key: "K" },
              { env: "k2", key: "K" },
              { env: "x1" },
              { env: "j1", key: "J" },
              { env: "x2" },
              { env: "j2", key: "J" }
            ])
            const t = token("o", 1)
            expect(idsOf(yield* store.claim(pk, t, 1))).toEqual([k1])
            expect(idsOf(yield* store.claim(pk, t, 10))).toEqual([x1, j1, x2, j2])
          })
        )
      )

      it.effect("R-CLAIM-5 a pending head beyond the limit: limit 1 returns the head only", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("limit1")
            const [k1, k2] = yield* seed(store, pk, [
              { env: "k1", key: "K" },
              { env: "k2", key: "K" }
            ])
            expect(idsOf(yield* store.claim(pk, token("o", 1), 1))).toEqual([k1])
            expect(yield* pendingIds(store, pk)).toEqual([k2])
          })
        )
      )

      it.effect("R-CLAIM-5 a head that fills the batch keeps its siblings out of it", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("headfills")
            const [x1, k1, , x2] = yield* seed(store, pk, [
              { env: "x1" },
              { env: "k1", key: "K" },
              { env: "k2", key: "K" },
              { env: "x2" }
            ])
            expect(idsOf(yield* store.claim(pk, token("o", 1), 2))).toEqual([x1, k1])
            // k2 is blocked by its claimed head; x2 is not
            expect(idsOf(yield* store.claim(pk, token("o", 1), 10))).toEqual([x2])
          })
        )
      )

      it.effect("R-CLAIM-5 the whole group comes back together, in age order, interleaved with others", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("group")
            const ids = yield* seed(store, pk, [
              { env: "k1", key: "K" },
              { env: "x1" },
              { env: "k2", key: "K" },
              { env: "j1", key: "J" },
              { env: "k3", key: "K" },
              { env: "x2" }
            ])
            expect(idsOf(yield* store.claim(pk, token("o", 1), 10))).toEqual(ids)
          })
        )
      )

      it.effect("R-CLAIM-5 a released head unblocks its siblings", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("released")
            const [k1, k2] = yield* seed(store, pk, [
              { env: "k1", key: "K" },
              { env: "k2", key: "K" }
            ])
            const t = token("o", 1)
            expect(idsOf(yield* store.claim(pk, t, 1))).toEqual([k1])
            yield* store.release([k1 ?? ""], t)
            expect(idsOf(yield* store.claim(pk, t, 10))).toEqual([k1, k2])
          })
        )
      )

      it.effect("R-CLAIM-5 a completed head unblocks the next sibling", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("completedhead")
            const [k1, k2, k3] = yield* seed(store, pk, [
              { env: "k1", key: "K" },
              { env: "k2", key: "K" },
              { env: "k3", key: "K" }
            ])
            const t = token("o", 1)
            expect(idsOf(yield* store.claim(pk, t, 1))).toEqual([k1])
            yield* store.complete([k1 ?? ""], t)
            expect(idsOf(yield* store.claim(pk, t, 1))).toEqual([k2])
            expect(idsOf(yield* store.claim(pk, t, 10))).toEqual([])
            yield* store.complete([k2 ?? ""], t)
            expect(idsOf(yield* store.claim(pk, t, 10))).toEqual([k3])
          })
        )
      )

      it.effect("R-CLAIM-5 an expired head unblocks its siblings", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("expiredhead")
            const [, k2] = yield* seed(store, pk, [
              { env: "k1", key: "K", expiresAt: START + 5 },
              { env: "k2", key: "K" }
            ])
            const t = token("o", 1)
            expect(yield* store.expire(DateTime.unsafeMake(START + 6), pk, t)).toBe(1)
            expect(idsOf(yield* store.claim(pk, t, 10))).toEqual([k2])
          })
        )
      )

      it.effect("R-CLAIM-5 a pre-empted head comes back with its group", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("preemptgroup")
            const [k1, k2, x] = yield* seed(store, pk, [{ env: "k1", key: "K" }, { env: "k2", key: "K" }, { env: "x" }])
            expect(idsOf(yield* store.claim(pk, token("a", 1), 1))).toEqual([k1])
            expect(idsOf(yield* store.claim(pk, token("b", 2), 1))).toEqual([k1])
            expect(idsOf(yield* store.claim(pk, token("c", 3), 10))).toEqual([k1, k2, x])
          })
        )
      )

      it.effect("R-CLAIM-5 an empty ordering key means no key", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("emptykey")
            const [a, b] = yield* seed(store, pk, [
              { env: "a", key: "" },
              { env: "b", key: "" }
            ])
            const t = token("o", 1)
            expect(idsOf(yield* store.claim(pk, t, 1))).toEqual([a])
            expect(idsOf(yield* store.claim(pk, t, 10))).toEqual([b])
          })
        )
      )

      it.effect("R-CLAIM-5 a younger sibling with an older createdAt is the head", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("keyage")
            yield* seed(store, pk, [{ env: "late", key: "K", createdAt: START - 1_000 }])
            yield* seed(store, pk, [{ env: "early", key: "K", createdAt: START - 2_000 }])
            const t = token("o", 1)
            const first = yield* store.claim(pk, t, 1)
            expect(first.records.map((r) => r.envelopeId)).toEqual(["early"])
            expect(idsOf(yield* store.claim(pk, t, 10))).toEqual([])
          })
        )
      )

      if (capabilities.staleReclaim) {
        it.effect("R-CLAIM-6 a claim older than staleClaimAfter is reclaimable at the same version", () =>
          withStore(
            (store) =>
              Effect.gen(function* () {
                const pk = freshPartition("stale")
                const [a] = yield* seed(store, pk, ["a"])
                const first = token("first", 1)
                const second = token("second", 1)
                expect(idsOf(yield* store.claim(pk, first, 10))).toEqual([a])
                yield* TestClock.adjust("31 seconds")
                const batch = yield* store.claim(pk, second, 10)
                expect(idsOf(batch)).toEqual([a])
                expect(batch.records[0]?.replayCount).toBe(2)
                expect(Option.getOrUndefined(batch.records[0]?.claimedBy ?? Option.none())).toBe("second")
                expect(millisOf(batch.records[0]?.claimedAt ?? Option.none())).toBe(START + 31_000)
                // R-CLAIM-9: the earlier holder's complete must now fail
                expect((yield* Effect.flip(store.complete([a ?? ""], first)))._tag).toBe("StaleFencingToken")
                yield* store.complete([a ?? ""], second)
                expect(yield* store.countClaimed(pk)).toBe(0)
              }),
            stale
          )
        )

        it.effect("R-CLAIM-6 a fresh claim is not reclaimed at the same version", () =>
          withStore(
            (store) =>
              Effect.gen(function* () {
                const pk = freshPartition("fresh")
                const [a, b] = yield* seed(store, pk, ["a", "b"])
                const first = token("first", 1)
                expect(idsOf(yield* store.claim(pk, first, 1))).toEqual([a])
                yield* TestClock.adjust("29 seconds")
                expect(idsOf(yield* store.claim(pk, token("second", 1), 10))).toEqual([b])
                yield* store.complete([a ?? ""], first)
              }),
            stale
          )
        )

        it.effect("R-CLAIM-6 staleness is strict: a claim exactly staleClaimAfter old is not reclaimed", () =>
          withStore(
            (store) =>
              Effect.gen(function* () {
                const pk = freshPartition("staleedge")
                const [a] = yield* seed(store, pk, ["a"])
                expect(idsOf(yield* store.claim(pk, token("first", 1), 10))).toEqual([a])
                yield* TestClock.adjust("30 seconds")
                expect(idsOf(yield* store.claim(pk, token("second", 1), 10))).toEqual([])
                yield* TestClock.adjust("1 millis")
                expect(idsOf(yield* store.claim(pk, token("second", 1), 10))).toEqual([a])
              }),
            stale
          )
        )

        it.effect("R-CLAIM-6 a stale head comes back with its blocked siblings", () =>
          withStore(
            (store) =>
              Effect.gen(function* () {
                const pk = freshPartition("stalehead")
                const [k1, k2] = yield* seed(store, pk, [
                  { env: "k1", key: "K" },
                  { env: "k2", key: "K" }
                ])
                expect(idsOf(yield* store.claim(pk, token("dead", 1), 1))).toEqual([k1])
                yield* TestClock.adjust("10 seconds")
                expect(idsOf(yield* store.claim(pk, token("live", 1), 10))).toEqual([])
                yield* TestClock.adjust("25 seconds")
                expect(idsOf(yield* store.claim(pk, token("live", 1), 10))).toEqual([k1, k2])
              }),
            stale
          )
        )
      }

      it.effect("R-CLAIM-7 a record claimed 8 times is still claimable", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("replay")
            const [a] = yield* seed(store, pk, ["a"])
            for (let version = 1; version <= 8; version++) {
              const batch = yield* store.claim(pk, token(`o${version}`, version), 10)
              expect(idsOf(batch)).toEqual([a])
              expect(batch.records[0]?.replayCount).toBe(version)
            }
            const t = token("o8", 8)
            yield* store.release([a ?? ""], t)
            const again = yield* store.claim(pk, t, 10)
            expect(idsOf(again)).toEqual([a])
            expect(again.records[0]?.replayCount).toBe(9)
          })
        )
      )

      it.effect("R-CLAIM-8 a claim that meets no failure is not truncated", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("nottruncated")
            yield* seed(store, pk, ["a", "b", "c"])
            const batch = yield* store.claim(pk, token("o", 1), 2)
            expect(batch.records).toHaveLength(2)
            expect(Option.isNone(batch.truncated)).toBe(true)
          })
        )
      )

      it.effect("R-CLAIM-9 two concurrent claimers receive disjoint sets covering every record", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("concurrent")
            const specs: Array<string> = []
            for (let i = 0; i < 20; i++) specs.push(`e${String(i).padStart(2, "0")}`)
            const ids = yield* seed(store, pk, specs)
            const [left, right] = yield* Effect.all(
              [store.claim(pk, token("left", 1), 20), store.claim(pk, token("right", 1), 20)],
              { concurrency: 2 }
            )
            const leftIds = idsOf(left)
            const rightIds = idsOf(right)
            expect(leftIds.filter((id) => rightIds.includes(id))).toEqual([])
            expect([...leftIds, ...rightIds].sort()).toEqual([...ids].sort())
            expect(yield* store.countClaimed(pk)).toBe(20)
          })
        )
      )

      it.effect("R-CLAIM-10 a fenced claim fails with a typed error, not a defect", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("typed")
            yield* store.claim(pk, token("o", 2), 1)
            const result = yield* Effect.either(store.claim(pk, token("o", 1), 1))
            expect(result._tag).toBe("Left")
            if (result._tag === "Left") expect(result.left._tag).toBe("StaleFencingToken")
          })
        )
      )

      if (capabilities.firstAttempt) {
        it.effect("R-CLAIM-4 firstAttemptedAt is stamped once and kept across release and pre-emption", () =>
          withStore((store) =>
            Effect.gen(function* () {
              const pk = freshPartition("firstattempt")
              const [a] = yield* seed(store, pk, ["a"])
              yield* TestClock.adjust("1 second")
              const first = yield* store.claim(pk, token("o", 1), 10)
              expect(millisOf(first.records[0]?.firstAttemptedAt ?? Option.none())).toBe(START + 1_000)
              yield* store.release([a ?? ""], token("o", 1))
              const released = yield* findPending(store, pk, a ?? "")
              expect(millisOf(released?.firstAttemptedAt ?? Option.none())).toBe(START + 1_000)
              yield* TestClock.adjust("5 seconds")
              const second = yield* store.claim(pk, token("o", 1), 10)
              expect(millisOf(second.records[0]?.firstAttemptedAt ?? Option.none())).toBe(START + 1_000)
              expect(millisOf(second.records[0]?.claimedAt ?? Option.none())).toBe(START + 6_000)
              yield* TestClock.adjust("5 seconds")
              const third = yield* store.claim(pk, token("p", 2), 10)
              expect(millisOf(third.records[0]?.firstAttemptedAt ?? Option.none())).toBe(START + 1_000)
              expect(millisOf(third.records[0]?.claimedAt ?? Option.none())).toBe(START + 11_000)
              expect(third.records[0]?.replayCount).toBe(3)
            })
          )
        )
      }
    })

    // ---------------------------------------------------------------- complete / release

    describe("complete and release", () => {
      for (const operation of ["complete", "release"] as const) {
        it.effect(`R-DONE-1 ${operation} rejects every invalid token before any state change`, () =>
          withStore((store) =>
            Effect.gen(function* () {
              const pk = freshPartition(`${operation}badtoken`)
              const [a, b] = yield* seed(store, pk, ["a", "b"])
              const t = token("o", 1)
              yield* store.claim(pk, t, 1)
              const before = yield* snapshot(store, pk)
              for (const bad of invalidTokens) {
                const error = yield* Effect.flip(store[operation]([a ?? ""], bad))
                expect(error._tag).toBe("StaleFencingToken")
                // the never-claimed row has empty owner and version 0: an empty token must not match it
                const pendingError = yield* Effect.flip(store[operation]([b ?? ""], bad))
                expect(pendingError._tag).toBe("StaleFencingToken")
              }
              expect(yield* snapshot(store, pk)).toEqual(before)
              yield* store[operation]([a ?? ""], t)
            })
          )
        )
      }

      it.effect("R-DONE-2 complete by the holder marks the record completed", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("complete")
            const [a, b] = yield* seed(store, pk, ["a", "b"])
            const t = token("o", 1)
            yield* store.claim(pk, t, 10)
            yield* store.complete([a ?? ""], t)
            expect(yield* store.countClaimed(pk)).toBe(1)
            expect(yield* store.countPending(pk)).toBe(0)
            expect(idsOf(yield* store.claim(pk, token("o", 2), 10))).toEqual([b])
          })
        )
      )

      it.effect("R-DONE-2 release returns the record to pending, keeping claimVersion and replayCount", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("release")
            const [a] = yield* seed(store, pk, ["a"])
            const t = token("o", 3)
            yield* store.claim(pk, t, 10)
            yield* store.release([a ?? ""], t)
            const released = yield* findPending(store, pk, a ?? "")
            expect(released?.status).toBe("pending")
            expect(released?.claimVersion).toBe(3)
            expect(released?.replayCount).toBe(1)
            expect(Option.isNone(released?.claimedBy ?? Option.some("missing"))).toBe(true)
            expect(Option.isNone(released?.claimedAt ?? Option.some(DateTime.unsafeMake(0)))).toBe(true)
            expect(yield* store.countClaimed(pk)).toBe(0)
            expect(yield* store.countPending(pk)).toBe(1)
          })
        )
      )

      for (const operation of ["complete", "release"] as const) {
        it.effect(`R-DONE-2 ${operation} with the same version but another owner is rejected`, () =>
          withStore((store) =>
            Effect.gen(function* () {
              const pk = freshPartition(`${operation}otherowner`)
              const [a] = yield* seed(store, pk, ["a"])
              yield* store.claim(pk, token("holder", 2), 10)
              const error = yield* Effect.flip(store[operation]([a ?? ""], token("intruder", 2)))
              expect(error._tag).toBe("StaleFencingToken")
              expect(yield* store.countClaimed(pk)).toBe(1)
            })
          )
        )

        it.effect(`R-DONE-2 ${operation} with the same owner but another version is rejected`, () =>
          withStore((store) =>
            Effect.gen(function* () {
              const pk = freshPartition(`${operation}otherversion`)
              const [a] = yield* seed(store, pk, ["a"])
              yield* store.claim(pk, token("holder", 2), 10)
              expect((yield* Effect.flip(store[operation]([a ?? ""], token("holder", 1))))._tag).toBe(
                "StaleFencingToken"
              )
              expect((yield* Effect.flip(store[operation]([a ?? ""], token("holder", 3))))._tag).toBe(
                "StaleFencingToken"
              )
              expect(yield* store.countClaimed(pk)).toBe(1)
            })
          )
        )

        it.effect(`R-DONE-2 ${operation} of an unknown id fails naming it`, () =>
          withStore((store) =>
            Effect.gen(function* () {
              const pk = freshPartition(`${operation}unknown`)
              const unknown = `${pk}.does-not-exist`
              const error = yield* Effect.flip(store[operation]([unknown], token("o", 1)))
              expect(error._tag).toBe("StaleFencingToken")
              if (error._tag === "StaleFencingToken") expect(error.recordIds ?? []).toContain(unknown)
            })
          )
        )

        it.effect(`R-DONE-2 ${operation} of a pending record is a mismatch`, () =>
          withStore((store) =>
            Effect.gen(function* () {
              const pk = freshPartition(`${operation}pending`)
              const [a] = yield* seed(store, pk, ["a"])
              const t = token("o", 1)
              yield* store.claim(pk, t, 0)
              const error = yield* Effect.flip(store[operation]([a ?? ""], t))
              expect(error._tag).toBe("StaleFencingToken")
              expect(yield* pendingIds(store, pk)).toEqual([a])
            })
          )
        )
      }

      it.effect("R-DONE-2 completing twice is a mismatch (complete is not idempotent)", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("doublecomplete")
            const [a] = yield* seed(store, pk, ["a"])
            const t = token("o", 1)
            yield* store.claim(pk, t, 10)
            yield* store.complete([a ?? ""], t)
            expect((yield* Effect.flip(store.complete([a ?? ""], t)))._tag).toBe("StaleFencingToken")
            expect((yield* Effect.flip(store.release([a ?? ""], t)))._tag).toBe("StaleFencingToken")
            expect(yield* store.countPending(pk)).toBe(0)
            expect(yield* store.countClaimed(pk)).toBe(0)
          })
        )
      )

      it.effect("R-DONE-2 releasing twice is a mismatch; a released record cannot be completed", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("doublerelease")
            const [a] = yield* seed(store, pk, ["a"])
            const t = token("o", 1)
            yield* store.claim(pk, t, 10)
            yield* store.release([a ?? ""], t)
            expect((yield* Effect.flip(store.release([a ?? ""], t)))._tag).toBe("StaleFencingToken")
            expect((yield* Effect.flip(store.complete([a ?? ""], t)))._tag).toBe("StaleFencingToken")
            expect(yield* store.countPending(pk)).toBe(1)
          })
        )
      )

      it.effect("R-DONE-3 several ids that all match are completed together", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("multi")
            const ids = yield* seed(store, pk, ["a", "b", "c"])
            const t = token("o", 1)
            yield* store.claim(pk, t, 10)
            yield* store.complete(ids.slice(0, 2), t)
            expect(yield* store.countClaimed(pk)).toBe(1)
            yield* store.release(ids.slice(2), t)
            expect(yield* pendingIds(store, pk)).toEqual(ids.slice(2))
          })
        )
      )

      it.effect("R-DONE-3 several ids with a mismatch fail naming the mismatched id", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("multimismatch")
            const [a, b] = yield* seed(store, pk, ["a", "b"])
            const t = token("o", 1)
            yield* store.claim(pk, t, 1)
            const error = yield* Effect.flip(store.complete([a ?? "", b ?? ""], t))
            expect(error._tag).toBe("StaleFencingToken")
            if (error._tag === "StaleFencingToken") expect(error.recordIds ?? []).toContain(b)
            expect(yield* pendingIds(store, pk)).toEqual([b])
            if (capabilities.multiIdAtomic) {
              // all-or-nothing: the matching record stays claimed
              expect(yield* store.countClaimed(pk)).toBe(1)
              const releaseError = yield* Effect.flip(store.release([a ?? "", b ?? ""], t))
              expect(releaseError._tag).toBe("StaleFencingToken")
              expect(yield* store.countClaimed(pk)).toBe(1)
            }
          })
        )
      )
    })

    // ---------------------------------------------------------------- expire

    describe("expire", () => {
      it.effect("R-EXP-1 expire rejects every invalid token before any state change", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("expirebadtoken")
            yield* seed(store, pk, [{ env: "a", expiresAt: START + 1 }])
            const before = yield* snapshot(store, pk)
            for (const bad of invalidTokens) {
              const error = yield* Effect.flip(store.expire(DateTime.unsafeMake(START + 100), pk, bad))
              expect(error._tag).toBe("StaleFencingToken")
            }
            expect(yield* snapshot(store, pk)).toEqual(before)
            expect(yield* store.expire(DateTime.unsafeMake(START + 100), pk, token("o", 1))).toBe(1)
          })
        )
      )

      it.effect("R-EXP-1 expire below the high-water mark fails and expires nothing", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("expirehwm")
            yield* seed(store, pk, [{ env: "a", expiresAt: START + 1 }])
            yield* store.claim(pk, token("o", 4), 0)
            const error = yield* Effect.flip(store.expire(DateTime.unsafeMake(START + 100), pk, token("o", 3)))
            expect(error._tag).toBe("StaleFencingToken")
            expect(yield* store.countPending(pk)).toBe(1)
          })
        )
      )

      it.effect("R-EXP-1 an accepted expire raises the high-water mark", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("expireraises")
            const [a] = yield* seed(store, pk, ["a"])
            expect(yield* store.expire(DateTime.unsafeMake(START), pk, token("sweeper", 4))).toBe(0)
            expect((yield* Effect.flip(store.claim(pk, token("o", 3), 10)))._tag).toBe("StaleFencingToken")
            expect(idsOf(yield* store.claim(pk, token("o", 4), 10))).toEqual([a])
          })
        )
      )

      it.effect("R-EXP-2 only pending records expire; claimed and terminal ones are untouched", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("expirepending")
            const [claimed, done, pending, later, never] = yield* seed(store, pk, [
              { env: "claimed", expiresAt: START + 1_000 },
              { env: "done", expiresAt: START + 1_000 },
              { env: "pending", expiresAt: START + 1_000 },
              { env: "later", expiresAt: START + 5_000 },
              { env: "never" }
            ])
            const t = token("o", 1)
            expect(idsOf(yield* store.claim(pk, t, 2))).toEqual([claimed, done])
            yield* store.complete([done ?? ""], t)
            expect(yield* store.expire(DateTime.unsafeMake(START + 2_000), pk, t)).toBe(1)
            expect(yield* pendingIds(store, pk)).toEqual([later, never])
            expect(yield* store.countClaimed(pk)).toBe(1)
            // the claimed one can still be completed; the expired one is gone for good
            yield* store.complete([claimed ?? ""], t)
            expect((yield* Effect.flip(store.complete([pending ?? ""], t)))._tag).toBe("StaleFencingToken")
            expect(idsOf(yield* store.claim(pk, t, 10))).toEqual([later, never])
          })
        )
      )

      it.effect("R-EXP-2 expiry is strictly before: expiresAt equal to `before` stays", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("strict")
            yield* seed(store, pk, [{ env: "a", expiresAt: START + 5_000 }])
            const t = token("o", 1)
            expect(yield* store.expire(DateTime.unsafeMake(START + 5_000), pk, t)).toBe(0)
            expect(yield* store.countPending(pk)).toBe(1)
            expect(yield* store.expire(DateTime.unsafeMake(START + 5_001), pk, t)).toBe(1)
            expect(yield* store.countPending(pk)).toBe(0)
          })
        )
      )

      it.effect("R-EXP-2 expire is scoped to its partition and returns the count", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const p1 = freshPartition("expire1")
            const p2 = freshPartition("expire2")
            yield* seed(store, p1, [
              { env: "a", expiresAt: START + 1 },
              { env: "b", expiresAt: START + 2 },
              { env: "c", expiresAt: START + 3 }
            ])
            yield* seed(store, p2, [{ env: "a", expiresAt: START + 1 }])
            expect(yield* store.expire(DateTime.unsafeMake(START + 10), p1, token("o", 1))).toBe(3)
            expect(yield* store.countPending(p1)).toBe(0)
            expect(yield* store.countPending(p2)).toBe(1)
            expect(yield* store.expire(DateTime.unsafeMake(START + 10), p1, token("o", 1))).toBe(0)
          })
        )
      )

      it.effect("R-EXP-3 a sweep that completes reports its count and expired records stay expired", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("sweep")
            yield* seed(store, pk, [
              { env: "a", expiresAt: START + 1 },
              { env: "b", expiresAt: START + 1 }
            ])
            const result = yield* Effect.either(store.expire(DateTime.unsafeMake(START + 2), pk, token("o", 1)))
            expect(result._tag).toBe("Right")
            if (result._tag === "Right") expect(result.right).toBe(2)
            expect(idsOf(yield* store.claim(pk, token("o", 1), 10))).toEqual([])
            // an expired identity is terminal: re-persisting it is a duplicate
            const error = yield* Effect.flip(store.persist([record(pk, { env: "a", id: `${pk}.again` })]))
            expect(error._tag).toBe("DuplicateRecord")
          })
        )
      )
    })

    // ---------------------------------------------------------------- reads

    describe("reads", () => {
      it.effect("R-READ-1 queryPending returns pending records only, sorted by age, at most limit", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("query")
            yield* seed(store, pk, [
              { env: "c", createdAt: START - 300 },
              { env: "a", createdAt: START - 900 },
              { env: "d", createdAt: START - 100 },
              { env: "b", createdAt: START - 600 },
              { env: "z", createdAt: START - 2_000 }
            ])
            yield* store.claim(pk, token("o", 1), 1) // claims z
            const all = yield* store.queryPending(pk, 100)
            expect(all.map((r) => r.envelopeId)).toEqual(["a", "b", "c", "d"])
            expect(all.every((r) => r.status === "pending")).toBe(true)
            const two = yield* store.queryPending(pk, 2)
            expect(two.length).toBeLessThanOrEqual(2)
            expect(two.length).toBeGreaterThan(0)
            expect(two.every((r) => r.status === "pending" && r.envelopeId !== "z")).toBe(true)
            const ages = two.map((r) => DateTime.toEpochMillis(r.createdAt))
            expect([...ages].sort((x, y) => x - y)).toEqual(ages)
            expect(yield* store.queryPending(pk, 0)).toEqual([])
          })
        )
      )

      it.effect("R-READ-1 queryPending is a preview: it changes nothing", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("preview")
            const ids = yield* seed(store, pk, ["a", "b"])
            yield* store.queryPending(pk, 10)
            expect(idsOf(yield* store.claim(pk, token("o", 1), 10))).toEqual(ids)
          })
        )
      )

      it.effect("R-READ-2 countPending and countClaimed are exact and per partition", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const p1 = freshPartition("count1")
            const p2 = freshPartition("count2")
            expect(yield* store.countPending(p1)).toBe(0)
            expect(yield* store.countClaimed(p1)).toBe(0)
            const ids = yield* seed(store, p1, ["a", "b", "c", { env: "d", expiresAt: START + 1 }])
            yield* seed(store, p2, ["a"])
            const t = token("o", 1)
            yield* store.claim(p1, t, 2)
            expect(yield* store.countPending(p1)).toBe(2)
            expect(yield* store.countClaimed(p1)).toBe(2)
            expect(yield* store.countPending(p2)).toBe(1)
            expect(yield* store.countClaimed(p2)).toBe(0)
            yield* store.complete([ids[0] ?? ""], t)
            yield* store.release([ids[1] ?? ""], t)
            expect(yield* store.countPending(p1)).toBe(3)
            expect(yield* store.countClaimed(p1)).toBe(0)
            yield* store.expire(DateTime.unsafeMake(START + 2), p1, t)
            expect(yield* store.countPending(p1)).toBe(2)
          })
        )
      )

      it.effect("R-READ-3 listPartitions includes every partition with pending work", () =>
        withStore((store) =>
          Effect.gen(function* () {
            const p1 = freshPartition("list1")
            const p2 = freshPartition("list2")
            const p3 = freshPartition("list3")
            yield* seed(store, p1, ["a"])
            yield* seed(store, p2, ["a", "b"])
            yield* seed(store, p3, ["a"])
            yield* store.claim(p2, token("o", 1), 1)
            yield* store.claim(p3, token("o", 1), 1)
            const listed = Chunk.toReadonlyArray(yield* Stream.runCollect(store.listPartitions))
            expect(listed).toContain(p1)
            expect(listed).toContain(p2)
            // p3 only has a claimed record: it holds non-terminal records, so it is listed too
            expect(listed).toContain(p3)
          })
        )
      )
    })
  })
}
