/**
 * The persist path of the SQLite outbox store (R-PERSIST-1..5): seq allocation from the fence row,
 * multi-row inserts that leave out existing identities, and the report of skipped records. Runs inside
 * a transaction the store opened (or the caller's, R-PERSIST-6).
 *
 * @since 0.1.0
 */
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { InvalidRecord, StoreUnavailable } from "../../domain/OutboxError.js"
import * as OutboxRecord from "../../domain/OutboxRecord.js"
import type { PersistReport } from "../../services/OutboxStore.js"
import * as SqliteOutboxSchema from "./SqliteOutboxSchema.js"
import { chunksOf, decodeIdentities, idsOf, run, select, seqOf } from "./SqliteStatement.js"

/** The `InvalidRecord` of a record whose id is already held by another identity. */
export const idReused = (record: OutboxRecord.PreparedRecord, index: number): InvalidRecord =>
  new InvalidRecord({
    index,
    recordId: record.id,
    partitionKey: record.partitionKey,
    reason: `id ${record.id} is already used by a record with another identity`
  })

/** Fails with `InvalidRecord` when the record's id is stored under another identity. */
export const rejectIdHeldByOther = (
  st: SqliteOutboxSchema.Statements,
  conn: Connection,
  record: OutboxRecord.PreparedRecord,
  index: number
): Effect.Effect<void, SqlError | StoreUnavailable | InvalidRecord> =>
  Effect.flatMap(run(conn, st.findById, [record.id]), (rows): Effect.Effect<void, StoreUnavailable | InvalidRecord> => {
    if (rows.length === 0) return Effect.void
    const holders = decodeIdentities(rows)
    if (Either.isLeft(holders)) {
      return Effect.fail(new StoreUnavailable({ operation: "persist", cause: holders.left }))
    }
    const holder = holders.right[0]
    return holder !== undefined &&
      OutboxRecord.identityKey({
        partitionKey: holder.partition_key,
        envelopeId: holder.envelope_id,
        bindingId: holder.binding_id
      }) !== OutboxRecord.identityKey(record)
      ? Effect.fail(idReused(record, index))
      : Effect.void
  })

/**
 * Inserts the records with seq blocks from the fence row, in the same transaction (R-PERSIST-4; gaps
 * are allowed), and returns the ids inserted: `ON CONFLICT DO NOTHING` leaves out a record whose
 * identity (or id) is already stored, also by an earlier record of the same statement.
 */
export const insertRecords = (
  st: SqliteOutboxSchema.Statements,
  conn: Connection,
  records: ReadonlyArray<OutboxRecord.PreparedRecord>
): Effect.Effect<Set<string>, SqlError | StoreUnavailable> =>
  Effect.gen(function* () {
    const perPartition = new Map<string, number>()
    for (const record of records) {
      perPartition.set(record.partitionKey, (perPartition.get(record.partitionKey) ?? 0) + 1)
    }
    const nextSeq = new Map<string, number>()
    for (const [partitionKey, count] of perPartition) {
      const last = (yield* select(seqOf, "persist", conn, st.allocateSeq, [partitionKey, count]))[0]
      if (last === undefined) {
        return yield* new StoreUnavailable({ operation: "persist", partitionKey, cause: "no seq allocated" })
      }
      nextSeq.set(partitionKey, last - count + 1)
    }
    const inserted = new Set<string>()
    for (const chunk of chunksOf(records, SqliteOutboxSchema.insertChunk)) {
      const values: Array<unknown> = []
      for (const record of chunk) {
        const seq = nextSeq.get(record.partitionKey) ?? 0
        nextSeq.set(record.partitionKey, seq + 1)
        SqliteOutboxSchema.pushInsertValues(values, record, seq)
      }
      for (const id of yield* select(idsOf, "persist", conn, st.insert(chunk.length), values)) inserted.add(id)
    }
    return inserted
  })

/** The records of a batch by first occurrence of their identity (R-PERSIST-3: the first one wins). */
export const dedupe = (batch: ReadonlyArray<OutboxRecord.PreparedRecord>) => {
  const firstOfIdentity = new Map<string, number>()
  const unique: Array<{ readonly record: OutboxRecord.PreparedRecord; readonly index: number }> = []
  const duplicateOf: Array<{ readonly index: number; readonly first: number }> = []
  batch.forEach((record, index) => {
    const identity = OutboxRecord.identityKey(record)
    const first = firstOfIdentity.get(identity)
    if (first === undefined) {
      firstOfIdentity.set(identity, index)
      unique.push({ record, index })
    } else {
      duplicateOf.push({ index, first })
    }
  })
  return { unique, duplicateOf }
}

