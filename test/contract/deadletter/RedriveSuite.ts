/**
 * DeadLetterStore contract, redrive (SPEC §5): a fresh pending record per entry, replacing a terminal
 * record of the identity, keeping a non-terminal one, `NotFound` before anything is redriven.
 */
import { expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import { NewOutboxRecord } from "../../../src/domain/OutboxRecord.js"
import { DeadLetterStore } from "../../../src/services/DeadLetterStore.js"
import { OutboxStore } from "../../../src/services/OutboxStore.js"
import { bytes, entry, idsOf, type Run, unique, uniqueWindowStart } from "./DeadLetterSupport.js"

/** The redrive tests. */
export const redriveSuite = (run: Run): void => {
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

  it.effect("§5 redrive re-persists a fresh record (new id, same envelope), removes the entry; it can be claimed", () =>
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
}
