/**
 * Runs the bundled CLI (see ./CliBundle.ts) as child processes for the sink tests: an environment without
 * inherited OUTBOX_/OTEL_ settings, output collection, run-to-completion and a relay started in the
 * background.
 */
import { type ChildProcess, spawn } from "node:child_process"
import type { CliBundle } from "./CliBundle.js"

/** The environment of a spawned CLI: no inherited OUTBOX_* or OTEL_* settings. */
export const baseEnv = (): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("OUTBOX_") && !key.startsWith("OTEL_")) env[key] = value
  }
  return env
}

/** Collects a child's output; `exited` resolves with its exit code. */
export const finish = (child: ChildProcess, input = "") => {
  const output = { stdout: "", stderr: "" }
  child.stdout?.on("data", (chunk: Buffer) => (output.stdout += chunk.toString("utf8")))
  child.stderr?.on("data", (chunk: Buffer) => (output.stderr += chunk.toString("utf8")))
  child.stdin?.end(input)
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)))
  return { output, exited }
}

/** CLI runners bound to a bundle and a working directory. */
export const cliRunner = (bundle: CliBundle, cwd: string) => {
  const spawnCli = (args: ReadonlyArray<string>, env: Record<string, string> = {}): ChildProcess =>
    spawn(process.execPath, bundle.argv(args), { cwd, env: { ...baseEnv(), ...env } })
  const run = async (args: ReadonlyArray<string>, input = "", env: Record<string, string> = {}) => {
    const { exited, output } = finish(spawnCli(args, env), input)
    const code = await exited
    return { code, ...output }
  }
  return { spawnCli, run }
}

/** Polls `check` every 25 ms until it holds; throws after `withinMillis` (with `detail()` in the message). */
export const waitFor = async (
  what: string,
  check: () => boolean | Promise<boolean>,
  withinMillis = 60_000,
  detail?: () => string
) => {
  const deadline = Date.now() + withinMillis
  while (!(await check())) {
    if (Date.now() > deadline)
      throw new Error(`gave up waiting for ${what}${detail === undefined ? "" : `\n${detail()}`}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

/**
 * `relay stdout …` started in the background: every line it prints is a delivered record. `stop` sends
 * SIGINT and resolves with the exit code.
 */
export const startStdoutRelay = (bundle: CliBundle, args: ReadonlyArray<string>) => {
  const child = spawn(process.execPath, bundle.argv(["relay", "stdout", ...args]), {
    env: baseEnv(),
    stdio: ["ignore", "pipe", "pipe"]
  })
  const { output, exited } = finish(child)
  const delivered = (): number => output.stdout.split("\n").filter((line) => line.length > 0).length
  const stop = (): Promise<number | null> => {
    child.kill("SIGINT")
    return exited
  }
  return { output, delivered, stop }
}
