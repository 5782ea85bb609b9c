/**
 * Generated-history tests of an `OutboxStore` against the pure model in `./Model.ts`.
 *
 * fast-check (through `FastCheck` from `effect`) generates command sequences: persist batches with
 * random ordering keys (from a small set, plus keyless and the empty key), colliding `createdAt`,
 * repeated identities and reused ids, occasional invalid records; claims by several owners with rising,
 * equal and stale versions and random limits (including 0 and negative); completes and releases by the
 * right and by wrong tokens (single ids, and several ids that all match); expiry sweeps (some aimed at
 * a record's expiry ±1 ms); persists that replace terminal holders (dead-letter redrive); optionally
 * pairs of concurrent claims, which must match one of the two serial orders; and clock advances around
 * the stale-reclaim threshold. Each history runs on a fresh layer, with fresh partition keys, under a
 * `TestClock` (one per run, shared by its histories), so clock jumps are deterministic.
 *
 * After every step: the outcome (value or error tag) equals the model's — claim results are the same
 * ids in the same order with the same claim facts; and the invariants hold — no record handed to a
 * second holder except by pre-emption or stale reclaim (R-CLAIM-9), head-of-line never violated
 * (`ClaimOrder.headOfLineViolation`), the fence high-water mark never decreases, pending and claimed
 * counts and the pending preview equal the model's, and conservation (pending + claimed + terminal
 * records equal the records persisted).
 *
 * The seed is printed on failure; `OUTBOX_SEED` replays it.
 */
import { randomBytes } from "node:crypto"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { FastCheck as fc } from "effect"
import type * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import * as TestContext from "effect/TestContext"
import * as ClaimOrder from "../../src/domain/ClaimOrder.js"
import type { LeaseTokenLike } from "../../src/domain/LeaseToken.js"
import { NewOutboxRecord, type OutboxRecord } from "../../src/domain/OutboxRecord.js"
import {
  type ClaimBatch,
  normaliseLimit,
  OutboxStore,
  type OutboxStoreService
} from "../../src/services/OutboxStore.js"
import type { ContractLayerOptions } from "../contract/OutboxStoreContract.js"
import { type ModelClaim, type ModelInput, type ModelRecord, OutboxModel, type Outcome } from "./Model.js"
import { seedFromEnvironment, testSeed } from "../support/Seed.js"

// vitest refuses to be imported outside its runner; the soak CLI imports this module without it
const vitest = process.env["VITEST"] !== undefined ? await import("@effect/vitest") : undefined

/** Options of a generated-history run. */
export interface HistoryOptions {
  /** Number of histories to generate. */
  readonly runs: number
  /** fast-check seed (the `OUTBOX_SEED` environment variable overrides it). */
  readonly seed?: number
  /**
   * Stale-reclaim threshold given to the layer and the model (R-CLAIM-6); none when absent. A backend with
   * a default threshold (DynamoDB: 30 s) must be given it here, or the model will not expect reclaims.
   */
  readonly staleClaimAfterMillis?: number
  /** Maximum commands per history (default 40). */
  readonly maxSteps?: number
  /** Compare `firstAttemptedAt` of claimed records (default true). */
  readonly firstAttempt?: boolean
  /**
   * Also run pairs of concurrent claims and require the outcome of one of the two serial orders (default
   * false: only for backends whose claim is atomic as a whole, such as memory and SQLite).
   */
  readonly concurrentClaims?: boolean
}

/**
 * What the generated histories exercised (so a generator change that stops reaching a case shows).
 */
export interface HistoryStats {
  histories: number
  steps: number
  /** Outcomes by operation and result, e.g. `claim:ok`, `claim:StaleFencingToken`. */
  readonly outcomes: Record<string, number>
  /** Records handed out by claims. */
  claimedRecords: number
  /** Records handed out again through a higher version. */
  preemptions: number
  /** Records handed out again at the same or a lower version because their claim went stale. */
  staleReclaims: number
  /** Claims whose result head-of-line changed (differs from the oldest N claimable records). */
  headOfLineShaped: number
  /** Records skipped by persist as existing identities. */
  skippedDuplicates: number
  /** Terminal records replaced by a `replaceTerminal` persist. */
  replacedTerminal: number
}

