/**
 * Renders bench/README.md and bench/results/chart.svg from the benchmarks' result files
 * (bench/results/{memory,sqlite,postgres,mysql,dynamodb,dynamodbThroughput,drain,contention,brokers,latency,steady,inbox,
 * fairness}.json).
 *
 * Every figure is read defensively: a missing file, a file caught half-written by a benchmark running
 * at the same moment, or a missing field shows as "not available" instead of failing the report. Ratios
 * are computed here from the store and baseline figures, so they always match the numbers beside them.
 * The chart is hand-written SVG (no packages): store vs baseline records/s per backend (DynamoDB: store
 * vs raw SDK), claim latency vs backlog per backend (DynamoDB: store and raw SDK side by side), and
 * DynamoDB items read per claimed record by backlog (scan / GSI / LSI).
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as prettier from "prettier"
import { profiledSides } from "./CpuProfile.js"
import { median } from "./Stats.js"

/** The result files the report knows, in report order. */
export const ResultNames = [
  "memory",
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
] as const

/** One result name. */
export type ResultName = (typeof ResultNames)[number]

/** Parsed result files by name; a name is absent when its file is missing or unreadable. */
export type Results = Partial<Record<ResultName, unknown>>

// ---------------------------------------------------------------------------------------------------
// Safe access to parsed JSON
// ---------------------------------------------------------------------------------------------------

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** The value at `path` (object keys), or undefined. */
const at = (value: unknown, ...path: ReadonlyArray<string>): unknown => {
  let current = value
  for (const key of path) {
    if (!isRecord(current)) return undefined
    current = current[key]
  }
  return current
}

const num = (value: unknown, ...path: ReadonlyArray<string>): number | undefined => {
  const found = at(value, ...path)
  return typeof found === "number" && Number.isFinite(found) ? found : undefined
}

const str = (value: unknown, ...path: ReadonlyArray<string>): string | undefined => {
  const found = at(value, ...path)
  return typeof found === "string" ? found : undefined
}

const bool = (value: unknown, ...path: ReadonlyArray<string>): boolean | undefined => {
  const found = at(value, ...path)
  return typeof found === "boolean" ? found : undefined
}

const list = (value: unknown, ...path: ReadonlyArray<string>): ReadonlyArray<unknown> => {
  const found = at(value, ...path)
  return Array.isArray(found) ? found : []
}

const entries = (value: unknown, ...path: ReadonlyArray<string>): ReadonlyArray<readonly [string, unknown]> => {
  const found = at(value, ...path)
  return isRecord(found) ? Object.entries(found) : []
}

// ---------------------------------------------------------------------------------------------------
// Formatting
// ---------------------------------------------------------------------------------------------------

const na = "n/a"

/** 1,234 for large numbers, 3 significant digits for small ones; "n/a" when absent. */
export const formatNumber = (n: number | undefined): string => {
  if (n === undefined) return na
  const abs = Math.abs(n)
  if (abs >= 1000) return Math.round(n).toLocaleString("en-US")
  if (abs >= 100 || Number.isInteger(n)) return String(Math.round(n * 10) / 10)
  return String(Number(n.toPrecision(3)))
}

/** store / baseline, two decimals, e.g. `0.51×`; "n/a" when either side is missing or the baseline is 0. */
export const formatRatio = (store: number | undefined, baseline: number | undefined): string =>
  store === undefined || baseline === undefined || baseline === 0 ? na : `${(store / baseline).toFixed(2)}×`

const metText = (met: boolean | undefined): string => (met === undefined ? na : met ? "met" : "**not met**")

const cell = (text: string): string => text.replace(/\|/g, "\\|").replace(/\n/g, " ")

const numeric = /^[-\d,.×/ ]*(n\/a)?[-\d,.×/ ]*$/

/** A Markdown table; columns whose cells are all figures are right-aligned. */
const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): Array<string> => [
  `| ${header.map(cell).join(" | ")} |`,
  `| ${header.map((_, i) => (i > 0 && rows.every((row) => numeric.test(row[i] ?? "")) ? "---:" : "---")).join(" | ")} |`,
  ...rows.map((row) => `| ${row.map(cell).join(" | ")} |`),
  ""
]

const missing = (name: string): Array<string> => [
  `_No results: bench/results/${name}.json is missing or unreadable (run \`npm run bench -- ${name}\`)._`,
  ""
]

const measuredLine = (data: unknown): string => {
  const date = str(data, "date") ?? str(data, "generatedAt")
  const before = num(data, "loadAverage1m", "before")
  const after = num(data, "loadAverage1m", "after")
  const parts = [
    date !== undefined ? `measured ${date}` : undefined,
    before !== undefined ? `load average ${formatNumber(before)} → ${formatNumber(after)}` : undefined,
    num(data, "seconds") !== undefined ? `run took ${formatNumber(num(data, "seconds"))} s` : undefined,
    bool(data, "quick") === true ? "**quick run**" : undefined
  ].filter((p): p is string => p !== undefined)
  return parts.length > 0 ? `_${parts.join("; ")}._` : ""
}

// ---------------------------------------------------------------------------------------------------
// Sections
// ---------------------------------------------------------------------------------------------------

const memorySection = (data: unknown): Array<string> => {
  const out = ["## Memory store", "", measuredLine(data), ""]
  const e2e = at(data, "endToEnd")
  const base = (kind: "wall" | "cpu") => num(e2e, "baseline", kind)
  const goal = str(e2e, "target") ?? na
  out.push(
    "End to end through the store API (persist 100 → claim 100 → complete 100), records/s; baseline: the same",
    "work in plain JS without Effect, in the same process. Best of the alternating rounds.",
    "",
    ...table(
      ["scenario", "store", "baseline", "store / baseline", "goal", "goal met"],
      [
        ["ids given, wall clock", "wall", goal, metText(bool(e2e, "met"))],
        ["ids given, per CPU second", "cpu", "", ""],
        ["ids generated by the store, wall clock", "wall", "", ""],
        ["ids generated by the store, per CPU second", "cpu", "", ""]
      ].map(([label = "", kind = "wall", g = "", met = ""], i) => {
        const side = i < 2 ? "idsGiven" : "idsGenerated"
        const k = kind === "cpu" ? "cpu" : "wall"
        const store = num(e2e, side, k)
        return [label, formatNumber(store), formatNumber(base(k)), formatRatio(store, base(k)), g, met]
      })
    )
  )
  const claim = at(data, "claim")
  const backlogs = entries(claim, "medianMicrosWall").map(([k]) => k)
  out.push(
    `claim(${formatNumber(num(claim, "limit"))}) latency by backlog of pending records (median of ${formatNumber(num(claim, "samples"))} claims, µs):`,
    "",
    ...table(
      ["backlog", "median µs (wall)", "median µs (CPU)", "vs smallest backlog"],
      backlogs.map((b) => [
        formatNumber(Number(b)),
        formatNumber(num(claim, "medianMicrosWall", b)),
        formatNumber(num(claim, "medianMicrosCpu", b)),
        formatRatio(num(claim, "medianMicrosWall", b), num(claim, "medianMicrosWall", backlogs[0] ?? ""))
      ])
    ),
    `Goal: ${str(claim, "target") ?? na} — ${metText(bool(claim, "met"))}.`,
    ""
  )
  return out
}

const sqliteSection = (data: unknown): Array<string> => {
  const out = ["## SQLite store (file, WAL, synchronous = FULL)", "", measuredLine(data), ""]
  const phases: ReadonlyArray<readonly [string, string]> = [
    ["persist", "persist in batches of 100"],
    ["claimComplete", "claim(100) + complete over the backlog"],
    ["endToEnd", "persist 100 → claim 100 → complete 100"]
  ]
  out.push(
    "Records/s; baseline: raw better-sqlite3 running the store's own statements in the same transactions, in the",
    "same process and rounds (median of the rounds).",
    "",
    ...table(
      ["scenario", "store", "raw baseline", "store / baseline", "goal", "goal met"],
      phases.map(([key, label]) => {
        const store = num(data, key, "storeRecordsPerSecond")
        const raw = num(data, key, "rawRecordsPerSecond")
        return [
          label,
          formatNumber(store),
          formatNumber(raw),
          formatRatio(store, raw),
          str(data, key, "target") ?? "",
          bool(data, key, "met") === undefined ? "" : metText(bool(data, key, "met"))
        ]
      })
    )
  )
  const handWritten = num(data, "endToEnd", "handWrittenRecordsPerSecond")
  if (handWritten !== undefined) {
    /** The ratio at `endToEnd.<path>.<which>`. */
    const ratio = (which: "bestToBest" | "medianOfRounds", ...path: ReadonlyArray<string>) => {
      const value = num(data, "endToEnd", ...path, which)
      return value === undefined ? na : `${value.toFixed(2)}×`
    }
    // the raw loop reading its claims as values (informational), when the run has it
    const rawValues = ["rawValues", "storeToRawValues"]
    const rawValuesRow =
      num(data, "endToEnd", ...rawValues, "bestToBest") === undefined
        ? []
        : [
            [
              "store / raw reading its claims as values (informational)",
              ratio("bestToBest", ...rawValues),
              ratio("medianOfRounds", ...rawValues)
            ]
          ]
    out.push(
      "End to end, a third loop writes the same statements by hand on `@effect/sql-sqlite-node` (`sql.withTransaction`,",
      "`sql.unsafe`, the claim's rows read as values). The store must run on the application's `SqlClient` (a persist joins the application's",
      "transaction), so no code on that client beats the hand-written loop; its ratio to the raw loop is the ceiling:",
      "",
      `Hand-written loop ${formatNumber(handWritten)} rec/s (median of rounds), store ` +
        `${formatNumber(num(data, "endToEnd", "storeRecordsPerSecond"))}, raw ` +
        `${formatNumber(num(data, "endToEnd", "rawRecordsPerSecond"))}.`,
      "",
      ...table(
        ["end to end", "best against best", "median of rounds"],
        [
          ["store / raw", ratio("bestToBest", "storeToRaw"), ratio("medianOfRounds", "storeToRaw")],
          [
            "hand-written / raw (the ceiling)",
            ratio("bestToBest", "handWrittenToRaw"),
            ratio("medianOfRounds", "handWrittenToRaw")
          ],
          [
            "store / hand-written (the store's own cost)",
            ratio("bestToBest", "storeToHandWritten"),
            ratio("medianOfRounds", "storeToHandWritten")
          ],
          ...rawValuesRow
        ]
      ),
      ...(() => {
        const statement = str(data, "endToEnd", "ceiling", "statement")
        return statement === undefined ? [] : [`- ${statement}`, ""]
      })()
    )
  }
  const cpuStore = num(data, "cpu", "storeMillis")
  const cpuRaw = num(data, "cpu", "rawMillis")
  if (cpuStore !== undefined) {
    out.push(
      `CPU time over the throughput phases: store ${formatNumber(cpuStore)} ms, raw ${formatNumber(cpuRaw)} ms (${formatRatio(cpuStore, cpuRaw)}).`,
      ""
    )
  }
  const latency = at(data, "claimLatency")
  const pendings = entries(latency, "byPending").map(([k]) => k)
  out.push(
    `claim(${formatNumber(num(latency, "limit"))}) latency by pending records (ms):`,
    "",
    ...table(
      ["pending", "median ms", "p95 ms", "vs smallest backlog"],
      pendings.map((p) => [
        formatNumber(Number(p)),
        formatNumber(num(latency, "byPending", p, "medianMillis")),
        formatNumber(num(latency, "byPending", p, "p95Millis")),
        formatRatio(
          num(latency, "byPending", p, "medianMillis"),
          num(latency, "byPending", pendings[0] ?? "", "medianMillis")
        )
      ])
    ),
    `Goal: ${str(latency, "target") ?? na} — ${metText(bool(latency, "met"))}.`,
    ""
  )
  return out
}

/** Claim paths of dynamodb.json: kind, label, short label. */
const dynamoKinds: ReadonlyArray<readonly [string, string, string]> = [
  ["keyless", "keyless (ClaimIndex GSI)", "keyless (GSI)"],
  ["keyed", "keyed, consistent scan", "keyed (scan)"],
  ["keyed-lsi", "keyed, ClaimLocalIndex (LSI)", "keyed (LSI)"],
  ["keyed-lsi-stranded", "keyed, LSI, 5 of 20 heads stranded", "keyed (LSI, stranded heads)"]
]

const dynamoRows = (data: unknown) =>
  list(data, "results").map((row) => ({
    kind: str(row, "kind") ?? "?",
    backlog: num(row, "backlog"),
    itemsRead: num(row, "itemsReadPerClaimedRecord"),
    requests: num(row, "requestsPerClaimedRecord"),
    capacity: num(row, "readCapacityPerClaimedRecord"),
    millis: num(row, "localMillisPerClaim"),
    claimed: num(row, "claimed"),
    claims: num(row, "claims")
  }))

