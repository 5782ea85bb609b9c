/**
 * The benchmark report (bench/Report.ts) and progress display (bench/Progress.ts): small result objects
 * in, README tables and SVG chart out — figures present, ratios computed from the figures beside them,
 * missing or half-written result files tolerated.
 */
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { parseProgress, ProgressDisplay, ProgressPrefix } from "../bench/Progress.js"
import { readResults, renderChart, renderReadme, writeReport } from "../bench/Report.js"

const memory = {
  date: "2026-12-02T12:00:00.000Z",
  loadAverage1m: { before: 0.5, after: 1.5 },
  quick: false,
  claim: {
    limit: 100,
    samples: 50,
    medianMicrosWall: { "1000": 80, "100000": 120 },
    medianMicrosCpu: { "1000": 90, "100000": 130 },
    target: "median claim(100) at 100k <= 2x at 1k",
    met: true
  },
  endToEnd: {
    idsGiven: { wall: 123_456, cpu: 100_000 },
    idsGenerated: { wall: 60_000, cpu: 50_000 },
    baseline: { wall: 246_912, cpu: 400_000 },
    target: ">= 100000 records/s end to end",
    met: true
  }
}

const sqlite = {
  date: "2026-12-02T12:10:00.000Z",
  // ratio fields in the file are ignored: the report divides the figures it shows
  persist: { storeRecordsPerSecond: 50, rawRecordsPerSecond: 200, ratio: 0.9 },
  claimComplete: { storeRecordsPerSecond: 300, rawRecordsPerSecond: 400 },
  endToEnd: {
    storeRecordsPerSecond: 7_000,
    rawRecordsPerSecond: 14_000,
    target: "store end to end >= 0.7x raw better-sqlite3 in the same run",
    met: false
  },
  claimLatency: {
    limit: 100,
    byPending: { "1000": { medianMillis: 4, p95Millis: 8 }, "100000": { medianMillis: 6, p95Millis: 9 } },
    target: "median claim(100) at 100k pending <= 2x at 1k",
    met: true
  }
}

const dynamoRow = (kind: string, backlog: number, itemsRead: number) => ({
  kind,
  backlog,
  claims: 5,
  claimed: 500,
  requestsPerClaimedRecord: 1.02,
  itemsReadPerClaimedRecord: itemsRead,
  readCapacityPerClaimedRecord: 0.1,
  localMillisPerClaim: 900
})

const dynamodb = {
  generatedAt: "2026-12-02T11:00:00.000Z",
  limit: 100,
  goal: { keylessItemsReadPerClaimedRecord: 1.5, worstKeyless: 1.01, met: true },
  goalLocalClaimIndex: { keyedLsiItemsReadPerClaimedRecord: 3, worstKeyedLsi: 1.07, met: true },
  results: [
    dynamoRow("keyless", 1000, 1.01),
    dynamoRow("keyed", 1000, 10.21),
    dynamoRow("keyed-lsi", 1000, 1.07),
    dynamoRow("keyless", 5000, 1.01),
    dynamoRow("keyed", 5000, 50.21),
    dynamoRow("keyed-lsi", 5000, 1.03)
  ]
}

const dynamodbThroughput = {
  date: "2026-12-02T14:00:00.000Z",
  loadAverage1m: { before: 9.5, after: 11 },
  seconds: 200,
  persist: {
    batch: 25,
    storeRecordsPerSecond: 60,
    rawRecordsPerSecond: 80,
    bestStoreRecordsPerSecond: 70,
    bestRawRecordsPerSecond: 90,
    medianRoundRatio: 0.8,
    storeRequestsPerRecord: 1.08,
    rawRequestsPerRecord: 1.04,
    storeCpuMillisPerRecord: 5.5,
    rawCpuMillisPerRecord: 3.7
  },
  claimLatency: {
    limit: 100,
    partition: "keyless",
    samplesPerSide: 6,
    byBacklog: {
      // out of order on purpose: rows sort by backlog
      "10000": { store: { medianMillis: 3000, p90Millis: 4000 }, raw: { medianMillis: 2000, p90Millis: 5000 } },
      "1000": {
        store: { medianMillis: 2500, p90Millis: 2600, requestsPerClaim: 103, medianCpuMillis: 450 },
        raw: { medianMillis: 2000, p90Millis: 2600, requestsPerClaim: 103, medianCpuMillis: 330 }
      }
    }
  },
  endToEnd: {
    batch: 25,
    limit: 100,
    storeRecordsPerSecond: 30,
    rawRecordsPerSecond: 24,
    medianRoundRatio: 1.2
  },
  notes: ["raw = the same SDK client"]
}

/** A drain round's rates, wall clock and CPU, as the drain results hold them. */
const throughput = (wall: number, cpu: number) => ({ recordsPerSecondWall: wall, recordsPerSecondCpu: cpu })

const run = (producers: number, recordsPerSecond: number, p50: number, p99: number) => ({
  producers,
  recordsPerSecond,
  persistCall: { p50Millis: p50, p99Millis: p99 }
})

const contention = {
  date: "2026-12-02T13:00:00.000Z",
  dynamodb: {
    scenarios: [
      {
        batch: 1,
        single: run(1, 40, 20, 90),
        contended: run(8, 120, 60, 300),
        spread: run(8, 125, 58, 280),
        medianRoundRatio: { contendedToSingle: 2.8, contendedToSpread: 0.99 }
      },
      { batch: 10, single: run(1, 200, 45, 100), contended: run(8, 500, 150, 600), spread: run(8, 520, 140, 500) }
    ],
    fence: [
      {
        batch: 1,
        seqAllocationP50Millis: { single: 5, contended: 17, spread: 16 },
        seqAllocationP99Millis: { single: 9, contended: 70, spread: 66 },
        recordPutP50Millis: { single: 6, contended: 18, spread: 17 },
        seqAllocationToPutP50: { single: 0.83, contended: 0.94, spread: 0.94 },
        dynamoLocalCpuMillisPerRecord: { single: 3, contended: 2.5, spread: 2.4 }
      }
    ],
    withClaimer: [],
    conflictsAndFailures: { producers: 0, withClaimer: 0 },
    sdkRetries: 0
  },
  sqlite: {
    scenarios: [{ batch: 1, single: run(1, 150, 4, 50), contended: run(8, 150, 5, 40), spread: run(8, 160, 4, 30) }]
  },
  fenceBottleneck: false,
  note: "Verdict: the fence row is not a bottleneck here."
}

