/**
 * A pure reference model of the OutboxStore contract (SPEC §2) for generated-history tests: records,
 * per-partition fence high-water marks and seq counters, with claim selection delegated to
 * `ClaimOrder.selectFrom` (the single reference implementation of R-CLAIM-4/5/6).
 *
 * The model performs no effects: time is passed in, ids are given by the caller, and every operation
 * returns its outcome. Records are immutable values (an update replaces the record), so a snapshot of
 * a partition taken before an operation stays valid after it.
 */
import * as DateTime from "effect/DateTime"
import * as Option from "effect/Option"
import * as ClaimOrder from "../../src/domain/ClaimOrder.js"
import * as LeaseToken from "../../src/domain/LeaseToken.js"
import type { RecordStatus } from "../../src/domain/OutboxRecord.js"
import { identityKey, NewOutboxRecord } from "../../src/domain/OutboxRecord.js"
import { normaliseLimit } from "../../src/services/OutboxStore.js"

/** A record as the model keeps it. */
export interface ModelRecord extends ClaimOrder.ClaimFacts {
  readonly id: string
  readonly partitionKey: string
  readonly envelopeId: string
  readonly bindingId: string
  readonly identity: string
  readonly expiresAt: Option.Option<DateTime.Utc>
  readonly claimedBy: Option.Option<string>
  readonly firstAttemptedAt: Option.Option<DateTime.Utc>
  readonly replayCount: number
  readonly status: RecordStatus
}

/** What the model is asked to persist (plain data; empty strings make an invalid record). */
export interface ModelInput {
  readonly id: string
  readonly partitionKey: string
  readonly envelopeId: string
  readonly bindingId: string
  readonly orderingKey?: string
  readonly createdAtMillis?: number
  readonly expiresAtMillis?: number
}

/**
 * The store record for a model input (payload: the id's bytes), so a history hands the store and the model
 * the same record.
 */
export const newRecordOf = (input: ModelInput): NewOutboxRecord =>
  new NewOutboxRecord({
    id: input.id,
    partitionKey: input.partitionKey,
    envelopeId: input.envelopeId,
    bindingId: input.bindingId,
    payload: new TextEncoder().encode(input.id),
    ...(input.orderingKey !== undefined ? { orderingKey: input.orderingKey } : {}),
    ...(input.createdAtMillis !== undefined ? { createdAt: DateTime.unsafeMake(input.createdAtMillis) } : {}),
    ...(input.expiresAtMillis !== undefined ? { expiresAt: DateTime.unsafeMake(input.expiresAtMillis) } : {})
  })

/** The error tags the model predicts. */
export type ModelErrorTag = "StaleFencingToken" | "DuplicateRecord" | "InvalidRecord"

/** The outcome of a model operation: a value, or the tag of the typed error the store must fail with. */
export type Outcome<A> =
  | { readonly _tag: "Success"; readonly value: A }
  | { readonly _tag: "Failure"; readonly error: ModelErrorTag; readonly reason: string }

const success = <A>(value: A): Outcome<A> => ({ _tag: "Success", value })
const failure = <A>(error: ModelErrorTag, reason: string): Outcome<A> => ({ _tag: "Failure", error, reason })

/** The persist report the model predicts. */
export interface ModelPersistReport {
  readonly persisted: ReadonlyArray<string>
  readonly skipped: ReadonlyArray<string>
  readonly existingIds: ReadonlyArray<string>
}

/** The claim result the model predicts, with the partition as it was before the claim. */
export interface ModelClaim {
  readonly records: ReadonlyArray<ModelRecord>
  readonly partitionBefore: ReadonlyArray<ModelRecord>
}

/** The per-status totals of the model. */
export interface ModelTotals {
  readonly pending: number
  readonly claimed: number
  readonly completed: number
  readonly expired: number
  readonly persisted: number
  /** Terminal records removed by a `replaceTerminal` persist (they left the store). */
  readonly replaced: number
}

interface PartitionState {
  highWaterMark: number
  seq: number
}

/**
 * The reference model. One instance models one store (any number of partitions).
 */
export class OutboxModel {
  private readonly records = new Map<string, ModelRecord>()
  private readonly byIdentity = new Map<string, string>()
  private readonly partitions = new Map<string, PartitionState>()
  private persistedTotal = 0
  private replacedTotal = 0

  /** @param staleClaimAfterMillis wall-clock stale reclaim threshold (R-CLAIM-6), when configured */
  constructor(readonly staleClaimAfterMillis: number | undefined) {}