const dynamoSection = (data: unknown): Array<string> => {
  const out = ["## DynamoDB store (DynamoDB Local): claim cost", "", measuredLine(data), ""]
  const rows = dynamoRows(data)
  const backlogs = Array.from(new Set(rows.map((r) => r.backlog).filter((b): b is number => b !== undefined))).sort(
    (a, b) => a - b
  )
  const kinds = dynamoKinds.filter(([kind]) => rows.some((r) => r.kind === kind))
  const find = (kind: string, backlog: number) => rows.find((r) => r.kind === kind && r.backlog === backlog)
  out.push(
    `Items read per claimed record (Query ScannedCount + GetItem items), claim limit ${formatNumber(num(data, "limit"))};`,
    "the baseline is the ideal of 1 item read per claimed record.",
    "",
    ...table(
      ["backlog", ...kinds.map(([, label]) => label)],
      backlogs.map((b) => [formatNumber(b), ...kinds.map(([kind]) => formatNumber(find(kind, b)?.itemsRead))])
    ),
    ...table(
      ["goal", "worst measured", "goal met"],
      [
        [
          `keyless ≤ ${formatNumber(num(data, "goal", "keylessItemsReadPerClaimedRecord"))} items read per claimed record`,
          formatNumber(num(data, "goal", "worstKeyless")),
          metText(bool(data, "goal", "met"))
        ],
        [
          `keyed with the LSI ≤ ${formatNumber(num(data, "goalLocalClaimIndex", "keyedLsiItemsReadPerClaimedRecord"))} items read per claimed record`,
          formatNumber(num(data, "goalLocalClaimIndex", "worstKeyedLsi")),
          metText(bool(data, "goalLocalClaimIndex", "met"))
        ]
      ]
    ),
    "All figures per claimed record (local milliseconds are for orientation only: DynamoDB Local is far slower",
    "than DynamoDB):",
    "",
    ...table(
      ["path", "backlog", "claimed / claims", "items read", "vs ideal", "requests", "RCU", "local ms per claim"],
      rows.map((r) => [
        dynamoKinds.find(([kind]) => kind === r.kind)?.[1] ?? r.kind,
        formatNumber(r.backlog),
        `${formatNumber(r.claimed)} / ${formatNumber(r.claims)}`,
        formatNumber(r.itemsRead),
        formatRatio(r.itemsRead, 1),
        formatNumber(r.requests),
        formatNumber(r.capacity),
        formatNumber(r.millis)
      ])
    )
  )
  const notes = list(data, "notes").filter((n): n is string => typeof n === "string")
  if (notes.length > 0) out.push(...notes.map((n) => `- ${n}`), "")
  return out
}

/** `a / b` of two figures, each "n/a" when absent. */
const pair = (a: number | undefined, b: number | undefined): string => `${formatNumber(a)} / ${formatNumber(b)}`

const dynamoThroughputSection = (data: unknown): Array<string> => {
  const out = ["## DynamoDB store vs raw SDK (DynamoDB Local)", "", measuredLine(data), ""]
  const scenarios: ReadonlyArray<readonly [string, string]> = [
    ["persist", `persist in batches of ${formatNumber(num(data, "persist", "batch"))}`],
    [
      "endToEnd",
      `persist ${formatNumber(num(data, "endToEnd", "limit"))} (batches of ${formatNumber(num(data, "endToEnd", "batch"))}) → claim ${formatNumber(num(data, "endToEnd", "limit"))} → complete`
    ]
  ]
  out.push(
    "Records/s, median of the rounds; baseline: the same SDK client sending the minimum requests the design",
    "needs (identical items), in the same process, the two sides taking turns in every round.",
    "",
    ...table(
      [
        "scenario",
        "store",
        "raw baseline",
        "store / baseline",
        "paired-round median ratio",
        "best round store / raw",
        "requests per record store / raw",
        "CPU ms per record store / raw"
      ],
      scenarios.map(([key, label]) => {
        const store = num(data, key, "storeRecordsPerSecond")
        const raw = num(data, key, "rawRecordsPerSecond")
        return [
          label,
          formatNumber(store),
          formatNumber(raw),
          formatRatio(store, raw),
          formatNumber(num(data, key, "medianRoundRatio")),
          pair(num(data, key, "bestStoreRecordsPerSecond"), num(data, key, "bestRawRecordsPerSecond")),
          pair(num(data, key, "storeRequestsPerRecord"), num(data, key, "rawRequestsPerRecord")),
          pair(num(data, key, "storeCpuMillisPerRecord"), num(data, key, "rawCpuMillisPerRecord"))
        ]
      })
    )
  )
  const latency = at(data, "claimLatency")
  const pendings = entries(latency, "byBacklog")
    .map(([k]) => k)
    .sort((a, b) => Number(a) - Number(b))
  const side = (p: string, s: "store" | "raw", field: string) => num(latency, "byBacklog", p, s, field)
  out.push(
    `claim(${formatNumber(num(latency, "limit"))}) latency on a ${str(latency, "partition") ?? na} partition by pending records, ms over ${formatNumber(num(latency, "samplesPerSide"))} claims per side; baseline: fence GetItem + conditional`,
    "UpdateItem + one ClaimIndex Query + one TransactWriteItems per record, with the same SDK client.",
    "",
    ...table(
      [
        "pending",
        "store median",
        "store p90",
        "raw median",
        "raw p90",
        "store / raw (median)",
        "store / raw (p90)",
        "requests per claim store / raw",
        "CPU ms per claim store / raw"
      ],
      pendings.map((p) => [
        formatNumber(Number(p)),
        formatNumber(side(p, "store", "medianMillis")),
        formatNumber(side(p, "store", "p90Millis")),
        formatNumber(side(p, "raw", "medianMillis")),
        formatNumber(side(p, "raw", "p90Millis")),
        formatRatio(side(p, "store", "medianMillis"), side(p, "raw", "medianMillis")),
        formatRatio(side(p, "store", "p90Millis"), side(p, "raw", "p90Millis")),
        pair(side(p, "store", "requestsPerClaim"), side(p, "raw", "requestsPerClaim")),
        pair(side(p, "store", "medianCpuMillis"), side(p, "raw", "medianCpuMillis"))
      ])
    )
  )
  const notes = list(data, "notes").filter((n): n is string => typeof n === "string")
  if (notes.length > 0) out.push(...notes.map((n) => `- ${n}`), "")
  return out
}

/** The drain bench's informational round with every SQLite statement timed, as one paragraph. */
const statementTimeLines = (data: unknown): Array<string> => {
  if (data === undefined) return []
  const side = (name: string) => {
    const wall = num(data, name, "wallSeconds")
    const seconds = num(data, name, "statements", "seconds")
    const commits = num(data, name, "statements", "commits")
    const commitMedian = num(data, name, "statements", "commitMedianMillis")
    if (wall === undefined || seconds === undefined) return na
    return (
      `${seconds.toFixed(2)} s of ${wall.toFixed(2)} s wall in SQLite statements` +
      (commits !== undefined && commitMedian !== undefined
        ? ` (${formatNumber(commits)} commits, median ${commitMedian.toFixed(2)} ms)`
        : "")
    )
  }
  const ceiling = num(data, "ceilingRatio")
  const perBatch = (name: string) => {
    const statements = num(data, name, "statements", "statementsPerBatch")
    const commits = num(data, name, "statements", "commitsPerBatch")
    const per100 = num(data, name, "statements", "statementsPer100Records")
    const commits100 = num(data, name, "statements", "commitsPer100Records")
    if (statements === undefined || commits === undefined) return na
    return (
      `${formatNumber(statements)} statements and ${formatNumber(commits)} commits per claimed batch` +
      (per100 !== undefined && commits100 !== undefined
        ? ` (${formatNumber(per100)} and ${formatNumber(commits100)} per 100 records)`
        : "")
    )
  }
  const counted = num(data, "relay", "statements", "statementsPerBatch") !== undefined
  const handWritten = num(data, "handWritten", "statements", "seconds") !== undefined
  return [
    `SQLite statement time (one more round, every statement timed): raw baseline ${side("raw")}; ` +
      `relay ${side("relay")}` +
      (handWritten ? `; hand-written loop with the order ${side("handWritten")}` : "") +
      `. With nothing outside SQLite taking time, the relay would reach ` +
      `${ceiling === undefined ? na : `${ceiling.toFixed(2)}×`} the raw baseline.`,
    "",
    ...(counted
      ? [
          `Store work in that round (claim → complete): relay ${perBatch("relay")}; raw loop ${perBatch("raw")}` +
            (handWritten ? `; hand-written loop ${perBatch("handWritten")}` : "") +
            ".",
          ""
        ]
      : [])
  ]
}

/** A side's ratio best against best and as the median of the per-round ratios, in words. */
const bestAndMedian = (best: number | undefined, medianOfRounds: number | undefined): string =>
  `${best === undefined ? na : `${best.toFixed(2)}×`} best against best, ${medianOfRounds === undefined ? na : `${medianOfRounds.toFixed(2)}×`} the median of rounds`

/**
 * The hand-written drain on the store's client (with and without the relay's order) against the raw baseline,
 * and the relay against it; one paragraph.
 */
const handWrittenDrainLines = (sqlite: unknown): Array<string> => {
  const best = num(sqlite, "handWrittenDrain", "ratioWall")
  if (best === undefined) return []
  const unorderedBest = num(sqlite, "handWrittenDrainWithoutOrder", "ratioWall")
  return [
    `In the same rounds, the raw loop written on Effect and \`@effect/sql-sqlite-node\` (the client used as the store ` +
      `uses it: one reserved connection, no span per statement; every partition claimed in ` +
      `one transaction, each record sent through an Effect, a key's records sent in waves, each wave completed before ` +
      `the next is sent: SPEC §6 step 5) reached ${bestAndMedian(best, num(sqlite, "handWrittenDrain", "ratioWallMedianOfRounds"))} ` +
      `of the raw baseline` +
      (unorderedBest === undefined
        ? ""
        : `; without the waves ${bestAndMedian(unorderedBest, num(sqlite, "handWrittenDrainWithoutOrder", "ratioWallMedianOfRounds"))}`) +
      `. The relay reached ${bestAndMedian(
        num(sqlite, "handWrittenDrain", "relayToHandWritten", "bestToBest"),
        num(sqlite, "handWrittenDrain", "relayToHandWritten", "medianOfRounds")
      )} of the hand-written loop with the waves.`,
    ""
  ]
}

/**
 * The store-calls drain in the relay's shape (`storeCallsDrainInOrder`: a fiber per partition, its claims sent in
 * waves, a store complete per wave) against the raw baseline, and the relay against it: how much of the relay's
 * gap is the shape SPEC §6 and the store's port give any relay, and how much the drainer's own.
 */
const storeCallsInOrderLines = (sqlite: unknown): Array<string> => {
  const best = num(sqlite, "storeCallsDrainInOrder", "ratioWall")
  if (best === undefined) return []
  return [
    `The store's own calls in the relay's shape (a fiber per partition, each claim sent in waves, every wave but the ` +
      `last completed with one \`OutboxStore.complete\` before the next is sent; no lease, drainer or metric) reached ` +
      `${bestAndMedian(best, num(sqlite, "storeCallsDrainInOrder", "ratioWallMedianOfRounds"))} of the raw baseline; the relay ` +
      `reached ${bestAndMedian(
        num(sqlite, "storeCallsDrainInOrder", "relayAgainstIt", "ratioWall"),
        num(sqlite, "storeCallsDrainInOrder", "relayAgainstIt", "ratioWallMedianOfRounds")
      )} of it.`,
    ""
  ]
}

/**
 * Where the SQLite sides' time goes (the drain bench's profiled rounds, `cpuProfile`): a table of milliseconds by
 * category, and the relay's time over the store's calls in its shape (what the drainer costs), by category.
 */