describe("bench report", () => {
  it("renders store vs baseline per scenario with the ratio computed from the two figures, goal and verdict", () => {
    const readme = renderReadme({ memory, sqlite })
    expect(readme).toContain(
      "| ids given, wall clock | 123,456 | 246,912 | 0.50× | >= 100000 records/s end to end | met |"
    )
    expect(readme).toContain("| ids given, per CPU second | 100,000 | 400,000 | 0.25× |")
    expect(readme).toContain("| 100,000 | 120 | 130 | 1.50× |")
    // 50 / 200, not the 0.9 the file claims
    expect(readme).toContain("| persist in batches of 100 | 50 | 200 | 0.25× |")
    expect(readme).not.toContain("0.90×")
    expect(readme).toContain(
      "| persist 100 → claim 100 → complete 100 | 7,000 | 14,000 | 0.50× | store end to end >= 0.7x raw better-sqlite3 in the same run | **not met** |"
    )
    expect(readme).toContain("| 100,000 | 6 | 9 | 1.50× |")
    expect(readme).toContain("load average 0.5 → 1.5")
    expect(readme).not.toContain("hand-written / raw (the ceiling)")
    // with the hand-written loop and the raw loop reading values: the end-to-end ratios, each from its own field
    const withCeiling = renderReadme({
      sqlite: {
        ...sqlite,
        endToEnd: {
          ...sqlite.endToEnd,
          handWrittenRecordsPerSecond: 7_500,
          storeToRaw: { bestToBest: 0.52, medianOfRounds: 0.5 },
          handWrittenToRaw: { bestToBest: 0.56, medianOfRounds: 0.54 },
          storeToHandWritten: { bestToBest: 0.93, medianOfRounds: 0.92 },
          rawValues: { storeToRawValues: { bestToBest: 0.47, medianOfRounds: 0.45 } }
        }
      }
    })
    expect(withCeiling).toContain("| hand-written / raw (the ceiling) | 0.56× | 0.54× |")
    expect(withCeiling).toContain("| store / raw reading its claims as values (informational) | 0.47× | 0.45× |")
    expect(readme).toContain("![Store vs baseline, claim cost vs backlog](results/chart.svg)")
  })

  it("pivots DynamoDB items read per claimed record by backlog and path, with the goals", () => {
    const readme = renderReadme({ dynamodb })
    expect(readme).toContain(
      "| backlog | keyless (ClaimIndex GSI) | keyed, consistent scan | keyed, ClaimLocalIndex (LSI) |"
    )
    expect(readme).toContain("| 1,000 | 1.01 | 10.2 | 1.07 |")
    expect(readme).toContain("| 5,000 | 1.01 | 50.2 | 1.03 |")
    expect(readme).toContain("| keyed with the LSI ≤ 3 items read per claimed record | 1.07 | met |")
    // the stranded-heads path is absent from this file, so it gets no column
    expect(readme).not.toContain("heads stranded")
  })

  it("renders DynamoDB store vs raw SDK: throughput and claim latency tables with ratios from the figures shown", () => {
    const readme = renderReadme({ dynamodbThroughput })
    expect(readme).toContain("## DynamoDB store vs raw SDK (DynamoDB Local)")
    expect(readme).toContain("load average 9.5 → 11; run took 200 s")
    expect(readme).toContain("| persist in batches of 25 | 60 | 80 | 0.75× | 0.8 | 70 / 90 | 1.08 / 1.04 | 5.5 / 3.7 |")
    // fields absent from the file: n/a, the ratio still computed
    expect(readme).toContain(
      "| persist 100 (batches of 25) → claim 100 → complete | 30 | 24 | 1.25× | 1.2 | n/a / n/a | n/a / n/a | n/a / n/a |"
    )
    expect(readme).toContain("claim(100) latency on a keyless partition by pending records, ms over 6 claims per side")
    const first = readme.indexOf("| 1,000 | 2,500 | 2,600 | 2,000 | 2,600 | 1.25× | 1.00× | 103 / 103 | 450 / 330 |")
    const second = readme.indexOf("| 10,000 | 3,000 | 4,000 | 2,000 | 5,000 | 1.50× | 0.80× | n/a / n/a | n/a / n/a |")
    expect(first).toBeGreaterThan(0)
    expect(second).toBeGreaterThan(first)
    expect(readme).toContain("- raw = the same SDK client")
  })

  it("renders the contention tables: 1 producer vs 8 on one partition vs 8 on eight, fence latencies, the note", () => {
    const readme = renderReadme({ contention })
    expect(readme).toContain(
      "| DynamoDB Local | 1 | 40 | 120 | 125 | 3.00× | 0.96× | 2.8 / 0.99 | 20 / 60 | 90 / 300 |"
    )
    // no paired-round medians in the file: n/a, the rest still computed
    expect(readme).toContain(
      "| DynamoDB Local | 10 | 200 | 500 | 520 | 2.50× | 0.96× | n/a / n/a | 45 / 150 | 100 / 600 |"
    )
    expect(readme).toContain("| SQLite | 1 | 150 | 150 | 160 | 1.00× | 0.94× |")
    expect(readme).toContain("| 1 | 5 / 17 / 16 | 9 / 70 / 66 | 6 / 18 / 17 | 0.83 / 0.94 / 0.94 | 3 / 2.5 / 2.4 |")
    expect(readme).toContain("Fence row a bottleneck: no.")
    expect(readme).toContain("**Conclusion.** Verdict: the fence row is not a bottleneck here.")
  })

  it("renders the drain table with its informational variants and the SQLite statement-time paragraph", () => {
    const drain = {
      date: "2026-12-02T12:00:00.000Z",
      loadAverage1m: { before: 0.5, after: 0.7 },
      memory: { throughput: throughput(60_000, 50_000), target: "≥ 50000 records/s end to end", met: true },
      sqlite: {
        throughput: throughput(5_000, 4_000),
        rawBaseline: { best: throughput(10_000, 16_000) },
        target: "≥ 0.6 × raw better-sqlite3 baseline",
        met: false,
        withoutGroupCommit: { throughput: throughput(4_000, 3_000), ratioWall: 0.4 },
        statementTime: {
          raw: { wallSeconds: 2, statements: { seconds: 1.5, commits: 600, commitMedianMillis: 0.4 } },
          relay: { wallSeconds: 4, statements: { seconds: 2.5, commits: 250, commitMedianMillis: 1.25 } },
          ceilingRatio: 0.8
        }
      }
    }
    const readme = renderReadme({ drain })
    expect(readme).toContain("| memory, wall clock | 60,000 | n/a | n/a | ≥ 50000 records/s end to end | met |")
    expect(readme).toContain(
      "| sqlite, wall clock | 5,000 | 10,000 | 0.50× | ≥ 0.6 × raw better-sqlite3 baseline | **not met** |"
    )
    expect(readme).toContain("| sqlite, group commit off (informational) | 4,000 |  | 0.40× |")
    expect(readme).toContain(
      "raw baseline 1.50 s of 2.00 s wall in SQLite statements (600 commits, median 0.40 ms); " +
        "relay 2.50 s of 4.00 s wall in SQLite statements (250 commits, median 1.25 ms). " +
        "With nothing outside SQLite taking time, the relay would reach 0.80× the raw baseline."
    )
    const without = renderReadme({ drain: { ...drain, sqlite: { ...drain.sqlite, statementTime: undefined } } })
    expect(without).not.toContain("SQLite statement time")
    expect(readme).not.toContain("The goal's ceiling for code on the client")
  })

  it("renders the relay's rounds timed from its start beside the goal's, and what its start took", () => {
    const sqlite = {
      throughput: throughput(9_000, 8_000),
      rawBaseline: { best: throughput(10_000, 12_000) },
      target: "≥ 0.95 × the raw better-sqlite3 claim → complete loop, best against best and median of rounds",
      met: false,
      fromStart: {
        best: 8_600,
        ratioWall: 0.86,
        ratioWallMedianOfRounds: 0.84,
        startMillis: { min: 6.5, median: 12, max: 30.25 }
      }
    }
    const readme = renderReadme({ drain: { date: "2026-12-07T00:00:00.000Z", sqlite } })
    expect(readme).toContain("| sqlite, wall clock | 9,000 | 10,000 | 0.90× |")
    expect(readme).toContain("| sqlite, timed from the relay's start (informational) | 8,600 |  | 0.86× |  |  |")
    expect(readme).toContain(
      "is a fixed cost that does not grow with the backlog: 6.5–30.3 ms a round (median 12.0), outside the rounds. " +
        "Timed from the start until the store held none pending or claimed, the relay reached 0.86× the raw " +
        "baseline best against best, 0.84× the median of rounds."
    )
    // results of a run before the rounds were timed so: neither the row nor the sentence
    const before = renderReadme({
      drain: { date: "2026-12-07T00:00:00.000Z", sqlite: { ...sqlite, fromStart: undefined } }
    })
    expect(before).not.toContain("timed from the relay's start")
    expect(before).not.toContain("a fixed cost that does not grow with the backlog")
  })
  it("renders the SQLite relay goal's ceiling on the store's client: the hand-written drain and the verdict", () => {
    const statementTime = {
      raw: { wallSeconds: 2, statements: { seconds: 1.9, commits: 400, commitMedianMillis: 0.3 } },
      relay: {
        wallSeconds: 3,
        statements: {
          seconds: 2,
          commits: 100,
          commitMedianMillis: 1,
          gcMicrosPerRecord: 3.25,
          effectOpsPerRecord: 6.9
        }
      },
      handWritten: {
        wallSeconds: 2.3,
        statements: {
          seconds: 1.8,
          commits: 101,
          commitMedianMillis: 1.2,
          gcMicrosPerRecord: 0.8,
          effectOpsPerRecord: 2
        }
      },
      ceilingRatio: 1,
      outsideStatementsMicrosPerRecord: { relay: 10, handWritten: 5, storeCalls: 2.5, relayWithoutKeys: 6 },
      clientCeilingRatio: 0.9,
      wavelessCeilingRatio: 0.8
    }
    const sqlite = {
      throughput: throughput(7_000, 6_000),
      rawBaseline: { best: throughput(10_000, 12_000) },
      target: "≥ 0.95 × the raw better-sqlite3 claim → complete loop",
      met: false,
      rawBaselineReadingValues: { best: throughput(11_200, 13_000), ratioWall: 0.625 },
      handWrittenDrain: {
        throughput: throughput(8_500, 9_000),
        ratioWall: 0.85,
        ratioWallMedianOfRounds: 0.875,
        relayToHandWritten: { bestToBest: 0.8, medianOfRounds: 0.77 }
      },
      handWrittenDrainWithoutOrder: {
        throughput: throughput(10_200, 11_000),
        ratioWall: 1.02,
        ratioWallMedianOfRounds: 1.01
      },
      storeCallsDrain: { throughput: throughput(12_500, 13_000), ratioWall: 1.25, ratioWallMedianOfRounds: 1.2 },
      storeCallsDrainInOrder: {
        throughput: throughput(9_100, 9_500),
        ratioWall: 0.91,
        ratioWallMedianOfRounds: 0.93,
        relayAgainstIt: { ratioWall: 0.769, ratioWallMedianOfRounds: 0.81 }
      },
      statementTime
    }
    const readme = renderReadme({ drain: { date: "2026-12-06T00:00:00.000Z", sqlite } })
    expect(readme).toContain(
      "| sqlite, hand-written on the store's client, order kept (informational) | 8,500 |  | 0.85× |"
    )
    // the relay against the raw loop that reads its claims as values: the ratio of the two figures shown
    expect(readme).toContain(
      "| sqlite, against a raw loop reading its claims as values (informational) | 7,000 | 11,200 | 0.63× |  |  |"
    )
    expect(readme).toContain(
      "| sqlite, hand-written on the store's client, order not kept (informational) | 10,200 |  | 1.02× |"
    )
    expect(readme).toContain(
      "each wave completed before the next is sent: SPEC §6 step 5) reached 0.85× best against best, 0.88× the " +
        "median of rounds of the raw baseline; without the waves 1.02× best against best, 1.01× the median of rounds. " +
        "The relay reached 0.80× best against best, 0.77× the median of rounds of the hand-written loop with the waves."
    )
    expect(readme).toContain(
      "; hand-written loop with the order 1.80 s of 2.30 s wall in SQLite statements (101 commits"
    )
    // the sides that carry the counts, each with its own figures; the others left out
    expect(readme).toContain(
      "In the statement-timed rounds: the relay 3.3 µs of garbage collection and 6.9 Effect operations a record; " +
        "the hand-written loop with the waves 0.8 µs of garbage collection and 2.0 Effect operations a record."
    )
    expect(readme).toContain(
      "Outside SQLite statements the relay took 10.0 µs a record, the hand-written loop with the waves 5.0 µs. With " +
        "the relay's statements and no more time outside them than that loop's, the relay would reach 0.90× the raw " +
        "baseline — below the goal's 0.95×: in this run even code as lean as that loop would miss it. The store's own " +
        "claim and complete calls alone (no drainer, one complete a claim) took 2.5 µs a record outside statements; the " +
        "rest of the relay's, 7.5 µs, went to the drainer and to the completes of its waves."
    )
    expect(readme).toContain(
      "| sqlite, the store's own claim and complete calls alone (informational) | 12,500 |  | 1.25× |"
    )
    // the store's calls in the relay's shape: its own row, and the relay against it
    expect(readme).toContain(
      "| sqlite, the store's own calls in the relay's shape, order kept (informational) | 9,100 |  | 0.91× |"
    )
    expect(readme).toContain(
      "no lease, drainer or metric) reached 0.91× best against best, 0.93× the median of rounds of the raw baseline; " +
        "the relay reached 0.77× best against best, 0.81× the median of rounds of it."
    )
    expect(readme).toContain(
      "With no record keyed (a batch goes out in one wave) the relay took 6.0 µs a record outside SQLite statements. " +
        "With the keyed relay's statements (SPEC §6 step 5's completes, a commit a wave, kept) and no more time outside " +
        "them than that, the relay would reach 0.80× the raw baseline — below the goal's 0.95×: even waves that cost " +
        "nothing outside SQLite (every partition waved together at no cost) would leave the relay short of it; the rest " +
        "is the relay's work for each record."
    )
    const reachable = renderReadme({
      drain: { sqlite: { ...sqlite, statementTime: { ...statementTime, clientCeilingRatio: 0.96 } } }
    })
    expect(reachable).toContain(
      "would reach 0.96× the raw baseline — the goal's 0.95× is within reach of code as lean as that loop."
    )
    expect(reachable).not.toContain("would miss it")
    const wavesTheGap = renderReadme({
      drain: { sqlite: { ...sqlite, statementTime: { ...statementTime, wavelessCeilingRatio: 0.97 } } }
    })
    expect(wavesTheGap).toContain(
      "would reach 0.97× the raw baseline — at or above the goal's 0.95×: the waves' cost outside SQLite is the whole gap."
    )
    const withoutStoreCalls = renderReadme({
      drain: {
        sqlite: {
          ...sqlite,
          statementTime: { ...statementTime, outsideStatementsMicrosPerRecord: { relay: 10, handWritten: 5 } }
        }
      }
    })
    expect(withoutStoreCalls).toContain("the relay would reach 0.90× the raw baseline")
    expect(withoutStoreCalls).not.toContain("The store's own claim and complete calls alone")
    const {
      handWrittenDrain: _hand,
      handWrittenDrainWithoutOrder: _unordered,
      storeCallsDrain: _storeCalls,
      storeCallsDrainInOrder: _storeCallsInOrder,
      ...withoutHandWritten
    } = sqlite
    const without = renderReadme({
      drain: {
        sqlite: { ...withoutHandWritten, statementTime: { raw: statementTime.raw, relay: statementTime.relay } }
      }
    })
    expect(without).not.toContain("hand-written on the store's client")
    expect(without).not.toContain("the raw loop written on Effect")
    expect(without).not.toContain("Outside SQLite statements")
    expect(without).not.toContain("in the relay's shape")
    // the shape's line stands on its own: printed without the hand-written sides
    const shapeOnly = renderReadme({
      drain: {
        sqlite: {
          ...withoutHandWritten,
          storeCallsDrainInOrder: sqlite.storeCallsDrainInOrder,
          statementTime: { raw: statementTime.raw, relay: statementTime.relay }
        }
      }
    })
    expect(shapeOnly).toContain("the relay reached 0.77× best against best, 0.81× the median of rounds of it.")
    expect(shapeOnly).not.toContain("the raw loop written on Effect")
    expect(without).not.toContain("With no record keyed (a batch goes out in one wave)")
    expect(without).not.toContain("the store's own claim and complete calls alone")
  })

  it("renders where the SQLite sides' time goes, and the relay's time over the store's calls in its shape", () => {
    const side = (sampled: number, sqlite: number, effect: number, library: number) => ({
      rounds: 3,
      sampledMillis: sampled,
      busyMillis: sampled,
      categories: { "SQLite (native)": sqlite, "Effect runtime": effect, "library (src/)": library, idle: 0 },
      topLibraryFiles: {}
    })
    const cpuProfile = {
      sides: {
        raw: side(450, 360, 0, 0),
        relay: side(600, 380, 130, 60),
        storeCallsInOrder: side(500, 370, 80, 20),
        handWritten: side(480, 370, 20, 0)
      }
    }
    const readme = renderReadme({ drain: { sqlite: { cpuProfile } } })
    expect(readme).toContain("V8's sampling profiler over 3 more rounds of each side")
    expect(readme).toContain("| category | raw baseline | relay | store's calls, relay's shape | hand-written drain |")
    expect(readme).toContain("| Effect runtime | 0.0 | 130.0 | 80.0 | 20.0 |")
    expect(readme).toContain(
      "the store's calls in the relay's shape take 0.90× the raw baseline's rate and the relay 0.75×; " +
        "the relay's 100.0 ms a round over that shape (20 %) is the drainer's own work: " +
        "Effect runtime 50.0, library (src/) 40.0, SQLite (native) 10.0 ms."
    )
    // a side missing from the results is left out of the table, and without the shape there is no comparison
    const { storeCallsInOrder: _shape, ...withoutShape } = cpuProfile.sides
    const partial = renderReadme({ drain: { sqlite: { cpuProfile: { sides: withoutShape } } } })
    expect(partial).toContain("| category | raw baseline | relay | hand-written drain |")
    expect(partial).not.toContain("is the drainer's own work")
    expect(renderReadme({ drain: { sqlite: {} } })).not.toContain("V8's sampling profiler")
  })

  it("renders the SQLite latency goal with its floor and the raw producer and relay at the same pace", () => {
    const latencyGoal = {
      target: "p99 ≤ 250 ms",
      met: false,
      ceiling: "sqlite latency ceiling: producer 15 µs + relay 26 µs of the one thread per record",
      floor: { statement: "sqlite latency floor: the pace is half the relay's throughput round (18 µs a record)" },
      rawBaseline: { eventLoopUtilization: 0.733, microsPerRecord: 27.5, p99Millis: 4.4 },
      rawBaselineAtItsOwnPace: {
        offeredPerSecond: 31_000,
        eventLoopUtilization: 0.987,
        microsPerRecord: 31.8,
        p99Millis: 9.1
      },
      handWrittenBaseline: { eventLoopUtilization: 0.861, microsPerRecord: 41.2, p99Millis: 21.5 }
    }
    const drain = {
      date: "2026-12-05T12:00:00.000Z",
      sqlite: {
        latency: { offeredPerSecond: 25_000, p50Millis: 120, p99Millis: 300, maxMillis: 320 },
        latencyGoal
      }
    }
    const readme = renderReadme({ drain })
    expect(readme).toContain("SQLite goal: p99 ≤ 250 ms — **not met**.")
    expect(readme).toContain("The pace is half the relay's throughput round (18 µs a record).\n")
    expect(readme).toContain(
      "The same pace without Effect, the store or the drainer (a raw better-sqlite3 producer and relay with the " +
        "store's statements, on the one thread): the thread 73 % busy, 27.5 µs a record, p99 4.4 ms (a lower bound:"
    )
    expect(readme).toContain(
      "The goal's rule applied to those raw loops (a producer at half the raw baseline's own throughput, 31,000 " +
        "records/s): the thread 99 % busy, 31.8 µs a record, p99 9.1 ms: a relay that drained a backlog as fast as " +
        "the raw loop would be given that producer"
    )
    expect(readme).toContain(
      "The same loop written on Effect and the store's client (`@effect/sql-sqlite-node`, `sql.withTransaction`, " +
        "`sql.unsafe`), without the store or the drainer: the thread 86 % busy, 41.2 µs a record, p99 21.5 ms — " +
        "the goal is within reach of code on that client."
    )
    const slow = renderReadme({
      drain: {
        ...drain,
        sqlite: {
          ...drain.sqlite,
          latencyGoal: { ...latencyGoal, handWrittenBaseline: { ...latencyGoal.handWrittenBaseline, p99Millis: 400 } }
        }
      }
    })
    expect(slow).toContain("p99 400 ms — code on that client misses the goal too.")
    const {
      handWrittenBaseline: _handWritten,
      rawBaseline: _raw,
      rawBaselineAtItsOwnPace: _ownPace,
      ...withoutRaw
    } = latencyGoal
    const without = renderReadme({ drain: { ...drain, sqlite: { ...drain.sqlite, latencyGoal: withoutRaw } } })
    expect(without).toContain("The pace is half the relay's throughput round")
    expect(without).not.toContain("The same pace without Effect")
    expect(without).not.toContain("The goal's rule applied to those raw loops")
    expect(without).not.toContain("The same loop written on Effect")
  })

  it("renders the latency section: p50/p99 per backend against its goal, the shorter method named, idle costs", () => {
    const latency = {
      date: "2026-12-03T19:00:00.000Z",
      method: { records: 100, idleMillis: 1000, issueMethod: false },
      goalsP99Millis: { memory: 10, sqlite: 100, postgres: 15, dynamodb: 1500 },
      memory: { latency: { p50Millis: 0.5, p99Millis: 2, maxMillis: 3 } },
      sqlite: {
        latency: { p50Millis: 40, p99Millis: 120, maxMillis: 130, persistP50Millis: 20 },
        idleCpu: { pollMillis: 10, cpuMicrosPerSecond: 3000 }
      },
      dynamodb: {
        latency: { p50Millis: 600, p99Millis: 1200, maxMillis: 1300 },
        idle: {
          seconds: 30,
          idleBackoffMaxMillis: 1000,
          requestsPerHour: 5000,
          queriesPerHour: 3600,
          readCapacityPerHour: 1800
        }
      }
    }
    const readme = renderReadme({ latency }, false)
    expect(readme).toContain("## Delivery latency after idle")
    expect(readme).toContain("A shorter configuration than the method's 200 records")
    expect(readme).toMatch(
      /\| memory \(same process\) +\| in-process `WakeHub` +\| 0\.5 +\| 2 +\| 3 +\| n\/a +\| ≤ 10 +\| met/
    )
    expect(readme).toMatch(/\| SQLite file \(second process\) .*\| 120 .*\| ≤ 100 +\| \*\*not met\*\*/)
    expect(readme).toMatch(/\| PostgreSQL \(second process\) .*\| n\/a +\|/)
    expect(readme).toContain("3,000 µs of CPU per second")
    expect(readme).toContain("5,000 requests per hour (3,600 queries)")
    // the peer's row and the comparison only when the peer was measured
    expect(readme).not.toContain("pg-transactional-outbox")
    const withPeer = renderReadme(
      {
        latency: {
          ...latency,
          postgres: { latency: { p50Millis: 10, p99Millis: 30, maxMillis: 40 } },
          peer: { latency: { p50Millis: 5, p99Millis: 15, maxMillis: 20 } }
        }
      },
      false
    )
    expect(withPeer).toMatch(
      /\| peer: `pg-transactional-outbox` 0\.5\.7 on PostgreSQL \(second process\) .*\| 5 +\| 15 +\|/
    )
    expect(withPeer).toContain("p99 30 ms against the peer's 15 ms: 2.00× the peer's p99")
    expect(withPeer).not.toContain("Re-measured in a run of their own")
  })

  it("renders a backend re-measured in a run of its own (`--merge`) with that run's date, load and method", () => {
    const run = {
      date: "2026-12-04T19:00:00.000Z",
      loadAverage1m: { before: 0.4, after: 0.6 },
      seconds: 2300,
      method: { records: 200, idleMillis: 10000, schedule: "backends together: one record per backend every 11500 ms" },
      backends: ["postgres", "peer"]
    }
    const latency = {
      date: "2026-12-03T19:00:00.000Z",
      method: { records: 200, idleMillis: 10000, issueMethod: true },
      goalsP99Millis: { memory: 10, postgres: 15 },
      memory: { latency: { p50Millis: 0.5, p99Millis: 2, maxMillis: 3 } },
      postgres: { latency: { p50Millis: 6, p99Millis: 12, maxMillis: 14 }, run },
      peer: { latency: { p50Millis: 2, p99Millis: 6, maxMillis: 7 }, run }
    }
    const readme = renderReadme({ latency }, false)
    // one line for the run, naming both backends it measured
    const line =
      "Re-measured in a run of their own: PostgreSQL (second process); peer: `pg-transactional-outbox` 0.5.7 on " +
      "PostgreSQL (second process) — measured 2026-12-04T19:00:00.000Z; load average 0.4 → 0.6; run took 2,300 s; " +
      "200 records, idle 10,000 ms before each; schedule: backends together: one record per backend every 11500 ms."
    expect(readme).toContain(line)
    expect(readme.split("Re-measured in a run of their own").length).toBe(2)
    expect(readme).not.toMatch(/Re-measured in a run of their own: memory/)
    expect(readme).toMatch(/\| PostgreSQL \(second process\) .*\| 12 +\| 14 +\| n\/a +\| ≤ 15 +\| met/)
  })

  it("renders the steady-state section: the highest sustained rate per target with a bar, latency at 50 % and 80 %", () => {
    const steady = {
      date: "2026-12-03T21:00:00.000Z",
      method: { windowSeconds: 20 },
      memory: {
        maxSustainedPerSecond: 8000,
        at50: { p50Millis: 2, p99Millis: 9 },
        at80: { p50Millis: 4, p99Millis: 30 }
      },
      sqlite: { maxSustainedPerSecond: 2000, at50: { p50Millis: 20, p99Millis: 90 }, at80: null }
    }
    const readme = renderReadme({ steady }, false)
    expect(readme).toContain("## Steady state: the highest rate one relay sustains")
    expect(readme).toMatch(/\| memory store, no-op sink +\| 8,000 \| █{24} +\| 2 +\| 9 +\| 4 +\| 30 +\|/)
    expect(readme).toMatch(/\| SQLite file, no-op sink +\| 2,000 \| █{6} +\| 20 +\| 90 +\| n\/a +\| n\/a +\|/)
    expect(readme).not.toContain("PostgreSQL, no-op sink")
  })

  it("renders the PostgreSQL section: store and relay vs raw pg, relay processes, wake-up latency, claim latency", () => {
    const postgres = {
      date: "2026-12-03T10:00:00.000Z",
      loadAverage1m: { before: 1, after: 2 },
      endToEnd: {
        storeRecordsPerSecond: 3_000,
        rawRecordsPerSecond: 4_000,
        ratio: 0.9,
        target: "store end to end >= 0.6x raw pg in the same run",
        met: true
      },
      relay: {
        relayRecordsPerSecond: 5_000,
        rawLoopRecordsPerSecond: 10_000,
        ratioPerRound: [0.5, 0.45, 0.55],
        ratioMedianOfRounds: 0.5,
        oneWavePerBatch: { maxConcurrency: 100, relayRecordsPerSecond: 8_000 },
        statementsPerBatch: { relay: 14.8, raw: 6.47 },
        target: "relay >= 0.6x raw pg in the same run (best against best)",
        met: false
      },
      relayProcesses: {
        oneProcessRecordsPerSecond: 4_000,
        twoProcessesRecordsPerSecond: 5_000,
        target: "two processes >= 1.0x one process (no contention collapse)",
        met: true,
        ratioPerRound: [1.25, 0.9, 1.1],
        ratioMedianOfRounds: 1.1
      },
      wakeLatency: {
        withNotify: { offeredPerSecond: 100, p50Millis: 4, p99Millis: 12, maxMillis: 20 },
        pollingOnly: { offeredPerSecond: 100, p50Millis: 150, p99Millis: 390, maxMillis: 410 }
      },
      claimLatency: {
        limit: 100,
        // out of order on purpose: rows sort by pending records
        byPending: { "100000": { medianMillis: 12, p95Millis: 30 }, "1000": { medianMillis: 8, p95Millis: 10 } },
        target: "median claim(100) at 100k pending <= 2x at 1k",
        met: true
      }
    }
    const readme = renderReadme({ postgres })
    expect(readme).toContain("## PostgreSQL store (127.0.0.1, fsync on)")
    expect(readme).toContain("load average 1 → 2")
    // 3,000 / 4,000, not the 0.9 the file claims
    expect(readme).toContain(
      "| persist 100 → claim 100 → complete 100 (median of rounds) | 3,000 | 4,000 | 0.75× | store end to end >= 0.6x raw pg in the same run | met |"
    )
    expect(readme).toContain(
      "| relay with a no-op sink vs raw claim/complete loop (best of rounds) | 5,000 | 10,000 | 0.50× | relay >= 0.6x raw pg in the same run (best against best) | **not met** |"
    )
    expect(readme).toContain(
      "| relay, maxConcurrency 100: one wave per batch (informational) | 8,000 | 10,000 | 0.80× |  |  |"
    )
    expect(readme).toContain("Relay / raw per round: 0.5, 0.45, 0.55 (median 0.5).")
    expect(readme).toContain("Two processes / one per round: 1.25, 0.9, 1.1 (median 1.1).")
    expect(readme).toContain("Statements per claimed batch of 100: relay 14.8, raw loop 6.47.")
    expect(readme).toContain("| 2 | 5,000 | 1.25× | two processes >= 1.0x one process (no contention collapse) | met |")
    expect(readme).toContain("| LISTEN/NOTIFY (PostgresWakeSignal) | 100 | 4 | 12 | 20 |")
    expect(readme).toContain("| polling only (default idle back-off) | 100 | 150 | 390 | 410 |")
    const small = readme.indexOf("| 1,000 | 8 | 10 | 1.00× |")
    const large = readme.indexOf("| 100,000 | 12 | 30 | 1.50× |")
    expect(small).toBeGreaterThan(0)
    expect(large).toBeGreaterThan(small)
    expect(readme).toContain("Goal: median claim(100) at 100k pending <= 2x at 1k — met.")
    // a file of the earlier shape (no processes, wake-up or one-wave figures) renders without those tables
    const earlier = renderReadme({ postgres: { endToEnd: postgres.endToEnd, relay: { relayRecordsPerSecond: 1 } } })
    expect(earlier).toContain("| relay with a no-op sink vs raw claim/complete loop (best of rounds) | 1 | n/a | n/a |")
    expect(earlier).not.toContain("Relay processes on one database")
    expect(earlier).not.toContain("LISTEN/NOTIFY")
  })

  it("renders the MySQL section: its own title, store and relay vs raw mysql2, statements, claim latency", () => {
    const mysql = {
      date: "2026-12-03T21:00:00.000Z",
      loadAverage1m: { before: 3, after: 4 },
      endToEnd: { storeRecordsPerSecond: 700, rawRecordsPerSecond: 1_000, target: "store >= 0.8x raw mysql2" },
      relay: {
        relayRecordsPerSecond: 400,
        rawLoopRecordsPerSecond: 1_000,
        statementsPerBatch: { relay: 21.3, raw: 10.4 },
        target: "relay >= 0.8x raw mysql2",
        met: false
      },
      claimLatency: {
        limit: 100,
        byPending: { "1000": { medianMillis: 10, p95Millis: 20 }, "100000": { medianMillis: 15, p95Millis: 30 } },
        target: "median claim(100) at 100k pending <= 2x at 1k",
        met: true
      }
    }
    const readme = renderReadme({ mysql })
    expect(readme).toContain("## MySQL / MariaDB store (127.0.0.1, InnoDB defaults: redo log flushed per commit)")
    expect(readme).toContain("baseline: raw `mysql2` running the store's own statements")
    expect(readme).toContain(
      "| persist 100 → claim 100 → complete 100 (median of rounds) | 700 | 1,000 | 0.70× | store >= 0.8x raw mysql2 |  |"
    )
    expect(readme).toContain(
      "| relay with a no-op sink vs raw claim/complete loop (best of rounds) | 400 | 1,000 | 0.40× | relay >= 0.8x raw mysql2 | **not met** |"
    )
    expect(readme).toContain("Statements per claimed batch of 100: relay 21.3, raw loop 10.4.")
    expect(readme).toContain("| 100,000 | 15 | 30 | 1.50× |")
    expect(readme).not.toContain("## PostgreSQL store (127.0.0.1, fsync on)\n\n_measured 2026-12-03T21")
  })

  it("renders the broker sinks: relay vs hand-written relay per broker, the goal's verdict from best and median, every round", () => {
    const brokers = {
      generatedAt: "2026-12-03T07:49:50.982Z",
      records: 5_000,
      partitions: 8,
      inFlight: 80,
      warmUpRounds: { relay: 3, handWritten: 2 },
      goal: "relay ≥ 0.8× hand-written relay (best against best and median of rounds)",
      loadAverage1m: { before: 3, after: 4 },
      nats: {
        relayRecordsPerSecond: 1_700,
        handWrittenRecordsPerSecond: 2_000,
        handWrittenWavesRecordsPerSecond: 1_600,
        rawClientRecordsPerSecond: 4_000,
        rawUnorderedRecordsPerSecond: 4_400,
        relayNoopSinkRecordsPerSecond: 3_000,
        handWrittenAsSink: { recordsPerSecond: 2_125, ratio: 0.8, ratioMedianOfRounds: 0.78 },
        cpuMicrosPerRecord: {
          relay: 150.5,
          handWritten: 40.2,
          handWrittenWaves: 50,
          rawClient: 30,
          relayNoopSink: 70.2
        },
        settled: {
          relayRecordsPerSecond: 1_900,
          handWrittenRecordsPerSecond: 2_100,
          ratio: 0.9,
          routedRecordsPerSecond: 1_710,
          routedToRelay: 0.9,
          cpuMicrosPerRecord: { relay: 120.5, handWritten: 39.8, routed: 130.1 }
        },
        // per-round ratios 0.85, 0.9, 0.5: median 0.85, best against best 0.85
        rounds: { relay: [1_700.4, 1_620, 900], handWritten: [2_000, 1_800.2, 1_800] }
      },
      rabbitmq: {
        // best against best 0.9 meets the goal, the median of rounds (0.6) does not
        relayRecordsPerSecond: 900,
        handWrittenRecordsPerSecond: 1_000,
        rounds: { relay: [900, 500, 600], handWritten: [1_000, 1_000, 1_000] }
      }
    }
    const readme = renderReadme({ brokers })
    expect(readme).toContain("## Broker sinks (relay vs hand-written relay)")
    expect(readme).toContain("measured 2026-12-03T07:49:50.982Z; load average 3 → 4")
    expect(readme).toContain("A relay drains 5,000 records in 8 partitions")
    expect(readme).toContain("Untimed warm-up rounds before them: 3 of the relay, 2 of the hand-written relay")
    // a result file without warm-up rounds says nothing of them
    const { warmUpRounds: _, ...unwarmed } = brokers
    expect(renderReadme({ brokers: unwarmed })).not.toContain("warm-up")
    expect(readme).toContain(
      "| NATS JetStream | 1,700 | 2,000 | 0.85× | 0.85× | met | 1,700, 1,620, 900 | 2,000, 1,800, 1,800 |"
    )
    expect(readme).toContain(
      "| RabbitMQ | 900 | 1,000 | 0.90× | 0.60× | **not met** | 900, 500, 600 | 1,000, 1,000, 1,000 |"
    )
    expect(readme).toContain("Goal: relay ≥ 0.8× hand-written relay (best against best and median of rounds).")
    // the hand-written relay in waves, the raw client alone and the no-op-sink relay, only for the brokers that report them
    expect(readme).toContain("| NATS JetStream | 1,600 | 0.80× | 1.06× |")
    expect(readme).toContain("| NATS JetStream | 4,000 | 4,400 | 0.50× | 3,000 | 0.42× |")
    // the hand-written relay publishing as the NATS sink does, only where reported
    expect(readme).toContain("publishing as `NatsSink` does")
    expect(readme).toContain("| NATS JetStream | 2,125 | 0.80× | 0.78× |")
    // CPU per record, only for the brokers that report it
    expect(readme).toContain("| NATS JetStream | 150.5 | 70.2 | 40.2 | 50 | 30 | 110.3 |")
    // the settled rounds, only for the brokers that report them
    expect(readme).toContain("For information, settled:")
    expect(readme).toContain("| NATS JetStream | 1,900 | 2,100 | 0.90× | 1,710 | 0.90× | 120.5, 39.8, 130.1 |")
    expect(readme.match(/\| RabbitMQ \|/g)).toHaveLength(1)
  })

  it("renders the fairness section: the drain of many small partitions, the steady producer, discovery cost", () => {
    const fairness = {
      date: "2026-12-03T22:00:00.000Z",
      loadAverage1m: { before: 1, after: 2 },
      drain: {
        sqlite: {
          delivered: 2000,
          sentSeconds: 12.5,
          completedSeconds: 12.75,
          cpuSeconds: 6.5,
          partitionsPerSecond: 157,
          finished: true
        },
        postgres: {
          delivered: 1500,
          sentSeconds: 0,
          completedSeconds: 0,
          cpuSeconds: 9,
          partitionsPerSecond: 6,
          finished: false
        }
      },
      steady: {
        sqlite: {
          offeredPerSecond: 80,
          seconds: 30,
          records: 2400,
          delivered: 2400,
          oldestPendingAgeSeconds: { p50: 0.25, p99: 1.5, max: 2 },
          unleasedOldestWaitSeconds: { p99: 0.75 },
          deliveryLatencyMillis: { p99: 900 }
        }
      },
      listing: [
        {
          backend: "MariaDB",
          listed: 100,
          statementsPerRound: 2,
          rowsReadPerRound: 302,
          medianMillis: 3.5,
          medianMillisOnly100Written: 3.25
        }
      ]
    }
    const readme = renderReadme({ fairness }, false)
    expect(readme).toContain("## Relay fairness: many small partitions")
    expect(readme).toMatch(/\| SQLite file, synchronous = FULL +\| +2,000 \| +12\.5 \| +12\.8 \| +6\.5 \| +157 \|/)
    expect(readme).toMatch(/\| PostgreSQL, fsync on +\| +1,500 \| .*not finished/)
    expect(readme).toMatch(
      /\| SQLite file +\| +80 \| +30 \| 2,400 \/ 2,400 \| +0\.25 \| +1\.5 \| +2 \| +0\.75 \| +900 \|/
    )
    expect(readme).toMatch(/\| MariaDB +\| +100 \| +2 \| +302 \| +3\.5 \| +3\.25 \|/)
  })

  it("a missing result says so instead of failing, and the other sections still render", () => {
    const readme = renderReadme({ memory })
    for (const name of [
      "sqlite",
      "postgres",
      "mysql",
      "dynamodb",
      "dynamodbThroughput",
      "drain",
      "contention",
      "brokers",
      "latency",
      "inbox",
      "fairness"
    ]) {
      expect(readme).toContain(`_No results: bench/results/${name}.json is missing or unreadable`)
    }
    expect(readme).toContain("123,456")
    const empty = renderReadme({}, false)
    expect(empty).not.toContain("chart.svg")
    expect(empty.match(/_No results:/g)?.length).toBe(13)
  })

  it("the inbox section shows inbox vs raw (best and median), the hand-written loop, the goal and statements per message", () => {
    const side = (best: number) => ({ messagesPerSecond: [best], best, median: best })
    const backend = (inbox: number, raw: number, hand: number, met: boolean) => ({
      inbox: side(inbox),
      raw: side(raw),
      handWritten: side(hand),
      ratio: { bestToBest: inbox / raw, medianOfRounds: 0.7, rounds: [0.7] },
      ratioToHandWritten: { bestToBest: inbox / hand, medianOfRounds: 0.95, rounds: [0.95] },
      statementsPerMessage: { inbox: 4.35, raw: 4.35, handWritten: 4.35 },
      cpuMillisPerMessage: { inbox: 1.2, raw: 0.35, handWritten: 1.1 },
      target: "inbox >= 0.8x the raw driver loop (best vs best and median of rounds)",
      met
    })
    const readme = renderReadme({
      inbox: {
        date: "2026-12-03T22:00:00.000Z",
        messagesPerRound: 1000,
        rounds: 5,
        sqlite: backend(160, 320, 165, false),
        postgres: backend(120, 130, 125, true)
      }
    })
    expect(readme).toContain("## Inbox (consumer side)")
    expect(readme).toMatch(
      /\| SQLite \(file, WAL, synchronous = FULL\) \| 160 \| 320 \| 0\.50× \| 0\.70× \| 165 \| 0\.95× \| .* \| \*\*not met\*\* \|/
    )
    expect(readme).toMatch(
      /\| PostgreSQL \(127\.0\.0\.1, fsync on\) \| 120 \| 130 \| 0\.92× \| 0\.70× \| 125 \| 0\.95× \| .* \| met \|/
    )
    expect(readme).toMatch(/\| SQLite \(file, WAL, synchronous = FULL\) \| 4\.35 \| 4\.35 \| 1\.2 \| 1\.1 \| 0\.35 \|/)
  })

  it("a field missing from a result file shows n/a", () => {
    const readme = renderReadme({ sqlite: { persist: { storeRecordsPerSecond: 10 } } })
    expect(readme).toContain("| persist in batches of 100 | 10 | n/a | n/a |")
  })

  it("the chart holds a bar per figure with its value, and one panel per kind of data present", () => {
    const svg = renderChart({ memory, sqlite, dynamodb, contention })
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true)
    expect(svg.trimEnd().endsWith("</svg>")).toBe(true)
    expect(svg.match(/<g transform=/g)?.length).toBe(3)
    for (const value of ["123,456", "246,912", "7,000", "14,000", "50.2", "1.03", "120", "40"]) {
      expect(svg).toContain(`>${value}</text>`)
    }
    // memory e2e store + baseline, SQLite persist + e2e pairs, 2 contention pairs, 6 DynamoDB items-read bars
    expect(svg.match(/<rect x=/g)?.length).toBe(2 + 4 + 4 + 6 + legendSwatches(svg))
    expect(svg).toContain("Store vs baseline, records per second")
    expect(svg).toContain("DynamoDB: items read per claimed record, by backlog (limit 100)")
    expect(svg).toContain("<title>memory (median): 0.12 ms per claim at 100,000 pending records</title>")
  })

  it("the chart puts DynamoDB store vs raw SDK beside the other pairs and draws both claim latency lines", () => {
    const svg = renderChart({ dynamodbThroughput })
    expect(svg.match(/<g transform=/g)?.length).toBe(2)
    // persist and end-to-end pairs
    expect(svg.match(/<rect x=/g)?.length).toBe(4 + legendSwatches(svg))
    for (const value of ["60", "80", "30", "24"]) expect(svg).toContain(`>${value}</text>`)
    expect(svg).toContain(">baseline (plain JS / raw SQL / raw SDK)</text>")
    expect(svg).toContain(
      "<title>DynamoDB Local, keyless, store (median): 3,000 ms per claim at 10,000 pending records</title>"
    )
    expect(svg).toContain(
      "<title>DynamoDB Local, keyless, raw SDK (median): 2,000 ms per claim at 1,000 pending records</title>"
    )
  })

  it("the chart of nothing is a valid note; table cells escape the Markdown column bar", () => {
    expect(renderChart({})).toContain("No benchmark results yet")
    expect(renderChart({ dynamodb: { results: [dynamoRow("unknown-path", 100, 2)] } })).toContain(
      "No benchmark results yet"
    )
    const readme = renderReadme({
      sqlite: { endToEnd: { storeRecordsPerSecond: 1, rawRecordsPerSecond: 2, target: "a | b" } }
    })
    expect(readme).toContain("| a \\| b |")
  })

  it("reads the result files it finds and reports missing or half-written ones", async () => {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), "bench-report-"))
    try {
      fs.writeFileSync(path.join(directory, "memory.json"), JSON.stringify(memory))
      fs.writeFileSync(path.join(directory, "sqlite.json"), '{ "persist": { "storeRecords') // caught mid-write
      fs.writeFileSync(path.join(directory, "drain.json"), "[1, 2]")
      const read = readResults(directory)
      expect(read.found).toEqual(["memory"])
      expect(read.missing).toEqual([
        "sqlite",
        "postgres",
        "mysql",
        "dynamodb",
        "dynamodbThroughput",
        "drain",
        "contention",
        "brokers",
        "latency",
        "steady",
        "inbox",
        "fairness"
      ])

      const readme = path.join(directory, "README.md")
      const written = await writeReport(directory, readme)
      expect(written.found).toEqual(["memory"])
      // laid out by Prettier: the columns are padded
      expect(fs.readFileSync(readme, "utf8")).toMatch(/\| ids given, wall clock +\| 123,456 \| +246,912 \| +0\.50× \|/)
      expect(fs.readFileSync(readme, "utf8")).toContain(
        "_No results: bench/results/sqlite.json is missing or unreadable"
      )
      expect(fs.readFileSync(path.join(directory, "chart.svg"), "utf8")).toContain(">123,456</text>")
    } finally {
      fs.rmSync(directory, { recursive: true, force: true })
    }
  })
})

