/**
 * Generated histories on the DynamoDB store (DynamoDB Local) behind the fault decorator
 * (`test/support/FaultyDynamoDb.ts`): a share of requests — all, writes, reads or transactions only — fail
 * before they reach DynamoDB with throttling, a `TransactionConflict` cancellation of a transaction, or a
 * `TransactionConflictException` of a fence update (the fence was in a claim's transaction), and some claims meet
 * another owner raising the fence in the middle of their batch.
 *
 * DynamoDB writes record by record, so a failed operation may have applied part of its work. The oracle
 * therefore reads the table after every step (faults off) and decides whether what happened is a legal
 * outcome, then adopts it into the model:
 * - persist: success is exactly the model's report; a typed failure may have stored any subset of the
 *   batch, and retrying the batch (as a caller must) stores exactly the rest — never a record twice;
 * - claim: without an injected fault the batch is exactly the model's; under faults the records claimed
 *   are a legal choice (claimable, head-of-line, at most `limit`) and exactly the records returned — a
 *   short batch carries `ClaimTruncated`, a failure claimed nothing (R-CLAIM-8), and `StaleFencingToken`
 *   comes only from a stale token or a fence lost mid-batch; the fence never drops (R-CLAIM-2);
 * - complete/release: applied as the model says, or failed typed with nothing changed;
 * - expire: expires only records the model would, and reports exactly how many (`ExpireIncomplete`).
 * After every step the whole partition state (status, owner, version, replay count of every record, and
 * the fence) must equal the model's, and after every persist `listPartitions` must list each partition
 * with non-terminal records (R-READ-3). Time comes from a hand-driven clock whose sleeps return at once.
 * The seed is printed on failure; `OUTBOX_SEED` replays it.
 */
import type { QueryCommandOutput } from "@aws-sdk/client-dynamodb"
import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { randomBytes } from "node:crypto"
import * as ClaimOrder from "../../src/domain/ClaimOrder.js"
import type { LeaseTokenLike } from "../../src/domain/LeaseToken.js"
import * as DynamoDbOutboxStore from "../../src/layers/dynamodb/DynamoDbOutboxStore.js"
import * as RecordItem from "../../src/layers/dynamodb/RecordItem.js"
import { DynamoDb } from "../../src/services/DynamoDb.js"
import { normaliseLimit, OutboxStore } from "../../src/services/OutboxStore.js"
import { seededRandom } from "../support/BusySqlClient.js"
import { outboxTableForFile } from "../support/DynamoOutboxTable.js"
import * as Faulty from "../support/FaultyDynamoDb.js"
import { makeHistoryClock } from "../support/HistoryClock.js"
import { testSeed } from "../support/Seed.js"
import { type ModelInput, type ModelRecord, OutboxModel, newRecordOf } from "./Model.js"

const PARTITIONS = 2
const OWNERS = 3
const STALE = 30_000
const START = 1_700_000_000_000
const RUNS = 30

const { tableName, dynamoLayer } = outboxTableForFile("outbox-fault-histories")

type Target = "all" | "writes" | "reads" | "transactions"

const targets: Record<Target, (operation: string) => boolean> = {
  all: () => true,
  writes: (operation) => ["PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems"].includes(operation),
  reads: (operation) => operation === "Query" || operation === "GetItem",
  transactions: (operation) => operation === "TransactWriteItems"
}

interface Step {
  readonly op:
    | { readonly _tag: "Persist"; readonly partition: number; readonly keys: ReadonlyArray<string | undefined> }
    | {
        readonly _tag: "Claim"
        readonly partition: number
        readonly owner: number
        readonly delta: number
        readonly limit: number
        /** Another owner raises the fence after this many of the claim's transactions. */
        readonly intrudeAfter: number | undefined
      }
    | { readonly _tag: "Complete" | "Release"; readonly pick: number; readonly wrong: boolean }
    | { readonly _tag: "Expire"; readonly partition: number; readonly offset: number }
    | { readonly _tag: "Advance"; readonly millis: number }
  readonly rate: number
  readonly burst: number
  /** Matching requests that pass before faults may strike (so they hit the middle of an operation). */
  readonly after: number
  readonly target: Target
}