/**
 * The report of a batch some of whose records were not inserted: each of them is an existing
 * identity or a repeat of an earlier record of the batch (skipped), or uses an id held by a different
 * identity (the whole batch fails with `InvalidRecord`; not checked again when `idsChecked`, i.e. every
 * id of the batch was checked before anything was written).
 */
export const reportOf = (
  st: SqliteOutboxSchema.Statements,
  conn: Connection,
  batch: ReadonlyArray<OutboxRecord.PreparedRecord>,
  { duplicateOf, unique }: ReturnType<typeof dedupe>,
  inserted: ReadonlySet<string>,
  idsChecked: boolean
): Effect.Effect<PersistReport, SqlError | StoreUnavailable | InvalidRecord> =>
  Effect.gen(function* () {
    if (!idsChecked) {
      const notInserted = [
        ...unique.filter(({ record }) => !inserted.has(record.id)),
        ...duplicateOf.flatMap(({ index }) => {
          const record = batch[index]
          return record === undefined ? [] : [{ record, index }]
        })
      ].sort((a, b) => a.index - b.index)
      for (const { record, index } of notInserted) yield* rejectIdHeldByOther(st, conn, record, index)
    }
    const holderOf = new Map<number, string>()
    for (const { record, index } of unique) {
      if (inserted.has(record.id)) {
        holderOf.set(index, record.id)
        continue
      }
      const holder = yield* select(idsOf, "persist", conn, st.findIdentity, [
        record.partitionKey,
        record.envelopeId,
        record.bindingId
      ])
      const existing = holder[0]
      if (existing === undefined) return yield* idReused(record, index)
      holderOf.set(index, existing)
    }
    const skipped: Array<{ readonly index: number; readonly id: string; readonly existing: string }> = []
    for (const { record, index } of unique) {
      if (!inserted.has(record.id)) skipped.push({ index, id: record.id, existing: holderOf.get(index) ?? "" })
    }
    for (const { index, first } of duplicateOf) {
      const record = batch[index]
      if (record !== undefined) skipped.push({ index, id: record.id, existing: holderOf.get(first) ?? "" })
    }
    skipped.sort((a, b) => a.index - b.index)
    const report: PersistReport = {
      persisted: unique.filter(({ record }) => inserted.has(record.id)).map(({ record }) => record.id),
      skipped: skipped.map((s) => s.id),
      existingIds: skipped.map((s) => s.existing)
    }
    return report
  })

/**
 * Stores a prepared batch on `conn`, inside the caller's transaction (see `OutboxStore.Backend.persist`):
 * existing and repeated identities are skipped, an id held by another identity fails the batch with
 * `InvalidRecord`, and with `replaceTerminal` a terminal holder of an identity is replaced.
 */
export const persistIn = (
  st: SqliteOutboxSchema.Statements,
  conn: Connection,
  batch: ReadonlyArray<OutboxRecord.PreparedRecord>,
  replaceTerminal: boolean
): Effect.Effect<PersistReport, SqlError | StoreUnavailable | InvalidRecord> =>
  Effect.gen(function* () {
    if (!replaceTerminal) {
      // one INSERT of the whole batch leaves out repeated and existing identities by itself; when
      // every record went in, none was repeated or existing and the batch is done
      const inserted = yield* insertRecords(st, conn, batch)
      if (inserted.size === batch.length) {
        return { persisted: batch.map((record) => record.id), skipped: [], existingIds: [] }
      }
      return yield* reportOf(st, conn, batch, dedupe(batch), inserted, false)
    }
    const batchIdentities = dedupe(batch)
    // an id held by another identity is rejected against the state before the batch, also when that
    // holder is a terminal record this batch replaces (as the model and memory store do) — for every
    // record of the batch, in-batch repeats included: once the terminal holders are deleted, the old id of
    // a replaced record would no longer be seen as taken
    for (let index = 0; index < batch.length; index++) {
      const record = batch[index]
      if (record !== undefined) yield* rejectIdHeldByOther(st, conn, record, index)
    }
    for (const { record } of batchIdentities.unique) {
      yield* run(conn, st.deleteTerminalIdentity, [record.partitionKey, record.envelopeId, record.bindingId])
    }
    const inserted = yield* insertRecords(
      st,
      conn,
      batchIdentities.unique.map(({ record }) => record)
    )
    return yield* reportOf(st, conn, batch, batchIdentities, inserted, true)
  })
