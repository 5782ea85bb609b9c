/**
 * Where a timed round's CPU time goes: V8's sampling profiler (through `node:inspector`, on this thread) runs
 * from a round's start to its end, and every sample is put under what was running when it was taken — SQLite
 * (better-sqlite3's native statement calls), the `@effect/sql` client's JavaScript, Effect's runtime, the
 * library's own code (by file), the bench's code, garbage collection, or the rest. The sides of one bench run
 * are profiled the same way, so their figures compare; the profiler's own cost is in all of them.
 *
 * An inspector session on the same thread answers synchronously, so a round is started and stopped without
 * waiting (the rounds' timers stay as they are).
 *
 * Given a directory, each profiled round's whole profile is also written there (`<side>-<n>.cpuprofile`, for
 * Chrome DevTools or a script), function by function. Run under `tsx`, every function of the library reports
 * line 1; a bundle keeps the lines: `npx esbuild bench/drain.ts --bundle --platform=node --format=esm
 * --packages=external --keep-names --outfile=<file>.mjs`, then `node <file>.mjs` with the same arguments (the
 * bundle's `// src/…` comments name each line's file).
 */
import * as fs from "node:fs"
import * as inspector from "node:inspector"
import * as path from "node:path"
import { median } from "./Stats.js"

/** One profiled round: milliseconds by category, and by library file. */
export interface ProfiledRound {
  /** Every sample of the round (about its wall time). */
  readonly sampledMillis: number
  /** The samples in which the thread ran (not idle). */
  readonly busyMillis: number
  readonly categories: Record<string, number>
  readonly libraryFiles: Record<string, number>
}

/**
 * The category of better-sqlite3's native calls and of the JavaScript frames that call them directly (see
 * `sqliteCallers`).
 */
const sqliteCategory = "SQLite (native)"

/** The categories, in the order a report lists them. */
export const categories = [
  sqliteCategory,
  "@effect/sql client",
  "Effect runtime",
  "library (src/)",
  "bench code",
  "garbage collection",
  "Node.js and V8",
  "other",
  "idle"
] as const

/**
 * The drain bench's profiled sides: the key under which drain.json keeps each, and the report's label. The
 * bench profiles them in this order, the report lists them so.
 */
export const profiledSides = [
  ["raw", "raw baseline"],
  ["relay", "relay"],
  ["storeCallsInOrder", "store's calls, relay's shape"],
  ["handWritten", "hand-written drain"]
] as const

/** A profiled side's key in drain.json. */
export type ProfiledSideKey = (typeof profiledSides)[number][0]

/** better-sqlite3's native calls, as the profiler names them (a frame without a script). */
const sqliteNatives = new Set(["all", "run", "get", "iterate", "raw", "prepare", "exec", "pragma", "Statement"])

/**
 * A node of a V8 CPU profile: the function a sample was taken in (its script's URL; none for native code), and
 * the nodes of the functions it called.
 */
export interface ProfileNode {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string }
  readonly children?: ReadonlyArray<number>
}

/** A V8 CPU profile (`Profiler.stop`'s): its nodes, the node of each sample and the time before each. */
export interface Profile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly samples?: ReadonlyArray<number>
  readonly timeDeltas?: ReadonlyArray<number>
}

const isProfile = (u: unknown): u is Profile =>
  typeof u === "object" && u !== null && Array.isArray(Reflect.get(u, "nodes"))

/** Whether a frame is one of better-sqlite3's native calls. */
const isSqliteNative = ({ functionName, url }: ProfileNode["callFrame"]): boolean =>
  url === "" && sqliteNatives.has(functionName)

/**
 * The category of a sample by its innermost frame (`idle`: the thread waited, for a timer or for I/O);
 * `undefined` for the profiler's own frames.
 */
const categoryOf = (frame: ProfileNode["callFrame"]): string | undefined => {
  const { functionName, url } = frame
  // the inspector's own message dispatch (the profile's hand-over) and the root are the profiler's
  if ((functionName === "dispatch" && url === "") || functionName === "(root)") return undefined
  if (functionName === "(idle)") return "idle"
  if (functionName === "(garbage collector)") return "garbage collection"
  if (url === "") return isSqliteNative(frame) ? sqliteCategory : "Node.js and V8"
  if (url.includes("/node_modules/@effect/sql")) return "@effect/sql client"
  if (url.includes("/node_modules/effect/")) return "Effect runtime"
  if (url.includes("/src/")) return "library (src/)"
  if (url.includes("/bench/")) return "bench code"
  if (url.startsWith("node:")) return "Node.js and V8"
  return "other"
}

/**
 * The JavaScript frames that call better-sqlite3's natives directly (the client's one-line statement calls,
 * the raw loops'). V8 credits to such a frame most of the time a statement spends making the JavaScript
 * values of its rows: 2,000 reads of 100 rows each through a one-line wrapper measured 131 ms in the wrapper and
 * 75 ms in the native `all`, and reads of no row nothing in the wrapper. Their samples count as SQLite's.
 */
