/**
 * The DeadLetterStore contract (SPEC §5), written once and run against every backend.
 *
 * Every test builds a fresh layer (dead-letter store plus the backend's outbox store) from the factory.
 * Tests keep to entries of their own: unique entry ids, route ids and partition keys, and a time
 * window of their own for filters that do not name a route, so a backend may share one table between
 * tests. Only the purge test works below every other test's window (purge spans all routes). Tests run
 * on `TestClock`.
 */
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import { randomInt, randomUUID } from "node:crypto"
import { type DeadLetterCategory, DeadLetterEntry } from "../../src/domain/DeadLetterEntry.js"
import { NewOutboxRecord } from "../../src/domain/OutboxRecord.js"
import { DeadLetterStore } from "../../src/services/DeadLetterStore.js"
import { OutboxStore } from "../../src/services/OutboxStore.js"

/** A time window no other test uses: a random minute-aligned start well after the purge test's region. */
const uniqueWindowStart = (): number => 1_600_000_000_000 + randomInt(0, 2 ** 28) * 60_000

const unique = (label: string): string => `${label}-${randomUUID()}`

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text)

interface EntrySpec {
  readonly id?: string
  readonly routeId?: string
  readonly category?: DeadLetterCategory
  readonly failedAt: number
  readonly partitionKey?: string
  readonly envelopeId?: string
  readonly bindingId?: string
  readonly orderingKey?: string
  readonly address?: string
  readonly headers?: Record<string, string>
  readonly payload?: Uint8Array
}

const entry = (spec: EntrySpec): DeadLetterEntry =>
  new DeadLetterEntry({
    id: spec.id ?? unique("dlq"),
    recordId: unique("rec"),
    partitionKey: spec.partitionKey ?? unique("pk"),
    envelopeId: spec.envelopeId ?? unique("env"),
    bindingId: spec.bindingId ?? "binding-1",
    payload: spec.payload ?? bytes("payload"),
    headers: spec.headers ?? {},
    orderingKey: spec.orderingKey,
    routeId: spec.routeId,
    address: spec.address,
    category: spec.category ?? "permanent",
    reason: "sink rejected",
    errorCode: "E400",
    lastError: "400 Bad Request",
    attempts: 1,
    failedAt: DateTime.unsafeMake(spec.failedAt)
  })

const idsOf = (entries: ReadonlyArray<DeadLetterEntry>): ReadonlyArray<string> => entries.map((e) => e.id)

const expectSameEntry = (actual: DeadLetterEntry, expected: DeadLetterEntry): void => {
  expect(actual.id).toBe(expected.id)
  expect(actual.recordId).toBe(expected.recordId)
  expect(actual.partitionKey).toBe(expected.partitionKey)
  expect(actual.envelopeId).toBe(expected.envelopeId)
  expect(actual.bindingId).toBe(expected.bindingId)
  expect(Array.from(actual.payload)).toEqual(Array.from(expected.payload))
  expect(actual.headers).toEqual(expected.headers)
  expect(actual.orderingKey).toBe(expected.orderingKey)
  expect(actual.routeId).toBe(expected.routeId)
  expect(actual.address).toBe(expected.address)
  expect(actual.category).toBe(expected.category)
  expect(actual.reason).toBe(expected.reason)
  expect(actual.errorCode).toBe(expected.errorCode)
  expect(actual.lastError).toBe(expected.lastError)
  expect(actual.attempts).toBe(expected.attempts)
  expect(DateTime.toEpochMillis(actual.failedAt)).toBe(DateTime.toEpochMillis(expected.failedAt))
}

/**
 * Runs the DeadLetterStore contract suite against the layer built by `makeLayer` (called once per
 * test). The layer provides the dead-letter store and the outbox store it redrives into.
 */
