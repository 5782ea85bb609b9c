/**
 * A RabbitMQ broker for tests (Debian `rabbitmq-server` 3.10): one per run, shared by the files that only
 * publish and consume on queues of their own (test/support/globalSetup.ts, `inject("rabbitUrl")`), and one of
 * its own for each file that stops the broker or blocks its publishers (start-up takes several seconds, and
 * longer on a loaded machine). The AMQP listener, the distribution port and epmd all on 127.0.0.1
 * with free ports, data and logs in a temporary directory, no plugins (no management listener), a unique
 * node name. {@link RabbitMqServer.restartApp} restarts the broker application inside the running node
 * (clients see their connections closed); {@link RabbitMqServer.dispose} stops the node with
 * `rabbitmqctl -n <node> stop`, then its epmd, and removes the directory.
 */
import { connect as amqpConnect } from "amqplib"
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { freePort } from "./NatsServer.js"

const bin = "/usr/lib/rabbitmq/bin"

/** A running broker. */
export interface RabbitMqServer {
  /** `amqp://guest:guest@127.0.0.1:<port>` (the default user, loopback only). */
  readonly url: string
  readonly node: string
  /** `rabbitmqctl stop_app` (clients are disconnected). */
  readonly stopApp: () => void
  /** `rabbitmqctl start_app`. */
  readonly startApp: () => void
  /** Runs `rabbitmqctl -n <node> <args>` (e.g. `add_user`, `set_permissions`); throws when it fails. */
  readonly ctl: (...args: ReadonlyArray<string>) => void
  /** Stops the node, its epmd, and removes the data directory. */
  readonly dispose: () => Promise<void>
}

const waitFor = async (check: () => boolean, what: string, withinMillis: number, tail: () => string) => {
  const deadline = Date.now() + withinMillis
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`RabbitMQ: gave up waiting for ${what}\n${tail()}`)
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
}

/** Starts a broker; resolves once it accepts AMQP connections. */
export const startRabbitMq = async (): Promise<RabbitMqServer> => {
  const [amqpPort, distPort, epmdPort] = [await freePort(), await freePort(), await freePort()]
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-rabbitmq-"))
  fs.chmodSync(dir, 0o755)
  fs.writeFileSync(path.join(dir, "enabled_plugins"), "[].\n")
  const node = `outbox-test-${process.pid}-${amqpPort}@localhost`
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    HOME: dir,
    RABBITMQ_NODENAME: node,
    RABBITMQ_NODE_IP_ADDRESS: "127.0.0.1",
    RABBITMQ_NODE_PORT: String(amqpPort),
    RABBITMQ_DIST_PORT: String(distPort),
    RABBITMQ_MNESIA_BASE: path.join(dir, "mnesia"),
    RABBITMQ_LOG_BASE: path.join(dir, "log"),
    RABBITMQ_ENABLED_PLUGINS_FILE: path.join(dir, "enabled_plugins"),
    RABBITMQ_CONFIG_FILE: path.join(dir, "rabbitmq"),
    RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS: "-kernel inet_dist_use_interface {127,0,0,1}",
    ERL_EPMD_ADDRESS: "127.0.0.1",
    ERL_EPMD_PORT: String(epmdPort)
  }
  let output = ""
  const child: ChildProcess = spawn(path.join(bin, "rabbitmq-server"), [], {
    cwd: dir,
    env,
    stdio: ["ignore", "pipe", "pipe"]
  })
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
  let exited = false
  child.once("exit", () => (exited = true))
  const ctl = (...args: ReadonlyArray<string>) => {
    const result = spawnSync(path.join(bin, "rabbitmqctl"), ["-n", node, ...args], { cwd: dir, env, encoding: "utf8" })
    if (result.status !== 0) throw new Error(`rabbitmqctl ${args.join(" ")} failed: ${result.stdout}${result.stderr}`)
  }
  const dispose = async () => {
    if (!exited) {
      spawnSync(path.join(bin, "rabbitmqctl"), ["-n", node, "stop"], { cwd: dir, env, encoding: "utf8" })
      await waitFor(
        () => exited,
        "the node to stop",
        30_000,
        () => output
      ).catch(() => {
        if (child.pid !== undefined) process.kill(child.pid, "SIGKILL")
      })
    }
    spawnSync("epmd", ["-kill"], { env, encoding: "utf8" })
    fs.rmSync(dir, { recursive: true, force: true })
  }
  try {
    await waitFor(
      () => exited || output.includes("completed with"),
      "start-up",
      180_000,
      () => output
    )
    if (exited) throw new Error(`rabbitmq-server exited during start-up:\n${output}`)
  } catch (error) {
    await dispose()
    throw error
  }
  return {
    url: `amqp://guest:guest@127.0.0.1:${amqpPort}`,
    node,
    stopApp: () => ctl("stop_app"),
    startApp: () => ctl("start_app"),
    ctl,
    dispose
  }
}

/**
 * Declares a durable queue named `prefix` and a random suffix on the broker at `url` and returns its name: a
 * queue of the caller's own on the run's shared broker (`inject("rabbitUrl")`).
 */
export const freshQueue = async (url: string, prefix: string): Promise<string> => {
  const queue = `${prefix}${randomBytes(4).toString("hex")}`
  const model = await amqpConnect(url)
  try {
    const channel = await model.createChannel()
    await channel.assertQueue(queue, { durable: true })
  } finally {
    await model.close()
  }
  return queue
}
