/**
 * A throw-away PostgreSQL server for tests, the soak runner and benchmarks: `initdb` into a temporary
 * directory owned by the `postgres` OS user (the server refuses to run as root), then `postgres` on
 * 127.0.0.1 with a free port, `fsync` on, its socket in the same directory.
 *
 * The server runs under a small shell watchdog whose stdin is a pipe from this process: when the pipe
 * closes (teardown, or a crashed runner) the watchdog stops the server (fast shutdown) and removes the
 * data directory. Stops go by PID only.
 *
 * Tests read the URL with `inject("postgresUrl")` (see ./globalSetup.ts) and give each test file its
 * own database with {@link createDatabase}.
 */
import { spawn, spawnSync } from "node:child_process"
import type { ChildProcessWithoutNullStreams } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import * as readline from "node:readline"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Redacted from "effect/Redacted"

const startupTimeoutMs = 60_000
const stopTimeoutMs = 10_000
const outputTailLines = 60

const installHelp =
  "PostgreSQL tests need the server binaries (initdb, postgres) and a `postgres` OS user. " +
  "On Debian/Ubuntu: apt-get install -y postgresql"

/** The directory holding `initdb` and `postgres` (the newest installed major version). */
export const findBinDir = (): string => {
  const fromEnv = process.env["POSTGRES_BIN_DIR"]
  if (fromEnv !== undefined && fs.existsSync(path.join(fromEnv, "postgres"))) return fromEnv
  const root = "/usr/lib/postgresql"
  const versions = fs.existsSync(root)
    ? fs
        .readdirSync(root)
        .filter((v) => fs.existsSync(path.join(root, v, "bin", "postgres")))
        .sort((a, b) => Number(a) - Number(b))
    : []
  const newest = versions[versions.length - 1]
  if (newest === undefined) throw new Error(`no PostgreSQL server under ${root}/*/bin. ${installHelp}`)
  return path.join(root, newest, "bin")
}

interface OsUser {
  readonly uid: number
  readonly gid: number
}

const postgresUser = (): OsUser => {
  const uid = spawnSync("id", ["-u", "postgres"], { encoding: "utf8" })
  const gid = spawnSync("id", ["-g", "postgres"], { encoding: "utf8" })
  if (uid.status !== 0 || gid.status !== 0) throw new Error(`no \`postgres\` OS user. ${installHelp}`)
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) }
}

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
export interface PostgresServer {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication, loopback only). */
  readonly url: string
  readonly port: number
  /** The watchdog's PID (the server is its child). */
  readonly pid: number | undefined
  /** Stops the server (fast shutdown) and removes its data directory. */
  readonly stop: () => Promise<void>
}

/** The watchdog: starts the server, waits for stdin to close, then stops the server and cleans up. */
const watchdogScript = `
"$PG_BIN/postgres" -D "$PG_DATA/data" -k "$PG_DATA" -h 127.0.0.1 -p "$PG_PORT" -c fsync=on -c max_connections=200 $PG_EXTRA &
server=$!
echo "SERVER $server"
cat >/dev/null
kill -INT "$server" 2>/dev/null
wait "$server"
rm -rf "$PG_DATA"
`

const runServer = (
  binDir: string,
  dir: string,
  port: number,
  user: OsUser,
  extra: string
): Promise<{ readonly child: ChildProcessWithoutNullStreams; readonly tail: Array<string> }> =>
  new Promise((resolve, reject) => {
    const child = spawn("sh", ["-c", watchdogScript], {
      uid: user.uid,
      gid: user.gid,
      cwd: dir,
      env: {
        PATH: process.env["PATH"] ?? "/usr/bin:/bin",
        PG_BIN: binDir,
        PG_DATA: dir,
        PG_PORT: String(port),
        PG_EXTRA: extra
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
      reject(new Error(`PostgreSQL failed to start: ${reason}\n--- server output (tail) ---\n${tail.join("\n")}`))
    }
    const timer = setTimeout(() => fail(`not ready within ${startupTimeoutMs} ms`), startupTimeoutMs)
    readline.createInterface({ input: child.stdout }).on("line", remember)
    readline.createInterface({ input: child.stderr }).on("line", (line) => {
      remember(line)
      if (!settled && line.includes("database system is ready to accept connections")) {
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
export const startPostgres = async (
  options: {
    /** Server settings passed as `-c name=value` (names and values of letters, digits, `_` and `.`). */
    readonly settings?: Readonly<Record<string, string>>
  } = {}
): Promise<PostgresServer> => {
  const extra = Object.entries(options.settings ?? {})
    .map(([name, value]) => {
      if (!/^[a-z0-9_.]+$/.test(name) || !/^[A-Za-z0-9_.]+$/.test(value)) throw new Error(`bad setting ${name}`)
      return `-c ${name}=${value}`
    })
    .join(" ")
  const binDir = findBinDir()
  const user = postgresUser()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-pg-"))
  fs.chownSync(dir, user.uid, user.gid)
  const remove = (): void => fs.rmSync(dir, { recursive: true, force: true })
  const init = spawnSync(
    path.join(binDir, "initdb"),
    ["-D", path.join(dir, "data"), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"],
    { uid: user.uid, gid: user.gid, cwd: dir, encoding: "utf8" }
  )
  if (init.error !== undefined || init.status !== 0) {
    remove()
    throw new Error(`initdb failed: ${init.error?.message ?? ""}\n${init.stdout}${init.stderr}`)
  }
  let lastError: unknown
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort()
    try {
      const { child, tail } = await runServer(binDir, dir, port, user, extra)
      let stopping = false
      child.on("exit", (code, signal) => {
        if (!stopping) {
          console.error(
            `[postgres] server exited mid-run (code ${String(code)}, signal ${String(signal)})\n${tail.join("\n")}`
          )
        }
      })
      return {
        url: `postgres://postgres@127.0.0.1:${port}/postgres`,
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

/**
 * Creates a fresh database `<prefix>_<random>` on the server and returns its URL (each test file gets
 * its own; the server and everything on it go away at the end of the run).
 */
export const createDatabase = async (url: string, prefix: string): Promise<string> => {
  if (!/^[a-z_][a-z0-9_]{0,40}$/.test(prefix)) throw new Error(`createDatabase: invalid prefix ${prefix}`)
  const name = `${prefix}_${randomBytes(6).toString("hex")}`
  await Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* PgClient.PgClient
      yield* sql.unsafe(`CREATE DATABASE ${name}`)
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })))
  )
  return databaseUrl(url, name)
}

/** A `PgClient` (and `SqlClient`) layer on `url` for tests: a small pool, no int8 parsing (the stores decode). */
export const clientLayer = (url: string, maxConnections = 4) =>
  PgClient.layer({ url: Redacted.make(url), maxConnections, applicationName: "effect-outbox-test" })

/**
 * One client for many store layers (a generated history builds a fresh store layer per history; a pool
 * per history would cost more than the history). `close` ends the pool.
 */
export const sharedClient = async (url: string, maxConnections = 8) => {
  const runtime = ManagedRuntime.make(clientLayer(url, maxConnections))
  const context = (await runtime.runtime()).context
  return { layer: Layer.succeedContext(context), close: () => runtime.dispose() }
}