const sqliteCallers = (nodes: ReadonlyArray<ProfileNode>, byId: ReadonlyMap<number, ProfileNode>): Set<number> => {
  const callers = new Set<number>()
  for (const node of nodes) {
    if (node.callFrame.url === "") continue
    for (const child of node.children ?? []) {
      const callee = byId.get(child)
      if (callee !== undefined && isSqliteNative(callee.callFrame)) callers.add(node.id)
    }
  }
  return callers
}

/** Sums a profile's samples by category (and library file), in milliseconds. */
export const summarise = (profile: Profile): ProfiledRound => {
  const byId = new Map<number, ProfileNode>()
  for (const node of profile.nodes) byId.set(node.id, node)
  const callers = sqliteCallers(profile.nodes, byId)
  const byCategory: Record<string, number> = {}
  const byFile: Record<string, number> = {}
  let sampled = 0
  const samples = profile.samples ?? []
  const deltas = profile.timeDeltas ?? []
  for (let i = 0; i < samples.length; i++) {
    const node = byId.get(samples[i] ?? -1)
    const micros = deltas[i] ?? 0
    if (node === undefined) continue
    const category = callers.has(node.id) ? sqliteCategory : categoryOf(node.callFrame)
    if (category === undefined) continue
    sampled += micros
    byCategory[category] = (byCategory[category] ?? 0) + micros
    if (category === "library (src/)") {
      const file = node.callFrame.url.slice(node.callFrame.url.indexOf("/src/") + 1)
      byFile[file] = (byFile[file] ?? 0) + micros
    }
  }
  const millis = (record: Record<string, number>) =>
    Object.fromEntries(Object.entries(record).map(([key, micros]) => [key, Number((micros / 1000).toFixed(1))]))
  return {
    sampledMillis: Number((sampled / 1000).toFixed(1)),
    busyMillis: Number(((sampled - (byCategory["idle"] ?? 0)) / 1000).toFixed(1)),
    categories: millis(byCategory),
    libraryFiles: millis(byFile)
  }
}

/**
 * The profiler of the bench's rounds: `profileNext(label)` makes the next round started with {@link start}
 * a profiled one, kept under `label`; with `directory`, each profiled round's profile is written there too.
 */
export const make = (intervalMicros = 100, directory?: string) => {
  let session: inspector.Session | undefined
  let label: string | undefined
  let running: string | undefined
  const rounds = new Map<string, Array<ProfiledRound>>()
  /** Posts a command and returns its result, which a same-thread session hands back before `post` returns. */
  const post = (method: string, params?: object): unknown => {
    let result: unknown
    let failure: Error | null = null
    session?.post(method, params, (error, value) => {
      failure = error
      result = value
    })
    if (failure !== null) throw failure
    return result
  }
  return {
    intervalMicros,
    rounds,
    /** The next round is profiled, under `label`. */
    profileNext(next: string): void {
      label = next
    },
    /** Called at a round's start: starts the profiler when the round is to be profiled. */
    start(): void {
      if (label === undefined) return
      if (session === undefined) {
        session = new inspector.Session()
        session.connect()
        post("Profiler.enable")
        post("Profiler.setSamplingInterval", { interval: intervalMicros })
      }
      running = label
      label = undefined
      post("Profiler.start")
    },
    /** Called at a round's end: stops the profiler and keeps the round's summary. */
    stop(): void {
      if (running === undefined) return
      const result = post("Profiler.stop")
      const profile: unknown =
        typeof result === "object" && result !== null ? Reflect.get(result, "profile") : undefined
      if (!isProfile(profile)) throw new Error("the profiler returned no profile")
      const list = rounds.get(running) ?? []
      if (directory !== undefined) {
        fs.mkdirSync(directory, { recursive: true })
        fs.writeFileSync(path.join(directory, `${running}-${list.length + 1}.cpuprofile`), JSON.stringify(profile))
      }
      list.push(summarise(profile))
      rounds.set(running, list)
      running = undefined
    },
    close(): void {
      session?.disconnect()
      session = undefined
    }
  }
}

/** A side's profiled rounds as the results hold them: the median of the rounds, category by category. */
export interface ProfiledSide {
  readonly rounds: number
  readonly sampledMillis: number
  readonly busyMillis: number
  readonly categories: Record<string, number>
  /** The library's files that took the most time (median milliseconds), at most ten. */
  readonly topLibraryFiles: Record<string, number>
}

/** The median of a side's rounds, per category and per library file. */
export const sideOf = (rounds: ReadonlyArray<ProfiledRound>): ProfiledSide => {
  const medianOf = (pick: (round: ProfiledRound) => number) => Number(median(rounds.map(pick)).toFixed(1))
  const files = new Set(rounds.flatMap((round) => Object.keys(round.libraryFiles)))
  const fileMedians = [...files]
    .map((file) => [file, medianOf((round) => round.libraryFiles[file] ?? 0)] as const)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 10)
  return {
    rounds: rounds.length,
    sampledMillis: medianOf((round) => round.sampledMillis),
    busyMillis: medianOf((round) => round.busyMillis),
    categories: Object.fromEntries(categories.map((name) => [name, medianOf((round) => round.categories[name] ?? 0)])),
    topLibraryFiles: Object.fromEntries(fileMedians)
  }
}