const cpuProfileLines = (sqlite: unknown): Array<string> => {
  const sides = at(sqlite, "cpuProfile", "sides")
  const present = profiledSides.filter(([key]) => num(sides, key, "sampledMillis") !== undefined)
  if (present.length === 0) return []
  const categories = entries(sides, present[0]?.[0] ?? "", "categories").map(([name]) => name)
  const figure = (value: number | undefined) => (value === undefined ? na : value.toFixed(1))
  const rows = [
    ["all samples (≈ wall time)", ...present.map(([key]) => figure(num(sides, key, "sampledMillis")))],
    ...categories.map((category) => [
      category,
      ...present.map(([key]) => figure(num(sides, key, "categories", category)))
    ])
  ]
  const out = [
    `Where the SQLite sides' time goes (V8's sampling profiler over ${formatNumber(
      num(sides, present[0]?.[0] ?? "", "rounds")
    )} more rounds of each side, median milliseconds a round; SQLite also counts the samples V8 credits to the ` +
      "JavaScript frame that called a statement, most of the time a read spends making its rows' values):",
    "",
    ...table(["category", ...present.map(([, label]) => label)], rows)
  ]
  const relay = num(sides, "relay", "sampledMillis")
  const shape = num(sides, "storeCallsInOrder", "sampledMillis")
  const raw = num(sides, "raw", "sampledMillis")
  if (relay !== undefined && shape !== undefined && raw !== undefined && shape > 0 && relay > 0) {
    const over = categories
      .map(
        (category) =>
          [
            category,
            (num(sides, "relay", "categories", category) ?? 0) -
              (num(sides, "storeCallsInOrder", "categories", category) ?? 0)
          ] as const
      )
      .filter(([, ms]) => ms >= 1)
      .sort((a, b) => b[1] - a[1])
      .map(([category, ms]) => `${category} ${ms.toFixed(1)}`)
      .join(", ")
    out.push(
      `Profiled, the store's calls in the relay's shape take ${(raw / shape).toFixed(2)}× the raw baseline's rate and ` +
        `the relay ${(raw / relay).toFixed(2)}×; the relay's ${(relay - shape).toFixed(1)} ms a round over that shape ` +
        `(${(((relay - shape) / shape) * 100).toFixed(0)} %) is the drainer's own work: ${over === "" ? na : over} ms.`,
      ""
    )
  }
  return out
}

/**
 * The SQLite relay goal's ceiling for code on the store's client (`clientCeilingRatio`: the relay's statements
 * and the hand-written loop's time outside them) against the goal's ratio; with the store-calls drain's time
 * outside statements, how much of the relay's is the store's own code.
 */
const clientCeilingLine = (statementTime: unknown, goal: number | undefined): string | undefined => {
  const ceiling = num(statementTime, "clientCeilingRatio")
  const relay = num(statementTime, "outsideStatementsMicrosPerRecord", "relay")
  const handWritten = num(statementTime, "outsideStatementsMicrosPerRecord", "handWritten")
  if (ceiling === undefined || relay === undefined || handWritten === undefined) return undefined
  const verdict =
    goal === undefined
      ? ""
      : ceiling >= goal
        ? ` — the goal's ${goal.toFixed(2)}× is within reach of code as lean as that loop.`
        : ` — below the goal's ${goal.toFixed(2)}×: in this run even code as lean as that loop would miss it.`
  const storeCalls = num(statementTime, "outsideStatementsMicrosPerRecord", "storeCalls")
  return (
    `Outside SQLite statements the relay took ${relay.toFixed(1)} µs a record, the hand-written loop with the waves ` +
    `${handWritten.toFixed(1)} µs. With the relay's statements and no more time outside them than that loop's, ` +
    `the relay would reach ${ceiling.toFixed(2)}× the raw baseline${verdict === "" ? "." : verdict}` +
    (storeCalls === undefined
      ? ""
      : ` The store's own claim and complete calls alone (no drainer, one complete a claim) took ` +
        `${storeCalls.toFixed(1)} µs a record outside statements; the rest of the relay's, ` +
        `${Math.max(0, relay - storeCalls).toFixed(1)} µs, went to the drainer and to the completes of its waves.`)
  )
}

/**
 * The most that making the relay's waves cost nothing outside SQLite could gain (`wavelessCeilingRatio`: the
 * keyed relay's statements and the time outside them of the same relay on a backlog with no record keyed,
 * where a batch goes out in one wave) against the goal's ratio.
 */
const wavelessCeilingLine = (statementTime: unknown, goal: number | undefined): string | undefined => {
  const ceiling = num(statementTime, "wavelessCeilingRatio")
  const unkeyed = num(statementTime, "outsideStatementsMicrosPerRecord", "relayWithoutKeys")
  if (ceiling === undefined || unkeyed === undefined) return undefined
  const verdict =
    goal === undefined
      ? "."
      : ceiling >= goal
        ? ` — at or above the goal's ${goal.toFixed(2)}×: the waves' cost outside SQLite is the whole gap.`
        : ` — below the goal's ${goal.toFixed(2)}×: even waves that cost nothing outside SQLite (every partition ` +
          `waved together at no cost) would leave the relay short of it; the rest is the relay's work for each record.`
  return (
    `With no record keyed (a batch goes out in one wave) the relay took ${unkeyed.toFixed(1)} µs a record outside ` +
    `SQLite statements. With the keyed relay's statements (SPEC §6 step 5's completes, a commit a wave, kept) and ` +
    `no more time outside them than that, the relay would reach ${ceiling.toFixed(2)}× the raw baseline${verdict}`
  )
}

/**
 * Where the time outside SQLite goes, from the statement-timed rounds: garbage collection per record and the
 * Effect operations evaluated per record, for the relay (keyed and not) and the loops it is measured against.
 */
const outsideStatementsLine = (statementTime: unknown): string | undefined => {
  const sides: ReadonlyArray<readonly [string, string]> = [
    ["relay", "the relay"],
    ["relayWithoutKeys", "the relay with no record keyed"],
    ["handWritten", "the hand-written loop with the waves"],
    ["raw", "the raw loop"]
  ]
  const parts: Array<string> = []
  for (const [key, label] of sides) {
    const gc = num(statementTime, key, "statements", "gcMicrosPerRecord")
    const ops = num(statementTime, key, "statements", "effectOpsPerRecord")
    if (gc === undefined || ops === undefined) continue
    parts.push(`${label} ${gc.toFixed(1)} µs of garbage collection and ${ops.toFixed(1)} Effect operations a record`)
  }
  return parts.length === 0 ? undefined : `In the statement-timed rounds: ${parts.join("; ")}.`
}

/**
 * How the relay's rounds are timed (from its first claim to its last complete, as the raw loop's span its claims
 * and completes), what its start before the first claim took, and the rounds timed from the start.
 */
const relayStartLines = (fromStart: unknown): Array<string> => {
  const min = num(fromStart, "startMillis", "min")
  const middle = num(fromStart, "startMillis", "median")
  const max = num(fromStart, "startMillis", "max")
  const ratio = num(fromStart, "ratioWall")
  const medianRatio = num(fromStart, "ratioWallMedianOfRounds")
  if (min === undefined || middle === undefined || max === undefined || ratio === undefined) return []
  return [
    "The relay's rounds are timed as the raw baseline's are, over the claims and completes: from the relay's first " +
      "claim to the return of the complete that finished the backlog. Its start before the first claim (partition " +
      "discovery, lease acquires, the drainers' builds, the first cycle's expiry sweep) is a fixed cost that does not " +
      `grow with the backlog: ${min.toFixed(1)}–${max.toFixed(1)} ms a round (median ${middle.toFixed(1)}), outside the ` +
      `rounds. Timed from the start until the store held none pending or claimed, the relay reached ${ratio.toFixed(2)}× ` +
      "the raw baseline best against best" +
      (medianRatio === undefined ? "." : `, ${medianRatio.toFixed(2)}× the median of rounds.`),
    ""
  ]
}

const drainSection = (data: unknown): Array<string> => {
  const out = ["## Drain end to end (Relay.run, memory sink)", "", measuredLine(data), ""]
  const note = str(data, "note")
  if (note !== undefined) out.push(note, "")
  const rows: Array<Array<string>> = []
  for (const backend of ["memory", "sqlite"]) {
    const section = at(data, backend)
    if (section === undefined) continue
    const wall = num(section, "throughput", "recordsPerSecondWall")
    const cpu = num(section, "throughput", "recordsPerSecondCpu")
    const rawWall = num(section, "rawBaseline", "best", "recordsPerSecondWall")
    const rawCpu = num(section, "rawBaseline", "best", "recordsPerSecondCpu")
    const goal = str(section, "target") ?? ""
    const met = metText(bool(section, "met"))
    rows.push([
      `${backend}, wall clock`,
      formatNumber(wall),
      formatNumber(rawWall),
      formatRatio(wall, rawWall),
      goal,
      met
    ])
    rows.push([`${backend}, per CPU second`, formatNumber(cpu), formatNumber(rawCpu), formatRatio(cpu, rawCpu), "", ""])
    // the same relay rounds against the raw loop reading its claims' rows as values, as the store reads them
    const valuesWall = num(section, "rawBaselineReadingValues", "best", "recordsPerSecondWall")
    if (valuesWall !== undefined) {
      rows.push([
        `${backend}, against a raw loop reading its claims as values (informational)`,
        formatNumber(wall),
        formatNumber(valuesWall),
        formatRatio(wall, valuesWall),
        "",
        ""
      ])
    }
    // the same relay rounds timed from the relay's start, as they were timed before
    const fromStartWall = num(section, "fromStart", "best")
    const fromStartRatio = num(section, "fromStart", "ratioWall")
    if (fromStartWall !== undefined) {
      rows.push([
        `${backend}, timed from the relay's start (informational)`,
        formatNumber(fromStartWall),
        "",
        fromStartRatio === undefined ? na : `${fromStartRatio.toFixed(2)}×`,
        "",
        ""
      ])
    }
    const variants: ReadonlyArray<readonly [string, string]> = [
      ["withoutGroupCommit", "group commit off"],
      ["oneLanePerKey", "one lane per key"],
      ["interleavedBacklog", "backlog interleaved over partitions"],
      ["withoutOrderingKeys", "no record keyed, against the raw loop on such a backlog"],
      ["handWrittenDrain", "hand-written on the store's client, order kept"],
      ["handWrittenDrainWithoutOrder", "hand-written on the store's client, order not kept"],
      ["storeCallsDrain", "the store's own claim and complete calls alone"],
      ["storeCallsDrainInOrder", "the store's own calls in the relay's shape, order kept"]
    ]
    for (const [name, label] of variants) {
      const variantWall = num(section, name, "throughput", "recordsPerSecondWall")
      if (variantWall === undefined) continue
      const ratio = num(section, name, "ratioWall")
      rows.push([
        `${backend}, ${label} (informational)`,
        formatNumber(variantWall),
        "",
        ratio === undefined ? na : `${ratio.toFixed(2)}×`,
        "",
        ""
      ])
    }
  }
  out.push(...table(["backend", "relay rec/s", "raw baseline rec/s", "relay / baseline", "goal", "goal met"], rows))
  out.push(...relayStartLines(at(data, "sqlite", "fromStart")))
  out.push(...handWrittenDrainLines(at(data, "sqlite")))
  out.push(...storeCallsInOrderLines(at(data, "sqlite")))
  out.push(...cpuProfileLines(at(data, "sqlite")))
  out.push(...statementTimeLines(at(data, "sqlite", "statementTime")))
  const clientCeiling = clientCeilingLine(at(data, "sqlite", "statementTime"), goalRatio(str(data, "sqlite", "target")))
  if (clientCeiling !== undefined) out.push(clientCeiling, "")
  const outsideStatements = outsideStatementsLine(at(data, "sqlite", "statementTime"))
  if (outsideStatements !== undefined) out.push(outsideStatements, "")
  const wavelessCeiling = wavelessCeilingLine(
    at(data, "sqlite", "statementTime"),
    goalRatio(str(data, "sqlite", "target"))
  )
  if (wavelessCeiling !== undefined) out.push(wavelessCeiling, "")
  const latencyRows: Array<Array<string>> = []
  for (const backend of ["memory", "sqlite"]) {
    const l = at(data, backend, "latency")
    if (l === undefined) continue
    latencyRows.push([
      backend,
      formatNumber(num(l, "offeredPerSecond")),
      formatNumber(num(l, "p50Millis")),
      formatNumber(num(l, "p99Millis")),
      formatNumber(num(l, "maxMillis"))
    ])
  }
  const other = at(data, "sqlite", "latencyOtherProcess")
  const otherRuns: Array<readonly [string, unknown]> = [
    ["sqlite, producer in a second process", other],
    ["sqlite, producer in a second process, again", at(other, "again")],
    ["sqlite, second process, relay checkpointing inline (before)", at(other, "checkpointsInline", "first")],
    ["sqlite, second process, relay checkpointing inline, again", at(other, "checkpointsInline", "again")]
  ]
  /** The WAL file's high-water mark of one of those runs, in MB. */
  const walMegabytes = (row: readonly [string, unknown] | undefined): string =>
    formatNumber(Math.round((num(row?.[1], "walBytes") ?? 0) / 1e6))
  for (const [label, run] of otherRuns) {
    if (run === undefined) continue
    latencyRows.push([
      label,
      formatNumber(num(run, "offeredPerSecond")),
      formatNumber(num(run, "p50Millis")),
      formatNumber(num(run, "p99Millis")),
      formatNumber(num(run, "maxMillis"))
    ])
  }
  if (latencyRows.length > 0) {
    out.push(
      "Delivery latency (createdAt → delivered) with a paced producer:",
      "",
      ...table(["backend", "offered rec/s", "p50 ms", "p99 ms", "max ms"], latencyRows)
    )
    const goal = at(data, "sqlite", "latencyGoal")
    const ceiling = str(goal, "ceiling")
    if (ceiling !== undefined) {
      out.push(
        `SQLite goal: ${str(goal, "target") ?? na} — ${metText(bool(goal, "met"))}. The producer and the relay share ` +
          `the process's one thread (better-sqlite3 runs every statement and fsync on it); ${ceiling.replace(/^sqlite latency ceiling: /, "")}.`,
        ""
      )
      const floor = str(at(data, "sqlite", "latencyGoal", "floor"), "statement")
      if (floor !== undefined) {
        out.push(`${floor.replace(/^sqlite latency floor: the pace/, "The pace")}.`, "")
      }
      const raw = at(data, "sqlite", "latencyGoal", "rawBaseline")
      const rawBusy = num(raw, "eventLoopUtilization")
      if (rawBusy !== undefined) {
        out.push(
          `The same pace without Effect, the store or the drainer (a raw better-sqlite3 producer and relay with the ` +
            `store's statements, on the one thread): the thread ${Math.round(rawBusy * 100)} % busy, ` +
            `${num(raw, "microsPerRecord") ?? na} µs a record, p99 ${num(raw, "p99Millis") ?? na} ms (a lower bound: ` +
            `records of one key in one claim go out without a complete between them, rare at this pace).`,
          ""
        )
      }
      const ownPace = at(data, "sqlite", "latencyGoal", "rawBaselineAtItsOwnPace")
      const ownPaceBusy = num(ownPace, "eventLoopUtilization")
      if (ownPaceBusy !== undefined) {
        out.push(
          `The goal's rule applied to those raw loops (a producer at half the raw baseline's own throughput, ` +
            `${formatNumber(num(ownPace, "offeredPerSecond"))} records/s): the thread ${Math.round(ownPaceBusy * 100)} % ` +
            `busy, ${num(ownPace, "microsPerRecord") ?? na} µs a record, p99 ${num(ownPace, "p99Millis") ?? na} ms: a relay ` +
            `that drained a backlog as fast as the raw loop would be given that producer, whose persists cost what they ` +
            `cost, and the thread has that little room left even at the raw loops' own cost.`,
          ""
        )
      }
      const handWritten = at(data, "sqlite", "latencyGoal", "handWrittenBaseline")
      const handWrittenP99 = num(handWritten, "p99Millis")
      if (handWrittenP99 !== undefined) {
        out.push(
          `The same loop written on Effect and the store's client (\`@effect/sql-sqlite-node\`, \`sql.withTransaction\`, ` +
            `\`sql.unsafe\`), without the store or the drainer: the thread ` +
            `${Math.round((num(handWritten, "eventLoopUtilization") ?? 0) * 100)} % busy, ` +
            `${num(handWritten, "microsPerRecord") ?? na} µs a record, p99 ${handWrittenP99} ms — ` +
            (handWrittenP99 <= 250
              ? "the goal is within reach of code on that client."
              : "code on that client misses the goal too."),
          ""
        )
      }
    }
    if (other !== undefined) {
      out.push(
        `With the producer in a second process (bench/drainProducer.ts) on the same file, the relay has its ` +
          `thread to itself but the two processes take turns at SQLite's one write lock (each commit an fsync): ` +
          `p99 ≤ 250 ms ${metText(bool(other, "met"))}; the relay's event loop (its statements and their fsyncs; it ` +
          `waits for the lock asleep) was ` +
          `${Math.round((num(other, "relayEventLoopUtilization") ?? 0) * 100)} % busy` +
          (num(other, "relayCpuMicrosPerRecord") === undefined
            ? "."
            : `, its process's CPU ${num(other, "relayCpuMicrosPerRecord")} µs per record delivered.`) +
          (at(other, "checkpointsInline") === undefined
            ? ""
            : ` The relay's database checkpoints its WAL on a worker thread (SqliteDatabase's checkpoint: ` +
              `"background", as the CLI's relay runs); the producer's checkpoints inline, an application's default. ` +
              `The "checkpointing inline" rows are the same run with the relay's database checkpointing inline too, ` +
              `as before (the commit that takes the log past 1000 pages copies it on the relay's thread), the four ` +
              `runs taking turns. The WAL file grew to ${walMegabytes(otherRuns[0])} MB and ` +
              `${walMegabytes(otherRuns[1])} MB with the worker, ${walMegabytes(otherRuns[2])} MB and ` +
              `${walMegabytes(otherRuns[3])} MB inline.`),
        ""
      )
    }
  }
  return out
}