/** Fresh, zeroed statistics. */
export const emptyStats = (): HistoryStats => ({
  histories: 0,
  steps: 0,
  outcomes: {},
  claimedRecords: 0,
  preemptions: 0,
  staleReclaims: 0,
  headOfLineShaped: 0,
  skippedDuplicates: 0,
  replacedTerminal: 0
})

// ---------------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------------

interface GenRecord {
  readonly env: number
  readonly binding: string
  readonly key: string | undefined
  readonly createdAtOffset: number | undefined
  readonly expiresOffset: number | undefined
  readonly idMode: "fresh" | "holder" | "other"
  readonly pick: number
  readonly invalid: boolean
}

interface TokenSpec {
  /** Owner index. */
  readonly owner: number
  /** Version relative to the partition's current high-water mark (at least 1); may end up at 0 or below. */
  readonly delta: number
  /** Use an invalid token instead (empty owner, or version 0). */
  readonly invalid: boolean
}

type Command =
  | {
      readonly _tag: "Persist"
      readonly partition: number
      readonly records: ReadonlyArray<GenRecord>
      /** persist as a dead-letter redrive does: terminal holders of an identity are replaced */
      readonly replaceTerminal: boolean
    }
  | { readonly _tag: "Claim"; readonly partition: number; readonly token: TokenSpec; readonly limit: number }
  | {
      readonly _tag: "ClaimPair"
      readonly partition: number
      readonly first: TokenSpec
      readonly firstLimit: number
      readonly second: TokenSpec
      readonly secondLimit: number
    }
  | {
      readonly _tag: "Complete" | "Release"
      readonly pick: number
      readonly mode: "holder" | "random" | "unknown"
      readonly many: boolean
      readonly partition: number
      readonly token: TokenSpec
    }
  | {
      readonly _tag: "Expire"
      readonly partition: number
      /** `before` relative to now, unless aimed at a record's expiry */
      readonly offset: number
      /** aim `before` at the expiry of a record of the partition, shifted by -1, 0 or +1 ms (boundaries) */
      readonly aim: { readonly pick: number; readonly shift: number } | undefined
      readonly token: TokenSpec
    }
  | { readonly _tag: "Advance"; readonly step: "tiny" | "small" | "medium" | "belowStale" | "atStale" | "pastStale" }

const PARTITIONS = 2
const OWNERS = 3

const rare = (oneIn: number) => fc.integer({ min: 0, max: oneIn - 1 }).map((n) => n === 0)

const tokenArb: fc.Arbitrary<TokenSpec> = fc.record({
  owner: fc.integer({ min: 0, max: OWNERS - 1 }),
  delta: fc.constantFrom(-2, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 2),
  invalid: rare(25)
})

const recordArb: fc.Arbitrary<GenRecord> = fc.record({
  env: fc.integer({ min: 0, max: 11 }),
  binding: fc.constantFrom("b0", "b0", "b1"),
  key: fc.constantFrom<string | undefined>(undefined, undefined, undefined, "", "A", "A", "B", "C"),
  createdAtOffset: fc.constantFrom<number | undefined>(undefined, undefined, undefined, 0, -1_000, -2_000, 700),
  expiresOffset: fc.constantFrom<number | undefined>(undefined, undefined, 500, 2_000, 40_000),
  idMode: fc.oneof(
    { weight: 40, arbitrary: fc.constant<GenRecord["idMode"]>("fresh") },
    { weight: 4, arbitrary: fc.constant<GenRecord["idMode"]>("holder") },
    { weight: 1, arbitrary: fc.constant<GenRecord["idMode"]>("other") }
  ),
  pick: fc.nat(),
  invalid: rare(80)
})

const limitArb = fc.constantFrom(-1, 0, 1, 1, 2, 2, 3, 5, 100)

const claimPairArb: fc.Arbitrary<Command> = fc.record({
  _tag: fc.constant("ClaimPair" as const),
  partition: fc.integer({ min: 0, max: PARTITIONS - 1 }),
  first: tokenArb,
  firstLimit: limitArb,
  second: tokenArb,
  secondLimit: limitArb
})