  /** An independent copy (records are immutable values, so copying the maps suffices). */
  clone(): OutboxModel {
    const copy = new OutboxModel(this.staleClaimAfterMillis)
    for (const [id, record] of this.records) copy.records.set(id, record)
    for (const [identity, id] of this.byIdentity) copy.byIdentity.set(identity, id)
    for (const [key, state] of this.partitions) copy.partitions.set(key, { ...state })
    copy.persistedTotal = this.persistedTotal
    copy.replacedTotal = this.replacedTotal
    return copy
  }

  private partition(key: string): PartitionState {
    let state = this.partitions.get(key)
    if (state === undefined) {
      state = { highWaterMark: 0, seq: 0 }
      this.partitions.set(key, state)
    }
    return state
  }

  /** The partition's fence high-water mark (0 when nothing was ever accepted). */
  highWaterMark(partitionKey: string): number {
    return this.partitions.get(partitionKey)?.highWaterMark ?? 0
  }

  /** A record by id. */
  get(id: string): ModelRecord | undefined {
    return this.records.get(id)
  }

  /** The id of the record holding an identity, if any. */
  holderOf(input: { readonly partitionKey: string; readonly envelopeId: string; readonly bindingId: string }) {
    return this.byIdentity.get(identityKey(input))
  }

  /** Every record, in insertion order (a `Map` keeps the first insertion position when a key is set again). */
  all(): ReadonlyArray<ModelRecord> {
    return Array.from(this.records.values())
  }

  /** The records of one partition (any status), in insertion order. */
  partitionRecords(partitionKey: string): ReadonlyArray<ModelRecord> {
    return this.all().filter((r) => r.partitionKey === partitionKey)
  }

  /** Pending records of a partition in age order. */
  pending(partitionKey: string): ReadonlyArray<ModelRecord> {
    return this.partitionRecords(partitionKey)
      .filter((r) => r.status === "pending")
      .sort(ClaimOrder.compareAge)
  }

  /** Records of a partition in a given status. */
  count(partitionKey: string, status: RecordStatus): number {
    let n = 0
    for (const record of this.records.values()) {
      if (record.partitionKey === partitionKey && record.status === status) n++
    }
    return n
  }

  /** Partitions holding pending records. */
  partitionsWithPendingWork(): ReadonlyArray<string> {
    return Array.from(
      new Set(
        this.all()
          .filter((r) => r.status === "pending")
          .map((r) => r.partitionKey)
      )
    )
  }

  /** Totals over every partition. */
  totals(): ModelTotals {
    const totals = {
      pending: 0,
      claimed: 0,
      completed: 0,
      expired: 0,
      persisted: this.persistedTotal,
      replaced: this.replacedTotal
    }
    for (const record of this.records.values()) totals[record.status]++
    return totals
  }

