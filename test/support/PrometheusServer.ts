/**
 * A Prometheus server for tests (Debian package `prometheus`): started on 127.0.0.1 and a free port with a
 * temporary configuration that scrapes the given targets every second under the job `effect-outbox`, and an
 * in-directory TSDB; queried through its HTTP API. Started by the test file that needs it and stopped by PID.
 */
import * as Schema from "effect/Schema"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { freePort } from "./NatsServer.js"

/** A running Prometheus server. */
export interface PrometheusServer {
  readonly url: string
  /** An instant query; rejects with Prometheus' error text when the query fails. */
  readonly query: (expr: string) => Promise<ReadonlyArray<PromSeries>>
  /** A range query over the last `seconds`, one step a second. */
  readonly queryRange: (expr: string, seconds: number) => Promise<ReadonlyArray<PromSeries>>
  /** The active targets' health (`up`, `down`, `unknown`) by scrape URL. */
  readonly targets: () => Promise<ReadonlyArray<{ readonly scrapeUrl: string; readonly health: string }>>
  /** The loaded rules with their evaluation health (`ok`, `err`, `unknown`). */
  readonly rules: () => Promise<ReadonlyArray<{ readonly name: string; readonly health: string }>>
  /** Stops the server (SIGTERM, SIGKILL after 5 s) and removes its directory. */
  readonly stop: () => Promise<void>
}

/** Options of {@link startPrometheus}. */
export interface PrometheusOptions {
  /** `host:port` of the operations endpoints to scrape (path /metrics). */
  readonly targets: ReadonlyArray<string>
  /** Rule files to load (copied into the server's directory). */
  readonly ruleFiles?: ReadonlyArray<string> | undefined
}

const Sample = Schema.Tuple(Schema.Number, Schema.String)
const Series = Schema.Struct({
  metric: Schema.Record({ key: Schema.String, value: Schema.String }),
  value: Schema.optional(Sample),
  values: Schema.optional(Schema.Array(Sample))
})
/** One series of a query result (instant: `value`; range: `values`). */
export type PromSeries = typeof Series.Type

const Target = Schema.Struct({ scrapeUrl: Schema.String, health: Schema.String })
const Rule = Schema.Struct({ name: Schema.String, health: Schema.String, lastError: Schema.optional(Schema.String) })
const ApiAnswer = Schema.Struct({
  status: Schema.String,
  error: Schema.optional(Schema.String),
  data: Schema.optional(
    Schema.Struct({
      result: Schema.optional(Schema.Array(Series)),
      activeTargets: Schema.optional(Schema.Array(Target)),
      groups: Schema.optional(Schema.Array(Schema.Struct({ rules: Schema.Array(Rule) })))
    })
  )
})

const api = async (base: string, pathAndQuery: string): Promise<typeof ApiAnswer.Type> => {
  const response = await fetch(`${base}${pathAndQuery}`)
  const answer = Schema.decodeUnknownSync(ApiAnswer)(await response.json())
  if (answer.status !== "success") throw new Error(`Prometheus ${pathAndQuery}: ${answer.error ?? response.status}`)
  return answer
}

const terminate = async (child: ChildProcess): Promise<void> => {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  child.kill("SIGTERM")
  const timer = setTimeout(() => child.kill("SIGKILL"), 5_000)
  await exited
  clearTimeout(timer)
}

/** Starts Prometheus and resolves once its readiness endpoint answers. */
export const startPrometheus = async (options: PrometheusOptions): Promise<PrometheusServer> => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-prometheus-"))
  const rules = (options.ruleFiles ?? []).map((file) => {
    const target = path.join(directory, path.basename(file))
    fs.copyFileSync(file, target)
    return target
  })
  const config = [
    "global:",
    "  scrape_interval: 1s",
    "  evaluation_interval: 1s",
    ...(rules.length > 0 ? ["rule_files:", ...rules.map((r) => `  - ${JSON.stringify(r)}`)] : []),
    "scrape_configs:",
    "  - job_name: effect-outbox",
    "    scrape_interval: 1s",
    "    static_configs:",
    `      - targets: [${options.targets.map((t) => JSON.stringify(t)).join(", ")}]`
  ].join("\n")
  const configFile = path.join(directory, "prometheus.yml")
  fs.writeFileSync(configFile, `${config}\n`)
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  const child = spawn(
    "prometheus",
    [
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${path.join(directory, "data")}`,
      `--web.listen-address=127.0.0.1:${port}`
    ],
    { stdio: ["ignore", "pipe", "pipe"] }
  )
  let output = ""
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
  const failed = new Promise<never>((_, reject) => {
    child.once("error", (error) =>
      reject(new Error(`cannot start prometheus (apt-get install prometheus): ${error.message}`))
    )
    child.once("exit", (code) => reject(new Error(`prometheus exited with ${String(code)}:\n${output}`)))
  })
  const stop = async () => {
    await terminate(child)
    fs.rmSync(directory, { recursive: true, force: true })
  }
  const ready = (async () => {
    for (let attempt = 0; attempt < 300; attempt++) {
      try {
        if ((await fetch(`${url}/-/ready`)).ok) return
      } catch {
        // not listening yet
      }
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    throw new Error(`prometheus did not become ready within 30 s:\n${output}`)
  })()
  try {
    await Promise.race([ready, failed])
  } catch (error) {
    await stop()
    throw error
  }
  failed.catch(() => undefined)
  return {
    url,
    query: async (expr) => (await api(url, `/api/v1/query?query=${encodeURIComponent(expr)}`)).data?.result ?? [],
    queryRange: async (expr, seconds) => {
      const end = Date.now() / 1000
      const answer = await api(
        url,
        `/api/v1/query_range?query=${encodeURIComponent(expr)}&start=${end - seconds}&end=${end}&step=1`
      )
      return answer.data?.result ?? []
    },
    targets: async () => (await api(url, "/api/v1/targets?state=active")).data?.activeTargets ?? [],
    rules: async () => ((await api(url, "/api/v1/rules")).data?.groups ?? []).flatMap((group) => group.rules),
    stop
  }
}