const contentionSection = (data: unknown): Array<string> => {
  const out = ["## Fence-row contention (8 producers, one partition)", "", measuredLine(data), ""]
  const method = str(data, "method")
  if (method !== undefined) out.push(method, "")
  const rows: Array<Array<string>> = []
  for (const [backend, label] of [
    ["dynamodb", "DynamoDB Local"],
    ["sqlite", "SQLite"]
  ] as const) {
    for (const s of list(data, backend, "scenarios")) {
      const single = num(s, "single", "recordsPerSecond")
      const contended = num(s, "contended", "recordsPerSecond")
      const spread = num(s, "spread", "recordsPerSecond")
      rows.push([
        label,
        formatNumber(num(s, "batch")),
        formatNumber(single),
        formatNumber(contended),
        formatNumber(spread),
        formatRatio(contended, single),
        formatRatio(contended, spread),
        `${formatNumber(num(s, "medianRoundRatio", "contendedToSingle"))} / ${formatNumber(num(s, "medianRoundRatio", "contendedToSpread"))}`,
        `${formatNumber(num(s, "single", "persistCall", "p50Millis"))} / ${formatNumber(num(s, "contended", "persistCall", "p50Millis"))}`,
        `${formatNumber(num(s, "single", "persistCall", "p99Millis"))} / ${formatNumber(num(s, "contended", "persistCall", "p99Millis"))}`
      ])
    }
  }
  out.push(
    "Records/s of persist calls of 1 and of 10 records (best round of each side); baseline: 1 producer on one",
    "partition; control: 8 producers on 8 partitions (8 fence rows). The ratios divide the figures shown; the",
    "paired-round medians divide the sides run back to back in each round (steadier under a swinging load).",
    "Persist-call latency in ms, 1 producer / 8 producers on one partition.",
    "",
    ...table(
      [
        "backend",
        "records per call",
        "1 producer",
        "8 on 1 partition",
        "8 on 8 partitions",
        "8 on 1 / 1 producer",
        "8 on 1 / 8 on 8",
        "paired-round medians: 8 on 1 / 1 producer, 8 on 1 / 8 on 8",
        "p50 ms",
        "p99 ms"
      ],
      rows
    )
  )
  const fenceRows = list(data, "dynamodb", "fence").map((f) => [
    formatNumber(num(f, "batch")),
    `${formatNumber(num(f, "seqAllocationP50Millis", "single"))} / ${formatNumber(num(f, "seqAllocationP50Millis", "contended"))} / ${formatNumber(num(f, "seqAllocationP50Millis", "spread"))}`,
    `${formatNumber(num(f, "seqAllocationP99Millis", "single"))} / ${formatNumber(num(f, "seqAllocationP99Millis", "contended"))} / ${formatNumber(num(f, "seqAllocationP99Millis", "spread"))}`,
    `${formatNumber(num(f, "recordPutP50Millis", "single"))} / ${formatNumber(num(f, "recordPutP50Millis", "contended"))} / ${formatNumber(num(f, "recordPutP50Millis", "spread"))}`,
    `${formatNumber(num(f, "seqAllocationToPutP50", "single"))} / ${formatNumber(num(f, "seqAllocationToPutP50", "contended"))} / ${formatNumber(num(f, "seqAllocationToPutP50", "spread"))}`,
    `${formatNumber(num(f, "dynamoLocalCpuMillisPerRecord", "single"))} / ${formatNumber(num(f, "dynamoLocalCpuMillisPerRecord", "contended"))} / ${formatNumber(num(f, "dynamoLocalCpuMillisPerRecord", "spread"))}`
  ])
  if (fenceRows.length > 0) {
    out.push(
      "DynamoDB seq allocation (the fence `ADD seq_counter`) beside the record puts, ms, and the DynamoDB Local",
      "JVM's CPU time per record, as 1 producer / 8 on 1 partition / 8 on 8 partitions (medians of the rounds):",
      "",
      ...table(
        [
          "records per call",
          "seq allocation p50",
          "seq allocation p99",
          "record put p50",
          "seq / put p50",
          "DynamoDB Local CPU ms per record"
        ],
        fenceRows
      )
    )
  }
  const claimerRows = list(data, "dynamodb", "withClaimer").map((r, i) => [
    String(i + 1),
    formatNumber(num(r, "recordsPerSecond")),
    formatNumber(num(r, "persistCall", "p50Millis")),
    formatNumber(num(r, "persistCall", "p99Millis")),
    `${formatNumber(num(r, "claimed"))} / ${formatNumber(num(r, "claims"))}`,
    formatNumber(num(r, "claimTransaction", "p50Millis")),
    JSON.stringify(at(r, "requestFailures") ?? {}),
    JSON.stringify(at(r, "cancellationReasons") ?? {})
  ])
  if (claimerRows.length > 0) {
    out.push(
      "8 producers (calls of 10) while one claimer claims and completes on the same partition (DynamoDB Local):",
      "",
      ...table(
        [
          "round",
          "rec/s",
          "persist p50 ms",
          "persist p99 ms",
          "claimed / claims",
          "claim tx p50 ms",
          "failed requests",
          "cancellation reasons"
        ],
        claimerRows
      )
    )
  }
  const conflicts = at(data, "dynamodb", "conflictsAndFailures")
  out.push(
    `Conflicts or failed requests: ${formatNumber(num(conflicts, "producers"))} among the producers, ${formatNumber(num(conflicts, "withClaimer"))} with the claimer; SDK retries: ${formatNumber(num(data, "dynamodb", "sdkRetries"))}. Fence row a bottleneck: ${bool(data, "fenceBottleneck") === undefined ? na : bool(data, "fenceBottleneck") === true ? "**yes**" : "no"}.`,
    ""
  )
  const rule = str(data, "bottleneckRule")
  if (rule !== undefined) out.push(`Rule for calling the fence row a bottleneck: ${rule}.`, "")
  const note = str(data, "note")
  if (note !== undefined) out.push(`**Conclusion.** ${note}`, "")
  return out
}