const commandArb = (concurrentClaims: boolean): fc.Arbitrary<Command> =>
  concurrentClaims
    ? fc.oneof({ weight: 15, arbitrary: serialCommandArb }, { weight: 2, arbitrary: claimPairArb })
    : serialCommandArb

const serialCommandArb: fc.Arbitrary<Command> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      _tag: fc.constant("Persist" as const),
      partition: fc.integer({ min: 0, max: PARTITIONS - 1 }),
      records: fc.array(recordArb, { minLength: 0, maxLength: 5 }),
      replaceTerminal: rare(3)
    })
  },
  {
    weight: 5,
    arbitrary: fc.record({
      _tag: fc.constant("Claim" as const),
      partition: fc.integer({ min: 0, max: PARTITIONS - 1 }),
      token: tokenArb,
      limit: limitArb
    })
  },
  {
    weight: 4,
    arbitrary: fc.record({
      _tag: fc.constantFrom("Complete" as const, "Complete" as const, "Release" as const),
      pick: fc.nat(),
      mode: fc.constantFrom<"holder" | "random" | "unknown">(
        "holder",
        "holder",
        "holder",
        "holder",
        "random",
        "unknown"
      ),
      many: rare(4),
      partition: fc.integer({ min: 0, max: PARTITIONS - 1 }),
      token: tokenArb
    })
  },
  {
    weight: 1,
    arbitrary: fc.record({
      _tag: fc.constant("Expire" as const),
      partition: fc.integer({ min: 0, max: PARTITIONS - 1 }),
      offset: fc.constantFrom(-1_000, 0, 1, 1_000, 3_000, 50_000),
      aim: fc.option(fc.record({ pick: fc.nat(), shift: fc.constantFrom(-1, 0, 1) }), { nil: undefined }),
      token: tokenArb
    })
  },
  {
    weight: 1,
    arbitrary: fc.record({
      _tag: fc.constant("Advance" as const),
      step: fc.constantFrom<"tiny" | "small" | "medium" | "belowStale" | "atStale" | "pastStale">(
        "tiny",
        "small",
        "medium",
        "belowStale",
        "atStale",
        "pastStale",
        "pastStale"
      )
    })
  }
)

// ---------------------------------------------------------------------------------------------------
// Running one history
// ---------------------------------------------------------------------------------------------------

const START = 1_700_000_000_000
/** Retention defaults to 1 hour; histories stay well inside it so no terminal record is evicted. */
const MAX_CLOCK_ADVANCE = 50 * 60 * 1000
const DEFAULT_STALE = 30_000

class HistoryMismatch extends Error {
  override readonly name = "HistoryMismatch"
}

const runPrefix = randomBytes(4).toString("hex")
let historyCounter = 0

interface Holder {
  readonly owner: string
  readonly version: number
  readonly claimedAtMillis: number
}

const millisOrUndefined = (value: Option.Option<DateTime.Utc>): number | undefined =>
  Option.getOrUndefined(Option.map(value, DateTime.toEpochMillis))

const describeOutcome = <A>(outcome: Outcome<A>): string =>
  outcome._tag === "Success" ? `ok ${JSON.stringify(outcome.value)}` : `${outcome.error} (${outcome.reason})`

const describeActual = <A>(actual: Either.Either<A, { readonly _tag: string }>): string => {
  if (Either.isLeft(actual)) return actual.left._tag
  const value: unknown = actual.right
  if (typeof value === "object" && value !== null && "records" in value && Array.isArray(value.records)) {
    // a claim batch: its ids are enough
    const records: ReadonlyArray<unknown> = value.records
    const ids = records.map((r) => (typeof r === "object" && r !== null && "id" in r ? String(r.id) : "?"))
    return `ok [${ids.join(",")}]`
  }
  return `ok ${JSON.stringify(value)}`
}

