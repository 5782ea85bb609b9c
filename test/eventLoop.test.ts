/**
 * `groupPerTurn` and `groupLookupsPerTurn`: the calls made in the same turn of the event loop form one group; a group that fails
 * anyway fails its calls instead of leaving them waiting; a lone caller stops waiting for the turn, and calls
 * of several fibers in one turn make it wait again.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import { aloneBeforeImmediate, Answer, groupLookupsPerTurn, groupPerTurn } from "../src/services/EventLoop.js"

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
        return Effect.sync(() => group.forEach((member) => member.done.succeed(member.n * 10)))
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
          : Effect.sync(() => group.forEach((member) => member.done.succeed(member.n)))
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

/** Whether `effect` returned before an immediate scheduled just before it ran (it did not wait for the turn). */
const withoutWaiting = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.flatMap(
    Effect.sync(() => {
      const turn = { passed: false }
      setImmediate(() => {
        turn.passed = true
      })
      return turn
    }),
    (turn) => Effect.map(effect, (a) => [a, !turn.passed] as const)
  )

describe("groupPerTurn with a lone caller", () => {
  const recorder = () => {
    const groups: Array<Array<number>> = []
    const join = groupPerTurn<Call, number, string>((group) => {
      groups.push(group.map((member) => member.n))
      return Effect.sync(() => group.forEach((member) => member.done.succeed(member.n)))
    })
    return { groups, join }
  }

  it.effect("after groups of one in a row, one fiber's calls run at once, one after another in one turn", () =>
    Effect.gen(function* () {
      const { groups, join } = recorder()
      const waited: Array<boolean> = []
      for (let n = 1; n <= aloneBeforeImmediate + 3; n++) {
        const [answer, atOnce] = yield* withoutWaiting(call(join, n))
        expect(answer).toBe(n)
        waited.push(!atOnce)
      }
      expect(waited).toEqual([...Array.from({ length: aloneBeforeImmediate }, () => true), false, false, false])
      // every call was a group of its own
      expect(groups).toEqual(Array.from({ length: aloneBeforeImmediate + 3 }, (_, i) => [i + 1]))
      // two calls of the same fiber in one turn (no wait between them) do not count as callers side by side
      const [[a, b], atOnce] = yield* withoutWaiting(Effect.all([call(join, 100), call(join, 101)]))
      expect([a, b, atOnce]).toEqual([100, 101, true])
    })
  )

  it.effect("calls of several fibers in one turn are grouped again, and the next lone call waits for the turn", () =>
    Effect.gen(function* () {
      const { groups, join } = recorder()
      for (let n = 1; n <= aloneBeforeImmediate; n++) yield* call(join, n)
      groups.length = 0
      const answers = yield* Effect.all(
        [10, 11, 12].map((n) => call(join, n)),
        { concurrency: "unbounded" }
      )
      expect(answers).toEqual([10, 11, 12])
      // the first ran at once, alone; the others, of other fibers in the same turn, waited and shared a group
      expect(groups).toEqual([[10], [11, 12]])
      const [answer, atOnce] = yield* withoutWaiting(call(join, 13))
      expect([answer, atOnce]).toEqual([13, false])
    })
  )
})

describe("groupLookupsPerTurn", () => {
  it.effect("lookups of one turn share one lookup of their distinct keys; each gets its key's value or undefined", () =>
    Effect.gen(function* () {
      const lookups: Array<ReadonlyArray<string>> = []
      const get = groupLookupsPerTurn((keys: ReadonlyArray<string>) => {
        lookups.push(keys)
        const stored = new Map<string, number>([
          ["a", 1],
          ["b", 2]
        ])
        return Effect.succeed(
          new Map(
            keys.flatMap((key) => {
              const value = stored.get(key)
              return value === undefined ? [] : [[key, value] as const]
            })
          )
        )
      })
      const answers = yield* Effect.all(
        ["a", "b", "a", "z"].map((key) => get(key)),
        { concurrency: "unbounded" }
      )
      expect(answers).toEqual([1, 2, 1, undefined])
      expect(lookups).toEqual([["a", "b", "z"]])
    })
  )

  it.effect("a failed lookup fails every call of its group with its error; the next group looks up again", () =>
    Effect.gen(function* () {
      let fail = true
      const get = groupLookupsPerTurn((keys: ReadonlyArray<string>) =>
        fail ? Effect.fail(`down for ${keys.join(",")}`) : Effect.succeed(new Map(keys.map((key) => [key, key])))
      )
      const failed = yield* Effect.all(
        ["a", "b"].map((key) => Effect.flip(get(key))),
        { concurrency: "unbounded" }
      )
      expect(failed).toEqual(["down for a,b", "down for a,b"])
      fail = false
      expect(yield* get("c")).toBe("c")
    })
  )
})

describe("Answer", () => {
  it.effect(
    "a wait before the answer resumes with it; a wait after it returns it at once; a second answer is ignored",
    () =>
      Effect.gen(function* () {
        const answer = new Answer<number, string>()
        const waiting = yield* Effect.fork(answer.wait())
        yield* Effect.yieldNow()
        expect(waiting.unsafePoll()).toBeNull()
        answer.succeed(1)
        answer.succeed(2)
        answer.failCause(Cause.fail("late"))
        expect(yield* waiting.await).toEqual(Exit.succeed(1))
        expect(yield* answer.wait()).toBe(1)
      })
  )

  it.live("a wait made before the answer but run after it returns the answer", () =>
    Effect.gen(function* () {
      const answer = new Answer<number, string>()
      const wait = answer.wait()
      answer.succeed(3)
      expect(yield* Effect.timeout(wait, "1 second")).toBe(3)
    })
  )

  it.effect("a failure reaches the waiter as its cause", () =>
    Effect.gen(function* () {
      const answer = new Answer<number, string>()
      const waiting = yield* Effect.fork(answer.wait())
      yield* Effect.yieldNow()
      answer.failCause(Cause.fail("no"))
      expect(yield* waiting.await).toEqual(Exit.fail("no"))
    })
  )

  it.effect("an interrupted wait is let go: the answer given after it goes to a later wait", () =>
    Effect.gen(function* () {
      const answer = new Answer<number, string>()
      const first = yield* Effect.fork(answer.wait())
      yield* Effect.yieldNow()
      const exit = yield* Fiber.interrupt(first)
      expect(Exit.isInterrupted(exit)).toBe(true)
      answer.succeed(7)
      expect(yield* answer.wait()).toBe(7)
    })
  )
})
