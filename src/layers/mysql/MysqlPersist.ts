/**
 * MySQL's steps of the shared persist path (`SqlPersist`, R-PERSIST-1..6): a seq block per partition from
 * `<prefix>outbox_seq` (a table claims never lock; one upsert per partition, in key order, reporting the
 * new counter through `LAST_INSERT_ID(expr)`), then one `INSERT IGNORE` of the batch, which leaves out
 * existing ids and identities (keys are validated before, so nothing else is ignored). When fewer rows
 * went in than were sent, the ids are read back: a record was inserted when the row holding its id has
 * its partition and the seq this persist allocated to it.
 *
 * @since 0.1.0
 */
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as OutboxRecord from "../../domain/OutboxRecord.js"
import * as SqlOutboxRow from "../sql/SqlOutboxRow.js"
import * as SqlOutboxStatements from "../sql/SqlOutboxStatements.js"
import * as SqlPersist from "../sql/SqlPersist.js"
import type { StoreUnavailable } from "../../domain/OutboxError.js"
import { IdRows, select, type StoreContext } from "./MysqlClaim.js"

const IdentityRows = Schema.Array(
  Schema.Struct({ partition_key: Schema.String, envelope_id: Schema.String, binding_id: Schema.String })
)
const HolderRows = Schema.Array(
  Schema.Struct({ id: Schema.String, partition_key: Schema.String, seq: SqlOutboxRow.BigIntColumn })
)

const payloadIndex = SqlOutboxStatements.recordColumns.indexOf("payload")

/** The first seq of a block of `n` from what the allocation reported (1 row: created at n; 2: updated, the insert id is the new counter). */
const firstSeq = (n: number, written: { readonly affectedRows: number; readonly insertId: number }): number =>
  (written.affectedRows === 1 ? n : written.insertId) - n + 1

/**
 * Allocates seq blocks per partition and inserts the records; returns the ids inserted. Plain
 * combinators, no generator: this runs once per persisted batch.
 */
const insertRecords = (
  ctx: StoreContext,
  conn: Connection,
  batch: ReadonlyArray<OutboxRecord.PreparedRecord>
): Effect.Effect<Set<string>, SqlError | StoreUnavailable> => {
  const { st, tx } = ctx
  if (batch.length === 0) return Effect.succeed(new Set<string>())
  const perPartition = new Map<string, number>()
  for (const record of batch) {
    perPartition.set(record.partitionKey, (perPartition.get(record.partitionKey) ?? 0) + 1)
  }
  // in key order: two persists spanning the same partitions lock their seq rows in the same order
  const keys = Array.from(perPartition.keys()).sort()
  const allocate = (key: string) => {
    const n = perPartition.get(key) ?? 0
    return Effect.map(tx.write(conn, st.allocateSeq, [key, n, n]), (written) => [key, firstSeq(n, written)] as const)
  }
  const allocated =
    keys.length === 1 && keys[0] !== undefined
      ? Effect.map(allocate(keys[0]), (entry) => new Map([entry]))
      : Effect.map(Effect.forEach(keys, allocate), (entries) => new Map(entries))
  return Effect.flatMap(allocated, (nextSeq) => {
    const values: Array<unknown> = []
    const seqOf = new Map<string, readonly [string, number]>()
    for (const record of batch) {
      const seq = nextSeq.get(record.partitionKey) ?? 0
      nextSeq.set(record.partitionKey, seq + 1)
      const at = values.length + payloadIndex
      SqlOutboxStatements.pushRecordValues(values, record, seq)
      // mysql2 binds a Buffer as bytes (a plain Uint8Array would not be)
      values[at] = Buffer.from(record.payload.buffer, record.payload.byteOffset, record.payload.byteLength)
      if (!seqOf.has(record.id)) seqOf.set(record.id, [record.partitionKey, seq])
    }
    return Effect.flatMap(
      tx.write(conn, st.insert(batch.length), values),
      ({ affectedRows }): Effect.Effect<Set<string>, SqlError | StoreUnavailable> => {
        if (affectedRows === batch.length) return Effect.succeed(new Set(batch.map((record) => record.id)))
        const ids = Array.from(seqOf.keys())
        return Effect.map(select(ctx, "persist", HolderRows, conn, st.readBack(ids.length), ids), (holders) => {
          const inserted = new Set<string>()
          for (const holder of holders) {
            const mine = seqOf.get(holder.id)
            if (mine !== undefined && mine[0] === holder.partition_key && mine[1] === holder.seq)
              inserted.add(holder.id)
          }
          return inserted
        })
      }
    )
  })
}

/**
 * The persist path of the MySQL store.
 *
 * @since 0.1.0
 */
export const make = (ctx: StoreContext): SqlPersist.Persist<Connection, SqlError | StoreUnavailable> =>
  SqlPersist.make<Connection, SqlError | StoreUnavailable>({
    holderOfId: (conn, id) =>
      Effect.map(select(ctx, "persist", IdentityRows, conn, ctx.st.findById, [id]), (rows) => {
        const holder = rows[0]
        return holder === undefined
          ? undefined
          : { partitionKey: holder.partition_key, envelopeId: holder.envelope_id, bindingId: holder.binding_id }
      }),
    idOfIdentity: (conn, record) =>
      Effect.map(
        select(ctx, "persist", IdRows, conn, ctx.st.findIdentity, [
          record.partitionKey,
          record.envelopeId,
          record.bindingId
        ]),
        (rows) => rows[0]?.id
      ),
    deleteTerminal: (conn, record) =>
      Effect.asVoid(
        ctx.tx.write(conn, ctx.st.deleteTerminalIdentity, [record.partitionKey, record.envelopeId, record.bindingId])
      ),
    insert: (conn, records) => insertRecords(ctx, conn, records)
  })
