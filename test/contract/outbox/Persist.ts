/**
 * R-PERSIST: persist stores new records idempotently per identity, assigns seq and defaults, and rejects invalid batches whole (SPEC §2).
 */
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import { NewOutboxRecord } from "../../../src/domain/OutboxRecord.js"
import * as Untyped from "../Untyped.js"
import { type ContractCapabilities, type Harness, idsOf, millisOf, payloadOf, START, token } from "./Harness.js"

/**
 * Registers the persist tests for one backend.
 */
export const persistContract = (harness: Harness, capabilities: ContractCapabilities): void => {
  const { freshPartition, record, records, seed, pendingIds, findPending, withStore } = harness
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

    it.effect("R-PERSIST-1 partial overlap stores the new records and keeps the original id of the existing one", () =>
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

    const surrogateCases: ReadonlyArray<readonly [field: string, make: (pk: string) => NewOutboxRecord]> = [
      ["id", (pk) => record(pk, { env: "s-id", id: `${pk}.\uD800` })],
      ["partitionKey", (pk) => record(`${pk}\uDC00`, { env: "s-pk", id: `${pk}.s-pk` })],
      ["envelopeId", (pk) => record(pk, { env: "s-env\uD83D", id: `${pk}.s-env` })],
      [
        "bindingId",
        (pk) =>
          new NewOutboxRecord({ partitionKey: pk, envelopeId: "s-b", bindingId: "b\uDFFF", payload: payloadOf("x") })
      ],
      [
        "routeId",
        (pk) =>
          new NewOutboxRecord({
            partitionKey: pk,
            envelopeId: "s-r",
            bindingId: "b",
            routeId: "r\uD800",
            payload: payloadOf("x")
          })
      ],
      [
        "address",
        (pk) =>
          new NewOutboxRecord({
            partitionKey: pk,
            envelopeId: "s-a",
            bindingId: "b",
            address: "\uDC00x",
            payload: payloadOf("x")
          })
      ],
      ["orderingKey", (pk) => record(pk, { env: "s-ok", key: "k\uD800" })],
      [
        "a header name",
        (pk) =>
          new NewOutboxRecord({
            partitionKey: pk,
            envelopeId: "s-hn",
            bindingId: "b",
            headers: { "x-\uD800": "v" },
            payload: payloadOf("x")
          })
      ],
      [
        "header x-trace",
        (pk) =>
          new NewOutboxRecord({
            partitionKey: pk,
            envelopeId: "s-hv",
            bindingId: "b",
            headers: { "x-trace": "t\uDBFF" },
            payload: payloadOf("x")
          })
      ]
    ]

    for (const [field, makeBad] of surrogateCases) {
      it.effect(
        `R-PERSIST-5 a lone surrogate in ${field} fails with InvalidRecord naming the field (every backend alike); nothing is stored`,
        () =>
          withStore((store) =>
            Effect.gen(function* () {
              const pk = freshPartition("surrogate")
              const good = record(pk, { env: "good" })
              const error = yield* Effect.flip(store.persist([good, makeBad(pk)]))
              expect(error._tag).toBe("InvalidRecord")
              if (error._tag === "InvalidRecord") {
                expect(error.index).toBe(1)
                expect(error.reason).toContain(`${field} holds a lone surrogate`)
                expect(error.message).not.toMatch(/\p{Cs}/u)
              }
              expect(yield* store.countPending(pk)).toBe(0)
            })
          )
      )
    }

    it.effect("R-PERSIST-5 two ids differing only in a lone surrogate never collide: both are InvalidRecord", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("collide")
          const first = yield* Effect.flip(store.persist([record(pk, { env: "one", id: `${pk}.\uD800` })]))
          const second = yield* Effect.flip(store.persist([record(pk, { env: "two", id: `${pk}.\uD801` })]))
          expect([first._tag, second._tag]).toEqual(["InvalidRecord", "InvalidRecord"])
          expect(yield* store.countPending(pk)).toBe(0)
        })
      )
    )

    it.effect("R-PERSIST-5 InvalidRecord names the field, never the rejected value (e.g. a secret header)", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("novalue")
          const secret = "Bearer S3CRET-token"
          const bad: ReadonlyArray<readonly [string, Record<string, unknown>]> = [
            ["payload", { payload: secret }],
            ["headers", { headers: [secret] }],
            ["headers.authorization", { headers: { authorization: [secret] } }],
            ["orderingKey", { orderingKey: { value: secret } }],
            ["createdAt", { createdAt: secret }],
            ["routeId", { routeId: 7 }]
          ]
          for (const [field, fields] of bad) {
            const input = { partitionKey: pk, envelopeId: "e", bindingId: "b", payload: payloadOf("x"), ...fields }
            const error = yield* Effect.flip(store.persist(Untyped.untyped<ReadonlyArray<NewOutboxRecord>>([input])))
            expect(error._tag, field).toBe("InvalidRecord")
            if (error._tag === "InvalidRecord") {
              expect(error.reason, field).toContain(field)
              expect(error.message, field).not.toContain("S3CRET")
              expect(error.message, field).not.toContain("actual")
              expect(JSON.stringify(error), field).not.toContain("S3CRET")
            }
          }
          expect(yield* store.countPending(pk)).toBe(0)
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
}
