/**
 * `npm run bench`: runs every benchmark in sequence (each in its own process, so one backend's heap and
 * JIT state does not colour the next) with a live progress line (bench/Progress.ts), then regenerates
 * bench/README.md and bench/results/chart.svg from bench/results/*.json (bench/Report.ts).
 *
 * Usage: `npm run bench [-- name ...] [-- --quick]` with names among memory, sqlite, postgres, mysql, dynamodb (claim
 * cost), dynamodbThroughput (store vs raw SDK), drain, contention, brokers (NATS and RabbitMQ sinks vs a hand-written
 * relay), inbox (`Inbox.process` vs a raw loop on SQLite and PostgreSQL); `--quick` is passed on to every
 * benchmark; `--report` only regenerates the report. `latency` (delivery after idle, bench/latency.ts) runs
 * only when named: its full method takes about 40 minutes with `--together` (every backend on one schedule),
 * over two hours without; so does `steady` (the highest rate one relay sustains, bench/steady.ts: half an
 * hour). fairness: one relay over many partitions.
 */
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { dirname, join } from "node:path"
import * as readline from "node:readline"
import { fileURLToPath } from "node:url"
import { ProgressDisplay } from "./Progress.js"
import { writeReport } from "./Report.js"

const here = dirname(fileURLToPath(import.meta.url))
const all = [
  "memory",
  "sqlite",
  "postgres",
  "mysql",
  "dynamodb",
  "dynamodbThroughput",
  "drain",
  "contention",
  "brokers",
  "inbox",
  "fairness"
]
const args = process.argv.slice(2)
const requested = args.filter((a) => !a.startsWith("-"))
const passOn = args.filter((a) => a === "--quick")
const names = args.includes("--report") ? [] : requested.length > 0 ? requested : all

/** Runs one benchmark process, its output going through the progress display; resolves to its exit code. */
const runOne = (file: string, label: string): Promise<number | null> =>
  new Promise((resolve) => {
    const display = new ProgressDisplay(label, process.stdout)
    const child = spawn(process.execPath, ["--import", "tsx", file, ...passOn], {
      stdio: ["ignore", "pipe", "pipe"]
    })
    readline.createInterface({ input: child.stdout }).on("line", (line) => display.line(line))
    readline.createInterface({ input: child.stderr }).on("line", (line) => display.line(line))
    child.on("error", (error) => {
      display.close()
      console.error(`${label}: could not start (${error.message})`)
      resolve(null)
    })
    child.on("close", (code) => {
      display.close()
      resolve(code)
    })
  })

let failed = 0
for (const [i, name] of names.entries()) {
  const label = `[${i + 1}/${names.length}] ${name}`
  const file = join(here, `${name}.ts`)
  if (!existsSync(file)) {
    console.error(`${label}: no such benchmark (${file})`)
    failed++
    continue
  }
  console.log(`\n${label} …`)
  const started = performance.now()
  const code = await runOne(file, label)
  const seconds = ((performance.now() - started) / 1000).toFixed(1)
  if (code !== 0) {
    console.error(`${label} failed (exit ${String(code)}) after ${seconds} s`)
    failed++
  } else {
    console.log(`${label} done in ${seconds} s`)
  }
}

const written = await writeReport(join(here, "results"), join(here, "README.md"))
console.log(
  `\nbench/README.md and bench/results/chart.svg regenerated from ${written.found.join(", ") || "no results"}` +
    (written.missing.length > 0 ? ` (missing: ${written.missing.join(", ")})` : "") +
    (failed > 0 ? `; ${failed} benchmark(s) failed` : "")
)
process.exit(failed > 0 ? 1 : 0)
