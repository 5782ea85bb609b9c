/**
 * Every operation validates its arguments in the store core and fails with `InvalidArgument` (naming the
 * operation and the argument, never its value) before touching state, identically on every backend. A
 * limit must be a safe integer; an integer `<= 0` stays the fencing no-op of R-CLAIM-3 and a larger one
 * than any backend takes means "everything".
 */
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import { InvalidArgument, InvalidRecord } from "../../../src/domain/OutboxError.js"
import type { OutboxStoreService } from "../../../src/services/OutboxStore.js"
import { type Harness, idsOf, START, token } from "./Harness.js"

/**
 * The store's operations as an untyped caller (plain JavaScript, decoded input) reaches them. Method
 * syntax makes the typed service assignable to it.
 */
interface UntypedStore {
  persist(records: unknown): Effect.Effect<unknown, unknown>
  claim(partitionKey: unknown, token: unknown, limit: unknown): Effect.Effect<unknown, unknown>
  complete(ids: unknown, token: unknown): Effect.Effect<unknown, unknown>
  release(ids: unknown, token: unknown): Effect.Effect<unknown, unknown>
  expire(before: unknown, partitionKey: unknown, token: unknown): Effect.Effect<unknown, unknown>
  queryPending(partitionKey: unknown, limit: unknown): Effect.Effect<unknown, unknown>
  countPending(partitionKey: unknown): Effect.Effect<unknown, unknown>
  countClaimed(partitionKey: unknown): Effect.Effect<unknown, unknown>
}

const untyped = (store: OutboxStoreService): UntypedStore => store

/** A value that must never appear in an error message. */
const SECRET = "s3cr3t-value"

/** Fails the test unless `effect` fails with `InvalidArgument` for `operation`/`argument`; returns its message. */
const expectInvalid = (effect: Effect.Effect<unknown, unknown>, operation: string, argument: string) =>
  Effect.gen(function* () {
    const error = yield* Effect.flip(effect)
    expect(error).toBeInstanceOf(InvalidArgument)
    if (error instanceof InvalidArgument) {
      expect({ operation: error.operation, argument: error.argument }).toEqual({ operation, argument })
      expect(error.message.startsWith(`${operation}: invalid ${argument}: `)).toBe(true)
      expect(error.message).not.toContain(SECRET)
    }
  })

const badPartitionKeys: ReadonlyArray<readonly [string, unknown]> = [
  ["an empty string", ""],
  ["a number", 42],
  ["undefined", undefined],
  ["an object", { key: SECRET }]
]

const badLimits: ReadonlyArray<readonly [string, unknown]> = [
  ["NaN", Number.NaN],
  ["Infinity", Number.POSITIVE_INFINITY],
  ["-Infinity", Number.NEGATIVE_INFINITY],
  ["1e308", 1e308],
  ["a fraction", 1.5],
  ["a numeric string", "10"]
]

const badIdLists: ReadonlyArray<readonly [string, unknown]> = [
  ["a string", SECRET],
  ["[undefined]", [undefined]],
  ["an empty id", [""]],
  ["a numeric id", [42]],
  ["null", null]
]

const badInstants: ReadonlyArray<readonly [string, unknown]> = [
  ["a string", SECRET],
  ["epoch milliseconds", START + 100],
  ["undefined", undefined]
]

/**
 * Registers the argument-validation tests for one backend.
 */