const opArb: fc.Arbitrary<Step["op"]> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      _tag: fc.constant("Persist" as const),
      partition: fc.integer({ min: 0, max: PARTITIONS - 1 }),
      keys: fc.array(fc.constantFrom<string | undefined>(undefined, undefined, "A", "A", "B"), {
        minLength: 1,
        maxLength: 5
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
      limit: fc.constantFrom(0, 1, 2, 3, 5, 100),
      intrudeAfter: fc.constantFrom<number | undefined>(undefined, undefined, undefined, undefined, 0, 1, 2)
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
      millis: fc.constantFrom(1, 500, STALE - 1, STALE + 1, 61_000)
    })
  }
)

const stepArb: fc.Arbitrary<Step> = fc.record({
  op: opArb,
  rate: fc.constantFrom(0, 0, 0.05, 0.15, 0.4),
  burst: fc.constantFrom(0, 0, 0, 0, 1, 3),
  after: fc.constantFrom(0, 0, 1, 2, 3, 5),
  target: fc.constantFrom<Target>("all", "all", "writes", "reads", "transactions")
})

interface Stats {
  histories: number
  steps: number
  injected: number
  conflicts: number
  intrusions: number
  shortBatches: number
  partialPersists: number
  partialExpires: number
  failedTyped: number
  claimed: number
  readonly outcomes: Record<string, number>
}

class FaultMismatch extends Error {
  override readonly name = "FaultMismatch"
}

/** What a record looks like in the comparison: status/owner/version/replays. */
const describeModel = (r: ModelRecord): string =>
  `${r.status}/${Option.getOrElse(r.claimedBy, () => "-")}/v${r.claimVersion}/n${r.replayCount}`

interface StoredRecord {
  readonly id: string
  readonly status: string
  readonly shape: string
  readonly replayCount: number
}

const runPrefix = randomBytes(3).toString("hex")
let counter = 0