/** The section of a server-backed SQL store (PostgreSQL; MySQL with its own title) against its raw driver. */
const postgresSection = (
  data: unknown,
  title = "PostgreSQL store (127.0.0.1, fsync on)",
  client = "`pg`"
): Array<string> => {
  const out = [`## ${title}`, "", measuredLine(data), ""]
  const e2e = at(data, "endToEnd")
  const relay = at(data, "relay")
  const oneWave = at(relay, "oneWavePerBatch")
  const relayRaw = num(relay, "rawLoopRecordsPerSecond")
  const rows = [
    [
      "persist 100 → claim 100 → complete 100 (median of rounds)",
      formatNumber(num(e2e, "storeRecordsPerSecond")),
      formatNumber(num(e2e, "rawRecordsPerSecond")),
      formatRatio(num(e2e, "storeRecordsPerSecond"), num(e2e, "rawRecordsPerSecond")),
      str(e2e, "target") ?? "",
      bool(e2e, "met") === undefined ? "" : metText(bool(e2e, "met"))
    ],
    [
      "relay with a no-op sink vs raw claim/complete loop (best of rounds)",
      formatNumber(num(relay, "relayRecordsPerSecond")),
      formatNumber(relayRaw),
      formatRatio(num(relay, "relayRecordsPerSecond"), relayRaw),
      str(relay, "target") ?? "",
      bool(relay, "met") === undefined ? "" : metText(bool(relay, "met"))
    ]
  ]
  if (num(oneWave, "relayRecordsPerSecond") !== undefined) {
    rows.push([
      `relay, maxConcurrency ${formatNumber(num(oneWave, "maxConcurrency"))}: one wave per batch (informational)`,
      formatNumber(num(oneWave, "relayRecordsPerSecond")),
      formatNumber(relayRaw),
      formatRatio(num(oneWave, "relayRecordsPerSecond"), relayRaw),
      "",
      ""
    ])
  }
  out.push(
    `Records/s; baseline: raw ${client} running the store's own statements in the same transactions, in the same process`,
    "and rounds.",
    "",
    ...table(["scenario", "store / relay", "raw baseline", "store / baseline", "goal", "goal met"], rows)
  )
  const perRound = list(relay, "ratioPerRound").filter((r): r is number => typeof r === "number")
  if (perRound.length > 0) {
    out.push(
      `Relay / raw per round: ${perRound.map(formatNumber).join(", ")} (median ${formatNumber(num(relay, "ratioMedianOfRounds"))}).`,
      ""
    )
  }
  const relayStatements = num(relay, "statementsPerBatch", "relay")
  if (relayStatements !== undefined) {
    const relayCommits = num(relay, "commitsPerBatch", "relay")
    out.push(
      `Statements per claimed batch of 100: relay ${formatNumber(relayStatements)}, raw loop ${formatNumber(num(relay, "statementsPerBatch", "raw"))}.` +
        (relayCommits !== undefined
          ? ` Commits per claimed batch: relay ${formatNumber(relayCommits)}, raw loop ${formatNumber(num(relay, "commitsPerBatch", "raw"))}.`
          : ""),
      ""
    )
  }
  const processes = at(data, "relayProcesses")
  if (processes !== undefined) {
    const one = num(processes, "oneProcessRecordsPerSecond")
    const two = num(processes, "twoProcessesRecordsPerSecond")
    out.push(
      "Relay processes on one database (no-op sink; best of rounds):",
      "",
      ...table(
        ["relay processes", "records/s", "vs one process", "goal", "goal met"],
        [
          ["1", formatNumber(one), formatRatio(one, one), "", ""],
          [
            "2",
            formatNumber(two),
            formatRatio(two, one),
            str(processes, "target") ?? "",
            bool(processes, "met") === undefined ? "" : metText(bool(processes, "met"))
          ]
        ]
      )
    )
    const processRounds = list(processes, "ratioPerRound").filter((r): r is number => typeof r === "number")
    if (processRounds.length > 0) {
      out.push(
        "",
        `Two processes / one per round: ${processRounds.map(formatNumber).join(", ")} (median ${formatNumber(num(processes, "ratioMedianOfRounds"))}).`,
        ""
      )
    }
  }
  const wake = at(data, "wakeLatency")
  if (wake !== undefined) {
    out.push(
      "Delivery latency (createdAt → sent) with a steady producer:",
      "",
      ...table(
        ["relay", "offered rec/s", "p50 ms", "p99 ms", "max ms"],
        [
          ["LISTEN/NOTIFY (PostgresWakeSignal)", "withNotify"],
          ["polling only (default idle back-off)", "pollingOnly"]
        ].map(([label = "", key = ""]) => [
          label,
          formatNumber(num(wake, key, "offeredPerSecond")),
          formatNumber(num(wake, key, "p50Millis")),
          formatNumber(num(wake, key, "p99Millis")),
          formatNumber(num(wake, key, "maxMillis"))
        ])
      )
    )
  }
  const latency = at(data, "claimLatency")
  const pending = entries(latency, "byPending")
    .map(([k]) => k)
    .sort((a, b) => Number(a) - Number(b))
  if (pending.length > 0) {
    const first = num(latency, "byPending", pending[0] ?? "", "medianMillis")
    out.push(
      `claim(${formatNumber(num(latency, "limit"))}) latency by pending records (ms):`,
      "",
      ...table(
        ["pending", "median ms", "p95 ms", "vs smallest backlog"],
        pending.map((p) => [
          formatNumber(Number(p)),
          formatNumber(num(latency, "byPending", p, "medianMillis")),
          formatNumber(num(latency, "byPending", p, "p95Millis")),
          formatRatio(num(latency, "byPending", p, "medianMillis"), first)
        ])
      ),
      `Goal: ${str(latency, "target") ?? na} — ${metText(bool(latency, "met"))}.`,
      ""
    )
  }
  return out
}

/**
 * The MySQL end-to-end ceiling: the same statements written by hand on `@effect/sql-mysql2` (the client the
 * store must run on), against raw `mysql2`, and the store against that hand-written loop.
 */
const mysqlCeilingLines = (data: unknown): Array<string> => {
  const e2e = at(data, "endToEnd")
  const hand = num(e2e, "handWrittenRecordsPerSecond")
  if (hand === undefined) return []
  const ratio = (key: string): string => {
    const value = num(e2e, key, "ratio")
    const best = num(e2e, key, "bestToBest")
    const rounds = list(e2e, key, "perRound").filter((r): r is number => typeof r === "number")
    return value === undefined
      ? na
      : `${value.toFixed(2)}×` +
          (best === undefined ? "" : `, best ${best.toFixed(2)}×`) +
          (rounds.length > 0 ? ` (per round ${rounds.map(formatNumber).join(", ")})` : "")
  }
  const perHundred = (key: string, side: string) => formatNumber(num(e2e, key, side))
  return [
    `End to end, a third side runs the same statements written by hand on \`@effect/sql-mysql2\` (\`sql.unsafe\` in ` +
      `\`sql.withTransaction\`): ${formatNumber(hand)} rec/s. The store must run on that client (persist joins the ` +
      "caller's transaction on it), so no code on it beats the hand-written loop: its ratio to raw is the ceiling.",
    "",
    ...table(
      ["end to end", "ratio", "statements per 100 records", "CPU ms per 100 records"],
      [
        [
          "store / raw",
          ratio("storeToRaw"),
          perHundred("statementsPer100Records", "store"),
          perHundred("cpuMillisPer100Records", "store")
        ],
        [
          "ceiling: hand-written / raw",
          ratio("ceiling"),
          perHundred("statementsPer100Records", "handWritten"),
          perHundred("cpuMillisPer100Records", "handWritten")
        ],
        ["store / hand-written", ratio("storeToHandWritten"), "", ""],
        ["raw", "", perHundred("statementsPer100Records", "raw"), perHundred("cpuMillisPer100Records", "raw")]
      ]
    ),
    ""
  ]
}

/** The threshold of a goal written as "… ≥ 0.6× …"; undefined when the text has none. */
const goalRatio = (goal: string | undefined): number | undefined => {
  const found = goal?.match(/([\d.]+)\s*×/)?.[1]
  return found === undefined ? undefined : Number(found)
}

/** The brokers of brokers.json: table label and result key. */
const brokers: ReadonlyArray<readonly [string, string]> = [
  ["NATS JetStream", "nats"],
  ["RabbitMQ", "rabbitmq"]
]

/**
 * A table of the brokers for which `reports` holds, after its intro lines; nothing when none does (results
 * of an earlier shape).
 */
const brokerTable = (
  reports: (key: string) => boolean,
  intro: ReadonlyArray<string>,
  headers: ReadonlyArray<string>,
  row: (label: string, key: string) => Array<string>
): Array<string> => {
  const present = brokers.filter(([, key]) => reports(key))
  if (present.length === 0) return []
  return [
    ...intro,
    "",
    ...table(
      headers,
      present.map(([label, key]) => row(label, key))
    ),
    ""
  ]
}

/** The median of the figures; undefined when there are none. */
const medianOf = (values: ReadonlyArray<number>): number | undefined =>
  values.length === 0 ? undefined : median(values)

/** The untimed warm-up rounds of brokers.json, when it records them. */
const warmUpLine = (data: unknown): Array<string> => {
  const relay = num(data, "warmUpRounds", "relay")
  const handWritten = num(data, "warmUpRounds", "handWritten")
  return relay === undefined || handWritten === undefined
    ? []
    : [
        `Untimed warm-up rounds before them: ${formatNumber(relay)} of the relay, ${formatNumber(handWritten)} of the hand-written relay`,
        "(each side until its CPU per record stops falling)."
      ]
}

const brokersSection = (data: unknown): Array<string> => {
  const out = ["## Broker sinks (relay vs hand-written relay)", "", measuredLine(data), ""]
  const goal = str(data, "goal")
  const threshold = goalRatio(goal)
  const figures = (key: string, side: string): Array<number> =>
    list(data, key, "rounds", side).filter((r): r is number => typeof r === "number" && Number.isFinite(r))
  out.push(
    `A relay drains ${formatNumber(num(data, "records"))} records in ${formatNumber(num(data, "partitions"))} partitions`,
    "(SQLite store) through the broker sink. The baseline is a hand-written relay in the same process on the same",
    "backlog: raw better-sqlite3 claim and complete with the SQLite store's own statements, and the raw broker client",
    "publishing each claimed record with the sink's headers, message id and acknowledgements, a keyed record only",
    `after the previous one of its key was acknowledged, ${formatNumber(num(data, "inFlight"))} in flight; one complete per batch (it does not`,
    "complete a keyed record before sending its successor, as the relay must: SPEC §6 step 5). Records/s, best of the",
    "alternating rounds; relay / hand-written best against best and the median of the per-round ratios.",
    ...warmUpLine(data),
    "",
    ...table(
      [
        "broker",
        "relay rec/s",
        "hand-written relay rec/s",
        "relay / hand-written",
        "median of rounds",
        "goal met",
        "rounds relay",
        "rounds hand-written"
      ],
      brokers.map(([label, key]) => {
        const relay = num(data, key, "relayRecordsPerSecond")
        const handWritten = num(data, key, "handWrittenRecordsPerSecond")
        const relayRounds = figures(key, "relay")
        const handRounds = figures(key, "handWritten")
        const perRound = relayRounds.flatMap((r, i) => {
          const h = handRounds[i]
          return h === undefined || h === 0 ? [] : [r / h]
        })
        const medianRatio = medianOf(perRound)
        const rounds = (values: ReadonlyArray<number>) => values.map((r) => formatNumber(Math.round(r))).join(", ")
        return [
          label,
          formatNumber(relay),
          formatNumber(handWritten),
          formatRatio(relay, handWritten),
          medianRatio === undefined ? na : `${medianRatio.toFixed(2)}×`,
          threshold === undefined ||
          relay === undefined ||
          handWritten === undefined ||
          handWritten === 0 ||
          medianRatio === undefined
            ? na
            : metText(relay / handWritten >= threshold && medianRatio >= threshold),
          rounds(relayRounds),
          rounds(handRounds)
        ]
      })
    ),
    `Goal: ${goal ?? na}.`,
    ""
  )
  out.push(
    ...brokerTable(
      (key) => num(data, key, "handWrittenWavesRecordsPerSecond") !== undefined,
      [
        "For information: the same hand-written relay completing as the relay must (SPEC §6 step 5: in waves of the",
        "next record of up to 10 groups per partition, a record with a younger sibling completed before that sibling",
        "is sent, one complete per wave), i.e. what the per-key guarantee costs a hand-written loop:"
      ],
      ["broker", "hand-written, in waves rec/s", "in waves / hand-written", "relay / hand-written in waves"],
      (label, key) => {
        const waves = num(data, key, "handWrittenWavesRecordsPerSecond")
        return [
          label,
          formatNumber(waves),
          formatRatio(waves, num(data, key, "handWrittenRecordsPerSecond")),
          formatRatio(num(data, key, "relayRecordsPerSecond"), waves)
        ]
      }
    ),
    ...brokerTable(
      (key) => num(data, key, "handWrittenAsSink", "recordsPerSecond") !== undefined,
      [
        "For information (NATS): the hand-written relay publishing as `NatsSink` does — a plain publish with a reply",
        "subject on one subscription of its own, the publish ack read there — instead of the client's `js.publish` (a",
        "request per publish: a promise, a timer and an error object each). The relay against it is what the relay's",
        "store and drainer cost beside a loop that publishes as cheaply as the sink:"
      ],
      ["broker", "hand-written, publishing as the sink rec/s", "relay / it, best", "relay / it, median of rounds"],
      (label, key) => {
        const asSink = (field: string) => num(data, key, "handWrittenAsSink", field)
        const median = asSink("ratioMedianOfRounds")
        return [
          label,
          formatNumber(asSink("recordsPerSecond")),
          formatRatio(num(data, key, "relayRecordsPerSecond"), asSink("recordsPerSecond")),
          median === undefined ? na : `${median.toFixed(2)}×`
        ]
      }
    ),
    ...brokerTable(
      (key) => num(data, key, "rawClientRecordsPerSecond") !== undefined,
      [
        "For information: the raw client alone (no database; the same messages, per-key wait and acknowledgements, the",
        "same in flight), the same without the per-key wait, and the relay with a sink that accepts every record at once",
        "(what the store and the drainer alone reach on this backlog):"
      ],
      [
        "broker",
        "raw client rec/s",
        "raw client, unordered rec/s",
        "hand-written / raw client",
        "relay, no-op sink rec/s",
        "relay / raw client"
      ],
      (label, key) => {
        const rawClient = num(data, key, "rawClientRecordsPerSecond")
        return [
          label,
          formatNumber(rawClient),
          formatNumber(num(data, key, "rawUnorderedRecordsPerSecond")),
          formatRatio(num(data, key, "handWrittenRecordsPerSecond"), rawClient),
          formatNumber(num(data, key, "relayNoopSinkRecordsPerSecond")),
          formatRatio(num(data, key, "relayRecordsPerSecond"), rawClient)
        ]
      }
    ),
    ...brokerTable(
      (key) => num(data, key, "cpuMicrosPerRecord", "relay") !== undefined,
      [
        "CPU time of the bench process per record (µs, the lowest of the rounds; the broker server runs on the",
        "same cores):"
      ],
      [
        "broker",
        "relay",
        "relay, no-op sink",
        "hand-written relay",
        "hand-written, in waves",
        "raw client",
        "relay − hand-written"
      ],
      (label, key) => {
        const relay = num(data, key, "cpuMicrosPerRecord", "relay")
        const handWritten = num(data, key, "cpuMicrosPerRecord", "handWritten")
        return [
          label,
          formatNumber(relay),
          formatNumber(num(data, key, "cpuMicrosPerRecord", "relayNoopSink")),
          formatNumber(handWritten),
          formatNumber(num(data, key, "cpuMicrosPerRecord", "handWrittenWaves")),
          formatNumber(num(data, key, "cpuMicrosPerRecord", "rawClient")),
          relay === undefined || handWritten === undefined ? na : formatNumber(Number((relay - handWritten).toFixed(1)))
        ]
      }
    ),
    ...brokerTable(
      (key) => num(data, key, "settled", "relayRecordsPerSecond") !== undefined,
      [
        "For information, settled: after the alternating rounds, the relay in four rounds in a row with no other code",
        "between (the best of the last two) against two hand-written rounds in a row. In the alternating rounds V8",
        "re-optimizes much of the relay's code in every round (150–200 TurboFan compilations in a round's timed window",
        "against 30–50 in a fourth round in a row, on background threads sharing the cores with the broker); a relay that",
        "keeps running pays that once. The goal above stays judged on the alternating rounds. Routed: the relay through",
        "a `SinkRouter` whose only route (the default, `*`) is the broker sink, three rounds in a row after those (the",
        "best of the last two): what routing costs."
      ],
      [
        "broker",
        "relay rec/s",
        "hand-written relay rec/s",
        "relay / hand-written",
        "routed relay rec/s",
        "routed / relay",
        "CPU µs/record relay, hand-written, routed"
      ],
      (label, key) => {
        const settled = (...path: ReadonlyArray<string>) => num(data, key, "settled", ...path)
        const cpu = (side: string) => formatNumber(settled("cpuMicrosPerRecord", side))
        const rates = [settled("relayRecordsPerSecond"), settled("handWrittenRecordsPerSecond")] as const
        const routed = settled("routedRecordsPerSecond")
        return [
          label,
          ...rates.map(formatNumber),
          formatRatio(...rates),
          formatNumber(routed),
          formatRatio(routed, rates[0]),
          `${cpu("relay")}, ${cpu("handWritten")}, ${cpu("routed")}`
        ]
      }
    )
  )
  return out
}