export const argumentsContract = (harness: Harness): void => {
  const { freshPartition, records, seed, pendingIds, withStore } = harness
  describe("arguments", () => {
    for (const [label, bad] of badPartitionKeys) {
      it.effect(`claim with ${label} as partition key fails with InvalidArgument and creates nothing`, () =>
        withStore((store) =>
          Effect.gen(function* () {
            yield* expectInvalid(untyped(store).claim(bad, token("o", 3), 10), "claim", "partitionKey")
            yield* expectInvalid(untyped(store).queryPending(bad, 10), "queryPending", "partitionKey")
            yield* expectInvalid(untyped(store).countPending(bad), "countPending", "partitionKey")
            yield* expectInvalid(untyped(store).countClaimed(bad), "countClaimed", "partitionKey")
            yield* expectInvalid(
              untyped(store).expire(DateTime.unsafeMake(START), bad, token("o", 3)),
              "expire",
              "partitionKey"
            )
          })
        )
      )
    }

    for (const [label, bad] of badLimits) {
      it.effect(`claim with limit ${label} fails with InvalidArgument and neither claims nor raises the fence`, () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("badlimit")
            const ids = yield* seed(store, pk, ["a", "b"])
            yield* expectInvalid(untyped(store).claim(pk, token("o", 5), bad), "claim", "limit")
            yield* expectInvalid(untyped(store).queryPending(pk, bad), "queryPending", "limit")
            expect(yield* pendingIds(store, pk)).toEqual(ids)
            expect(yield* store.countClaimed(pk)).toBe(0)
            // the fence was not raised to 5: version 4 is still accepted
            expect(idsOf(yield* store.claim(pk, token("o", 4), 10))).toEqual(ids)
          })
        )
      )
    }

    it.effect("R-CLAIM-3 a negative integer limit stays a fencing no-op, not an invalid argument", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("negativelimit")
          yield* seed(store, pk, ["a"])
          expect((yield* store.claim(pk, token("o", 5), -3)).records).toEqual([])
          expect(yield* store.queryPending(pk, -3)).toEqual([])
          expect((yield* Effect.flip(store.claim(pk, token("o", 4), 10)))._tag).toBe("StaleFencingToken")
        })
      )
    )

    it.effect("the largest safe integer is a valid limit for claim and queryPending", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("hugelimit")
          const ids = yield* seed(store, pk, ["a", "b", "c"])
          expect((yield* store.queryPending(pk, Number.MAX_SAFE_INTEGER)).map((r) => r.id)).toEqual(ids)
          expect(idsOf(yield* store.claim(pk, token("o", 1), Number.MAX_SAFE_INTEGER))).toEqual(ids)
        })
      )
    )

    for (const operation of ["complete", "release"] as const) {
      for (const [label, bad] of badIdLists) {
        it.effect(`${operation} with ${label} as ids fails with InvalidArgument and changes nothing`, () =>
          withStore((store) =>
            Effect.gen(function* () {
              const pk = freshPartition(`${operation}badids`)
              yield* seed(store, pk, ["a"])
              const t = token("o", 1)
              const claimed = idsOf(yield* store.claim(pk, t, 10))
              yield* expectInvalid(untyped(store)[operation](bad, t), operation, "ids")
              expect(yield* store.countClaimed(pk)).toBe(1)
              yield* store[operation](claimed, t)
              expect(yield* store.countClaimed(pk)).toBe(0)
            })
          )
        )
      }
    }

    for (const [label, bad] of badInstants) {
      it.effect(`expire with ${label} as before fails with InvalidArgument, expiring nothing`, () =>
        withStore((store) =>
          Effect.gen(function* () {
            const pk = freshPartition("badbefore")
            yield* seed(store, pk, [{ env: "a", expiresAt: START + 1 }])
            yield* expectInvalid(untyped(store).expire(bad, pk, token("o", 5)), "expire", "before")
            expect(yield* store.countPending(pk)).toBe(1)
            // the fence was not raised to 5
            expect(yield* store.expire(DateTime.unsafeMake(START + 100), pk, token("o", 4))).toBe(1)
          })
        )
      )
    }

    it.effect("R-PERSIST-5 persist of something other than an array fails with InvalidRecord", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const pk = freshPartition("notarray")
          const [only] = records(pk, ["a"])
          const error = yield* Effect.flip(untyped(store).persist(only))
          expect(error).toBeInstanceOf(InvalidRecord)
          expect(yield* store.countPending(pk)).toBe(0)
        })
      )
    )
  })
}
