/**
 * DeadLetterStore contract, single entries (SPEC §5): every field round-trips, duplicates and invalid
 * entries are refused, a missing id is `NotFound`, returned entries are copies.
 */
import { expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import { DeadLetterEntry } from "../../../src/domain/DeadLetterEntry.js"
import { DeadLetterStore } from "../../../src/services/DeadLetterStore.js"
import { bytes, entry, expectSameEntry, type Run, unique, uniqueWindowStart } from "./DeadLetterSupport.js"

/** The write, get and copy tests. */
export const entrySuite = (run: Run): void => {
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
}