const latencyBackends: ReadonlyArray<readonly [string, string, string]> = [
  ["memory", "memory (same process)", "in-process `WakeHub`"],
  ["sqlite", "SQLite file (second process)", "`SqliteWakeSignal` (`PRAGMA data_version`)"],
  ["postgres", "PostgreSQL (second process)", "`PostgresWakeSignal` (`LISTEN/NOTIFY`)"],
  ["dynamodb", "DynamoDB Local (second process)", "none: idle poll bound"],
  ["peer", "peer: `pg-transactional-outbox` 0.5.7 on PostgreSQL (second process)", "logical replication (`pgoutput`)"],
  [
    "cli-sqlite",
    "CLI `relay stdout` on SQLite (relay and producer, one process each)",
    "the CLI's default: `SqliteWakeSignal`"
  ],
  [
    "cli-postgres",
    "CLI `relay stdout` on PostgreSQL (relay and producer, one process each)",
    "the CLI's default: `PostgresWakeSignal`"
  ]
]

const latencySection = (data: unknown): Array<string> => {
  const out = ["## Delivery latency after idle", "", measuredLine(data), ""]
  const records = num(data, "method", "records")
  const idle = num(data, "method", "idleMillis")
  const issueMethod = bool(data, "method", "issueMethod")
  out.push(
    `Commit → delivery of a record committed while the relay was idle: ${formatNumber(records)} records per backend,`,
    `the relay idle ${formatNumber(idle)} ms before each, the producer in a second OS process (memory: the same process).`,
    issueMethod === false
      ? "A shorter configuration than the method's 200 records after 10 s of idle each (`node --import tsx bench/latency.ts` runs that)."
      : "",
    str(data, "method", "schedule") === undefined ? "" : `Schedule: ${str(data, "method", "schedule")}.`,
    ""
  )
  // the peer's row only when it was measured
  const optional = new Set(["peer", "cli-sqlite", "cli-postgres"])
  const measured = latencyBackends.filter(([key]) => !optional.has(key) || at(data, key, "latency") !== undefined)
  const rows = measured.map(([key, label, wake]) => {
    const latency = at(data, key, "latency")
    const goal = num(data, "goalsP99Millis", key)
    const p99 = num(latency, "p99Millis")
    return [
      label,
      wake,
      formatNumber(num(latency, "p50Millis")),
      formatNumber(p99),
      formatNumber(num(latency, "maxMillis")),
      formatNumber(num(latency, "persistP50Millis")),
      goal === undefined ? "" : `≤ ${formatNumber(goal)}`,
      goal === undefined || p99 === undefined ? na : metText(p99 <= goal)
    ]
  })
  out.push(
    ...table(["backend", "wake-up", "p50 ms", "p99 ms", "max ms", "persist p50 ms", "p99 goal ms", "goal met"], rows)
  )
  // backends re-measured on their own (`--merge`): one line per such run, naming its backends
  const runs = new Map<string, { readonly run: unknown; readonly labels: Array<string> }>()
  for (const [key, label] of measured) {
    const run = at(data, key, "run")
    if (run === undefined) continue
    const id = JSON.stringify(run)
    const seen = runs.get(id)
    if (seen === undefined) runs.set(id, { run, labels: [label] })
    else seen.labels.push(label)
  }
  for (const { labels, run } of runs.values()) {
    out.push(
      `Re-measured in a run of their own: ${labels.join("; ")} — ${measuredLine(run).replace(/^_|\._$/g, "")}; ` +
        `${formatNumber(num(run, "method", "records"))} records, idle ${formatNumber(num(run, "method", "idleMillis"))} ms before each; ` +
        `schedule: ${str(run, "method", "schedule") ?? na}.`,
      ""
    )
  }
  const ours = num(data, "postgres", "latency", "p99Millis")
  const peer = num(data, "peer", "latency", "p99Millis")
  if (ours !== undefined && peer !== undefined) {
    out.push(
      `PostgreSQL beside the peer, same server build, same method: p99 ${formatNumber(ours)} ms against the peer's ` +
        `${formatNumber(peer)} ms: ${formatRatio(ours, peer)} the peer's p99 (below 1.00× is ahead of it).`,
      ""
    )
  }
  const cpu = at(data, "sqlite", "idleCpu")
  if (num(cpu, "cpuMicrosPerSecond") !== undefined) {
    out.push(
      `Idle cost of \`SqliteWakeSignal\` (its poll alone, every ${formatNumber(num(cpu, "pollMillis"))} ms): ` +
        `${formatNumber(num(cpu, "cpuMicrosPerSecond"))} µs of CPU per second.`,
      ""
    )
  }
  const idleDynamo = at(data, "dynamodb", "idle")
  if (num(idleDynamo, "requestsPerHour") !== undefined) {
    out.push(
      `An idle DynamoDB relay of one partition (idle poll bound ${formatNumber(num(idleDynamo, "idleBackoffMaxMillis"))} ms), ` +
        `counted over ${formatNumber(num(idleDynamo, "seconds"))} s: ${formatNumber(num(idleDynamo, "requestsPerHour"))} requests ` +
        `per hour (${formatNumber(num(idleDynamo, "queriesPerHour"))} queries), ` +
        `${formatNumber(num(idleDynamo, "readCapacityPerHour"))} read capacity units per hour.`,
      ""
    )
  }
  return out
}

const steadyTargets: ReadonlyArray<readonly [string, string]> = [
  ["memory", "memory store, no-op sink"],
  ["sqlite", "SQLite file, no-op sink"],
  ["postgres", "PostgreSQL, no-op sink"],
  ["mysql", "MariaDB, no-op sink"],
  ["dynamodb", "DynamoDB Local, no-op sink"],
  ["webhook", "SQLite → webhook (loopback receiver)"],
  ["nats", "SQLite → NATS JetStream"],
  ["rabbitmq", "SQLite → RabbitMQ"]
]

/** A bar of up to 24 blocks, proportional to `value / max`. */
const bar = (value: number | undefined, max: number): string =>
  value === undefined || max <= 0 ? "" : "█".repeat(Math.max(value > 0 ? 1 : 0, Math.round((24 * value) / max)))

const steadySection = (data: unknown): Array<string> => {
  const out = ["## Steady state: the highest rate one relay sustains", "", measuredLine(data), ""]
  const seconds = num(data, "method", "windowSeconds")
  out.push(
    `One relay with the library's defaults; a producer in the same process offers a fixed rate over 8 partitions for ` +
      `${formatNumber(seconds)} s per window (the method's windows are 60 s). A rate is sustained when it was offered ` +
      "(≥ 95 %) and the backlog did not grow; latency is commit → the sink's send returned, in windows at 50 % and 80 % " +
      "of the highest sustained rate. The producer shares the relay's thread, so on the memory store the producer's " +
      "own pace can be what ends the search.",
    ""
  )
  const measured = steadyTargets.filter(([key]) => at(data, key) !== undefined)
  const max = Math.max(0, ...measured.map(([key]) => num(data, key, "maxSustainedPerSecond") ?? 0))
  const rows = measured.map(([key, label]) => {
    const sustained = num(data, key, "maxSustainedPerSecond")
    return [
      label,
      formatNumber(sustained),
      bar(sustained, max),
      formatNumber(num(data, key, "at50", "p50Millis")),
      formatNumber(num(data, key, "at50", "p99Millis")),
      formatNumber(num(data, key, "at80", "p50Millis")),
      formatNumber(num(data, key, "at80", "p99Millis"))
    ]
  })
  out.push(
    ...table(["target", "sustained rec/s", "", "50 %: p50 ms", "50 %: p99 ms", "80 %: p50 ms", "80 %: p99 ms"], rows)
  )
  return out
}

const inboxBackends: ReadonlyArray<readonly [string, string]> = [
  ["sqlite", "SQLite (file, WAL, synchronous = FULL)"],
  ["postgres", "PostgreSQL (127.0.0.1, fsync on)"]
]

