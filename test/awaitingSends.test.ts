/**
 * `AwaitingSends`, the broker sinks' sends awaiting an answer: each send is settled once — by its answer, by the
 * sweep once its deadline passed (TestClock), or as `closed` when the sink's scope closes.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/TestClock"
import * as AwaitingSends from "../src/layers/sinks/AwaitingSends.js"
import { SendError } from "../src/services/Sink.js"

interface Sent extends AwaitingSends.Awaiting {
  readonly name: string
}

/** A send whose results are collected by name (an exit per resume, so a second resume would show). */
const sent = (name: string, results: Array<readonly [string, string]>, deadline: number): Sent => ({
  name,
  deadline,
  resume: (result) => {
    const exit = Effect.runSyncExit(result)
    results.push([
      name,
      Exit.isSuccess(exit)
        ? "ok"
        : Option.match(Cause.failureOption(exit.cause), { onNone: () => "defect", onSome: (error) => error.code })
    ])
  }
})

describe("AwaitingSends", () => {
  it.effect("answered once; overdue sends time out in the sweep; the rest fail closed with the scope", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const awaiting = yield* AwaitingSends.make<string, Sent>(
        yield* Effect.clock,
        Duration.seconds(1),
        (entry, reason) => new SendError({ retryable: true, code: reason, message: `${entry.name}: ${reason}` })
      ).pipe(Scope.extend(scope))
      const results: Array<readonly [string, string]> = []
      awaiting.add("a", sent("a", results, awaiting.deadline()))
      awaiting.add("b", sent("b", results, awaiting.deadline()))
      // answered: taken out once; a late second answer finds nothing
      awaiting.take("a")?.resume(Effect.void)
      expect(awaiting.take("a")).toBeUndefined()
      // the sweep runs every quarter of the timeout: b is overdue after 1 s, found by 1.25 s
      yield* TestClock.adjust("1250 millis")
      awaiting.add("c", sent("c", results, awaiting.deadline()))
      awaiting.add("d", sent("d", results, awaiting.deadline()))
      expect(awaiting.takeFirst((entry) => entry.name === "d")?.name).toBe("d")
      yield* Scope.close(scope, Exit.void)
      expect(results).toEqual([
        ["a", "ok"],
        ["b", "timeout"],
        ["c", "closed"]
      ])
    })
  )
})
