/**
 * PostgreSQL's steps of the shared persist path (`SqlPersist`, R-PERSIST-1..6): seq blocks from
 * `<prefix>outbox_seq` (a table claims never lock), one `unnest` insert per batch that leaves out existing
 * identities, and, with `notify` on, a `pg_notify` of the partition keys delivered when the transaction
 * commits.
 *
 * @since 0.1.0
 */
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { StoreUnavailable } from "../../domain/OutboxError.js"
import type * as OutboxRecord from "../../domain/OutboxRecord.js"
import * as SqlPersist from "../sql/SqlPersist.js"
import { IdRows, select, type StoreContext } from "./PostgresClaim.js"
import * as PostgresOutboxSchema from "./PostgresOutboxSchema.js"

const SeqRows = Schema.Array(
  Schema.Struct({ partition_key: Schema.String, seq_counter: PostgresOutboxSchema.BigIntColumn })
)
const IdentityRows = Schema.Array(
  Schema.Struct({ partition_key: Schema.String, envelope_id: Schema.String, binding_id: Schema.String })
)

/** Allocates seq blocks per partition and inserts the records; returns the ids inserted. */
const insertRecords = (
  ctx: StoreContext,
  channel: string | undefined,
  conn: Connection,
  batch: ReadonlyArray<OutboxRecord.PreparedRecord>
): Effect.Effect<Set<string>, SqlError | StoreUnavailable> =>
  Effect.gen(function* () {
    const { run, st } = ctx
    if (batch.length === 0) return new Set<string>()
    const perPartition = new Map<string, number>()
    for (const record of batch) {
      perPartition.set(record.partitionKey, (perPartition.get(record.partitionKey) ?? 0) + 1)
    }
    const keys = Array.from(perPartition.keys())
    const blocks = yield* select(ctx, "persist", SeqRows, conn, st.allocateSeq, [
      keys,
      keys.map((k) => perPartition.get(k) ?? 0)
    ])
    const nextSeq = new Map<string, number>()
    for (const block of blocks) {
      nextSeq.set(block.partition_key, block.seq_counter - (perPartition.get(block.partition_key) ?? 0) + 1)
    }
    const withSeq: Array<readonly [OutboxRecord.PreparedRecord, number]> = []
    for (const record of batch) {
      const seq = nextSeq.get(record.partitionKey)
      if (seq === undefined) {
        return yield* new StoreUnavailable({
          operation: "persist",
          partitionKey: record.partitionKey,
          cause: "no seq block allocated"
        })
      }
      nextSeq.set(record.partitionKey, seq + 1)
      withSeq.push([record, seq])
    }
    const inserted = yield* select(ctx, "persist", IdRows, conn, st.insert, PostgresOutboxSchema.insertParams(withSeq))
    const ids = new Set(inserted.map((row) => row.id))
    if (channel !== undefined && ids.size > 0) {
      const notified = new Set<string>()
      for (const record of batch) if (ids.has(record.id)) notified.add(record.partitionKey)
      yield* run(conn, st.notify, [channel, Array.from(notified)])
    }
    return ids
  })

/**
 * The persist path of the PostgreSQL store; `channel` is notified on commit when given.
 *
 * @since 0.1.0
 */
export const make = (
  ctx: StoreContext,
  channel: string | undefined
): SqlPersist.Persist<Connection, SqlError | StoreUnavailable> =>
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
        ctx.run(conn, ctx.st.deleteTerminalIdentity, [record.partitionKey, record.envelopeId, record.bindingId])
      ),
    insert: (conn, records) => insertRecords(ctx, channel, conn, records)
  })
