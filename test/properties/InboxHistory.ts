/**
 * Generated histories of the inbox (SPEC §12) checked against a model, on any backend.
 *
 * A history is a set of unique messages of one partition (ordered ones under 1–3 ordering keys with rising
 * `seq`, plus keyless ones) and a list of delivery commands, as an at-least-once relay produces them:
 * first deliveries with per-key order held (a failed head stays the head: the relay releases it and stops
 * its key, SPEC §6), keyless ones in any order, redeliveries of anything delivered before (a relay crash
 * after a send, a redrive or replay of an old record: same id, same `seq`) at any later point, two copies
 * of one message at once, handler failures (retryable) and crashes between the handler's write and the
 * commit (a defect or an interruption). Every outcome must be the model's (`Processed`, `Duplicate`,
 * `Stale`, or the failure), and at the end, after the relay drained what was left, the consumer's state
 * must equal applying each unique message once: per key, every `seq` exactly once.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import type * as Layer from "effect/Layer"
import { randomUUID } from "node:crypto"
import type { InboxMessage } from "../../src/domain/InboxMessage.js"
import * as Inbox from "../../src/programs/Inbox.js"
import type { InboxStore } from "../../src/services/InboxStore.js"
import { TestApp } from "../contract/InboxStoreContract.js"

/** One message of a history. `key` is `""` for keyless ones. */
interface Message {
  readonly id: string
  readonly key: string
  readonly seq: number
}

type Fault = "none" | "fail" | "permanent" | "die" | "interrupt"

type Command =
  | { readonly _tag: "Next"; readonly pick: number; readonly fault: Fault }
  | { readonly _tag: "Redeliver"; readonly pick: number }
  | { readonly _tag: "Twice"; readonly pick: number }
  | { readonly _tag: "Redrive"; readonly pick: number; readonly fresh: boolean }

/** What the histories exercised, summed over a run. */
export interface InboxHistoryStats {
  histories: number
  processed: number
  duplicates: number
  stale: number
  failures: number
  crashes: number
  concurrent: number
  deadLettered: number
  redriven: number
}

const emptyStats = (): InboxHistoryStats => ({
  histories: 0,
  processed: 0,
  duplicates: 0,
  stale: 0,
  failures: 0,
  crashes: 0,
  concurrent: 0,
  deadLettered: 0,
  redriven: 0
})

const messagesArb = FastCheck.array(FastCheck.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 16 }).map(
  (keys) => {
    // persist order: seq rises through the partition, with gaps
    let seq = 0
    return keys.map((k, i): Message => {
      seq += 1 + (i % 3)
      return { id: `m${i}`, key: k === 0 ? "" : `k${k}`, seq }
    })
  }
)

const commandArb: FastCheck.Arbitrary<Command> = FastCheck.oneof(
  {
    weight: 6,
    arbitrary: FastCheck.record({
      _tag: FastCheck.constant("Next" as const),
      pick: FastCheck.nat(50),
      fault: FastCheck.constantFrom<Fault>("none", "none", "none", "none", "fail", "permanent", "die", "interrupt")
    })
  },
  {
    weight: 3,
    arbitrary: FastCheck.record({ _tag: FastCheck.constant("Redeliver" as const), pick: FastCheck.nat(50) })
  },
  { weight: 1, arbitrary: FastCheck.record({ _tag: FastCheck.constant("Twice" as const), pick: FastCheck.nat(50) }) },
  {
    weight: 2,
    arbitrary: FastCheck.record({
      _tag: FastCheck.constant("Redrive" as const),
      pick: FastCheck.nat(50),
      fresh: FastCheck.boolean()
    })
  }
)

/** Options of a run. */
export interface InboxHistoryOptions {
  readonly runs: number
  readonly seed?: number
  readonly maxSteps?: number
  /** The handler's writes roll back with the unit (false on memory: faults then strike before the write). */
  readonly transactionalWrites: boolean
}

const toInbox = (m: Message): InboxMessage =>
  m.key === ""
    ? { messageId: m.id, partitionKey: "p", seq: m.seq }
    : { messageId: m.id, partitionKey: "p", orderingKey: m.key, seq: m.seq }

