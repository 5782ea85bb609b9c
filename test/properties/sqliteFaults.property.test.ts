/**
 * Generated histories on the SQLite store behind `BusySqlClient`: a share of statements (and bursts that
 * outlast the store's busy retry) fail with `SQLITE_BUSY` or `SQLITE_LOCKED`. Every operation must either
 * succeed exactly as the model says (the store's busy retry absorbed the faults) or fail with a typed
 * `StoreUnavailable` having changed nothing — never a defect, never a half-applied claim, persist or
 * expire. After every step the whole table and the fence rows are read (faults off) and compared with the
 * model: statuses, owners, versions and replay counts of every record (nothing lost, conservation), and
 * the fence high-water marks (monotone). Claims are also checked for head-of-line order and for handing
 * a record to a second holder without pre-emption or stale reclaim (R-CLAIM-9).
 *
 * Time comes from a hand-driven clock whose sleeps return at once, so busy-retry back-off costs nothing
 * and the store and the model read the same instants. The seed is printed on failure; `OUTBOX_SEED`
 * replays it.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Cause from "effect/Cause"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { randomBytes } from "node:crypto"
import { makeHistoryClock } from "../support/HistoryClock.js"
import { testSeed } from "../support/Seed.js"
import * as ClaimOrder from "../../src/domain/ClaimOrder.js"
import type { LeaseTokenLike } from "../../src/domain/LeaseToken.js"
import * as SqliteDatabase from "../../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteOutboxStore from "../../src/layers/sqlite/SqliteOutboxStore.js"
import { OutboxStore } from "../../src/services/OutboxStore.js"
import * as BusySqlClient from "../support/BusySqlClient.js"
import { type ModelInput, OutboxModel, type Outcome, newRecordOf } from "./Model.js"

const PARTITIONS = 2
const OWNERS = 3
const STALE = 30_000
const START = 1_700_000_000_000

type Target = "all" | "writes" | "reads" | "early"

interface Step {
  readonly op:
    | { readonly _tag: "Persist"; readonly partition: number; readonly keys: ReadonlyArray<string | undefined> }
    | {
        readonly _tag: "Claim"
        readonly partition: number
        readonly owner: number
        readonly delta: number
        readonly limit: number
      }
    | { readonly _tag: "Complete" | "Release"; readonly pick: number; readonly wrong: boolean }
    | { readonly _tag: "Expire"; readonly partition: number; readonly offset: number }
    | { readonly _tag: "Advance"; readonly millis: number }
  /** Matching statements fail at this rate during the step. */
  readonly rate: number
  /** The first `burst` matching statements of the step fail (13 or more outlast the busy retry). */
  readonly burst: number
  readonly target: Target
}

const targets: Record<Target, (sql: string) => boolean> = {
  all: () => true,
  writes: (sql) => /^\s*(INSERT|UPDATE|DELETE)/i.test(sql),
  reads: (sql) => /^\s*(SELECT|WITH)/i.test(sql),
  // the fence statements come first in claim and expire: a fault there must roll back nothing half-done
  early: (sql) => /outbox_fence/i.test(sql)
}

const opArb: fc.Arbitrary<Step["op"]> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      _tag: fc.constant("Persist" as const),
      partition: fc.integer({ min: 0, max: PARTITIONS - 1 }),
      keys: fc.array(fc.constantFrom<string | undefined>(undefined, undefined, "A", "A", "B"), {
        minLength: 1,
        maxLength: 4
      })
    })
  },
  {
    weight: 5,
    arbitrary: fc.record({
      _tag: fc.constant("Claim" as const),
      partition: fc.integer({ min: 0, max: PARTITIONS - 1 }),
      owner: fc.integer({ min: 0, max: OWNERS - 1 }),
      delta: fc.constantFrom(-1, 0, 0, 0, 0, 1, 1),
      limit: fc.constantFrom(0, 1, 2, 3, 5, 100)
    })
  },
  {
    weight: 4,
    arbitrary: fc.record({
      _tag: fc.constantFrom("Complete" as const, "Complete" as const, "Release" as const),
      pick: fc.nat(),
      wrong: fc.integer({ min: 0, max: 7 }).map((n) => n === 0)
    })
  },
  {
    weight: 1,
    arbitrary: fc.record({
      _tag: fc.constant("Expire" as const),
      partition: fc.integer({ min: 0, max: PARTITIONS - 1 }),
      offset: fc.constantFrom(0, 1_000, 5_000)
    })
  },
  {
    weight: 1,
    arbitrary: fc.record({
      _tag: fc.constant("Advance" as const),
      millis: fc.constantFrom(1, 500, STALE - 1, STALE + 1)
    })
  }
)

