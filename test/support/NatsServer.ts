/**
 * A NATS server with JetStream for tests: `nats-server -js -sd <dir> -a 127.0.0.1 -p <free port>` (Debian
 * package `nats-server`). One server per test run is started by `globalSetup.ts` (`inject("natsUrl")`);
 * a test that restarts its broker starts its own with {@link startNats} and restarts it on the same port
 * and store directory. Servers are stopped by their PID.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"

/** A free TCP port on 127.0.0.1 (bound and released at once). */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

/** A running NATS server. */
export interface NatsServer {
  readonly url: string
  readonly port: number
  readonly storeDir: string
  /** Stops the server (SIGTERM, then SIGKILL after 5 s) and keeps its store directory. */
  readonly stop: () => Promise<void>
  /** Stops the server and starts it again on the same port and store directory. */
  readonly restart: () => Promise<void>
  /** Stops the server and removes its store directory. */
  readonly dispose: () => Promise<void>
}

/** Options of {@link startNats}. */
export interface NatsOptions {
  /**
   * A server configuration (nats-server's own format, e.g. `authorization { users = [...] }`), written to a
   * file in the store directory and passed with `-c`; the command-line flags (JetStream, store directory,
   * loopback address, port) still apply.
   */
  readonly config?: string | undefined
}

const launch = (port: number, storeDir: string, configFile: string | undefined): Promise<ChildProcess> =>
  new Promise((resolve, reject) => {
    const config = configFile === undefined ? [] : ["-c", configFile]
    const child = spawn("nats-server", [...config, "-js", "-sd", storeDir, "-a", "127.0.0.1", "-p", String(port)], {
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`nats-server did not become ready within 20 s:\n${output}`))
    }, 20_000)
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8")
      if (output.includes("Server is ready")) {
        clearTimeout(timer)
        resolve(child)
      }
    }
    child.stdout?.on("data", onData)
    child.stderr?.on("data", onData)
    child.once("error", (error) => {
      clearTimeout(timer)
      reject(new Error(`cannot start nats-server (apt-get install nats-server): ${error.message}`))
    })
    child.once("exit", (code) => {
      clearTimeout(timer)
      reject(new Error(`nats-server exited with ${String(code)}:\n${output}`))
    })
  })

const terminate = async (child: ChildProcess): Promise<void> => {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  child.kill("SIGTERM")
  const timer = setTimeout(() => child.kill("SIGKILL"), 5_000)
  await exited
  clearTimeout(timer)
}

/** Starts a NATS server with JetStream on a free loopback port and a fresh store directory. */
export const startNats = async (options: NatsOptions = {}): Promise<NatsServer> => {
  const port = await freePort()
  const storeDir = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-nats-"))
  const configFile = options.config === undefined ? undefined : path.join(storeDir, "server.conf")
  if (configFile !== undefined) fs.writeFileSync(configFile, options.config ?? "")
  let child = await launch(port, storeDir, configFile)
  const stop = () => terminate(child)
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    storeDir,
    stop,
    restart: async () => {
      await stop()
      child = await launch(port, storeDir, configFile)
    },
    dispose: async () => {
      await stop()
      fs.rmSync(storeDir, { recursive: true, force: true })
    }
  }
}
