/**
 * SQLite's steps of the shared persist path (`SqlPersist`, R-PERSIST-1..6): seq blocks from the fence
 * row and multi-row inserts that leave out existing identities.
 *
 * @since 0.1.0
 */
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { StoreUnavailable } from "../../domain/OutboxError.js"
import type * as OutboxRecord from "../../domain/OutboxRecord.js"
import * as SqlPersist from "../sql/SqlPersist.js"
import * as SqliteOutboxSchema from "./SqliteOutboxSchema.js"
import { chunksOf, decodeIdentities, idsOf, run, select, seqBlocksOf } from "./SqliteStatement.js"

/** Partitions per seq-allocation statement (two bound values each, well under SQLite's limit). */
const seqChunk = 500

/**
 * Inserts the records with seq blocks from the fence row, in the same transaction (R-PERSIST-4; gaps
 * are allowed), and returns the ids inserted: `ON CONFLICT DO NOTHING` leaves out a record whose
 * identity (or id) is already stored, also by an earlier record of the same statement.
 */
const insertRecords = (
  st: SqliteOutboxSchema.Statements,
  conn: Connection,
  records: ReadonlyArray<OutboxRecord.PreparedRecord>
): Effect.Effect<Set<string>, SqlError | StoreUnavailable> =>
  Effect.gen(function* () {
    const perPartition = new Map<string, number>()
    for (const record of records) {
      perPartition.set(record.partitionKey, (perPartition.get(record.partitionKey) ?? 0) + 1)
    }
    // every partition's block in one statement per chunk of partitions
    const nextSeq = new Map<string, number>()
    for (const chunk of chunksOf(Array.from(perPartition), seqChunk)) {
      const params: Array<unknown> = []
      for (const [partitionKey, count] of chunk) params.push(partitionKey, count)
      const rows = yield* select(seqBlocksOf, "persist", conn, st.allocateSeqs(chunk.length), params)
      for (const { partitionKey, last } of rows) {
        nextSeq.set(partitionKey, last - (perPartition.get(partitionKey) ?? 0) + 1)
      }
    }
    for (const partitionKey of perPartition.keys()) {
      if (!nextSeq.has(partitionKey)) {
        return yield* new StoreUnavailable({ operation: "persist", partitionKey, cause: "no seq allocated" })
      }
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

/**
 * The persist path of the SQLite store over its statements.
 *
 * @since 0.1.0
 */
export const make = (st: SqliteOutboxSchema.Statements): SqlPersist.Persist<Connection, SqlError | StoreUnavailable> =>
  SqlPersist.make<Connection, SqlError | StoreUnavailable>({
    holderOfId: (conn, id) =>
      Effect.flatMap(run(conn, st.findById, [id]), (rows) => {
        if (rows.length === 0) return Effect.succeed(undefined)
        const holders = decodeIdentities(rows)
        if (Either.isLeft(holders))
          return Effect.fail(new StoreUnavailable({ operation: "persist", cause: holders.left }))
        const holder = holders.right[0]
        return Effect.succeed(
          holder === undefined
            ? undefined
            : { partitionKey: holder.partition_key, envelopeId: holder.envelope_id, bindingId: holder.binding_id }
        )
      }),
    idOfIdentity: (conn, record) =>
      Effect.map(
        select(idsOf, "persist", conn, st.findIdentity, [record.partitionKey, record.envelopeId, record.bindingId]),
        (ids) => ids[0]
      ),
    deleteTerminal: (conn, record) =>
      Effect.asVoid(run(conn, st.deleteTerminalIdentity, [record.partitionKey, record.envelopeId, record.bindingId])),
    insert: (conn, records) => insertRecords(st, conn, records)
  })
