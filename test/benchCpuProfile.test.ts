/**
 * The drain bench's CPU profile summary (bench/CpuProfile.ts): samples put under what was running when they
 * were taken, the profiler's own frames left out, and a side's rounds reduced to their medians.
 */
import { describe, expect, it } from "@effect/vitest"
import * as CpuProfile from "../bench/CpuProfile.js"

const node = (id: number, functionName: string, url: string) => ({ id, callFrame: { functionName, url } })

describe("bench CPU profile", () => {
  it("puts each sample under what was running, by the innermost frame, and sums the library by file", () => {
    const profile: CpuProfile.Profile = {
      nodes: [
        node(1, "(root)", ""),
        node(2, "all", ""),
        node(3, "runLoop", "file:///work/x/node_modules/effect/dist/esm/internal/fiberRuntime.js"),
        node(4, "try", "file:///work/x/node_modules/@effect/sql-sqlite-node/dist/esm/SqliteClient.js"),
        node(5, "runWave", "file:///work/x/src/programs/drainer/Waves.ts"),
        node(6, "prepare", "file:///work/x/src/programs/drainer/Waves.ts"),
        node(7, "claim", "file:///work/x/src/layers/sqlite/SqliteClaim.ts"),
        node(8, "(garbage collector)", ""),
        node(9, "(idle)", ""),
        node(10, "dispatch", ""),
        node(11, "rawBaseline", "file:///work/x/bench/drain.ts"),
        node(12, "listOnTimeout", "node:internal/timers")
      ],
      samples: [2, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1],
      timeDeltas: [1000, 500, 300, 200, 100, 100, 50, 400, 700, 9000, 250, 20, 5000]
    }
    const round = CpuProfile.summarise(profile)
    expect(round.categories).toEqual({
      "SQLite (native)": 1.5,
      "Effect runtime": 0.3,
      "@effect/sql client": 0.2,
      "library (src/)": 0.3,
      "garbage collection": 0.4,
      idle: 0.7,
      "bench code": 0.3,
      "Node.js and V8": 0
    })
    expect(round.libraryFiles).toEqual({
      "src/programs/drainer/Waves.ts": 0.2,
      "src/layers/sqlite/SqliteClaim.ts": 0.1
    })
    // the profiler's own frames (dispatch, root) are left out; idle time is in the samples, not in the busy time
    expect(round.sampledMillis).toBe(3.6)
    expect(round.busyMillis).toBe(2.9)
  })

  it("counts the samples of a frame that calls better-sqlite3 directly as SQLite's, and no other frame's", () => {
    const client = "file:///work/x/node_modules/@effect/sql-sqlite-node/dist/esm/SqliteClient.js"
    const profile: CpuProfile.Profile = {
      nodes: [
        { ...node(1, "(root)", ""), children: [2, 5] },
        // the client's statement call, and the native read it made
        { ...node(2, "try", client), children: [3, 4] },
        node(3, "all", ""),
        // a callee of the same frame that is not SQLite's
        node(4, "hash", "file:///work/x/node_modules/effect/dist/esm/Hash.js"),
        // the same client function on another path, where it called no statement
        { ...node(5, "try", client), children: [6] },
        node(6, "(garbage collector)", "")
      ],
      samples: [2, 3, 4, 5, 6],
      timeDeltas: [600, 300, 100, 200, 50]
    }
    expect(CpuProfile.summarise(profile).categories).toEqual({
      "SQLite (native)": 0.9,
      "Effect runtime": 0.1,
      "@effect/sql client": 0.2,
      "garbage collection": 0.1
    })
  })

  it("takes the median of a side's rounds, category by category", () => {
    const round = (sqlite: number, effect: number): CpuProfile.ProfiledRound => ({
      sampledMillis: sqlite + effect,
      busyMillis: sqlite + effect,
      categories: { "SQLite (native)": sqlite, "Effect runtime": effect },
      libraryFiles: { "src/a.ts": effect / 10 }
    })
    const side = CpuProfile.sideOf([round(300, 90), round(320, 60), round(310, 200)])
    expect(side.rounds).toBe(3)
    expect(side.categories["SQLite (native)"]).toBe(310)
    expect(side.categories["Effect runtime"]).toBe(90)
    expect(side.categories["garbage collection"]).toBe(0)
    expect(side.sampledMillis).toBe(390)
    expect(side.topLibraryFiles).toEqual({ "src/a.ts": 9 })
  })
})