const inboxSection = (data: unknown): Array<string> => {
  const out = ["## Inbox (consumer side)", "", measuredLine(data), ""]
  const perRound = num(data, "messagesPerRound")
  const rounds = num(data, "rounds")
  out.push(
    `\`Inbox.process\` against a raw driver loop (better-sqlite3 / \`pg\`) doing the same work in one transaction per`,
    "message: insert the id if absent, raise the key's mark for a keyed message, the handler's insert; one in ten",
    "deliveries is a redelivery. A third loop writes the same statements by hand on `@effect/sql`. Messages/s,",
    `${formatNumber(rounds)} rounds of ${formatNumber(perRound)} deliveries, the sides taking turns every 50 deliveries.`,
    "",
    ...table(
      [
        "backend",
        "inbox msg/s (best)",
        "raw msg/s (best)",
        "inbox / raw, best",
        "inbox / raw, median of rounds",
        "hand-written @effect/sql msg/s (best)",
        "inbox / hand-written, median",
        "goal",
        "goal met"
      ],
      inboxBackends.map(([key, label]) => [
        label,
        formatNumber(num(data, key, "inbox", "best")),
        formatNumber(num(data, key, "raw", "best")),
        formatRatio(num(data, key, "inbox", "best"), num(data, key, "raw", "best")),
        (() => {
          const m = num(data, key, "ratio", "medianOfRounds")
          return m === undefined ? na : `${m.toFixed(2)}×`
        })(),
        formatNumber(num(data, key, "handWritten", "best")),
        (() => {
          const m = num(data, key, "ratioToHandWritten", "medianOfRounds")
          return m === undefined ? na : `${m.toFixed(2)}×`
        })(),
        str(data, key, "target") ?? "",
        metText(bool(data, key, "met"))
      ])
    ),
    "",
    "The ceiling: the handler runs on the application's `SqlClient` in the same transaction, so no code on that client",
    "beats the hand-written loop; its ratio to the raw loop bounds what the inbox can reach:",
    "",
    ...inboxBackends.flatMap(([key]) => {
      const statement = str(data, key, "ceiling", "statement")
      return statement === undefined ? [] : [`- ${statement}`]
    }),
    "",
    ...(() => {
      const spanMicros = num(data, "span", "spanMicros")
      const defaultMicros = num(data, "span", "defaultSpanMicros")
      return spanMicros === undefined || defaultMicros === undefined
        ? []
        : [
            `The inbox's one span per message (\`InboxStore.process\`, \`captureStackTrace: false\`) costs ` +
              `${formatNumber(spanMicros)} µs of CPU (${formatNumber(defaultMicros)} µs with the default stack capture).`,
            ""
          ]
    })(),
    "Statements and CPU time of the bench process per message:",
    "",
    ...table(
      ["backend", "statements inbox", "statements raw", "CPU ms inbox", "CPU ms hand-written", "CPU ms raw"],
      inboxBackends.map(([key, label]) => [
        label,
        formatNumber(num(data, key, "statementsPerMessage", "inbox")),
        formatNumber(num(data, key, "statementsPerMessage", "raw")),
        formatNumber(num(data, key, "cpuMillisPerMessage", "inbox")),
        formatNumber(num(data, key, "cpuMillisPerMessage", "handWritten")),
        formatNumber(num(data, key, "cpuMillisPerMessage", "raw"))
      ])
    ),
    ""
  )
  return out
}

/** The drain runs of the fairness bench, in report order. */
const fairnessDrains = [
  ["sqlite", "SQLite file, synchronous = FULL"],
  ["sqliteSynchronousNormal", "SQLite file, synchronous = NORMAL (informational)"],
  ["postgres", "PostgreSQL, fsync on"]
] as const

/** Every timed round's rate of a fairness drain run, or "" for results from before the bench ran rounds. */
const roundsOf = (run: unknown): string => {
  const rounds: unknown =
    typeof run === "object" && run !== null ? Reflect.get(run, "roundsPartitionsPerSecond") : undefined
  return Array.isArray(rounds) ? rounds.map((r) => (typeof r === "number" ? formatNumber(r) : "?")).join(", ") : ""
}

const fairnessSection = (data: unknown): Array<string> => {
  const out = ["## Relay fairness: many small partitions", "", measuredLine(data), ""]
  out.push(
    "One relay with `maxPartitions` 64 drains 2,000 partitions of one record each (time until every record was sent",
    "and until the listing is empty, wall and CPU seconds of the process; after an untimed warm-up drain, the median of",
    "three timed rounds, every round's rate in the last column):",
    ""
  )
  out.push(
    ...table(
      ["backend", "delivered", "all sent s", "all completed s", "CPU s", "partitions/s", "rounds, partitions/s"],
      fairnessDrains.map(([key, label]) => {
        const run = at(data, "drain", key)
        return [
          label,
          formatNumber(num(run, "delivered")),
          formatNumber(num(run, "sentSeconds")),
          bool(run, "finished") === false ? "not finished" : formatNumber(num(run, "completedSeconds")),
          formatNumber(num(run, "cpuSeconds")),
          formatNumber(num(run, "partitionsPerSecond")),
          roundsOf(run)
        ]
      })
    )
  )
  out.push(
    "A steady producer spreads records at random over 1,000 partitions while one relay with `maxPartitions` 64 drains",
    "them: the age of the oldest record not yet delivered (sampled every 250 ms), the relay's unleased gauge (oldest wait",
    "of a partition with work and no lease) and enqueue-to-delivery latency:",
    ""
  )
  out.push(
    ...table(
      [
        "backend",
        "records/s offered",
        "s",
        "delivered",
        "oldest pending p50 s",
        "oldest pending p99 s",
        "max s",
        "unleased wait p99 s",
        "latency p99 ms"
      ],
      (["sqlite", "postgres"] as const).map((key) => {
        const run = at(data, "steady", key)
        return [
          key === "sqlite" ? "SQLite file" : "PostgreSQL",
          formatNumber(num(run, "offeredPerSecond")),
          formatNumber(num(run, "seconds")),
          `${formatNumber(num(run, "delivered"))} / ${formatNumber(num(run, "records"))}`,
          formatNumber(num(run, "oldestPendingAgeSeconds", "p50")),
          formatNumber(num(run, "oldestPendingAgeSeconds", "p99")),
          formatNumber(num(run, "oldestPendingAgeSeconds", "max")),
          formatNumber(num(run, "unleasedOldestWaitSeconds", "p99")),
          formatNumber(num(run, "deliveryLatencyMillis", "p99"))
        ]
      })
    )
  )
  const listing = list(data, "listing")
  if (listing.length > 0) {
    out.push(
      "Discovery cost (R-READ-3): one `listPartitions` listing with 10,000 partitions written of which 100 hold work,",
      "beside the same listing with only those 100 written:",
      ""
    )
    out.push(
      ...table(
        ["backend", "listed", "statements / requests", "rows / items read", "median ms", "median ms, 100 written"],
        listing.map((row) => [
          str(row, "backend") ?? na,
          formatNumber(num(row, "listed")),
          formatNumber(num(row, "statementsPerRound")),
          formatNumber(num(row, "rowsReadPerRound")),
          formatNumber(num(row, "medianMillis")),
          formatNumber(num(row, "medianMillisOnly100Written"))
        ])
      )
    )
  }
  return out
}

const sections: Record<ResultName, (data: unknown) => Array<string>> = {
  memory: memorySection,
  sqlite: sqliteSection,
  postgres: (data) => postgresSection(data),
  mysql: (data) => {
    const section = postgresSection(
      data,
      "MySQL / MariaDB store (127.0.0.1, InnoDB defaults: redo log flushed per commit)",
      "`mysql2`"
    )
    // the end-to-end ceiling goes right after the store/relay table (before the relay-per-round line)
    const index = section.findIndex((line) => line.startsWith("Relay / raw per round"))
    const ceiling = mysqlCeilingLines(data)
    return index < 0 ? [...section, ...ceiling] : [...section.slice(0, index), ...ceiling, ...section.slice(index)]
  },
  dynamodb: dynamoSection,
  dynamodbThroughput: dynamoThroughputSection,
  drain: drainSection,
  contention: contentionSection,
  brokers: brokersSection,
  latency: latencySection,
  steady: steadySection,
  inbox: inboxSection,
  fairness: fairnessSection
}

/**
 * The README text for the results (missing ones show a "no results" line). `chart` is the chart's
 * path relative to the README, or false for no chart link.
 */
export const renderReadme = (results: Results, chart: string | false = "results/chart.svg"): string => {
  const out = [
    "# Benchmark results",
    "",
    "Generated by `npm run bench` (bench/run.ts → bench/Report.ts) from `bench/results/*.json`; do not edit by hand.",
    "Every store figure was measured in the same process and run as its baseline, on this project's shared 2-core",
    "machines (other processes compete for the cores: compare ratios, not absolute figures, across runs).",
    "Regenerate everything with `npm run bench`, one benchmark with `npm run bench -- <name>`, or only this page",
    "and the chart with `npm run bench -- --report`.",
    ""
  ]
  if (chart !== false) out.push(`![Store vs baseline, claim cost vs backlog](${chart})`, "")
  for (const name of ResultNames) {
    const data = results[name]
    const section = sections[name](data)
    if (data === undefined) out.push(section[0] ?? `## ${name}`, "", ...missing(name))
    else out.push(...section.filter((line, i) => !(line === "" && section[i - 1] === "")))
  }
  return `${out
    .join("\n")
    .replace(/\n{3,}/g, "\n\n")
    .trimEnd()}\n`
}

// ---------------------------------------------------------------------------------------------------
// Chart (hand-written SVG)
// ---------------------------------------------------------------------------------------------------

const escapeXml = (text: string): string =>
  text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")

const palette = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948", "#9c755f"]

/** Log-scale axis over [min, max] padded to whole decades. */
const logScale = (values: ReadonlyArray<number>, from: number, to: number) => {
  const positive = values.filter((v) => v > 0)
  const min = Math.min(...(positive.length > 0 ? positive : [1]))
  // a value just above a power of ten would get a bar of no height: start one decade lower then
  const lo = Math.floor(Math.log10(min)) - (min / 10 ** Math.floor(Math.log10(min)) < 2 ? 1 : 0)
  const hi = Math.max(lo + 1, Math.ceil(Math.log10(Math.max(...(positive.length > 0 ? positive : [10])))))
  const position = (v: number) => from + ((Math.log10(Math.max(v, 10 ** lo)) - lo) / (hi - lo)) * (to - from)
  const ticks = Array.from({ length: hi - lo + 1 }, (_, i) => 10 ** (lo + i))
  return { position, ticks }
}

const tickLabel = (v: number): string =>
  v >= 1_000_000 ? `${v / 1_000_000}M` : v >= 1000 ? `${v / 1000}k` : String(Number(v.toPrecision(3)))

interface BarGroup {
  readonly label: string
  readonly bars: ReadonlyArray<{ readonly series: string; readonly value: number | undefined }>
}

interface Panel {
  readonly height: number
  readonly svg: string
}

const panelFrame = (title: string, subtitle: string, width: number): Array<string> => [
  `<text x="20" y="24" font-size="15" font-weight="bold">${escapeXml(title)}</text>`,
  `<text x="20" y="42" font-size="11" fill="#555">${escapeXml(subtitle)}</text>`,
  `<line x1="20" y1="50" x2="${width - 20}" y2="50" stroke="#ddd"/>`
]

const legend = (series: ReadonlyArray<string>, x: number, y: number): Array<string> =>
  series.flatMap((name, i) => [
    `<rect x="${x}" y="${y + i * 16}" width="10" height="10" fill="${palette[i % palette.length] ?? "#888"}"/>`,
    `<text x="${x + 14}" y="${y + i * 16 + 9}" font-size="11">${escapeXml(name)}</text>`
  ])

/** Grouped bars on a log y axis, the value written above each bar. */
const barPanel = (
  title: string,
  subtitle: string,
  unit: string,
  groups: ReadonlyArray<BarGroup>,
  width: number
): Panel => {
  const series = Array.from(new Set(groups.flatMap((g) => g.bars.map((b) => b.series))))
  const height = 330
  const top = 70
  const bottom = height - 60
  const left = 70
  const right = width - 270
  const values = groups.flatMap((g) => g.bars.map((b) => b.value).filter((v): v is number => v !== undefined))
  const scale = logScale(values, bottom, top)
  const out = panelFrame(title, subtitle, width)
  out.push(
    `<text x="16" y="${(top + bottom) / 2}" font-size="11" transform="rotate(-90 16 ${(top + bottom) / 2})" text-anchor="middle">${escapeXml(unit)} (log scale)</text>`
  )
  for (const t of scale.ticks) {
    const y = scale.position(t).toFixed(1)
    out.push(`<line x1="${left}" y1="${y}" x2="${right}" y2="${y}" stroke="#eee"/>`)
    out.push(
      `<text x="${left - 6}" y="${y}" font-size="10" text-anchor="end" dominant-baseline="middle">${tickLabel(t)}</text>`
    )
  }
  out.push(`<line x1="${left}" y1="${bottom}" x2="${right}" y2="${bottom}" stroke="#333"/>`)
  const groupWidth = groups.length > 0 ? (right - left) / groups.length : right - left
  groups.forEach((group, gi) => {
    const barWidth = Math.min(36, (groupWidth - 16) / Math.max(1, group.bars.length))
    const x0 = left + gi * groupWidth + (groupWidth - barWidth * group.bars.length) / 2
    group.bars.forEach((bar, bi) => {
      const x = x0 + bi * barWidth
      const color = palette[series.indexOf(bar.series) % palette.length] ?? "#888"
      if (bar.value === undefined) {
        out.push(
          `<text x="${(x + barWidth / 2).toFixed(1)}" y="${bottom - 4}" font-size="9" text-anchor="middle" fill="#999">n/a</text>`
        )
        return
      }
      const y = scale.position(bar.value)
      out.push(
        `<rect x="${(x + 1).toFixed(1)}" y="${y.toFixed(1)}" width="${(barWidth - 2).toFixed(1)}" height="${(bottom - y).toFixed(1)}" fill="${color}"><title>${escapeXml(`${group.label} · ${bar.series}: ${formatNumber(bar.value)} ${unit}`)}</title></rect>`,
        `<text x="${(x + barWidth / 2).toFixed(1)}" y="${(y - 3).toFixed(1)}" font-size="9" text-anchor="middle">${escapeXml(formatNumber(bar.value))}</text>`
      )
    })
    const lines = group.label.split("\n")
    lines.forEach((line, li) => {
      out.push(
        `<text x="${(left + gi * groupWidth + groupWidth / 2).toFixed(1)}" y="${bottom + 16 + li * 13}" font-size="10" text-anchor="middle">${escapeXml(line)}</text>`
      )
    })
  })
  out.push(...legend(series, right + 20, top + 6))
  return { height, svg: out.join("\n") }
}