const stepArb: fc.Arbitrary<Step> = fc.record({
  op: opArb,
  rate: fc.constantFrom(0, 0.1, 0.3, 0.6),
  burst: fc.constantFrom(0, 0, 0, 0, 1, 3, 13, 30),
  target: fc.constantFrom<Target>("all", "all", "writes", "reads", "early")
})

const Row = Schema.Struct({
  id: Schema.String,
  partition_key: Schema.String,
  status: Schema.String,
  claimed_by: Schema.NullOr(Schema.String),
  claim_version: Schema.Number,
  replay_count: Schema.Number
})
const decodeRows = Schema.decodeUnknownSync(Schema.Array(Row))
const FenceRow = Schema.Struct({ partition_key: Schema.String, max_version: Schema.Number })
const decodeFences = Schema.decodeUnknownSync(Schema.Array(FenceRow))

interface Stats {
  histories: number
  steps: number
  injected: number
  absorbed: number
  unavailable: number
  claimed: number
  readonly outcomes: Record<string, number>
}

class FaultMismatch extends Error {
  override readonly name = "FaultMismatch"
}

const runPrefix = randomBytes(3).toString("hex")
let counter = 0

const runHistory = (steps: ReadonlyArray<Step>, faultSeed: number, stats: Stats): Promise<void> => {
  const faults = BusySqlClient.makeFaults()
  const random = BusySqlClient.seededRandom(faultSeed)
  const time = makeHistoryClock(START)
  const layer = Layer.provideMerge(
    SqliteOutboxStore.layerWith({ staleClaimAfter: Duration.millis(STALE) }),
    Layer.provide(BusySqlClient.layer(faults, random), SqliteDatabase.layer({ filename: ":memory:" }))
  )
  const program = Effect.gen(function* () {
    const store = yield* OutboxStore
    const sql = yield* SqlClient.SqlClient
    const prefix = `f${runPrefix}-${++counter}`
    const partitions = Array.from({ length: PARTITIONS }, (_, i) => `${prefix}-p${i}`)
    const partitionOf = (i: number) => partitions[i % PARTITIONS] ?? `${prefix}-p0`
    let model = new OutboxModel(STALE)
    const holders = new Map<string, { readonly owner: string; readonly version: number; readonly at: number }>()
    const marks = new Map<string, number>()
    const log: Array<string> = []
    let nextId = 0
    let nextEnvelope = 0

    const mismatch = (message: string): never => {
      throw new FaultMismatch(`${message}\nhistory ${prefix}:\n  ${log.join("\n  ")}`)
    }

    /** The whole stored state (faults off) against the model. */
    const checkState = Effect.fnUntraced(function* (label: string) {
      const rows = decodeRows(
        yield* Effect.orDie(
          sql`SELECT id, partition_key, status, claimed_by, claim_version, replay_count FROM outbox ORDER BY id`
        )
      )
      const stored = new Map(rows.map((r) => [r.id, r]))
      const expected = model.all()
      if (rows.length !== expected.length) {
        mismatch(`${label}: ${rows.length} stored records, model holds ${expected.length} (lost or extra records)`)
      }
      for (const r of expected) {
        const row = stored.get(r.id)
        const want = `${r.status}/${Option.getOrElse(r.claimedBy, () => "-")}/v${r.claimVersion}/n${r.replayCount}`
        const got =
          row === undefined
            ? "missing"
            : `${row.status}/${row.claimed_by ?? "-"}/v${row.claim_version}/n${row.replay_count}`
        if (got !== want) mismatch(`${label}: record ${r.id} is ${got}, model ${want}`)
      }
      const fences = decodeFences(yield* Effect.orDie(sql`SELECT partition_key, max_version FROM outbox_fence`))
      for (const pk of partitions) {
        const hwm = fences.find((f) => f.partition_key === pk)?.max_version ?? 0
        if (hwm !== model.highWaterMark(pk)) mismatch(`${label}: ${pk} fence ${hwm}, model ${model.highWaterMark(pk)}`)
        if (hwm < (marks.get(pk) ?? 0)) mismatch(`${label}: ${pk} fence decreased to ${hwm}`)
        marks.set(pk, hwm)
      }
      const violation = model.conservationViolation()
      if (violation !== undefined) mismatch(`${label}: conservation: ${violation}`)
    })

    /** Runs one store operation under the step's faults; returns its exit with faults off again. */
    const faulty = <A, E>(step: Step, effect: Effect.Effect<A, E>) =>
      Effect.gen(function* () {
        faults.rate = step.rate
        faults.burst = step.burst
        faults.match = targets[step.target]
        const before = faults.busy + faults.locked
        faults.enabled = true
        const exit = yield* Effect.exit(effect)
        faults.enabled = false
        faults.burst = 0
        return { exit, injected: faults.busy + faults.locked - before }
      })

    /**
     * Judges an outcome: a defect fails the history; `StoreUnavailable` keeps the old model (nothing
     * applied, checked by `checkState`); anything else must be the model's outcome (then adopted).
     */
    const judge = <A, B>(
      label: string,
      candidate: OutboxModel,
      expected: Outcome<A>,
      result: { readonly exit: Exit.Exit<B, { readonly _tag: string }>; readonly injected: number },
      same: (expected: A, actual: B) => string | undefined
    ): B | undefined => {
      const { exit, injected } = result
      stats.injected += injected
      if (Exit.isFailure(exit)) {
        const failure = Cause.failureOption(exit.cause)
        if (Option.isNone(failure)) return mismatch(`${label}: defect or interruption ${Cause.pretty(exit.cause)}`)
        const tag = failure.value._tag
        log.push(`${label} -> ${tag} (${injected} faults)`)
        stats.outcomes[`${label.split(" ")[1]}:${tag}`] = (stats.outcomes[`${label.split(" ")[1]}:${tag}`] ?? 0) + 1
        if (tag === "StoreUnavailable") {
          if (injected === 0) mismatch(`${label}: StoreUnavailable without an injected fault`)
          stats.unavailable++
          return undefined
        }
        if (expected._tag === "Success" || expected.error !== tag) {
          return mismatch(`${label}: store failed with ${tag}, model expected ${JSON.stringify(expected)}`)
        }
        model = candidate
        return undefined
      }
      log.push(`${label} -> ok (${injected} faults)`)
      stats.outcomes[`${label.split(" ")[1]}:ok`] = (stats.outcomes[`${label.split(" ")[1]}:ok`] ?? 0) + 1
      if (injected > 0) stats.absorbed++
      if (expected._tag === "Failure") return mismatch(`${label}: store succeeded, model expected ${expected.error}`)
      const difference = same(expected.value, exit.value)
      if (difference !== undefined) mismatch(`${label}: ${difference}`)
      model = candidate
      return exit.value
    }

    for (const [index, step] of steps.entries()) {
      const now = time.now()
      const label = `#${index} ${step.op._tag.toLowerCase()} [faults ${step.target} rate ${step.rate} burst ${step.burst}]`
      const candidate = model.clone()
      const op = step.op
      switch (op._tag) {
        case "Persist": {
          const pk = partitionOf(op.partition)
          const inputs: Array<ModelInput> = op.keys.map((key) => ({
            id: `${prefix}-r${nextId++}`,
            partitionKey: pk,
            envelopeId: `e${nextEnvelope++}`,
            bindingId: "b",
            ...(key !== undefined ? { orderingKey: key } : {}),
            ...(nextEnvelope % 3 === 0 ? { expiresAtMillis: now + 2_000 } : {})
          }))
          const records = inputs.map(newRecordOf)
          const expected = candidate.persist(inputs, now)
          const result = yield* faulty(step, store.persist(records))
          judge(`${label} ${pk} ${inputs.map((i) => i.id).join(",")}`, candidate, expected, result, (e, a) =>
            e.persisted.join(",") === a.persisted.join(",") ? undefined : `persisted ${a.persisted} vs ${e.persisted}`
          )
          break
        }
        case "Claim": {
          const pk = partitionOf(op.partition)
          const token: LeaseTokenLike = {
            owner: `o${op.owner}`,
            version: Math.max(1, model.highWaterMark(pk) + op.delta)
          }
          const expected = candidate.claim(pk, token, op.limit, now)
          const result = yield* faulty(step, store.claim(pk, token, op.limit))
          const batch = judge(
            `${label} ${pk} ${token.owner}@${token.version} limit ${op.limit}`,
            candidate,
            expected,
            result,
            (e, a) => {
              const got = a.records.map((r) => r.id).join(",")
              const want = e.records.map((r) => r.id).join(",")
              return got === want && Option.isNone(a.truncated) ? undefined : `claimed [${got}], model [${want}]`
            }
          )
          if (batch !== undefined && expected._tag === "Success") {
            const blocked = ClaimOrder.headOfLineViolation(expected.value.partitionBefore, batch.records)
            if (blocked !== undefined) mismatch(`${label}: head-of-line violated by ${blocked.recordId}`)
            for (const record of batch.records) {
              const previous = holders.get(record.id)
              if (previous !== undefined && token.version <= previous.version && !(previous.at < now - STALE)) {
                mismatch(`${label}: ${record.id} handed to ${token.owner} while held by ${previous.owner}`)
              }
              holders.set(record.id, { owner: token.owner, version: token.version, at: now })
            }
            stats.claimed += batch.records.length
          }
          break
        }
        case "Complete":
        case "Release": {
          const claimed = model.all().filter((r) => r.status === "claimed")
          const target =
            claimed[op.pick % Math.max(1, claimed.length)] ?? model.all()[op.pick % Math.max(1, model.all().length)]
          if (target === undefined) break
          const token: LeaseTokenLike = {
            owner: op.wrong ? "intruder" : Option.getOrElse(target.claimedBy, () => "o0"),
            version: Math.max(1, target.claimVersion)
          }
          const ids = [target.id]
          const expected = op._tag === "Complete" ? candidate.complete(ids, token) : candidate.release(ids, token)
          const result = yield* faulty(
            step,
            op._tag === "Complete" ? store.complete(ids, token) : store.release(ids, token)
          )
          judge(`${label} ${target.id} ${token.owner}@${token.version}`, candidate, expected, result, () => undefined)
          break
        }
        case "Expire": {
          const pk = partitionOf(op.partition)
          const token: LeaseTokenLike = { owner: "sweeper", version: Math.max(1, model.highWaterMark(pk)) }
          const before = now + op.offset
          const expected = candidate.expire(before, pk, token)
          const result = yield* faulty(step, store.expire(DateTime.unsafeMake(before), pk, token))
          judge(`${label} ${pk} before t+${before - START}`, candidate, expected, result, (e, a) =>
            e === a ? undefined : `expired ${a}, model ${e}`
          )
          break
        }
        case "Advance": {
          time.advance(op.millis)
          log.push(`${label} +${op.millis} ms`)
          break
        }
      }
      yield* checkState(label)
      // a completed, released or expired record has no holder any more
      for (const id of [...holders.keys()]) if (model.get(id)?.status !== "claimed") holders.delete(id)
      stats.steps++
    }
    stats.histories++
  })
  return Effect.runPromise(program.pipe(Effect.provide(layer), Effect.withClock(time.clock), Effect.orDie))
}

