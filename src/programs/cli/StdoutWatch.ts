/**
 * Notices that the reader of a piped stdout has gone away while nothing is being written: with
 * `relay stdout | head -n 4` and exactly four records, no fifth write ever fails with `EPIPE`, so the
 * relay would wait for records forever. Node cannot poll the write end of a pipe for its error state, so
 * a `tail -f --pid=<this process> /dev/null` child shares stdout and is watched instead: GNU tail (coreutils
 * 8.28 or later) polls its output and dies of SIGPIPE when the last reader is gone. `--pid` makes it exit
 * with this process. Where stdout is not a pipe or no such tail runs, nothing is watched (a write still
 * notices the closed pipe, see `StdoutSink`).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import { spawn } from "node:child_process"
import * as fs from "node:fs"

/** Whether file descriptor 1 is a pipe (or FIFO). */
const stdoutIsPipe = (): boolean => {
  try {
    return fs.fstatSync(1).isFIFO()
  } catch {
    return false
  }
}

/**
 * Runs `onGone` once when the reader of the piped stdout goes away, for as long as the scope is open.
 *
 * @since 0.1.0
 */
export const watch = (onGone: Effect.Effect<void>): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    if (process.platform !== "linux" || !stdoutIsPipe()) return
    const runtime = yield* Effect.runtime<never>()
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        const child = spawn("tail", ["-f", `--pid=${process.pid}`, "/dev/null"], {
          stdio: ["ignore", "inherit", "ignore"]
        })
        // no tail here: nothing is watched
        child.on("error", () => undefined)
        child.on("exit", (code, signal) => {
          if (signal === "SIGPIPE" || code === 141) Runtime.runFork(runtime)(onGone)
        })
        child.unref()
        return child
      }),
      (child) =>
        Effect.sync(() => {
          child.removeAllListeners("exit")
          if (child.exitCode === null && child.signalCode === null) child.kill()
        })
    )
  })