interface LineSeries {
  readonly name: string
  readonly points: ReadonlyArray<{ readonly x: number; readonly y: number }>
}

/** Lines on log-log axes, each point marked and labelled with its value. */
const linePanel = (
  title: string,
  subtitle: string,
  xUnit: string,
  yUnit: string,
  series: ReadonlyArray<LineSeries>,
  width: number
): Panel => {
  const height = 330
  const top = 70
  const bottom = height - 50
  const left = 70
  const right = width - 300
  const xs = logScale(
    series.flatMap((s) => s.points.map((p) => p.x)),
    left + 20,
    right - 20
  )
  const ys = logScale(
    series.flatMap((s) => s.points.map((p) => p.y)),
    bottom,
    top
  )
  const out = panelFrame(title, subtitle, width)
  out.push(
    `<text x="16" y="${(top + bottom) / 2}" font-size="11" transform="rotate(-90 16 ${(top + bottom) / 2})" text-anchor="middle">${escapeXml(yUnit)} (log scale)</text>`
  )
  for (const t of ys.ticks) {
    const y = ys.position(t).toFixed(1)
    out.push(`<line x1="${left}" y1="${y}" x2="${right}" y2="${y}" stroke="#eee"/>`)
    out.push(
      `<text x="${left - 6}" y="${y}" font-size="10" text-anchor="end" dominant-baseline="middle">${tickLabel(t)}</text>`
    )
  }
  const xValues = Array.from(new Set(series.flatMap((s) => s.points.map((p) => p.x)))).sort((a, b) => a - b)
  for (const x of xValues) {
    const px = xs.position(x).toFixed(1)
    out.push(`<line x1="${px}" y1="${bottom}" x2="${px}" y2="${bottom + 4}" stroke="#333"/>`)
    out.push(`<text x="${px}" y="${bottom + 16}" font-size="10" text-anchor="middle">${tickLabel(x)}</text>`)
  }
  out.push(`<line x1="${left}" y1="${bottom}" x2="${right}" y2="${bottom}" stroke="#333"/>`)
  out.push(
    `<text x="${(left + right) / 2}" y="${bottom + 34}" font-size="11" text-anchor="middle">${escapeXml(xUnit)} (log scale)</text>`
  )
  series.forEach((s, i) => {
    const color = palette[i % palette.length] ?? "#888"
    const points = [...s.points].sort((a, b) => a.x - b.x)
    if (points.length > 1) {
      const d = points
        .map((p, k) => `${k === 0 ? "M" : "L"}${xs.position(p.x).toFixed(1)},${ys.position(p.y).toFixed(1)}`)
        .join(" ")
      out.push(`<path d="${d}" fill="none" stroke="${color}" stroke-width="2"/>`)
    }
    points.forEach((p, k) => {
      const cx = xs.position(p.x).toFixed(1)
      const cy = ys.position(p.y).toFixed(1)
      out.push(
        `<circle cx="${cx}" cy="${cy}" r="3.5" fill="${color}"><title>${escapeXml(`${s.name}: ${formatNumber(p.y)} ${yUnit} at ${formatNumber(p.x)} ${xUnit}`)}</title></circle>`
      )
      // the value of the last point only, beside it (every point has a tooltip)
      if (k === points.length - 1) {
        out.push(
          `<text x="${(Number(cx) + 7).toFixed(1)}" y="${cy}" font-size="9.5" dominant-baseline="middle" fill="${color}">${escapeXml(formatNumber(p.y))}</text>`
        )
      }
    })
  })
  out.push(
    ...legend(
      series.map((s) => s.name),
      right + 20,
      top + 6
    )
  )
  return { height, svg: out.join("\n") }
}

/** The baseline series of the throughput panel (plain JS for memory, raw SQL for SQLite, raw SDK for DynamoDB). */
const baselineSeries = "baseline (plain JS / raw SQL / raw SDK)"

const throughputGroups = (results: Results): Array<BarGroup> => {
  const groups: Array<BarGroup> = []
  const memory = results.memory
  if (memory !== undefined) {
    groups.push({
      label: "memory\nend to end",
      bars: [
        { series: "store", value: num(memory, "endToEnd", "idsGiven", "wall") },
        { series: baselineSeries, value: num(memory, "endToEnd", "baseline", "wall") }
      ]
    })
  }
  const sqlite = results.sqlite
  if (sqlite !== undefined) {
    for (const [key, label] of [
      ["persist", "SQLite\npersist"],
      ["endToEnd", "SQLite\nend to end"]
    ] as const) {
      groups.push({
        label,
        bars: [
          { series: "store", value: num(sqlite, key, "storeRecordsPerSecond") },
          { series: baselineSeries, value: num(sqlite, key, "rawRecordsPerSecond") }
        ]
      })
    }
  }
  const drain = results.drain
  if (drain !== undefined && at(drain, "sqlite") !== undefined) {
    groups.push({
      label: "SQLite drain\n(Relay.run)",
      bars: [
        { series: "store", value: num(drain, "sqlite", "throughput", "recordsPerSecondWall") },
        {
          series: baselineSeries,
          value: num(drain, "sqlite", "rawBaseline", "best", "recordsPerSecondWall")
        }
      ]
    })
  }
  const dynamo = results.dynamodbThroughput
  if (dynamo !== undefined) {
    for (const [key, label] of [
      ["persist", "DynamoDB Local\npersist\nvs raw SDK"],
      ["endToEnd", "DynamoDB Local\nend to end\nvs raw SDK"]
    ] as const) {
      groups.push({
        label,
        bars: [
          { series: "store", value: num(dynamo, key, "storeRecordsPerSecond") },
          { series: baselineSeries, value: num(dynamo, key, "rawRecordsPerSecond") }
        ]
      })
    }
  }
  const contention = results.contention
  for (const s of list(contention, "dynamodb", "scenarios")) {
    groups.push({
      label: `DynamoDB Local\ncontention\ncalls of ${formatNumber(num(s, "batch"))}`,
      bars: [
        { series: "8 producers, 1 partition", value: num(s, "contended", "recordsPerSecond") },
        { series: "1 producer (contention baseline)", value: num(s, "single", "recordsPerSecond") }
      ]
    })
  }
  return groups
}

const claimLatencySeries = (results: Results): Array<LineSeries> => {
  const out: Array<LineSeries> = []
  const memory = results.memory
  const memoryPoints = entries(memory, "claim", "medianMicrosWall").flatMap(([b, v]) =>
    typeof v === "number" ? [{ x: Number(b), y: v / 1000 }] : []
  )
  if (memoryPoints.length > 0) out.push({ name: "memory (median)", points: memoryPoints })
  const sqlitePoints = entries(results.sqlite, "claimLatency", "byPending").flatMap(([b]) => {
    const y = num(results.sqlite, "claimLatency", "byPending", b, "medianMillis")
    return y !== undefined ? [{ x: Number(b), y }] : []
  })
  if (sqlitePoints.length > 0) out.push({ name: "SQLite file (median)", points: sqlitePoints })
  const rows = dynamoRows(results.dynamodb)
  for (const [kind, , label] of dynamoKinds.slice(0, 3)) {
    const points = rows.flatMap((r) =>
      r.kind === kind && r.backlog !== undefined && r.millis !== undefined ? [{ x: r.backlog, y: r.millis }] : []
    )
    if (points.length > 0) out.push({ name: `DynamoDB Local, ${label} (mean)`, points })
  }
  for (const [side, label] of [
    ["store", "store"],
    ["raw", "raw SDK"]
  ] as const) {
    const points = entries(results.dynamodbThroughput, "claimLatency", "byBacklog").flatMap(([b]) => {
      const y = num(results.dynamodbThroughput, "claimLatency", "byBacklog", b, side, "medianMillis")
      return y !== undefined ? [{ x: Number(b), y }] : []
    })
    if (points.length > 0) out.push({ name: `DynamoDB Local, keyless, ${label} (median)`, points })
  }
  return out
}

const itemsReadGroups = (results: Results): Array<BarGroup> => {
  const rows = dynamoRows(results.dynamodb)
  const backlogs = Array.from(new Set(rows.map((r) => r.backlog).filter((b): b is number => b !== undefined))).sort(
    (a, b) => a - b
  )
  const kinds = dynamoKinds.filter(([kind]) => rows.some((r) => r.kind === kind))
  if (kinds.length === 0) return []
  return backlogs.map((b) => ({
    label: `backlog ${formatNumber(b)}`,
    bars: kinds.map(([kind, label]) => ({
      series: label,
      value: rows.find((r) => r.kind === kind && r.backlog === b)?.itemsRead
    }))
  }))
}

/** The chart as an SVG document; panels without data are left out (an empty results set gives a note). */
export const renderChart = (results: Results): string => {
  const width = 1040
  const panels: Array<Panel> = []
  const throughput = throughputGroups(results)
  if (throughput.length > 0) {
    panels.push(
      barPanel(
        "Store vs baseline, records per second",
        "each pair measured in the same process and run (wall clock); DynamoDB Local contention pairs: 8 producers on one partition vs 1 producer",
        "records/s",
        throughput,
        width
      )
    )
  }
  const latency = claimLatencySeries(results)
  if (latency.length > 0) {
    panels.push(
      linePanel(
        "Claim(100) latency vs backlog, per backend",
        "memory, SQLite, DynamoDB store vs raw SDK: median claim at a steady backlog; DynamoDB claim-cost paths: mean per claim (local ms)",
        "pending records",
        "ms per claim",
        latency,
        width
      )
    )
  }
  const items = itemsReadGroups(results)
  if (items.length > 0) {
    panels.push(
      barPanel(
        "DynamoDB: items read per claimed record, by backlog (limit 100)",
        "consistent scan (keyed, no index) vs ClaimIndex GSI (keyless) vs ClaimLocalIndex LSI (keyed); ideal = 1",
        "items read per claimed record",
        items,
        width
      )
    )
  }
  if (panels.length === 0) {
    panels.push({
      height: 60,
      svg: `<text x="20" y="35" font-size="14">No benchmark results yet (run npm run bench).</text>`
    })
  }
  let y = 0
  const body: Array<string> = []
  for (const panel of panels) {
    body.push(`<g transform="translate(0,${y})">`, panel.svg, "</g>")
    y += panel.height + 10
  }
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${y}" viewBox="0 0 ${width} ${y}" font-family="Helvetica, Arial, sans-serif">`,
    `<rect width="${width}" height="${y}" fill="#fff"/>`,
    ...body,
    "</svg>",
    ""
  ].join("\n")
}

// ---------------------------------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------------------------------

/** Reads every known result file of `directory`; missing or unreadable files are listed, not thrown. */
export const readResults = (
  directory: string
): { readonly results: Results; readonly found: Array<ResultName>; readonly missing: Array<ResultName> } => {
  const results: Results = {}
  const found: Array<ResultName> = []
  const absent: Array<ResultName> = []
  for (const name of ResultNames) {
    const file = join(directory, `${name}.json`)
    try {
      if (!existsSync(file)) throw new Error("missing")
      const parsed: unknown = JSON.parse(readFileSync(file, "utf8"))
      if (!isRecord(parsed)) throw new Error("not an object")
      results[name] = parsed
      found.push(name)
    } catch {
      absent.push(name)
    }
  }
  return { results, found, missing: absent }
}

/**
 * Regenerates the README (`readmePath`, laid out by the project's Prettier settings so that
 * `prettier --check` passes) and `chart.svg` in `resultsDirectory` from the result files found there;
 * returns which files were found and which were missing.
 */
export const writeReport = async (
  resultsDirectory: string,
  readmePath: string
): Promise<{ readonly found: Array<ResultName>; readonly missing: Array<ResultName> }> => {
  const { found, missing: absent, results } = readResults(resultsDirectory)
  writeFileSync(join(resultsDirectory, "chart.svg"), renderChart(results))
  const options = (await prettier.resolveConfig(readmePath)) ?? {}
  writeFileSync(readmePath, await prettier.format(renderReadme(results), { ...options, filepath: readmePath }))
  return { found, missing: absent }
}