describe("SQLite store under SQLITE_BUSY / SQLITE_LOCKED faults", () => {
  it("40 generated histories: typed StoreUnavailable or the model's outcome, nothing half-applied (R-CLAIM-9, R-CLAIM-10, R-CLAIM-5, R-CLAIM-2, conservation)", async () => {
    const seed = testSeed("sqlite faults")
    const stats: Stats = {
      histories: 0,
      steps: 0,
      injected: 0,
      absorbed: 0,
      unavailable: 0,
      claimed: 0,
      outcomes: {}
    }
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(stepArb, { minLength: 10, maxLength: 40 }), fc.integer(), (steps, faultSeed) =>
          runHistory(steps, faultSeed, stats)
        ),
        { numRuns: 40, seed }
      )
    } catch (error) {
      console.error(`[sqlite faults] history failed; replay with OUTBOX_SEED=${seed}`)
      throw error
    }
    console.log(`[sqlite faults] seed ${seed}: ${JSON.stringify(stats)}`)
    expect(stats.histories).toBeGreaterThanOrEqual(40)
    // the campaign must reach both ways a fault can end: absorbed by the retry, and surfaced as typed
    expect(stats.injected).toBeGreaterThan(0)
    expect(stats.absorbed).toBeGreaterThan(0)
    expect(stats.unavailable).toBeGreaterThan(0)
    expect(stats.claimed).toBeGreaterThan(0)
  }, 60_000)
})