const runHistory = (steps: ReadonlyArray<Step>, faultSeed: number, stats: Stats): Promise<void> => {
  const faults = new Faulty.Faults()
  faults.random = seededRandom(faultSeed)
  faults.updateConflictShare = 0.5
  const time = makeHistoryClock(START)
  const faultyDynamo = Faulty.layer(faults).pipe(Layer.provide(dynamoLayer))
  const layer = Layer.provideMerge(
    DynamoDbOutboxStore.layerWith({
      tableName,
      ensureTable: false,
      indexLagRetries: 0,
      staleClaimAfter: Duration.millis(STALE)
    }),
    faultyDynamo
  )
  const program = Effect.gen(function* () {
    const store = yield* OutboxStore
    const dynamo = yield* DynamoDb
    const prefix = `df${runPrefix}-${++counter}`
    const partitions = Array.from({ length: PARTITIONS }, (_, i) => `${prefix}-p${i}`)
    const partitionOf = (i: number) => partitions[i % PARTITIONS] ?? `${prefix}-p0`
    let model = new OutboxModel(STALE)
    const log: Array<string> = []
    let nextId = 0
    let nextEnvelope = 0

    const mismatch = (message: string): never => {
      throw new FaultMismatch(`${message}\nhistory ${prefix} (fault seed ${faultSeed}):\n  ${log.join("\n  ")}`)
    }
    const count = (key: string) => void (stats.outcomes[key] = (stats.outcomes[key] ?? 0) + 1)

    /** Every record item and the fence of a partition, read consistently with faults off. */
    const readPartition = Effect.fnUntraced(function* (partitionKey: string) {
      const records = new Map<string, StoredRecord>()
      let cursor: RecordItem.Item | undefined = undefined
      do {
        const page: QueryCommandOutput = yield* Effect.orDie(
          dynamo.query({
            TableName: tableName,
            ConsistentRead: true,
            KeyConditionExpression: "PK = :pk AND begins_with(SK, :prefix)",
            ExpressionAttributeValues: {
              ":pk": RecordItem.str(partitionKey),
              ":prefix": RecordItem.str(RecordItem.RecordSortKeyPrefix)
            },
            ...(cursor !== undefined ? { ExclusiveStartKey: cursor } : {})
          })
        )
        for (const item of page.Items ?? []) {
          const decoded = RecordItem.decode(item)
          if (Either.isLeft(decoded)) return mismatch(`corrupt item in ${partitionKey}: ${decoded.left.message}`)
          const r = decoded.right
          records.set(r.id, {
            id: r.id,
            status: r.status,
            replayCount: r.replayCount,
            shape: `${r.status}/${Option.getOrElse(r.claimedBy, () => "-")}/v${r.claimVersion}/n${r.replayCount}`
          })
        }
        cursor = page.LastEvaluatedKey
      } while (cursor !== undefined)
      const fenceItem = yield* Effect.orDie(
        dynamo.getItem({ TableName: tableName, Key: RecordItem.fenceKey(partitionKey), ConsistentRead: true })
      )
      const fence = RecordItem.decodeFence(fenceItem.Item)
      if (Either.isLeft(fence)) return mismatch(`corrupt fence of ${partitionKey}: ${fence.left}`)
      return { records, highWaterMark: fence.right.highWaterMark }
    })

    /** The stored state of every partition against the model: nothing lost, nothing extra, fences equal. */
    const checkState = Effect.fnUntraced(function* (label: string) {
      for (const pk of partitions) {
        const { records, highWaterMark } = yield* readPartition(pk)
        const expected = model.partitionRecords(pk)
        if (records.size !== expected.length) {
          mismatch(`${label}: ${pk} stores ${records.size} records, model holds ${expected.length}`)
        }
        for (const r of expected) {
          const got = records.get(r.id)?.shape ?? "missing"
          if (got !== describeModel(r)) mismatch(`${label}: record ${r.id} is ${got}, model ${describeModel(r)}`)
        }
        if (highWaterMark !== model.highWaterMark(pk)) {
          mismatch(`${label}: ${pk} fence ${highWaterMark}, model ${model.highWaterMark(pk)}`)
        }
      }
      const violation = model.conservationViolation()
      if (violation !== undefined) mismatch(`${label}: conservation: ${violation}`)
    })

    /** R-READ-3: every partition with non-terminal records is listed (faults off). */
    const checkListed = Effect.fnUntraced(function* (label: string) {
      const listed = new Set(Chunk.toReadonlyArray(yield* Effect.orDie(Stream.runCollect(store.listPartitions))))
      for (const pk of model.partitionsWithPendingWork()) {
        if (pk.startsWith(prefix) && !listed.has(pk)) mismatch(`${label}: ${pk} has work but is not listed`)
      }
    })

    /** Runs one store operation under the step's faults; returns its exit and how many faults it met. */
    const faulty = <A, E>(step: Step, effect: Effect.Effect<A, E>) =>
      Effect.gen(function* () {
        faults.reset()
        faults.rate = step.rate
        faults.burst = step.burst
        faults.after = step.after
        faults.match = targets[step.target]
        faults.enabled = true
        const exit = yield* Effect.exit(effect)
        faults.enabled = false
        faults.burst = 0
        faults.after = 0
        faults.raiseFenceAfter = undefined
        stats.injected += faults.injected
        stats.conflicts += faults.injectedConflicts
        return { exit, injected: faults.injected }
      })

    const failureTag = <A>(exit: Exit.Exit<A, { readonly _tag: string }>, label: string): string | undefined => {
      if (Exit.isSuccess(exit)) return undefined
      const failure = Cause.failureOption(exit.cause)
      if (Option.isNone(failure)) return mismatch(`${label}: defect or interruption ${Cause.pretty(exit.cause)}`)
      return failure.value._tag
    }

    /** A typed failure that only a fault may explain. */
    const faultFailure = (label: string, tag: string, injected: number): void => {
      if (tag !== "StoreUnavailable" && tag !== "TransactionConflict") {
        mismatch(`${label}: failed with ${tag} where only a fault could make it fail`)
      }
      if (injected === 0) mismatch(`${label}: ${tag} without an injected fault`)
      stats.failedTyped++
    }

    for (const [index, step] of steps.entries()) {
      const now = time.now()
      const label = `#${index} ${step.op._tag.toLowerCase()} [faults ${step.target} rate ${step.rate} burst ${step.burst} after ${step.after}]`
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
          const ids = inputs.map((i) => i.id)
          const tag = `${label} ${pk} ${ids.join(",")}`
          const { exit, injected } = yield* faulty(step, store.persist(records))
          const failed = failureTag(exit, tag)
          if (failed === undefined) {
            const expected = model.persist(inputs, now)
            if (expected._tag === "Failure") return mismatch(`${tag}: stored, model expected ${expected.error}`)
            if (Exit.isSuccess(exit) && exit.value.persisted.join(",") !== expected.value.persisted.join(",")) {
              mismatch(`${tag}: persisted ${exit.value.persisted} vs ${expected.value.persisted}`)
            }
            log.push(`${tag} -> ok (${injected} faults)`)
            count("persist:ok")
            break
          }
          faultFailure(tag, failed, injected)
          // some records of the batch may be stored: adopt them, then retry the batch as a caller must
          const { records: stored } = yield* readPartition(pk)
          const landed = inputs.filter((i) => stored.has(i.id))
          log.push(`${tag} -> ${failed} (${injected} faults), stored [${landed.map((i) => i.id).join(",")}]`)
          count(`persist:${failed}`)
          if (landed.length > 0) {
            stats.partialPersists++
            const adopted = model.persist(landed, now)
            if (adopted._tag === "Failure") return mismatch(`${tag}: partial persist the model rejects`)
          }
          yield* checkState(`${tag} (after the failure)`)
          const expected = model.persist(inputs, now)
          const retry = yield* Effect.exit(store.persist(records))
          const retryFailed = failureTag(retry, `${tag} retry`)
          if (expected._tag === "Failure") {
            if (retryFailed !== expected.error)
              mismatch(`${tag} retry: ${retryFailed ?? "ok"}, model ${expected.error}`)
          } else if (Exit.isFailure(retry) || retry.value.persisted.join(",") !== expected.value.persisted.join(",")) {
            mismatch(`${tag} retry: ${retryFailed ?? "persisted other records"}, model ${expected.value.persisted}`)
          }
          log.push(`${tag} retry -> ${retryFailed ?? "ok"}`)
          break
        }
        case "Claim": {
          const pk = partitionOf(op.partition)
          const token: LeaseTokenLike = {
            owner: `o${op.owner}`,
            version: Math.max(1, model.highWaterMark(pk) + op.delta)
          }
          const intruder = token.version + 1
          if (op.intrudeAfter !== undefined) {
            faults.raiseFenceAfter = { transactions: op.intrudeAfter, partitionKey: pk, version: intruder }
          }
          const tag = `${label} ${pk} ${token.owner}@${token.version} limit ${op.limit}${
            op.intrudeAfter !== undefined ? ` intruder@${intruder} after ${op.intrudeAfter}` : ""
          }`
          const oldMark = model.highWaterMark(pk)
          const partitionBefore = model.partitionRecords(pk)
          const predicted = model.clone().claim(pk, token, op.limit, now)
          const { exit, injected } = yield* faulty(step, store.claim(pk, token, op.limit))
          const failed = failureTag(exit, tag)
          const { records: stored, highWaterMark } = yield* readPartition(pk)
          const intruded = highWaterMark === intruder && op.intrudeAfter !== undefined && intruder > oldMark
          if (intruded) stats.intrusions++
          // the records this claim took: their replay count rose
          const taken = partitionBefore
            .filter((r) => (stored.get(r.id)?.replayCount ?? 0) > r.replayCount)
            .sort(ClaimOrder.compareAge)
          const takenIds = taken.map((r) => r.id)
          const outcome = failed ?? (Exit.isSuccess(exit) && Option.isSome(exit.value.truncated) ? "short" : "ok")
          log.push(`${tag} -> ${outcome} (${injected} faults) took [${takenIds.join(",")}]`)
          count(`claim:${outcome}`)
          if (predicted._tag === "Failure") {
            if (failed !== predicted.error && !(injected > 0 && failed === "StoreUnavailable")) {
              mismatch(`${tag}: ${outcome}, model expected ${predicted.error}`)
            }
            if (taken.length > 0) mismatch(`${tag}: a rejected claim took ${takenIds}`)
            if (highWaterMark !== oldMark) mismatch(`${tag}: a rejected claim moved the fence to ${highWaterMark}`)
            yield* checkState(tag)
            break
          }
          const want = predicted.value.records.map((r) => r.id)
          if (injected === 0 && !intruded) {
            // nothing went wrong: exactly the model's batch
            if (Exit.isFailure(exit)) return mismatch(`${tag}: failed with ${failed} without a fault`)
            const got = exit.value.records.map((r) => r.id)
            if (got.join(",") !== want.join(",") || Option.isSome(exit.value.truncated)) {
              mismatch(`${tag}: claimed [${got}], model [${want}]`)
            }
          }
          // the fence: untouched (the raise itself failed), raised to the token, or raised by the intruder
          const allowedMarks = new Set([oldMark, Math.max(oldMark, token.version), ...(intruded ? [intruder] : [])])
          if (!allowedMarks.has(highWaterMark)) mismatch(`${tag}: fence ${highWaterMark} (was ${oldMark})`)
          // what was taken must be a legal choice
          const rule: ClaimOrder.ClaimRule = { version: token.version, nowMillis: now, staleClaimAfterMillis: STALE }
          const selectable = new Set(
            ClaimOrder.selectFrom(partitionBefore, partitionBefore.length, rule).map((r) => r.id)
          )
          for (const id of takenIds) if (!selectable.has(id)) mismatch(`${tag}: took ${id}, which was not claimable`)
          const blocked = ClaimOrder.headOfLineViolation(partitionBefore, taken)
          if (blocked !== undefined) mismatch(`${tag}: head-of-line violated by ${blocked.recordId}`)
          if (taken.length > normaliseLimit(op.limit)) mismatch(`${tag}: took ${taken.length} > limit ${op.limit}`)
          if (Exit.isSuccess(exit)) {
            const got = exit.value.records.map((r) => r.id)
            if (got.join(",") !== takenIds.join(",")) mismatch(`${tag}: returned [${got}] but took [${takenIds}]`)
            if (Option.isSome(exit.value.truncated)) {
              if (injected === 0) mismatch(`${tag}: short batch without a fault`)
              if (taken.length === 0) mismatch(`${tag}: an empty short batch must be a failure (R-CLAIM-8)`)
              stats.shortBatches++
            }
            stats.claimed += taken.length
          } else if (failed === "StaleFencingToken") {
            if (!intruded) mismatch(`${tag}: StaleFencingToken without a stale token or a lost fence`)
          } else {
            faultFailure(tag, failed ?? "?", injected)
            if (taken.length > 0) mismatch(`${tag}: failed with ${failed} but took [${takenIds}] (R-CLAIM-8)`)
          }
          if (highWaterMark >= token.version) {
            const adopted = model.claimExactly(pk, token, takenIds, now)
            if (adopted._tag === "Failure") return mismatch(`${tag}: ${adopted.reason}`)
          } else if (taken.length > 0) {
            mismatch(`${tag}: took records without raising the fence`)
          }
          if (intruded) model.raiseFence(pk, intruder)
          yield* checkState(tag)
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
          const tag = `${label} ${target.id} ${token.owner}@${token.version}`
          const candidate = model.clone()
          const expected = op._tag === "Complete" ? candidate.complete(ids, token) : candidate.release(ids, token)
          const { exit, injected } = yield* faulty(
            step,
            op._tag === "Complete" ? store.complete(ids, token) : store.release(ids, token)
          )
          const failed = failureTag(exit, tag)
          log.push(`${tag} -> ${failed ?? "ok"} (${injected} faults)`)
          count(`${op._tag.toLowerCase()}:${failed ?? "ok"}`)
          if (failed === undefined) {
            if (expected._tag === "Failure") mismatch(`${tag}: succeeded, model expected ${expected.error}`)
            model = candidate
          } else if (expected._tag === "Failure" && failed === expected.error) {
            model = candidate
          } else {
            faultFailure(tag, failed, injected)
          }
          yield* checkState(tag)
          break
        }
        case "Expire": {
          const pk = partitionOf(op.partition)
          const token: LeaseTokenLike = { owner: "sweeper", version: Math.max(1, model.highWaterMark(pk)) }
          const before = now + op.offset
          const tag = `${label} ${pk} before t+${before - START}`
          const oldMark = model.highWaterMark(pk)
          const partitionBefore = model.partitionRecords(pk)
          const candidate = model.clone()
          const expected = candidate.expire(before, pk, token)
          const expirable = new Set(
            candidate
              .partitionRecords(pk)
              .filter((r) => r.status === "expired" && model.get(r.id)?.status !== "expired")
              .map((r) => r.id)
          )
          const { exit, injected } = yield* faulty(step, store.expire(DateTime.unsafeMake(before), pk, token))
          const failed = failureTag(exit, tag)
          const { records: stored, highWaterMark } = yield* readPartition(pk)
          const turned = partitionBefore
            .filter((r) => r.status !== "expired" && stored.get(r.id)?.status === "expired")
            .map((r) => r.id)
          log.push(`${tag} -> ${failed ?? "ok"} (${injected} faults) expired [${turned.join(",")}]`)
          count(`expire:${failed ?? "ok"}`)
          for (const id of turned) if (!expirable.has(id)) mismatch(`${tag}: expired ${id}, which the model keeps`)
          if (expected._tag === "Failure") {
            if (failed !== expected.error && !(injected > 0 && failed === "StoreUnavailable")) {
              mismatch(`${tag}: ${failed ?? "ok"}, model expected ${expected.error}`)
            }
            if (turned.length > 0 || highWaterMark !== oldMark) mismatch(`${tag}: a rejected expire changed state`)
            break
          }
          if (Exit.isSuccess(exit)) {
            if (exit.value !== turned.length || turned.length !== expirable.size) {
              mismatch(`${tag}: reported ${exit.value}, expired ${turned.length}, model ${expirable.size}`)
            }
          } else if (failed === "ExpireIncomplete") {
            if (injected === 0) mismatch(`${tag}: ExpireIncomplete without a fault`)
            const reported = Cause.failureOption(exit.cause).pipe(
              Option.flatMap((e) =>
                "expired" in e && typeof e.expired === "number" ? Option.some(e.expired) : Option.none()
              )
            )
            if (Option.getOrUndefined(reported) !== turned.length) {
              mismatch(`${tag}: ExpireIncomplete reports ${Option.getOrUndefined(reported)}, expired ${turned.length}`)
            }
            stats.partialExpires++
          } else {
            faultFailure(tag, failed ?? "?", injected)
            if (turned.length > 0) mismatch(`${tag}: failed with ${failed} but expired [${turned}]`)
          }
          if (highWaterMark !== oldMark && highWaterMark !== Math.max(oldMark, token.version)) {
            mismatch(`${tag}: fence ${highWaterMark} (was ${oldMark})`)
          }
          model.raiseFence(pk, highWaterMark)
          model.expireExactly(turned)
          yield* checkState(tag)
          break
        }
        case "Advance": {
          time.advance(op.millis)
          log.push(`${label} +${op.millis} ms`)
          break
        }
      }
      if (op._tag === "Persist") yield* checkListed(label)
      stats.steps++
    }
    yield* checkListed("end of history")
    stats.histories++
  })
  return Effect.runPromise(
    program.pipe(
      Effect.provide(layer),
      Effect.withClock(time.clock),
      Logger.withMinimumLogLevel(LogLevel.Warning),
      Effect.orDie
    )
  )
}

