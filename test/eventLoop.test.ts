/**
 * `groupPerTurn`: the calls made in the same turn of the event loop form one group; a group that fails
 * anyway fails its calls instead of leaving them waiting.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { groupPerTurn } from "../src/services/EventLoop.js"

interface Call {
  readonly n: number
}

const call = (join: (request: Call) => Effect.Effect<number, string>, n: number) => join({ n })

describe("groupPerTurn", () => {
  it.effect("calls of one turn share a group; a call made after the group ran starts the next one", () =>
    Effect.gen(function* () {
      const groups: Array<Array<number>> = []
      const join = groupPerTurn<Call, number, string>((group) => {
        groups.push(group.map((member) => member.n))
        return Effect.forEach(group, (member) => Deferred.succeed(member.done, member.n * 10), { discard: true })
      })
      const answers = yield* Effect.all(
        [1, 2, 3].map((n) => call(join, n)),
        { concurrency: "unbounded" }
      )
      expect(answers).toEqual([10, 20, 30])
      expect(yield* call(join, 4)).toBe(40)
      expect(groups).toEqual([[1, 2, 3], [4]])
    })
  )

  it.effect("a group whose runner fails anyway fails every waiting call with its cause; the next group runs", () =>
    Effect.gen(function* () {
      let broken = true
      const join = groupPerTurn<Call, number, string>((group) =>
        broken
          ? Effect.die(new Error("runner broke"))
          : Effect.forEach(group, (member) => Deferred.succeed(member.done, member.n), { discard: true })
      )
      const exits = yield* Effect.all(
        [1, 2].map((n) => Effect.exit(call(join, n))),
        { concurrency: "unbounded" }
      )
      for (const exit of exits) {
        expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
      }
      broken = false
      expect(yield* call(join, 5)).toBe(5)
    })
  )
})