  /**
   * R-PERSIST-1..5: skips existing identities (keeping the stored id), stores the first of repeated
   * identities of the batch, assigns seq in batch order, stamps `createdAt = now` when absent. Invalid
   * records (empty fields, an id used by another identity) fail the batch with nothing stored; an
   * all-skipped non-empty batch is a `DuplicateRecord`. With `replaceTerminal` (dead-letter redrive), a
   * terminal holder of an identity is removed and the new record stored in its place.
   */
  persist(
    inputs: ReadonlyArray<ModelInput>,
    nowMillis: number,
    replaceTerminal = false
  ): Outcome<ModelPersistReport & { readonly replaced: number }> {
    if (inputs.length === 0) return success({ persisted: [], skipped: [], existingIds: [], replaced: 0 })
    const idIdentity = new Map<string, string>()
    for (const [index, input] of inputs.entries()) {
      if (input.id === "" || input.partitionKey === "" || input.envelopeId === "" || input.bindingId === "") {
        return failure("InvalidRecord", `record ${index} has an empty field`)
      }
      const identity = identityKey(input)
      const inBatch = idIdentity.get(input.id)
      if (inBatch !== undefined && inBatch !== identity) {
        return failure("InvalidRecord", `id ${input.id} is used twice in the batch`)
      }
      idIdentity.set(input.id, identity)
      const stored = this.records.get(input.id)
      if (stored !== undefined && stored.identity !== identity) {
        return failure("InvalidRecord", `id ${input.id} is already used by another identity`)
      }
    }
    const persisted: Array<string> = []
    const skipped: Array<string> = []
    const existingIds: Array<string> = []
    const staged: Array<ModelRecord> = []
    const replaced: Array<string> = []
    const firstInBatch = new Map<string, string>()
    const seqs = new Map<string, number>()
    for (const input of inputs) {
      const identity = identityKey(input)
      const inBatch = firstInBatch.get(identity)
      const holder = inBatch === undefined ? this.byIdentity.get(identity) : undefined
      const holderStatus = holder === undefined ? undefined : this.records.get(holder)?.status
      const replaceable = replaceTerminal && (holderStatus === "completed" || holderStatus === "expired")
      if (holder !== undefined && replaceable) replaced.push(holder)
      const existing = inBatch ?? (replaceable ? undefined : holder)
      if (existing !== undefined) {
        skipped.push(input.id)
        existingIds.push(existing)
        firstInBatch.set(identity, existing)
        continue
      }
      const seq = (seqs.get(input.partitionKey) ?? this.partition(input.partitionKey).seq) + 1
      seqs.set(input.partitionKey, seq)
      staged.push({
        id: input.id,
        partitionKey: input.partitionKey,
        envelopeId: input.envelopeId,
        bindingId: input.bindingId,
        identity,
        orderingKey:
          input.orderingKey === undefined || input.orderingKey === "" ? Option.none() : Option.some(input.orderingKey),
        createdAt: DateTime.unsafeMake(input.createdAtMillis ?? nowMillis),
        expiresAt:
          input.expiresAtMillis === undefined ? Option.none() : Option.some(DateTime.unsafeMake(input.expiresAtMillis)),
        seq,
        status: "pending",
        claimedBy: Option.none(),
        claimVersion: 0,
        claimedAt: Option.none(),
        firstAttemptedAt: Option.none(),
        replayCount: 0
      })
      firstInBatch.set(identity, input.id)
      persisted.push(input.id)
    }
    if (persisted.length === 0) return failure("DuplicateRecord", "every record of the batch exists")
    for (const id of replaced) {
      const old = this.records.get(id)
      this.records.delete(id)
      if (old !== undefined && this.byIdentity.get(old.identity) === id) this.byIdentity.delete(old.identity)
      this.replacedTotal++
    }
    for (const record of staged) {
      this.records.set(record.id, record)
      this.byIdentity.set(record.identity, record.id)
      this.persistedTotal++
    }
    for (const [key, seq] of seqs) this.partition(key).seq = seq
    return success({ persisted, skipped, existingIds, replaced: replaced.length })
  }

  private fence(partitionKey: string, token: LeaseToken.LeaseTokenLike): Outcome<void> {
    const reason = LeaseToken.invalidReason(token)
    if (reason !== undefined) return failure("StaleFencingToken", reason)
    const state = this.partition(partitionKey)
    if (token.version < state.highWaterMark) {
      return failure("StaleFencingToken", `version ${token.version} below high-water mark ${state.highWaterMark}`)
    }
    state.highWaterMark = token.version
    return success(undefined)
  }

  /** R-CLAIM-1..7: token check, fence, then `ClaimOrder.selectFrom` over the partition. */
  claim(partitionKey: string, token: LeaseToken.LeaseTokenLike, limit: number, nowMillis: number): Outcome<ModelClaim> {
    const fenced = this.fence(partitionKey, token)
    if (fenced._tag === "Failure") return failure(fenced.error, fenced.reason)
    const partitionBefore = this.partitionRecords(partitionKey)
    const selected = ClaimOrder.selectFrom(partitionBefore, normaliseLimit(limit), {
      version: token.version,
      nowMillis,
      staleClaimAfterMillis: this.staleClaimAfterMillis
    })
    const now = DateTime.unsafeMake(nowMillis)
    const records = selected.map((record) => this.markClaimed(record, token, now))
    return success({ records, partitionBefore })
  }

  /**
   * Applies a claim whose result was observed rather than predicted (a short batch under faults, R-CLAIM-8,
   * or records claimed before the fence was lost): the fence check and raise of `claim`, then exactly the
   * records `ids` become claimed by the token, in the given order. The caller checks beforehand that they
   * were a legal choice (claimable, head-of-line).
   */
  claimExactly(
    partitionKey: string,
    token: LeaseToken.LeaseTokenLike,
    ids: ReadonlyArray<string>,
    nowMillis: number
  ): Outcome<ReadonlyArray<ModelRecord>> {
    const fenced = this.fence(partitionKey, token)
    if (fenced._tag === "Failure") return failure(fenced.error, fenced.reason)
    const now = DateTime.unsafeMake(nowMillis)
    const records: Array<ModelRecord> = []
    for (const id of ids) {
      const record = this.records.get(id)
      if (record === undefined || record.partitionKey !== partitionKey) {
        return failure("InvalidRecord", `record ${id} is not in partition ${partitionKey}`)
      }
      records.push(this.markClaimed(record, token, now))
    }
    return success(records)
  }

