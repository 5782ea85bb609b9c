/**
 * A relay process killed between the broker's acknowledgement of a record and the outbox complete, and
 * the relay process that takes its partitions over (see `brokerRelayWorker.ts`): both drain one SQLite
 * file through a real broker sink.
 */
import * as Effect from "effect/Effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type { NewOutboxRecord } from "../../src/domain/OutboxRecord.js"
import * as SqliteDatabase from "../../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteOutboxStore from "../../src/layers/sqlite/SqliteOutboxStore.js"
import { OutboxStore } from "../../src/services/OutboxStore.js"

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")
const workerScript = path.join(projectRoot, "test", "support", "brokerRelayWorker.ts")

/** What the killed relay and its successor did. */
export interface TakeOver {
  /** The ids the killed relay had acknowledged by the broker, in order; the last one it never completed. */
  readonly killedSent: ReadonlyArray<string>
  /** The ids the successor had acknowledged. */
  readonly successorSent: ReadonlyArray<string>
  /** Records left claimed in the outbox right after the kill. */
  readonly claimedAtKill: number
  /** Records left pending or claimed after the successor finished. */
  readonly left: number
}

/** Runs one relay process to its end; resolves with its exit code, or the signal that killed it. */
const runWorker = (
  args: ReadonlyArray<string>
): Promise<{ readonly code: number | null; readonly signal: string | null }> =>
  new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", workerScript, ...args], {
      cwd: projectRoot,
      stdio: ["ignore", "ignore", "pipe"]
    })
    let stderr = ""
    child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    // a wedged worker must not outlive the test
    const timer = setTimeout(() => child.kill("SIGKILL"), 90_000)
    child.on("exit", (code, signal) => {
      clearTimeout(timer)
      if (stderr.length > 0) process.stderr.write(stderr)
      resolve({ code, signal })
    })
  })

const sentIds = (file: string): ReadonlyArray<string> =>
  fs.existsSync(file)
    ? fs
        .readFileSync(file, "utf8")
        .split("\n")
        .filter((line) => line.length > 0)
    : []

/** Runs an effect on the outbox stores of `dbFile` (the connection is closed afterwards). */
const onOutbox = <A, E>(dbFile: string, use: Effect.Effect<A, E, OutboxStore>): Promise<A> =>
  Effect.runPromise(
    use.pipe(
      Effect.provide(SqliteOutboxStore.layer),
      Effect.provide(SqliteDatabase.layer({ filename: dbFile })),
      Effect.orDie
    )
  )

const countOf = (partitions: ReadonlyArray<string>, claimedOnly: boolean) =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    let n = 0
    for (const partition of partitions) {
      n += (yield* store.countClaimed(partition)) + (claimedOnly ? 0 : yield* store.countPending(partition))
    }
    return n
  })

/**
 * Persists `records` in a fresh SQLite file, runs a relay process that dies (`SIGKILL`) right after the
 * broker acknowledged its `killAfter`-th send, then a second relay process (another owner, after the
 * first one's 1 s lease expired) until the outbox is drained. `target` is the NATS subject template or the
 * RabbitMQ routing key. Fails unless the first process was killed and the second exited cleanly.
 */
export const killedRelayTakenOver = (options: {
  readonly broker: "nats" | "rabbitmq"
  readonly url: string
  readonly target: string
  readonly records: ReadonlyArray<NewOutboxRecord>
  readonly killAfter: number
}): Effect.Effect<TakeOver> =>
  Effect.promise(async () => {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-broker-crash-"))
    try {
      const dbFile = path.join(directory, "outbox.db")
      const partitions = Array.from(new Set(options.records.map((r) => r.partitionKey)))
      await onOutbox(
        dbFile,
        Effect.flatMap(OutboxStore, (store) => store.persist(options.records))
      )
      const args = (owner: string, killAfter: number) => [
        dbFile,
        path.join(directory, `${owner}.sent`),
        owner,
        options.broker,
        options.url,
        options.target,
        String(killAfter),
        ...partitions
      ]
      const killed = await runWorker(args("killed", options.killAfter))
      if (killed.signal !== "SIGKILL") throw new Error(`the first relay was not killed (exit ${String(killed.code)})`)
      const claimedAtKill = await onOutbox(dbFile, countOf(partitions, true))
      const successor = await runWorker(args("successor", 0))
      if (successor.code !== 0) throw new Error(`the successor relay failed (exit ${String(successor.code)})`)
      return {
        killedSent: sentIds(path.join(directory, "killed.sent")),
        successorSent: sentIds(path.join(directory, "successor.sent")),
        claimedAtKill,
        left: await onOutbox(dbFile, countOf(partitions, false))
      }
    } finally {
      fs.rmSync(directory, { recursive: true, force: true })
    }
  })
