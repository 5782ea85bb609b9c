/**
 * A throw-away MariaDB server for tests, the soak runner and benchmarks: `mariadb-install-db` into a
 * temporary directory, then `mariadbd` on 127.0.0.1 with a free port and its own socket in that directory
 * (as root with `--user=root`; root over TCP has no password).
 *
 * The server runs under a small shell watchdog whose stdin is a pipe from this process: when the pipe
 * closes (teardown, or a crashed runner) the watchdog stops the server and removes the data directory.
 * Stops go by PID only.
 *
 * Tests read the URL with `inject("mysqlUrl")` (see ./globalSetup.ts) and give each test file its own
 * database with {@link createDatabase}.
 */
import { spawn, spawnSync } from "node:child_process"
import type { ChildProcessWithoutNullStreams } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import * as readline from "node:readline"
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Redacted from "effect/Redacted"

const startupTimeoutMs = 60_000
const stopTimeoutMs = 15_000
const outputTailLines = 60

const installHelp =
  "MySQL tests need MariaDB (mariadb-install-db, mariadbd). On Debian/Ubuntu: apt-get install -y mariadb-server"

/** A port that was free a moment ago (the server start is retried if it got taken meanwhile). */
const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

/** A running server. */
export interface MysqlServer {
  /** `mysql://root@127.0.0.1:<port>/` (no password, loopback only). */
  readonly url: string
  readonly port: number
  /** The watchdog's PID (the server is its child). */
  readonly pid: number | undefined
  /** Stops the server and removes its data directory. */
  readonly stop: () => Promise<void>
}

/** The watchdog: starts the server, waits for stdin to close, then stops the server and cleans up. */
const watchdogScript = `
mariadbd --no-defaults --datadir="$MY_DIR/data" --bind-address=127.0.0.1 --port="$MY_PORT" --socket="$MY_DIR/sock" \\
  --pid-file="$MY_DIR/pid" --skip-name-resolve --max-connections=400 --innodb-buffer-pool-size=256M $MY_USER &
server=$!
echo "SERVER $server"
cat >/dev/null
kill -TERM "$server" 2>/dev/null
wait "$server"
rm -rf "$MY_DIR"
`

const isRoot = (): boolean => typeof process.getuid === "function" && process.getuid() === 0

const runServer = (
  dir: string,
  port: number
): Promise<{ readonly child: ChildProcessWithoutNullStreams; readonly tail: Array<string> }> =>
  new Promise((resolve, reject) => {
    const child = spawn("sh", ["-c", watchdogScript], {
      cwd: dir,
      env: {
        PATH: `${process.env["PATH"] ?? "/usr/bin:/bin"}:/usr/sbin:/sbin`,
        MY_DIR: dir,
        MY_PORT: String(port),
        MY_USER: isRoot() ? "--user=root" : ""
      },
      stdio: ["pipe", "pipe", "pipe"]
    })
    const tail: Array<string> = []
    const remember = (line: string): void => {
      tail.push(line)
      if (tail.length > outputTailLines) tail.shift()
    }
    let settled = false
    const fail = (reason: string): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      child.stdin.end()
      reject(new Error(`MariaDB failed to start: ${reason}\n--- server output (tail) ---\n${tail.join("\n")}`))
    }
    const timer = setTimeout(() => fail(`not ready within ${startupTimeoutMs} ms`), startupTimeoutMs)
    readline.createInterface({ input: child.stdout }).on("line", remember)
    readline.createInterface({ input: child.stderr }).on("line", (line) => {
      remember(line)
      if (!settled && line.includes("ready for connections")) {
        settled = true
        clearTimeout(timer)
        resolve({ child, tail })
      }
    })
    child.on("error", (error) => fail(`could not spawn the watchdog (${error.message})`))
    child.on("exit", (code, signal) => fail(`server exited early (code ${String(code)}, signal ${String(signal)})`))
  })

const stopChild = async (child: ChildProcessWithoutNullStreams): Promise<void> => {
  const pid = child.pid
  if (pid === undefined || child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  child.stdin.end()
  const timedOut = await Promise.race([
    exited.then(() => false),
    new Promise<boolean>((resolve) => setTimeout(() => resolve(true), stopTimeoutMs).unref())
  ])
  if (timedOut && child.exitCode === null && child.signalCode === null) {
    process.kill(pid, "SIGKILL")
    await exited
  }
}

/**
 * Initialises a data directory and starts a loopback-only server on a free port. Resolves once the
 * server accepts connections.
 */
export const startMysql = async (): Promise<MysqlServer> => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-mysql-"))
  const remove = (): void => fs.rmSync(dir, { recursive: true, force: true })
  const init = spawnSync(
    "mariadb-install-db",
    [
      "--no-defaults",
      `--datadir=${path.join(dir, "data")}`,
      "--auth-root-authentication-method=normal",
      "--skip-test-db",
      ...(isRoot() ? ["--user=root"] : [])
    ],
    { cwd: dir, encoding: "utf8", env: { ...process.env, PATH: `${process.env["PATH"] ?? ""}:/usr/sbin:/sbin` } }
  )
  if (init.error !== undefined || init.status !== 0) {
    remove()
    throw new Error(
      `mariadb-install-db failed: ${init.error?.message ?? ""}\n${init.stdout}${init.stderr}\n${installHelp}`
    )
  }
  let lastError: unknown
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort()
    try {
      const { child, tail } = await runServer(dir, port)
      let stopping = false
      child.on("exit", (code, signal) => {
        if (!stopping) {
          console.error(
            `[mysql] server exited mid-run (code ${String(code)}, signal ${String(signal)})\n${tail.join("\n")}`
          )
        }
      })
      return {
        url: `mysql://root@127.0.0.1:${port}/`,
        port,
        pid: child.pid,
        stop: async () => {
          stopping = true
          await stopChild(child)
          remove()
        }
      }
    } catch (error) {
      lastError = error
    }
  }
  remove()
  throw lastError
}

/** The URL of a database named `name` on the server of `url`. */
export const databaseUrl = (url: string, name: string): string => {
  const parsed = new URL(url)
  parsed.pathname = `/${name}`
  return parsed.toString()
}

/** A `MysqlClient` (and `SqlClient`) layer on `url` for tests: a small pool. */
export const clientLayer = (url: string, maxConnections = 4) =>
  MysqlClient.layer({ url: Redacted.make(url), maxConnections })

/**
 * Creates a fresh database `<prefix>_<random>` on the server and returns its URL (each test file gets
 * its own; the server and everything on it go away at the end of the run).
 */
export const createDatabase = async (url: string, prefix: string): Promise<string> => {
  if (!/^[a-z_][a-z0-9_]{0,40}$/.test(prefix)) throw new Error(`createDatabase: invalid prefix ${prefix}`)
  const name = `${prefix}_${randomBytes(6).toString("hex")}`
  await Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* MysqlClient.MysqlClient
      yield* sql.unsafe(`CREATE DATABASE ${name}`)
    }).pipe(Effect.provide(clientLayer(url, 1)))
  )
  return databaseUrl(url, name)
}

/**
 * One client for many store layers (a generated history builds a fresh store layer per history; a pool
 * per history would cost more than the history). `close` ends the pool.
 */
export const sharedClient = async (url: string, maxConnections = 8) => {
  const runtime = ManagedRuntime.make(clientLayer(url, maxConnections))
  const context = (await runtime.runtime()).context
  return { layer: Layer.succeedContext(context), close: () => runtime.dispose() }
}