  /** Raises the partition's fence high-water mark to `version` (never lowers it), as another owner's claim would. */
  raiseFence(partitionKey: string, version: number): void {
    const state = this.partition(partitionKey)
    state.highWaterMark = Math.max(state.highWaterMark, version)
  }

  private markClaimed(record: ModelRecord, token: LeaseToken.LeaseTokenLike, now: DateTime.Utc): ModelRecord {
    const claimed: ModelRecord = {
      ...record,
      status: "claimed",
      claimedBy: Option.some(token.owner),
      claimVersion: token.version,
      claimedAt: Option.some(now),
      firstAttemptedAt: Option.isSome(record.firstAttemptedAt) ? record.firstAttemptedAt : Option.some(now),
      replayCount: record.replayCount + 1
    }
    this.records.set(claimed.id, claimed)
    return claimed
  }

  /** Marks exactly `ids` expired (observed under faults: an expire that stopped part-way, R-EXP-1). */
  expireExactly(ids: ReadonlyArray<string>): void {
    for (const id of ids) {
      const record = this.records.get(id)
      if (record !== undefined) this.records.set(id, { ...record, status: "expired" })
    }
  }

  private matching(ids: ReadonlyArray<string>, token: LeaseToken.LeaseTokenLike): Outcome<ReadonlyArray<ModelRecord>> {
    const reason = LeaseToken.invalidReason(token)
    if (reason !== undefined) return failure("StaleFencingToken", reason)
    const matched: Array<ModelRecord> = []
    for (const id of new Set(ids)) {
      const record = this.records.get(id)
      if (
        record === undefined ||
        record.status !== "claimed" ||
        record.claimVersion !== token.version ||
        Option.getOrUndefined(record.claimedBy) !== token.owner
      ) {
        return failure("StaleFencingToken", `record ${id} is not claimed by ${token.owner}@${token.version}`)
      }
      matched.push(record)
    }
    return success(matched)
  }

  /** R-DONE-1/2/3 (all-or-nothing, as the memory store): claimed by exactly this token → completed. */
  complete(ids: ReadonlyArray<string>, token: LeaseToken.LeaseTokenLike): Outcome<void> {
    const matched = this.matching(ids, token)
    if (matched._tag === "Failure") return failure(matched.error, matched.reason)
    for (const record of matched.value) this.records.set(record.id, { ...record, status: "completed" })
    return success(undefined)
  }

  /** R-DONE-1/2/3: claimed by exactly this token → pending, keeping claimVersion and replayCount. */
  release(ids: ReadonlyArray<string>, token: LeaseToken.LeaseTokenLike): Outcome<void> {
    const matched = this.matching(ids, token)
    if (matched._tag === "Failure") return failure(matched.error, matched.reason)
    for (const record of matched.value) {
      this.records.set(record.id, { ...record, status: "pending", claimedBy: Option.none(), claimedAt: Option.none() })
    }
    return success(undefined)
  }

  /** R-EXP-1/2: fenced like a claim; pending records with `expiresAt < before` become expired. */
  expire(beforeMillis: number, partitionKey: string, token: LeaseToken.LeaseTokenLike): Outcome<number> {
    const fenced = this.fence(partitionKey, token)
    if (fenced._tag === "Failure") return failure(fenced.error, fenced.reason)
    let count = 0
    for (const record of this.partitionRecords(partitionKey)) {
      if (
        record.status === "pending" &&
        Option.isSome(record.expiresAt) &&
        DateTime.toEpochMillis(record.expiresAt.value) < beforeMillis
      ) {
        this.records.set(record.id, { ...record, status: "expired" })
        count++
      }
    }
    return success(count)
  }

  /**
   * Conservation: every persisted record is in exactly one state and the totals add up. Returns a
   * description of the first violation, or `undefined`.
   */
  conservationViolation(): string | undefined {
    const totals = this.totals()
    const sum = totals.pending + totals.claimed + totals.completed + totals.expired + totals.replaced
    if (sum !== totals.persisted) {
      return `states (and replaced records) add up to ${sum} but ${totals.persisted} records were persisted`
    }
    for (const record of this.records.values()) {
      const claimedFacts = Option.isSome(record.claimedBy) && Option.isSome(record.claimedAt)
      if (record.status === "claimed" && !claimedFacts) return `claimed record ${record.id} has no owner`
      if (record.status === "pending" && Option.isSome(record.claimedBy)) return `pending record ${record.id} has owner`
    }
    return undefined
  }
}
