/**
 * DeadLetterStore contract, arguments (issue 18 item 10): every operation refuses a bad argument with one
 * `InvalidArgument` naming the operation and the argument (never echoing the value), before anything is
 * read or deleted, on every backend.
 */
import { expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import type { DeadLetterFilter } from "../../../src/domain/DeadLetterEntry.js"
import { DeadLetterStore } from "../../../src/services/DeadLetterStore.js"
import { untyped } from "../Untyped.js"
import { entry, idsOf, type Run, unique, uniqueWindowStart } from "./DeadLetterSupport.js"

const expectInvalid = (error: { readonly _tag: string }, operation: string, argument: string): void => {
  expect(error).toMatchObject({ _tag: "InvalidArgument", operation, argument })
}

/** Limits that are not positive integers (an absent limit is the one way to ask for all). */
const badLimits: ReadonlyArray<number> = [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 1e308]

/** The argument tests. */
export const argumentSuite = (run: Run): void => {
  it.effect("§5 get with an empty or non-string id fails with InvalidArgument", () =>
    run(
      Effect.gen(function* () {
        const dlq = yield* DeadLetterStore
        for (const bad of ["", untyped<string>(42), untyped<string>(undefined)]) {
          expectInvalid(yield* Effect.flip(dlq.get(bad)), "get", "id")
        }
      })
    )
  )

  it.effect(
    "§5 delete and redrive with an empty or non-string id, or ids not in an array, fail and touch nothing",
    () =>
      run(
        Effect.gen(function* () {
          const dlq = yield* DeadLetterStore
          const kept = entry({ failedAt: uniqueWindowStart() })
          yield* dlq.write(kept)
          const badIds: ReadonlyArray<ReadonlyArray<string>> = [
            [kept.id, ""],
            [kept.id, untyped<string>(undefined)],
            [untyped<string>(7)],
            untyped<ReadonlyArray<string>>(kept.id)
          ]
          for (const bad of badIds) {
            expectInvalid(yield* Effect.flip(dlq.delete(bad)), "delete", "ids")
            expectInvalid(yield* Effect.flip(dlq.redrive(bad)), "redrive", "ids")
          }
          expect((yield* dlq.get(kept.id)).id).toBe(kept.id)
        })
      )
  )

  it.effect("§5 list and deleteWhere with a limit that is not a positive integer fail and delete nothing", () =>
    run(
      Effect.gen(function* () {
        const dlq = yield* DeadLetterStore
        const routeId = unique("route")
        const kept = entry({ routeId, failedAt: uniqueWindowStart() })
        yield* dlq.write(kept)
        for (const limit of badLimits) {
          expectInvalid(yield* Effect.flip(dlq.list({ routeId, limit })), "list", "filter.limit")
          expectInvalid(yield* Effect.flip(dlq.deleteWhere({ routeId, limit })), "deleteWhere", "filter.limit")
        }
        expect(idsOf(yield* dlq.list({ routeId }))).toEqual([kept.id])
      })
    )
  )

  it.effect("§5 a filter with since after before, a bad instant, category or route fails with InvalidArgument", () =>
    run(
      Effect.gen(function* () {
        const dlq = yield* DeadLetterStore
        const routeId = unique("route")
        const t = uniqueWindowStart()
        const kept = entry({ routeId, failedAt: t + 1 })
        yield* dlq.write(kept)
        const bad: ReadonlyArray<readonly [DeadLetterFilter, string]> = [
          [{ routeId, since: DateTime.unsafeMake(t + 2), before: DateTime.unsafeMake(t + 1) }, "filter"],
          [{ routeId, since: untyped<DateTime.Utc>("2020-01-01") }, "filter.since"],
          [{ routeId, before: untyped<DateTime.Utc>(t) }, "filter.before"],
          [{ routeId, category: untyped<"poison">("bogus") }, "filter.category"],
          [{ routeId: untyped<string>(42) }, "filter.routeId"],
          [untyped<DeadLetterFilter>(null), "filter"]
        ]
        for (const [filter, argument] of bad) {
          expectInvalid(yield* Effect.flip(dlq.list(filter)), "list", argument)
          expectInvalid(yield* Effect.flip(dlq.deleteWhere(filter)), "deleteWhere", argument)
        }
        expect(idsOf(yield* dlq.list({ routeId }))).toEqual([kept.id])
      })
    )
  )

  it.effect("§5 purge with something other than a DateTime fails with InvalidArgument and deletes nothing", () =>
    run(
      Effect.gen(function* () {
        const dlq = yield* DeadLetterStore
        const kept = entry({ failedAt: uniqueWindowStart() })
        yield* dlq.write(kept)
        for (const bad of [untyped<DateTime.Utc>("nope"), untyped<DateTime.Utc>(undefined), untyped<DateTime.Utc>(0)]) {
          expectInvalid(yield* Effect.flip(dlq.purge(bad)), "purge", "before")
        }
        expect((yield* dlq.get(kept.id)).id).toBe(kept.id)
      })
    )
  )

  it.effect("§5 InvalidArgument names the argument, never the value", () =>
    run(
      Effect.gen(function* () {
        const dlq = yield* DeadLetterStore
        const error = yield* Effect.flip(dlq.list({ limit: 123.456 }))
        expect(error.message).toContain("filter.limit")
        expect(error.message).not.toContain("123.456")
      })
    )
  )
}
