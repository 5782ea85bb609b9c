/**
 * The persist path the SQL backends share (R-PERSIST-1..5), over a backend's storage steps: a batch is
 * inserted in one go, existing and repeated identities are skipped and reported with the id that holds
 * them (the first record of an identity wins), an id held by another identity fails the whole batch with
 * `InvalidRecord`, and with `replaceTerminal` a terminal holder of an identity is replaced. Runs inside the
 * transaction the backend opened (or the caller's, R-PERSIST-6).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import { InvalidRecord } from "../../domain/OutboxError.js"
import * as OutboxRecord from "../../domain/OutboxRecord.js"
import type { PersistReport } from "../../services/OutboxStore.js"

/**
 * The identity columns of a stored record.
 *
 * @since 0.1.0
 */
export interface Identity {
  readonly partitionKey: string
  readonly envelopeId: string
  readonly bindingId: string
}

/**
 * What a backend does on its connection `C` for a persist; `E` are its failures.
 *
 * @since 0.1.0
 */
export interface PersistSteps<C, E> {
  /** The identity of the record holding `id`, or `undefined`. */
  readonly holderOfId: (conn: C, id: string) => Effect.Effect<Identity | undefined, E>
  /** The id of the record stored under the record's identity, or `undefined`. */
  readonly idOfIdentity: (conn: C, record: Identity) => Effect.Effect<string | undefined, E>
  /** Deletes a terminal (completed or expired) record stored under the identity. */
  readonly deleteTerminal: (conn: C, record: Identity) => Effect.Effect<void, E>
  /**
   * Allocates seqs (R-PERSIST-4) and inserts the records, leaving out any whose id or identity is stored
   * (also by an earlier record of the same call); returns the ids inserted.
   */
  readonly insert: (
    conn: C,
    records: ReadonlyArray<OutboxRecord.PreparedRecord>
  ) => Effect.Effect<ReadonlySet<string>, E>
}

/**
 * The `InvalidRecord` of a record whose id is already held by another identity.
 *
 * @since 0.1.0
 */
export const idReused = (record: OutboxRecord.PreparedRecord, index: number): InvalidRecord =>
  new InvalidRecord({
    index,
    recordId: record.id,
    partitionKey: record.partitionKey,
    reason: `id ${record.id} is already used by a record with another identity`
  })

/** A record of a batch with its index. */
interface Indexed {
  readonly record: OutboxRecord.PreparedRecord
  readonly index: number
}

/**
 * The records of a batch by first occurrence of their identity (R-PERSIST-3: the first one wins).
 *
 * @since 0.1.0
 */
export interface Identities {
  readonly unique: ReadonlyArray<Indexed>
  readonly duplicateOf: ReadonlyArray<{ readonly index: number; readonly first: number }>
}

/**
 * Splits a batch into the first record of each identity and the repeats.
 *
 * @since 0.1.0
 */
export const dedupe = (batch: ReadonlyArray<OutboxRecord.PreparedRecord>): Identities => {
  const firstOfIdentity = new Map<string, number>()
  const unique: Array<Indexed> = []
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
 * The persist operations of a backend's steps.
 *
 * @since 0.1.0
 */
export interface Persist<C, E> {
  /** Stores a prepared batch on `conn` (see the module doc). */
  readonly persistIn: (
    conn: C,
    batch: ReadonlyArray<OutboxRecord.PreparedRecord>,
    replaceTerminal: boolean
  ) => Effect.Effect<PersistReport, E | InvalidRecord>
}

/**
 * Builds the persist path over a backend's steps.
 *
 * @since 0.1.0
 */
export const make = <C, E>(steps: PersistSteps<C, E>): Persist<C, E> => {
  /** Fails with `InvalidRecord` when the record's id is stored under another identity. */
  const rejectIdHeldByOther = (conn: C, record: OutboxRecord.PreparedRecord, index: number) =>
    Effect.flatMap(steps.holderOfId(conn, record.id), (holder): Effect.Effect<void, InvalidRecord> =>
      holder !== undefined && OutboxRecord.identityKey(holder) !== OutboxRecord.identityKey(record)
        ? Effect.fail(idReused(record, index))
        : Effect.void
    )

  /**
   * The report of a batch some of whose records were not inserted: each of them is an existing identity
   * or a repeat of an earlier record of the batch (skipped), or uses an id held by a different identity
   * (not checked again when `idsChecked`: every id of the batch was checked before anything was written).
   */
  const reportOf = (
    conn: C,
    batch: ReadonlyArray<OutboxRecord.PreparedRecord>,
    { duplicateOf, unique }: Identities,
    inserted: ReadonlySet<string>,
    idsChecked: boolean
  ): Effect.Effect<PersistReport, E | InvalidRecord> =>
    Effect.gen(function* () {
      if (!idsChecked) {
        const notInserted = [
          ...unique.filter(({ record }) => !inserted.has(record.id)),
          ...duplicateOf.flatMap(({ index }) => {
            const record = batch[index]
            return record === undefined ? [] : [{ record, index }]
          })
        ].sort((a, b) => a.index - b.index)
        for (const { index, record } of notInserted) yield* rejectIdHeldByOther(conn, record, index)
      }
      const holderOf = new Map<number, string>()
      for (const { index, record } of unique) {
        if (inserted.has(record.id)) {
          holderOf.set(index, record.id)
          continue
        }
        const existing = yield* steps.idOfIdentity(conn, record)
        if (existing === undefined) return yield* idReused(record, index)
        holderOf.set(index, existing)
      }
      const skipped: Array<{ readonly index: number; readonly id: string; readonly existing: string }> = []
      for (const { index, record } of unique) {
        if (!inserted.has(record.id)) skipped.push({ index, id: record.id, existing: holderOf.get(index) ?? "" })
      }
      for (const { first, index } of duplicateOf) {
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

  const persistIn: Persist<C, E>["persistIn"] = (conn, batch, replaceTerminal) =>
    replaceTerminal
      ? persistReplacing(conn, batch)
      : // one insert of the whole batch leaves out repeated and existing identities by itself; when every
        // record went in, none was repeated or existing and the batch is done (plain combinators, no
        // generator: this is the hot path)
        Effect.flatMap(steps.insert(conn, batch), (inserted) => {
          if (inserted.size !== batch.length) return reportOf(conn, batch, dedupe(batch), inserted, false)
          const report: PersistReport = { persisted: batch.map((record) => record.id), skipped: [], existingIds: [] }
          return Effect.succeed(report)
        })

  /** A persist with `replaceTerminal`: ids checked first, terminal holders deleted, then the insert. */
  const persistReplacing = (
    conn: C,
    batch: ReadonlyArray<OutboxRecord.PreparedRecord>
  ): Effect.Effect<PersistReport, E | InvalidRecord> =>
    Effect.gen(function* () {
      const identities = dedupe(batch)
      // ids are checked against the state before the batch, also when their holder is a terminal record
      // this batch replaces, and for in-batch repeats too: once the terminal holders are deleted, the old
      // id of a replaced record would no longer be seen as taken
      for (let index = 0; index < batch.length; index++) {
        const record = batch[index]
        if (record !== undefined) yield* rejectIdHeldByOther(conn, record, index)
      }
      for (const { record } of identities.unique) yield* steps.deleteTerminal(conn, record)
      const inserted = yield* steps.insert(
        conn,
        identities.unique.map(({ record }) => record)
      )
      return yield* reportOf(conn, batch, identities, inserted, true)
    })

  return { persistIn }
}