describe("DynamoDB store under throttling, transaction conflicts and lost fences", () => {
  it(`${RUNS} generated histories: every outcome legal, partial work adopted exactly, retries idempotent (R-CLAIM-8, R-CLAIM-2, R-CLAIM-5, R-PERSIST-1, R-READ-3)`, async () => {
    const seed = testSeed("dynamodb faults")
    const stats: Stats = {
      histories: 0,
      steps: 0,
      injected: 0,
      conflicts: 0,
      intrusions: 0,
      shortBatches: 0,
      partialPersists: 0,
      partialExpires: 0,
      failedTyped: 0,
      claimed: 0,
      outcomes: {}
    }
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(stepArb, { minLength: 8, maxLength: 30 }), fc.integer(), (steps, faultSeed) =>
          runHistory(steps, faultSeed, stats)
        ),
        { numRuns: RUNS, seed }
      )
    } catch (error) {
      console.error(`[dynamodb faults] history failed; replay with OUTBOX_SEED=${seed}`)
      throw error
    }
    console.log(`[dynamodb faults] seed ${seed}: ${JSON.stringify(stats)}`)
    expect(stats.histories).toBeGreaterThanOrEqual(RUNS)
    // the campaign must reach every way a fault can end
    expect(stats.injected).toBeGreaterThan(0)
    expect(stats.conflicts).toBeGreaterThan(0)
    expect(stats.failedTyped).toBeGreaterThan(0)
    expect(stats.claimed).toBeGreaterThan(0)
  }, 240_000)
})