/** Legend swatches are rects too: one per series of each bar panel. */
const legendSwatches = (svg: string): number =>
  (svg.match(/<rect x="[\d.]+" y="[\d.]+" width="10" height="10"/g) ?? []).length

describe("bench progress display", () => {
  const output = (isTTY: boolean) => {
    const written: Array<string> = []
    return { isTTY, columns: 200, write: (text: string) => written.push(text), written }
  }

  it("recognises progress lines only by their prefix", () => {
    expect(parseProgress(`${ProgressPrefix}claim at backlog 1000`)).toBe("claim at backlog 1000")
    expect(parseProgress("claim at backlog 1000")).toBeUndefined()
  })

  it("without a TTY, prints each progress line once with the elapsed time, and passes other lines through", () => {
    let now = 0
    const out = output(false)
    const display = new ProgressDisplay("[1/2] memory", out, () => now)
    now = 2_500
    display.line(`${ProgressPrefix}end to end, round 1/3`)
    display.line("plain output")
    display.close()
    expect(out.written).toEqual(["[1/2] memory: end to end, round 1/3 (at 2.5 s)\n", "plain output\n"])
  })

  it("on a TTY, keeps one status line: cleared before other output, redrawn after it", () => {
    let now = 0
    const out = output(true)
    const display = new ProgressDisplay("[2/2] dynamodb", out, () => now)
    now = 1_000
    display.line(`${ProgressPrefix}keyed-lsi, backlog 5000`)
    now = 4_000
    display.line("a result line")
    display.close()
    expect(out.written.at(-1)).toBe("\r\x1b[K")
    expect(out.written).toContain("a result line\n")
    const redrawn = out.written[out.written.indexOf("a result line\n") + 1]
    expect(redrawn).toBe("\r\x1b[K[2/2] dynamodb · keyed-lsi, backlog 5000 · 3.0 s (total 4.0 s)")
    // the status line is cleared right before the passed-through line
    expect(out.written[out.written.indexOf("a result line\n") - 1]).toBe("\r\x1b[K")
  })
})
