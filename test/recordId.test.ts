import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import * as OutboxRecord from "../src/domain/OutboxRecord.js"

const uuidV7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

describe("time-ordered record ids", () => {
  it("formats the UUIDv7 layout for every extreme of the random bits", () => {
    for (const [a, b, c] of [
      [0, 0, 0],
      [0xfff, 0x3fffffff, 0xffffffff],
      [0x800, 0x20000000, 0x80000000]
    ] as const) {
      expect(OutboxRecord.formatTimeOrderedId(1_764_000_000_000, a, b, c)).toMatch(uuidV7)
    }
  })

  it("ids made in a later millisecond sort after earlier ones", () => {
    const earlier = OutboxRecord.formatTimeOrderedId(1_764_000_000_000, 0xfff, 0x3fffffff, 0xffffffff)
    const later = OutboxRecord.formatTimeOrderedId(1_764_000_000_001, 0, 0, 0)
    expect(earlier < later).toBe(true)
  })

  it.effect("generateId reads Clock and Random: well-formed, unique, ordered over time", () =>
    Effect.gen(function* () {
      const ids: Array<string> = []
      for (let i = 0; i < 200; i++) {
        ids.push(yield* OutboxRecord.generateId)
        yield* TestClock.adjust("1 millis")
      }
      for (const id of ids) expect(id).toMatch(uuidV7)
      expect(new Set(ids).size).toBe(ids.length)
      expect([...ids].sort()).toEqual(ids)
    })
  )
})