/** Runs one history against the store and app in context; fails (throws) on the first disagreement. */
const runHistory = (
  messages: ReadonlyArray<Message>,
  commands: ReadonlyArray<Command>,
  options: InboxHistoryOptions,
  stats: InboxHistoryStats
): Effect.Effect<void, unknown, InboxStore | TestApp> =>
  Effect.gen(function* () {
    const app = yield* TestApp
    const consumer = `history-${randomUUID()}`
    const keys = [...new Set(messages.map((m) => m.key))]
    const appKey = (key: string) => `${consumer}/${key === "" ? "-" : key}`
    // model
    const processed = new Set<string>()
    const marks = new Map<string, number>()
    const applied = new Map<string, Array<number>>()
    const delivered: Array<Message> = []
    /** Messages the relay dead-lettered after a permanent failure (their key moved on). */
    const deadLetters: Array<Message> = []
    const deadLetteredIds = new Set<string>()
    let redrives = 0
    const pendingKeyless = messages.filter((m) => m.key === "")
    const heads = new Map(keys.filter((k) => k !== "").map((k) => [k, messages.filter((m) => m.key === k)]))

    const candidates = (): Array<Message> => {
      const out: Array<Message> = [...pendingKeyless]
      for (const queue of heads.values()) if (queue[0] !== undefined) out.push(queue[0])
      return out
    }

    const handler = (m: Message, fault: Fault) => {
      const write = app.write(appKey(m.key), String(m.seq).padStart(8, "0"))
      const failure: Effect.Effect<void, unknown> =
        fault === "fail"
          ? Effect.fail("handler failed")
          : fault === "permanent"
            ? Inbox.permanent(Effect.fail("handler refuses"))
            : fault === "die"
              ? Effect.die("crash before commit")
              : fault === "interrupt"
                ? Effect.interrupt
                : Effect.void
      return options.transactionalWrites ? Effect.zipRight(write, failure) : Effect.zipRight(failure, write)
    }

    /** The model's outcome of delivering `m` without a fault. */
    const expected = (m: Message): "Processed" | "Duplicate" | "Stale" => {
      if (processed.has(m.id)) return "Duplicate"
      if (m.key !== "" && (marks.get(m.key) ?? -1) >= m.seq) return "Stale"
      return "Processed"
    }

    /** The relay is done with `m`: it leaves the first-delivery queues. */
    const settle = (m: Message) => {
      const keyless = pendingKeyless.indexOf(m)
      if (keyless >= 0) pendingKeyless.splice(keyless, 1)
      const queue = heads.get(m.key)
      if (queue !== undefined && queue[0] === m) queue.shift()
    }

    const apply = (m: Message) => {
      processed.add(m.id)
      if (m.key !== "") marks.set(m.key, m.seq)
      applied.set(m.key, [...(applied.get(m.key) ?? []), m.seq])
      delivered.push(m)
      settle(m)
    }

    const deliver = (m: Message, fault: Fault) =>
      Effect.gen(function* () {
        const want = expected(m)
        const exit = yield* Effect.exit(Inbox.process(consumer, toInbox(m), handler(m, fault)))
        if (want !== "Processed" || fault === "none") {
          if (!Exit.isSuccess(exit)) throw new Error(`delivery of ${m.id} failed, model says ${want}: ${String(exit)}`)
          if (exit.value._tag !== want) throw new Error(`delivery of ${m.id}: ${exit.value._tag}, model says ${want}`)
          if (want === "Processed") {
            stats.processed++
            apply(m)
          } else if (want === "Duplicate") stats.duplicates++
          else stats.stale++
          return
        }
        if (Exit.isSuccess(exit)) throw new Error(`delivery of ${m.id} with fault ${fault} succeeded`)
        const disposition = Inbox.disposition(exit)
        if (fault === "fail") {
          stats.failures++
          if (disposition._tag !== "Retry") throw new Error(`a failed handler of ${m.id} is not retryable`)
        } else if (fault === "permanent") {
          if (disposition._tag !== "Reject") throw new Error(`a permanent failure of ${m.id} is not rejected`)
          stats.deadLettered++
          deadLetters.push(m)
          deadLetteredIds.add(m.id)
          settle(m)
        } else {
          stats.crashes++
          if (disposition._tag !== "Retry") throw new Error(`a crash in the handler of ${m.id} is not retried`)
        }
      })

    for (const command of commands) {
      if (command._tag === "Next") {
        const all = candidates()
        const m = all[command.pick % Math.max(all.length, 1)]
        if (m !== undefined) yield* deliver(m, command.fault)
      } else if (command._tag === "Redeliver") {
        const m = delivered[command.pick % Math.max(delivered.length, 1)]
        if (m !== undefined) yield* deliver(m, "none")
      } else if (command._tag === "Redrive") {
        // a dead letter redriven later: the original record again, or a copy under a new id with its seq
        const dead = deadLetters[command.pick % Math.max(deadLetters.length, 1)]
        if (dead === undefined) continue
        deadLetters.splice(deadLetters.indexOf(dead), 1)
        stats.redriven++
        yield* deliver(command.fresh ? { ...dead, id: `${dead.id}-r${++redrives}` } : dead, "none")
      } else {
        const all = candidates()
        const m = all[command.pick % Math.max(all.length, 1)]
        if (m === undefined) continue
        stats.concurrent++
        const want = expected(m)
        const exits = yield* Effect.all(
          [0, 1].map(() => Effect.exit(Inbox.process(consumer, toInbox(m), handler(m, "none")))),
          { concurrency: 2 }
        )
        const tags = exits.map((e) => (Exit.isSuccess(e) ? e.value._tag : Inbox.disposition(e)._tag))
        const wins = tags.filter((t) => t === "Processed").length
        if (want === "Processed") {
          if (wins !== 1) throw new Error(`two concurrent deliveries of ${m.id}: ${tags.join(", ")}`)
          for (const t of tags) if (t !== "Processed" && t !== "Duplicate" && t !== "Retry") throw new Error(t)
          stats.processed++
          apply(m)
        } else if (tags.some((t) => t !== want)) throw new Error(`concurrent ${m.id}: ${tags.join(", ")}, want ${want}`)
      }
    }
    const isDeadLetter = (m: Message) => deadLetteredIds.has(m.id)
    // the relay drains what is left, in order
    for (let next = candidates()[0]; next !== undefined; next = candidates()[0]) yield* deliver(next, "none")

    // final state: each unique message applied once, per key in seq order
    for (const key of keys) {
      // every message applied once, except dead letters never redriven or found stale when redriven
      const want = (applied.get(key) ?? []).map((seq) => String(seq).padStart(8, "0"))
      const lost = messages.filter((m) => m.key === key && !processed.has(m.id) && !isDeadLetter(m))
      if (lost.length > 0) throw new Error(`key ${key || "(none)"}: never applied ${lost.map((m) => m.id).join(",")}`)
      const got = yield* app.read(appKey(key))
      if (JSON.stringify([...got]) !== JSON.stringify([...want].sort())) {
        throw new Error(`key ${key || "(none)"}: applied ${got.join(",")}, want ${want.join(",")}`)
      }
      const order = applied.get(key) ?? []
      for (let i = 1; i < order.length && key !== ""; i++) {
        if ((order[i] ?? 0) <= (order[i - 1] ?? 0)) throw new Error(`key ${key} applied out of seq order`)
      }
    }
    stats.histories++
  })

/**
 * Checks `runs` generated histories against a fresh layer each; resolves with the stats, rejects with the
 * seed to replay on the first disagreement.
 */
export const checkInboxHistories = async (
  name: string,
  makeLayer: () => Layer.Layer<InboxStore | TestApp, unknown>,
  options: InboxHistoryOptions
): Promise<{ readonly seed: number; readonly stats: InboxHistoryStats }> => {
  const stats = emptyStats()
  const fromEnv = Number(process.env["OUTBOX_SEED"])
  const seed = Number.isSafeInteger(fromEnv) ? fromEnv : (options.seed ?? Math.floor(Math.random() * 2 ** 31))
  const property = FastCheck.asyncProperty(
    messagesArb,
    FastCheck.array(commandArb, { minLength: 5, maxLength: options.maxSteps ?? 30 }),
    (messages, commands) =>
      Effect.runPromise(Effect.provide(runHistory(messages, commands, options, stats), makeLayer()))
  )
  try {
    await FastCheck.assert(property, { numRuns: options.runs, seed })
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error)
    throw new Error(`[${name}] generated inbox history failed (replay with OUTBOX_SEED=${seed})\n${message}`)
  }
  return { seed, stats }
}