const runHistory = (
  commands: ReadonlyArray<Command>,
  options: HistoryOptions,
  stats: HistoryStats
): Effect.Effect<void, never, OutboxStore> =>
  Effect.gen(function* () {
    const store: OutboxStoreService = yield* OutboxStore
    const origin = yield* Clock.currentTimeMillis
    const prefix = `h${runPrefix}-${++historyCounter}`
    const partitions = Array.from({ length: PARTITIONS }, (_, i) => `${prefix}-p${i}`)
    let model = new OutboxModel(options.staleClaimAfterMillis)
    const compareFirstAttempt = options.firstAttempt ?? true
    const holders = new Map<string, Holder>()
    const highWaterMarks = new Map<string, number>()
    const log: Array<string> = []
    let nextId = 0
    let storePersisted = 0
    let storeTerminal = 0
    let advanced = 0

    const mismatch = (message: string): never => {
      throw new HistoryMismatch(`${message}\nhistory ${prefix}:\n  ${log.join("\n  ")}`)
    }
    const partitionOf = (index: number): string => partitions[index % PARTITIONS] ?? `${prefix}-p0`
    const tokenFor = (spec: TokenSpec, partitionKey: string): LeaseTokenLike => {
      const version = Math.max(1, model.highWaterMark(partitionKey)) + spec.delta
      if (spec.invalid) return spec.delta % 2 === 0 ? { owner: "", version } : { owner: `o${spec.owner}`, version: 0 }
      return { owner: `o${spec.owner}`, version }
    }
    const sameTag = <A, B>(
      step: string,
      expected: Outcome<A>,
      actual: Either.Either<B, { readonly _tag: string }>
    ): actual is Either.Right<never, B> => {
      log.push(`${step} -> ${describeActual(actual)}`)
      const outcome = `${step.split(" ")[2] ?? "?"}:${Either.isRight(actual) ? "ok" : actual.left._tag}`
      stats.outcomes[outcome] = (stats.outcomes[outcome] ?? 0) + 1
      if (expected._tag === "Failure") {
        if (Either.isRight(actual) || actual.left._tag !== expected.error) {
          mismatch(`${step}: expected ${describeOutcome(expected)}, store gave ${describeActual(actual)}`)
        }
        return false
      }
      if (Either.isLeft(actual)) {
        mismatch(`${step}: expected ${describeOutcome(expected)}, store failed with ${actual.left._tag}`)
      }
      return true
    }

    const compareClaimed = (step: string, actual: OutboxRecord, expected: ModelRecord | undefined): void => {
      if (expected === undefined || actual.id !== expected.id) {
        return mismatch(`${step}: store returned ${actual.id}, model ${expected?.id}`)
      }
      const facts = (r: {
        readonly status: string
        readonly claimVersion: number
        readonly replayCount: number
        readonly claimedBy: Option.Option<string>
        readonly claimedAt: Option.Option<DateTime.Utc>
        readonly firstAttemptedAt: Option.Option<DateTime.Utc>
        readonly createdAt: DateTime.Utc
        readonly orderingKey: Option.Option<string>
        readonly expiresAt: Option.Option<DateTime.Utc>
        readonly partitionKey: string
        readonly envelopeId: string
        readonly bindingId: string
      }) => ({
        status: r.status,
        claimVersion: r.claimVersion,
        replayCount: r.replayCount,
        claimedBy: Option.getOrUndefined(r.claimedBy),
        claimedAt: millisOrUndefined(r.claimedAt),
        firstAttemptedAt: compareFirstAttempt ? millisOrUndefined(r.firstAttemptedAt) : undefined,
        createdAt: DateTime.toEpochMillis(r.createdAt),
        orderingKey: Option.getOrUndefined(r.orderingKey),
        expiresAt: millisOrUndefined(r.expiresAt),
        partitionKey: r.partitionKey,
        envelopeId: r.envelopeId,
        bindingId: r.bindingId
      })
      const a = JSON.stringify(facts(actual))
      const e = JSON.stringify(facts(expected))
      if (a !== e) mismatch(`${step}: record ${actual.id} is ${a}, model says ${e}`)
    }

    /** True when a store outcome has the model's tag and, for a claim, the same ids in the same order. */
    const agrees = (
      expected: Outcome<ModelClaim>,
      actual: Either.Either<ClaimBatch, { readonly _tag: string }>
    ): boolean =>
      expected._tag === "Failure"
        ? Either.isLeft(actual) && actual.left._tag === expected.error
        : Either.isRight(actual) &&
          actual.right.records.map((r) => r.id).join(",") === expected.value.records.map((r) => r.id).join(",")

    /** Checks a successful claim against the model's and the invariants; records the new holders. */
    const verifyClaim = (
      step: string,
      token: LeaseTokenLike,
      limit: number,
      now: number,
      expected: ModelClaim,
      batch: ClaimBatch
    ): void => {
      if (Option.isSome(batch.truncated)) mismatch(`${step}: unexpected truncated batch`)
      const actualIds = batch.records.map((r) => r.id)
      const expectedIds = expected.records.map((r) => r.id)
      if (actualIds.join(",") !== expectedIds.join(",")) {
        mismatch(`${step}: store claimed [${actualIds.join(",")}], model [${expectedIds.join(",")}]`)
      }
      batch.records.forEach((r, i) => compareClaimed(step, r, expected.records[i]))
      const blocked = ClaimOrder.headOfLineViolation(expected.partitionBefore, batch.records)
      if (blocked !== undefined) {
        mismatch(`${step}: head-of-line violated: ${blocked.recordId} returned before ${blocked.blockedBy}`)
      }
      stats.claimedRecords += batch.records.length
      const rule = { version: token.version, nowMillis: now, staleClaimAfterMillis: options.staleClaimAfterMillis }
      const oldestClaimable = [...expected.partitionBefore]
        .filter((r) => ClaimOrder.isClaimable(r, rule))
        .sort(ClaimOrder.compareAge)
        .slice(0, normaliseLimit(limit))
        .map((r) => r.id)
      if (oldestClaimable.join(",") !== expectedIds.join(",")) stats.headOfLineShaped++
      for (const record of batch.records) {
        const previous = holders.get(record.id)
        if (previous !== undefined) {
          const stale = options.staleClaimAfterMillis
          const preempted = token.version > previous.version
          const reclaimed = stale !== undefined && previous.claimedAtMillis < now - stale
          if (preempted) stats.preemptions++
          else if (reclaimed) stats.staleReclaims++
          else {
            mismatch(
              `${step}: ${record.id} handed to ${token.owner}@${token.version} while held by ${previous.owner}@${previous.version}`
            )
          }
        }
        holders.set(record.id, { owner: token.owner, version: token.version, claimedAtMillis: now })
      }
    }

    /** Counts of every partition; the pending preview of the partitions the step touched. */
    const checkState = Effect.fnUntraced(function* (step: string, touched: ReadonlySet<string>) {
      let live = 0
      for (const pk of partitions) {
        const pending = yield* Effect.orDie(store.countPending(pk))
        const claimed = yield* Effect.orDie(store.countClaimed(pk))
        const expectedPending = model.count(pk, "pending")
        const expectedClaimed = model.count(pk, "claimed")
        if (pending !== expectedPending || claimed !== expectedClaimed) {
          mismatch(
            `${step}: ${pk} counts pending=${pending} claimed=${claimed}, model ${expectedPending}/${expectedClaimed}`
          )
        }
        live += pending + claimed
        const hwm = model.highWaterMark(pk)
        if (hwm < (highWaterMarks.get(pk) ?? 0)) mismatch(`${step}: ${pk} high-water mark decreased to ${hwm}`)
        highWaterMarks.set(pk, hwm)
        if (!touched.has(pk)) continue
        const preview = yield* Effect.orDie(store.queryPending(pk, 10_000))
        const shown = preview.map((r) => `${r.id}:${r.status}:v${r.claimVersion}:n${r.replayCount}`).join(",")
        const modelled = model
          .pending(pk)
          .map((r) => `${r.id}:${r.status}:v${r.claimVersion}:n${r.replayCount}`)
          .join(",")
        if (shown !== modelled) mismatch(`${step}: ${pk} pending preview [${shown}], model [${modelled}]`)
      }
      // conservation, from the store's own answers: live + terminal = persisted
      if (live + storeTerminal !== storePersisted) {
        mismatch(`${step}: ${live} live + ${storeTerminal} terminal records but ${storePersisted} persisted`)
      }
      const violation = model.conservationViolation()
      if (violation !== undefined) mismatch(`${step}: model conservation: ${violation}`)
    })

    for (const [index, command] of commands.entries()) {
      const touched = new Set<string>()
      const now = yield* Clock.currentTimeMillis
      const label = `#${index} t+${now - origin}`
      switch (command._tag) {
        case "Persist": {
          const pk = partitionOf(command.partition)
          touched.add(pk)
          const inputs: Array<ModelInput> = []
          const batch: Array<NewOutboxRecord> = []
          const known = model.all()
          for (const gen of command.records) {
            const envelopeId = gen.invalid ? "" : `e${gen.env}`
            const holder = model.holderOf({ partitionKey: pk, envelopeId, bindingId: gen.binding })
            const other = known.length > 0 ? known[gen.pick % known.length]?.id : undefined
            const id =
              gen.idMode === "holder" && holder !== undefined
                ? holder
                : gen.idMode === "other" && other !== undefined
                  ? other
                  : `${prefix}-r${nextId++}`
            const input: ModelInput = {
              id,
              partitionKey: pk,
              envelopeId,
              bindingId: gen.binding,
              ...(gen.key !== undefined ? { orderingKey: gen.key } : {}),
              ...(gen.createdAtOffset !== undefined ? { createdAtMillis: now + gen.createdAtOffset } : {}),
              ...(gen.expiresOffset !== undefined ? { expiresAtMillis: now + gen.expiresOffset } : {})
            }
            inputs.push(input)
            batch.push(
              new NewOutboxRecord(
                {
                  id,
                  partitionKey: pk,
                  envelopeId,
                  bindingId: gen.binding,
                  payload: new TextEncoder().encode(`${id}/${envelopeId}`),
                  ...(input.orderingKey !== undefined ? { orderingKey: input.orderingKey } : {}),
                  ...(input.createdAtMillis !== undefined
                    ? { createdAt: DateTime.unsafeMake(input.createdAtMillis) }
                    : {}),
                  ...(input.expiresAtMillis !== undefined
                    ? { expiresAt: DateTime.unsafeMake(input.expiresAtMillis) }
                    : {})
                },
                { disableValidation: true }
              )
            )
          }
          const step = `${label} persist${command.replaceTerminal ? " (replaceTerminal)" : ""} ${pk} ${JSON.stringify(inputs.map((i) => [i.id, i.envelopeId, i.bindingId, i.orderingKey ?? null]))}`
          const expected = model.persist(inputs, now, command.replaceTerminal)
          const actual = yield* Effect.either(store.persist(batch, { replaceTerminal: command.replaceTerminal }))
          if (sameTag(step, expected, actual) && expected._tag === "Success") {
            const { replaced, ...report } = expected.value
            const a = JSON.stringify(actual.right)
            const e = JSON.stringify(report)
            if (a !== e) mismatch(`${step}: store reported ${a}, model ${e}`)
            // a replaced record was terminal already (it stays counted in storeTerminal) and left the store
            storePersisted += actual.right.persisted.length
            stats.skippedDuplicates += actual.right.skipped.length
            stats.replacedTerminal += replaced
          }
          break
        }
        case "Claim": {
          const pk = partitionOf(command.partition)
          touched.add(pk)
          const token = tokenFor(command.token, pk)
          const step = `${label} claim ${pk} ${token.owner}@${token.version} limit ${command.limit}`
          const expected = model.claim(pk, token, command.limit, now)
          const actual = yield* Effect.either(store.claim(pk, token, command.limit))
          if (sameTag(step, expected, actual) && expected._tag === "Success") {
            verifyClaim(step, token, command.limit, now, expected.value, actual.right)
          }
          break
        }
        case "ClaimPair": {
          // two claims at once (R-CLAIM-9): the store must behave as one of the two serial orders
          const pk = partitionOf(command.partition)
          touched.add(pk)
          const first = { token: tokenFor(command.first, pk), limit: command.firstLimit }
          const second = { token: { ...tokenFor(command.second, pk), owner: `o${OWNERS}` }, limit: command.secondLimit }
          const show = (c: typeof first) => `${c.token.owner}@${c.token.version} limit ${c.limit}`
          const step = `${label} concurrent claims ${pk} [${show(first)}] [${show(second)}]`
          const [a, b] = yield* Effect.all(
            [
              Effect.either(store.claim(pk, first.token, first.limit)),
              Effect.either(store.claim(pk, second.token, second.limit))
            ],
            { concurrency: 2 }
          )
          const orders = [
            [first, a, second, b],
            [second, b, first, a]
          ] as const
          let matched = false
          for (const [x, xActual, y, yActual] of orders) {
            const candidate = model.clone()
            const xExpected = candidate.claim(pk, x.token, x.limit, now)
            const yExpected = candidate.claim(pk, y.token, y.limit, now)
            if (!agrees(xExpected, xActual) || !agrees(yExpected, yActual)) continue
            matched = true
            model = candidate
            for (const [c, expected, actual] of [
              [x, xExpected, xActual],
              [y, yExpected, yActual]
            ] as const) {
              const sub = `${step}: ${show(c)}`
              if (sameTag(sub, expected, actual) && expected._tag === "Success") {
                verifyClaim(sub, c.token, c.limit, now, expected.value, actual.right)
              }
            }
            break
          }
          if (!matched) {
            mismatch(`${step}: results [${describeActual(a)}] [${describeActual(b)}] match neither serial order`)
          }
          break
        }
        case "Complete":
        case "Release": {
          const known = model.all()
          const claimedNow = known.filter((r) => r.status === "claimed")
          // the holder mode aims at claimed records; the others at any record
          const pool = command.mode === "holder" && claimedNow.length > 0 ? claimedNow : known
          const target = command.mode === "unknown" ? undefined : pool[command.pick % Math.max(1, pool.length)]
          const targetId = target?.id ?? `${prefix}-unknown`
          const held = target !== undefined && target.status === "claimed" && command.mode === "holder"
          const token: LeaseTokenLike =
            held && Option.isSome(target.claimedBy)
              ? { owner: target.claimedBy.value, version: target.claimVersion }
              : tokenFor(command.token, target?.partitionKey ?? partitionOf(command.partition))
          const ids =
            held && command.many
              ? known
                  .filter(
                    (r) =>
                      r.status === "claimed" &&
                      r.claimVersion === token.version &&
                      Option.getOrUndefined(r.claimedBy) === token.owner
                  )
                  .map((r) => r.id)
              : [targetId]
          for (const id of ids) {
            const pk = model.get(id)?.partitionKey
            if (pk !== undefined) touched.add(pk)
          }
          const operation = command._tag === "Complete" ? "complete" : "release"
          const step = `${label} ${operation} [${ids.join(",")}] ${token.owner}@${token.version}`
          const expected = operation === "complete" ? model.complete(ids, token) : model.release(ids, token)
          const actual = yield* Effect.either(store[operation](ids, token))
          if (sameTag(step, expected, actual)) {
            for (const id of new Set(ids)) holders.delete(id)
            if (operation === "complete") storeTerminal += new Set(ids).size
          }
          break
        }
        case "Expire": {
          const pk = partitionOf(command.partition)
          touched.add(pk)
          const token = tokenFor(command.token, pk)
          const expiring = model.partitionRecords(pk).flatMap((r) => Option.toArray(r.expiresAt))
          const aimed =
            command.aim === undefined ? undefined : expiring[command.aim.pick % Math.max(1, expiring.length)]
          const before =
            aimed !== undefined && command.aim !== undefined
              ? DateTime.toEpochMillis(aimed) + command.aim.shift
              : now + command.offset
          const step = `${label} expire ${pk} before t+${before - origin} ${token.owner}@${token.version}`
          const expected = model.expire(before, pk, token)
          const actual = yield* Effect.either(store.expire(DateTime.unsafeMake(before), pk, token))
          if (sameTag(step, expected, actual) && expected._tag === "Success") {
            if (actual.right !== expected.value)
              mismatch(`${step}: store expired ${actual.right}, model ${expected.value}`)
            storeTerminal += actual.right
          }
          break
        }
        case "Advance": {
          const stale = options.staleClaimAfterMillis ?? DEFAULT_STALE
          const millis = {
            tiny: 1,
            small: 500,
            medium: 5_000,
            belowStale: stale - 1,
            atStale: stale,
            pastStale: stale + 1
          }[command.step]
          if (advanced + millis <= MAX_CLOCK_ADVANCE) {
            advanced += millis
            yield* TestClock.adjust(Duration.millis(millis))
            log.push(`${label} advance ${millis} ms`)
          }
          break
        }
      }
      yield* checkState(`${label} ${command._tag}`, touched)
      stats.steps++
    }
    stats.histories++

    yield* checkState("end of history", new Set(partitions))
    const listed = Chunk.toReadonlyArray(yield* Effect.orDie(Stream.runCollect(store.listPartitions)))
    for (const pk of model.partitionsWithPendingWork()) {
      if (!listed.includes(pk)) mismatch(`listPartitions omits ${pk}, which has pending work`)
    }
  })

