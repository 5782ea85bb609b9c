/**
 * Progress of the benchmarks, both ends of one tiny protocol:
 *
 * - a benchmark announces each scenario it starts with {@link progress} (one call,
 *   `progress("persist round 2/3")`), which writes one line `bench-progress: <scenario>` to stderr;
 * - `npm run bench` (bench/run.ts) reads its children's stderr through a {@link ProgressDisplay}: progress
 *   lines become one live status line on a TTY (benchmark, scenario, elapsed times, redrawn every second)
 *   or one plain line each when the output is not a terminal; every other line passes through unchanged.
 *
 * Run alone (`npx tsx bench/x.ts`), a benchmark simply shows its progress lines on stderr.
 */
import * as Effect from "effect/Effect"

/** The prefix that marks a progress line on a benchmark's stderr. */
export const ProgressPrefix = "bench-progress: "

/** Announces the scenario this benchmark starts now (one line on stderr). */
export const progress = (scenario: string): void => {
  process.stderr.write(`${ProgressPrefix}${scenario.replace(/[\r\n]+/g, " ")}\n`)
}

/** {@link progress} as an Effect, for benchmarks written as one `Effect.gen`. */
export const progressEffect = (scenario: string): Effect.Effect<void> => Effect.sync(() => progress(scenario))

/** The scenario of a progress line, or `undefined` for any other line. */
export const parseProgress = (line: string): string | undefined =>
  line.startsWith(ProgressPrefix) ? line.slice(ProgressPrefix.length).trim() : undefined

/** Where a display writes: a stream with an optional TTY flag (process.stdout in run.ts). */
export interface ProgressOutput {
  readonly isTTY?: boolean | undefined
  write(text: string): unknown
}

const seconds = (millis: number): string => `${(millis / 1000).toFixed(1)} s`

/**
 * The live display of one benchmark process: feed it the child's stdout and stderr lines; on a TTY it
 * keeps one status line at the bottom (cleared before any other line is printed, redrawn after), and
 * without a TTY it prints each progress line once as `[i/n] name: scenario (at 12.3 s)`.
 */
export class ProgressDisplay {
  private scenario = "starting"
  private scenarioStarted: number
  private readonly started: number
  private shown = false
  private closed = false
  private timer: ReturnType<typeof setInterval> | undefined = undefined

  constructor(
    private readonly label: string,
    private readonly out: ProgressOutput,
    private readonly now: () => number = () => performance.now()
  ) {
    this.started = now()
    this.scenarioStarted = this.started
    if (out.isTTY === true) {
      this.timer = setInterval(() => this.draw(), 1000)
      this.timer.unref()
      this.draw()
    }
  }

  /** The status text: `[2/5] dynamodb · keyed-lsi backlog 1000 · 3.1 s (total 42.0 s)`. */
  status(): string {
    const now = this.now()
    return `${this.label} · ${this.scenario} · ${seconds(now - this.scenarioStarted)} (total ${seconds(now - this.started)})`
  }

  /** One line of the child's output (stdout or stderr, without its newline). */
  line(text: string): void {
    const scenario = parseProgress(text)
    if (scenario === undefined) {
      this.clear()
      this.out.write(`${text}\n`)
      this.draw()
      return
    }
    this.scenario = scenario
    this.scenarioStarted = this.now()
    if (this.out.isTTY === true) this.draw()
    else this.out.write(`${this.label}: ${scenario} (at ${seconds(this.scenarioStarted - this.started)})\n`)
  }

  /** Stops redrawing and removes the status line. */
  close(): void {
    if (this.timer !== undefined) clearInterval(this.timer)
    this.timer = undefined
    this.clear()
    this.closed = true
  }

  private clear(): void {
    if (this.shown) this.out.write("\r\x1b[K")
    this.shown = false
  }

  private draw(): void {
    if (this.out.isTTY !== true || this.closed) return
    // a pseudo-terminal may report 0 columns: then assume a usual width
    const reported = "columns" in this.out && typeof this.out.columns === "number" ? this.out.columns : 0
    const columns = reported >= 20 ? reported : 120
    const text = this.status()
    this.out.write(`\r\x1b[K${text.length >= columns ? `${text.slice(0, columns - 2)}…` : text}`)
    this.shown = true
  }
}