export const deadLetterStoreContract = (
  name: string,
  makeLayer: () => Layer.Layer<DeadLetterStore | OutboxStore, unknown>
): void => {
  const run = <A, E>(self: Effect.Effect<A, E, DeadLetterStore | OutboxStore>): Effect.Effect<A, unknown> =>
    Effect.provide(self, makeLayer())

  /** Persists a record, claims it and completes it: what the drainer leaves behind a dead-letter. */
  const deadLettered = (record: NewOutboxRecord, version: number) =>
    Effect.gen(function* () {
      const outbox = yield* OutboxStore
      const report = yield* outbox.persist([record])
      const token = { owner: "drainer", version }
      const batch = yield* outbox.claim(record.partitionKey, token, 10)
      expect(batch.records.map((r) => r.id)).toEqual(report.persisted)
      yield* outbox.complete(report.persisted, token)
      const id = report.persisted[0]
      if (id === undefined) return yield* Effect.dieMessage("persist reported no id")
      return id
    })

  describe(`DeadLetterStore contract: ${name}`, () => {
    it.effect("§5 every field round-trips through write, get and list, optional fields present", () =>
      run(
        Effect.gen(function* () {
          const dlq = yield* DeadLetterStore
          const written = new DeadLetterEntry({
            id: unique("full"),
            recordId: unique("rec"),
            partitionKey: unique("pk"),
            envelopeId: "env-ü-1",
            bindingId: "binding-#1",
            payload: new Uint8Array([0, 1, 2, 254, 255, 0]),
            headers: { "content-type": "application/json", "x-trace": "a=b;c=d", empty: "", ünï: "çødé" },
            orderingKey: "customer-7",
            routeId: unique("route"),
            address: "https://example.invalid/hook?x=1",
            category: "poison",
            reason: "replay budget spent",
            errorCode: "POISON",
            lastError: 'timeout after 30s: "quoted" \n newline',
            attempts: 7,
            failedAt: DateTime.unsafeMake(uniqueWindowStart() + 123)
          })
          yield* dlq.write(written)
          expectSameEntry(yield* dlq.get(written.id), written)
          const listed = yield* dlq.list({ routeId: written.routeId })
          expect(listed).toHaveLength(1)
          const first = listed[0]
          if (first !== undefined) expectSameEntry(first, written)
        })
      )
    )

    it.effect("§5 every field round-trips with the optional fields absent and empty headers", () =>
      run(
        Effect.gen(function* () {
          const dlq = yield* DeadLetterStore
          const written = new DeadLetterEntry({
            id: unique("bare"),
            recordId: unique("rec"),
            partitionKey: unique("pk"),
            envelopeId: "env-1",
            bindingId: "binding-1",
            payload: new Uint8Array(0),
            headers: {},
            category: "expired",
            reason: "",
            errorCode: "",
            lastError: "",
            attempts: 0,
            failedAt: DateTime.unsafeMake(uniqueWindowStart())
          })
          yield* dlq.write(written)
          const got = yield* dlq.get(written.id)
          expectSameEntry(got, written)
          expect(got.orderingKey).toBeUndefined()
          expect(got.routeId).toBeUndefined()
          expect(got.address).toBeUndefined()
          expect(got.payload.length).toBe(0)
        })
      )
    )

    it.effect("§5 write of an existing id fails with DuplicateRecord and keeps the first entry", () =>
      run(
        Effect.gen(function* () {
          const dlq = yield* DeadLetterStore
          const first = entry({ failedAt: uniqueWindowStart(), category: "poison" })
          yield* dlq.write(first)
          const second = new DeadLetterEntry({ ...first, category: "permanent", reason: "other" })
          const error = yield* Effect.flip(dlq.write(second))
          expect(error._tag).toBe("DuplicateRecord")
          if (error._tag === "DuplicateRecord") expect(error.ids).toEqual([first.id])
          const stored = yield* dlq.get(first.id)
          expect(stored.category).toBe("poison")
          expect(stored.reason).toBe(first.reason)
        })
      )
    )

    it.effect("§5 write of an invalid entry fails with InvalidRecord and stores nothing", () =>
      run(
        Effect.gen(function* () {
          const dlq = yield* DeadLetterStore
          const valid = entry({ failedAt: uniqueWindowStart() })
          const invalid = new DeadLetterEntry({ ...valid, partitionKey: "" }, { disableValidation: true })
          const error = yield* Effect.flip(dlq.write(invalid))
          expect(error._tag).toBe("InvalidRecord")
          const missing = yield* Effect.flip(dlq.get(valid.id))
          expect(missing._tag).toBe("NotFound")
        })
      )
    )

    it.effect("§5 get of a missing id fails with NotFound naming the entity and id", () =>
      run(
        Effect.gen(function* () {
          const dlq = yield* DeadLetterStore
          const id = unique("missing")
          const error = yield* Effect.flip(dlq.get(id))
          expect(error._tag).toBe("NotFound")
          if (error._tag === "NotFound") {
            expect(error.entity).toBe("DeadLetterEntry")
            expect(error.ids).toEqual([id])
          }
        })
      )
    )

    it.effect("§5 returned entries are copies: mutating them, or the written value, changes nothing stored", () =>
      run(
        Effect.gen(function* () {
          const dlq = yield* DeadLetterStore
          const routeId = unique("route")
          const written = entry({ routeId, failedAt: uniqueWindowStart(), headers: { a: "1" }, payload: bytes("abc") })
          yield* dlq.write(written)
          written.payload[0] = 120
          Reflect.set(written.headers, "a", "changed-after-write")
          const got = yield* dlq.get(written.id)
          got.payload[1] = 121
          Reflect.set(got.headers, "b", "added")
          const listed = yield* dlq.list({ routeId })
          const first = listed[0]
          if (first !== undefined) {
            first.payload[2] = 122
            Reflect.set(first.headers, "a", "changed-after-list")
          }
          const again = yield* dlq.get(written.id)
          expect(new TextDecoder().decode(again.payload)).toBe("abc")
          expect(again.headers).toEqual({ a: "1" })
        })
      )
    )

    it.effect("§5 list returns oldest first by (failedAt, id) whatever the write order", () =>
      run(
        Effect.gen(function* () {
          const dlq = yield* DeadLetterStore
          const routeId = unique("route")
          const t = uniqueWindowStart()
          const tag = randomUUID()
          const entries = [
            entry({ id: `${tag}-c`, routeId, failedAt: t + 5 }),
            entry({ id: `${tag}-b`, routeId, failedAt: t + 10 }),
            entry({ id: `${tag}-a`, routeId, failedAt: t + 10 }),
            entry({ id: `${tag}-z`, routeId, failedAt: t }),
            entry({ id: `${tag}-d`, routeId, failedAt: t + 10 }),
            entry({ id: `${tag}-y`, routeId, failedAt: t + 1 })
          ]
          for (const e of entries) yield* dlq.write(e)
          const listed = yield* dlq.list({ routeId })
          expect(idsOf(listed)).toEqual([`${tag}-z`, `${tag}-y`, `${tag}-c`, `${tag}-a`, `${tag}-b`, `${tag}-d`])
          const limited = yield* dlq.list({ routeId, limit: 4 })
          expect(idsOf(limited)).toEqual([`${tag}-z`, `${tag}-y`, `${tag}-c`, `${tag}-a`])
        })
      )
    )

    it.effect("§5 list filters by route, by category, since (inclusive), before (exclusive) and limit", () =>
      run(
        Effect.gen(function* () {
          const dlq = yield* DeadLetterStore
          const routeA = unique("route-a")
          const routeB = unique("route-b")
          const t = uniqueWindowStart()
          const a1 = entry({ routeId: routeA, category: "poison", failedAt: t + 1 })
          const a2 = entry({ routeId: routeA, category: "permanent", failedAt: t + 2 })
          const a3 = entry({ routeId: routeA, category: "expired", failedAt: t + 3 })
          const a4 = entry({ routeId: routeA, category: "poison", failedAt: t + 4 })
          const b1 = entry({ routeId: routeB, category: "poison", failedAt: t + 2 })
          const none = entry({ category: "poison", failedAt: t + 3 })
          for (const e of [a4, b1, a1, none, a3, a2]) yield* dlq.write(e)
          const at = (ms: number) => DateTime.unsafeMake(t + ms)

          expect(idsOf(yield* dlq.list({ routeId: routeA }))).toEqual(idsOf([a1, a2, a3, a4]))
          expect(idsOf(yield* dlq.list({ routeId: routeB }))).toEqual(idsOf([b1]))
          expect(idsOf(yield* dlq.list({ routeId: unique("route-none") }))).toEqual([])
          expect(idsOf(yield* dlq.list({ category: "poison", since: at(0), before: at(5) }))).toEqual(
            idsOf([a1, b1, none, a4])
          )
          expect(idsOf(yield* dlq.list({ routeId: routeA, category: "poison" }))).toEqual(idsOf([a1, a4]))
          expect(idsOf(yield* dlq.list({ routeId: routeA, since: at(2) }))).toEqual(idsOf([a2, a3, a4]))
          expect(idsOf(yield* dlq.list({ routeId: routeA, before: at(3) }))).toEqual(idsOf([a1, a2]))
          expect(idsOf(yield* dlq.list({ routeId: routeA, since: at(2), before: at(4) }))).toEqual(idsOf([a2, a3]))
          expect(idsOf(yield* dlq.list({ since: at(3), before: at(4) }))).toEqual(idsOf([a3, none].sort(byId)))
          expect(idsOf(yield* dlq.list({ routeId: routeA, limit: 2 }))).toEqual(idsOf([a1, a2]))
          expect(idsOf(yield* dlq.list({ routeId: routeA, since: at(2), limit: 1 }))).toEqual(idsOf([a2]))
          expect(yield* dlq.list({ routeId: routeA, limit: 0 })).toEqual([])
        })
      )
    )

    it.effect("§5 delete by ids returns the count of entries that existed and removes only those", () =>
      run(
        Effect.gen(function* () {
          const dlq = yield* DeadLetterStore
          const routeId = unique("route")
          const t = uniqueWindowStart()
          const [e1, e2, e3] = [1, 2, 3].map((i) => entry({ routeId, failedAt: t + i }))
          if (e1 === undefined || e2 === undefined || e3 === undefined) return
          for (const e of [e1, e2, e3]) yield* dlq.write(e)
          expect(yield* dlq.delete([e1.id, unique("missing"), e3.id])).toBe(2)
          expect(idsOf(yield* dlq.list({ routeId }))).toEqual([e2.id])
          expect(yield* dlq.delete([e1.id])).toBe(0)
          expect(yield* dlq.delete([])).toBe(0)
          expect((yield* Effect.flip(dlq.get(e1.id)))._tag).toBe("NotFound")
          expect((yield* dlq.get(e2.id)).id).toBe(e2.id)
        })
      )
    )

    it.effect("§5 deleteWhere by route removes exactly that route's entries", () =>
      run(
        Effect.gen(function* () {
          const dlq = yield* DeadLetterStore
          const routeA = unique("route-a")
          const routeB = unique("route-b")
          const t = uniqueWindowStart()
          for (let i = 0; i < 3; i++) yield* dlq.write(entry({ routeId: routeA, failedAt: t + i }))
          const b = entry({ routeId: routeB, failedAt: t })
          yield* dlq.write(b)
          expect(yield* dlq.deleteWhere({ routeId: routeA })).toBe(3)
          expect(yield* dlq.list({ routeId: routeA })).toEqual([])
          expect(idsOf(yield* dlq.list({ routeId: routeB }))).toEqual([b.id])
          expect(yield* dlq.deleteWhere({ routeId: routeA })).toBe(0)
        })
      )
    )

    it.effect("§5 deleteWhere by category removes only entries of that category", () =>
      run(
        Effect.gen(function* () {
          const dlq = yield* DeadLetterStore
          const routeId = unique("route")
          const t = uniqueWindowStart()
          const poison = [1, 3].map((i) => entry({ routeId, category: "poison", failedAt: t + i }))
          const permanent = [2, 4].map((i) => entry({ routeId, category: "permanent", failedAt: t + i }))
          for (const e of [...poison, ...permanent]) yield* dlq.write(e)
          const window = { since: DateTime.unsafeMake(t), before: DateTime.unsafeMake(t + 60_000) }
          expect(yield* dlq.deleteWhere({ category: "poison", ...window })).toBe(2)
          expect(idsOf(yield* dlq.list({ routeId }))).toEqual(idsOf(permanent))
        })
      )
    )

    it.effect("§5 deleteWhere by time range honours since (inclusive) and before (exclusive)", () =>
      run(
        Effect.gen(function* () {
          const dlq = yield* DeadLetterStore
          const routeId = unique("route")
          const t = uniqueWindowStart()
          const entries = [0, 1, 2, 3, 4].map((i) => entry({ routeId, failedAt: t + i * 1000 }))
          for (const e of entries) yield* dlq.write(e)
          const removed = yield* dlq.deleteWhere({
            routeId,
            since: DateTime.unsafeMake(t + 1000),
            before: DateTime.unsafeMake(t + 3000)
          })
          expect(removed).toBe(2)
          expect(idsOf(yield* dlq.list({ routeId }))).toEqual(idsOf(entries.filter((_, i) => i === 0 || i >= 3)))
        })
      )
    )

    it.effect("§5 deleteWhere with a limit removes the oldest entries first", () =>
      run(
        Effect.gen(function* () {
          const dlq = yield* DeadLetterStore
          const routeId = unique("route")
          const t = uniqueWindowStart()
          const entries = [5, 3, 1, 4, 2].map((i) => entry({ routeId, failedAt: t + i }))
          for (const e of entries) yield* dlq.write(e)
          const sorted = [...entries].sort(byAge)
          expect(yield* dlq.deleteWhere({ routeId, limit: 2 })).toBe(2)
          expect(idsOf(yield* dlq.list({ routeId }))).toEqual(idsOf(sorted.slice(2)))
          expect(yield* dlq.deleteWhere({ routeId, limit: 0 })).toBe(0)
          expect(yield* dlq.deleteWhere({ routeId, limit: 10 })).toBe(3)
          expect(yield* dlq.list({ routeId })).toEqual([])
        })
      )
    )

    it.effect("§5 deleteWhere over 260 entries of one route pages to the end and returns the exact total", () =>
      run(
        Effect.gen(function* () {
          const dlq = yield* DeadLetterStore
          const routeId = unique("route")
          const other = unique("route-other")
          const t = uniqueWindowStart()
          const entries = Array.from({ length: 260 }, (_, i) => entry({ routeId, failedAt: t + (i % 37) }))
          yield* Effect.forEach(entries, (e) => dlq.write(e), { concurrency: 8, discard: true })
          const kept = entry({ routeId: other, failedAt: t })
          yield* dlq.write(kept)
          expect(yield* dlq.deleteWhere({ routeId })).toBe(260)
          expect(yield* dlq.list({ routeId })).toEqual([])
          expect(idsOf(yield* dlq.list({ routeId: other }))).toEqual([kept.id])
        })
      )
    )

    it.effect("§5 purge(before) removes only entries strictly older than before, across routes", () =>
      run(
        Effect.gen(function* () {
          const dlq = yield* DeadLetterStore
          // Below every other test's window: purge spans all routes.
          const t = 1_000 + randomInt(0, 1000) * 100_000
          const routeA = unique("route-a")
          const routeB = unique("route-b")
          const oldA = entry({ routeId: routeA, failedAt: t })
          const oldB = entry({ routeId: routeB, failedAt: t + 1 })
          const oldNoRoute = entry({ failedAt: t + 2 })
          const boundary = entry({ routeId: routeA, failedAt: t + 10 })
          const young = entry({ routeId: routeB, failedAt: t + 11 })
          for (const e of [young, oldA, boundary, oldNoRoute, oldB]) yield* dlq.write(e)
          const purged = yield* dlq.purge(DateTime.unsafeMake(t + 10))
          expect(purged).toBe(3)
          for (const e of [oldA, oldB, oldNoRoute]) expect((yield* Effect.flip(dlq.get(e.id)))._tag).toBe("NotFound")
          expect(idsOf(yield* dlq.list({ routeId: routeA }))).toEqual([boundary.id])
          expect(idsOf(yield* dlq.list({ routeId: routeB }))).toEqual([young.id])
          expect(yield* dlq.purge(DateTime.unsafeMake(t + 10))).toBe(0)
        })
      )
    )

    it.effect(
      "§5 redrive re-persists a fresh record (new id, same envelope), removes the entry; it can be claimed",
      () =>
        run(
          Effect.gen(function* () {
            const dlq = yield* DeadLetterStore
            const outbox = yield* OutboxStore
            const partitionKey = unique("pk-redrive")
            const e = entry({
              partitionKey,
              envelopeId: "env-1",
              bindingId: "binding-9",
              orderingKey: "key-1",
              routeId: unique("route"),
              address: "https://example.invalid/hook",
              headers: { "content-type": "text/plain", "x-id": "42" },
              payload: bytes("hello again"),
              failedAt: uniqueWindowStart()
            })
            yield* dlq.write(e)
            yield* TestClock.adjust(Duration.minutes(3))
            const now = yield* DateTime.now
            const ids = yield* dlq.redrive([e.id])
            expect(ids).toHaveLength(1)
            const newId = ids[0]
            expect(newId).not.toBe(e.recordId)
            expect((yield* Effect.flip(dlq.get(e.id)))._tag).toBe("NotFound")
            expect(yield* outbox.countPending(partitionKey)).toBe(1)
            const batch = yield* outbox.claim(partitionKey, { owner: "drainer", version: 1 }, 10)
            expect(batch.records).toHaveLength(1)
            const record = batch.records[0]
            if (record === undefined) return
            expect(record.id).toBe(newId)
            expect(record.partitionKey).toBe(partitionKey)
            expect(record.envelopeId).toBe("env-1")
            expect(record.bindingId).toBe("binding-9")
            expect(Option.getOrUndefined(record.orderingKey)).toBe("key-1")
            expect(record.routeId).toBe(e.routeId)
            expect(record.address).toBe(e.address)
            expect(record.headers).toEqual({ "content-type": "text/plain", "x-id": "42" })
            expect(new TextDecoder().decode(record.payload)).toBe("hello again")
            expect(DateTime.toEpochMillis(record.createdAt)).toBe(DateTime.toEpochMillis(now))
            expect(record.status).toBe("claimed")
          })
        )
    )

    it.effect("§5 redrive replaces a completed record of the same identity with a fresh pending one", () =>
      run(
        Effect.gen(function* () {
          const dlq = yield* DeadLetterStore
          const outbox = yield* OutboxStore
          const partitionKey = unique("pk-replace")
          const original = new NewOutboxRecord({
            partitionKey,
            envelopeId: "env-1",
            bindingId: "binding-1",
            payload: bytes("first"),
            orderingKey: "k"
          })
          const originalId = yield* deadLettered(original, 1)
          const e = entry({
            partitionKey,
            envelopeId: "env-1",
            bindingId: "binding-1",
            orderingKey: "k",
            payload: bytes("first"),
            failedAt: uniqueWindowStart()
          })
          yield* dlq.write(e)
          yield* TestClock.adjust(Duration.seconds(1))
          const ids = yield* dlq.redrive([e.id])
          expect(ids).toHaveLength(1)
          expect(ids[0]).not.toBe(originalId)
          expect((yield* Effect.flip(dlq.get(e.id)))._tag).toBe("NotFound")
          const batch = yield* outbox.claim(partitionKey, { owner: "drainer", version: 2 }, 10)
          expect(batch.records.map((r) => r.id)).toEqual(ids)
          expect(batch.records[0]?.replayCount).toBe(1)
          expect(batch.records[0]?.envelopeId).toBe("env-1")
        })
      )
    )

    it.effect("§5 redrive when a pending record holds the identity persists nothing and returns its id", () =>
      run(
        Effect.gen(function* () {
          const dlq = yield* DeadLetterStore
          const outbox = yield* OutboxStore
          const partitionKey = unique("pk-pending")
          const report = yield* outbox.persist([
            new NewOutboxRecord({ partitionKey, envelopeId: "env-1", bindingId: "binding-1", payload: bytes("x") })
          ])
          const e = entry({ partitionKey, envelopeId: "env-1", bindingId: "binding-1", failedAt: uniqueWindowStart() })
          yield* dlq.write(e)
          const ids = yield* dlq.redrive([e.id])
          expect(ids).toEqual(report.persisted)
          expect((yield* Effect.flip(dlq.get(e.id)))._tag).toBe("NotFound")
          expect(yield* outbox.countPending(partitionKey)).toBe(1)
        })
      )
    )

    it.effect("§5 redrive of several entries returns one record id per entry, in order", () =>
      run(
        Effect.gen(function* () {
          const dlq = yield* DeadLetterStore
          const outbox = yield* OutboxStore
          const partitionKey = unique("pk-many")
          const routeId = unique("route")
          const t = uniqueWindowStart()
          const entries = [1, 2, 3].map((i) =>
            entry({ partitionKey, routeId, envelopeId: `env-${i}`, orderingKey: "k", failedAt: t + i })
          )
          for (const e of entries) yield* dlq.write(e)
          const ids = yield* dlq.redrive(idsOf(entries))
          expect(ids).toHaveLength(3)
          expect(new Set(ids).size).toBe(3)
          expect(yield* dlq.list({ routeId })).toEqual([])
          const batch = yield* outbox.claim(partitionKey, { owner: "drainer", version: 1 }, 10)
          expect(batch.records.map((r) => r.id)).toEqual(ids)
          expect(batch.records.map((r) => r.envelopeId)).toEqual(["env-1", "env-2", "env-3"])
        })
      )
    )

    it.effect("§5 redrive with an unknown entry id fails with NotFound and redrives nothing", () =>
      run(
        Effect.gen(function* () {
          const dlq = yield* DeadLetterStore
          const outbox = yield* OutboxStore
          const partitionKey = unique("pk-unknown")
          const known = entry({ partitionKey, failedAt: uniqueWindowStart() })
          yield* dlq.write(known)
          const missing = unique("missing")
          const error = yield* Effect.flip(dlq.redrive([known.id, missing]))
          expect(error._tag).toBe("NotFound")
          if (error._tag === "NotFound") {
            expect(error.entity).toBe("DeadLetterEntry")
            expect(error.ids).toEqual([missing])
          }
          expect((yield* dlq.get(known.id)).id).toBe(known.id)
          expect(yield* outbox.countPending(partitionKey)).toBe(0)
        })
      )
    )
  })
}

const byId = (a: DeadLetterEntry, b: DeadLetterEntry): number => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

const byAge = (a: DeadLetterEntry, b: DeadLetterEntry): number =>
  DateTime.toEpochMillis(a.failedAt) - DateTime.toEpochMillis(b.failedAt) || byId(a, b)