/**
 * Runs `options.runs` generated histories against stores built by `makeLayer` (a fresh layer per
 * history), comparing every step with the model. Rejects with a message naming the seed (replay with
 * `OUTBOX_SEED=<seed>`) on the first mismatch, after fast-check has shrunk the history.
 *
 * @returns the seed used and the number of histories run
 */
export const checkOutboxHistories = async (
  name: string,
  makeLayer: (options: ContractLayerOptions) => Layer.Layer<OutboxStore, unknown>,
  options: HistoryOptions
): Promise<{ readonly seed: number; readonly runs: number; readonly stats: HistoryStats }> => {
  const stats = emptyStats()
  const seed = seedFromEnvironment() ?? options.seed ?? testSeed(name)
  const layerOptions: ContractLayerOptions =
    options.staleClaimAfterMillis === undefined
      ? {}
      : { staleClaimAfter: Duration.millis(options.staleClaimAfterMillis) }
  const property = fc.asyncProperty(
    fc.array(commandArb(options.concurrentClaims ?? false), {
      minLength: Math.min(10, options.maxSteps ?? 40),
      maxLength: options.maxSteps ?? 40,
      size: "max"
    }),
    (commands) => runtime.runPromise(runHistory(commands, options, stats).pipe(Effect.provide(makeLayer(layerOptions))))
  )
  // one TestClock for the whole run (building TestContext per history costs more than the history);
  // each history reads its own origin, a fresh layer and fresh partition keys
  const runtime = ManagedRuntime.make(TestContext.TestContext)
  try {
    await runtime.runPromise(TestClock.setTime(START))
    await fc.assert(property, { numRuns: options.runs, seed })
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error)
    console.error(`[${name}] generated history failed; replay with OUTBOX_SEED=${seed}`)
    throw new Error(`[${name}] generated history failed (seed ${seed}; replay with OUTBOX_SEED=${seed})\n${message}`)
  } finally {
    await runtime.dispose()
  }
  return { seed, runs: options.runs, stats }
}

/**
 * Registers a vitest test that runs `options.runs` generated histories against stores built by
 * `makeLayer` (a fresh layer and fresh partition keys per history), compares every step with the pure
 * model (built on `ClaimOrder`), prints the seed on failure and replays a given seed (`OUTBOX_SEED`
 * overrides `options.seed`).
 */
export const runOutboxHistories = (
  name: string,
  makeLayer: (options: ContractLayerOptions) => Layer.Layer<OutboxStore, unknown>,
  options: HistoryOptions
): void => {
  if (vitest === undefined) throw new Error("runOutboxHistories registers a vitest test: run it under vitest")
  vitest.it(
    `${name}: ${options.runs} generated histories agree with the model (R-CLAIM-4/5/6/9, R-DONE-2, R-EXP-2, conservation)`,
    async () => {
      const result = await checkOutboxHistories(name, makeLayer, options)
      vitest.expect(result.stats.histories).toBeGreaterThanOrEqual(options.runs)
    },
    60_000 + options.runs * 2_000
  )
}
