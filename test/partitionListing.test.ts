/**
 * What `listPartitions` costs (R-READ-3): with 10,000 partitions ever written of which 100 still hold
 * work, every backend lists exactly those 100 and reads O(100) rows or items, not O(10,000) — the relay
 * runs it on every discovery round.
 */
import type { WriteRequest } from "@aws-sdk/client-dynamodb"
import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { inject } from "vitest"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as DynamoDbOutboxStore from "../src/layers/dynamodb/DynamoDbOutboxStore.js"
import * as RecordItem from "../src/layers/dynamodb/RecordItem.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as PostgresOutboxSchema from "../src/layers/postgres/PostgresOutboxSchema.js"
import * as PostgresOutboxStore from "../src/layers/postgres/PostgresOutboxStore.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteOutboxSchema from "../src/layers/sqlite/SqliteOutboxSchema.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import { DynamoDb } from "../src/services/DynamoDb.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { outboxTableForFile } from "./support/DynamoOutboxTable.js"
import { clientLayer, createDatabase } from "./support/PostgresServer.js"

// one database for the file
const url = await createDatabase(inject("postgresUrl"), "listing")

const total = 10_000
const withWork = 100

const key = (i: number) => `cust-${String(i).padStart(5, "0")}`
/** Every 100th partition keeps its work. */
const busy = Array.from({ length: withWork }, (_, i) => key(i * (total / withWork)))

const record = (i: number) =>
  new NewOutboxRecord({
    id: `l-${i}`,
    partitionKey: key(i),
    envelopeId: "e",
    bindingId: "b",
    payload: new Uint8Array([1])
  })

const listed = Effect.flatMap(OutboxStore, (store) =>
  Effect.map(Stream.runCollect(store.listPartitions), (keys) => Chunk.toReadonlyArray(keys).slice().sort())
)

/** Persists one record in each of the 10,000 partitions. */
const persistAll = Effect.flatMap(OutboxStore, (store) =>
  Effect.forEach(
    Array.from({ length: total / 1000 }, (_, k) => k * 1000),
    (from) => store.persist(Array.from({ length: 1000 }, (_, i) => record(from + i)))
  )
)

/** Persists one record per partition, then claims and completes those of every partition but the busy ones. */
const drainAllButBusy = Effect.gen(function* () {
  const store = yield* OutboxStore
  yield* persistAll
  const keep = new Set(busy)
  for (let i = 0; i < total; i++) {
    if (keep.has(key(i))) continue
    const token = { owner: "drain", version: 1 }
    const batch = yield* store.claim(key(i), token, 1)
    yield* store.complete(
      batch.records.map((r) => r.id),
      token
    )
  }
})

describe("listPartitions with 10,000 partitions of which 100 have work (R-READ-3)", () => {
  it.effect("memory: lists exactly the 100 from its set of live partitions", () =>
    Effect.gen(function* () {
      yield* drainAllButBusy
      expect(yield* listed).toEqual(busy)
    }).pipe(Effect.provide(MemoryOutboxStore.layer))
  )

  it.effect("SQLite: lists exactly the 100 with one index seek each (skip scan; the fence table is not read)", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* persistAll
      // completed as a drainer would leave them (faster than 9,900 claims and completes)
      yield* sql.unsafe(
        `UPDATE outbox SET status = 'completed', completed_at = 1, terminal_at = 1 WHERE partition_key NOT IN (${busy.map(() => "?").join(", ")})`,
        busy
      )
      yield* sql.unsafe("ANALYZE")
      expect(yield* listed).toEqual(busy)
      expect(yield* sql.unsafe<{ readonly n: number }>("SELECT count(*) AS n FROM outbox_fence")).toEqual([
        { n: total }
      ])
      const plan = yield* Effect.map(
        sql.unsafe<{ readonly detail: string }>(
          `EXPLAIN QUERY PLAN ${SqliteOutboxSchema.statements(yield* SqliteOutboxSchema.tableNames(""), { staleReclaim: false }).listPartitions}`,
          ["", 100]
        ),
        (rows) => rows.map((row) => row.detail)
      )
      // two seeks in the plan (the first key, then each next key), no scan of a table
      expect(
        plan.filter((line) => line.startsWith("SEARCH o USING COVERING INDEX outbox_claim (partition_key>?)"))
      ).toHaveLength(2)
      expect(
        plan.filter((line) => line.startsWith("SCAN") && line !== "SCAN CONSTANT ROW" && line !== "SCAN k")
      ).toEqual([])
    }).pipe(
      Effect.provide(SqliteOutboxStore.layer.pipe(Layer.provideMerge(SqliteDatabase.layer({ filename: ":memory:" }))))
    )
  )

  describe("PostgreSQL", () => {
    const names = Either.getOrThrow(PostgresOutboxSchema.tableNames("test", "public", ""))

    interface Node {
      readonly "Node Type": string
      readonly "Relation Name"?: string | undefined
      readonly "Actual Rows": number
      readonly "Actual Loops": number
      readonly Plans?: ReadonlyArray<Node> | undefined
    }
    const Node: Schema.Schema<Node> = Schema.Struct({
      "Node Type": Schema.String,
      "Relation Name": Schema.optional(Schema.String),
      "Actual Rows": Schema.Number,
      "Actual Loops": Schema.Number,
      Plans: Schema.optional(Schema.Array(Schema.suspend(() => Node)))
    })
    const Explained = Schema.Array(Schema.Struct({ "QUERY PLAN": Schema.Tuple(Schema.Struct({ Plan: Node })) }))
    const nodesOf = (node: Node): Array<Node> => [node, ...(node.Plans ?? []).flatMap(nodesOf)]

    it.live("lists exactly the 100, reading about one index entry per partition with work (EXPLAIN ANALYZE)", () =>
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* persistAll
        yield* sql.unsafe(
          `UPDATE ${names.outbox} SET status = 'completed', completed_at = 1, terminal_at = 1 WHERE NOT (partition_key = ANY($1))`,
          [busy]
        )
        yield* sql.unsafe(`VACUUM ANALYZE ${names.outbox}`)
        expect(yield* listed).toEqual(busy)
        const text = PostgresOutboxSchema.statements(names, { staleReclaim: false }).listPartitions
        const rows = yield* sql.unsafe(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, ["", 1000])
        const decoded = yield* Schema.decodeUnknown(Explained)(rows)
        const root = decoded[0]?.["QUERY PLAN"][0].Plan
        expect(root).toBeDefined()
        const scans = (root === undefined ? [] : nodesOf(root)).filter((n) => n["Node Type"].includes("Scan"))
        expect(scans.filter((n) => n["Node Type"] === "Seq Scan" && n["Relation Name"] !== undefined)).toEqual([])
        const read = scans
          .filter((n) => n["Relation Name"] !== undefined)
          .reduce((sum, n) => sum + n["Actual Rows"] * n["Actual Loops"], 0)
        // one entry per listed partition (and the last, empty step): not the 10,000 partitions written
        expect(read).toBeLessThanOrEqual(2 * withWork + 2)
      }).pipe(Effect.provide(PostgresOutboxStore.layer.pipe(Layer.provideMerge(clientLayer(url)))))
    )
  })

  describe("DynamoDB", () => {
    const { dynamoLayer, makeLayer, tableName } = outboxTableForFile("listing")

    it.live("lists exactly the 100, reading one partition-index item each (9,900 de-listed fence items unread)", () =>
      Effect.gen(function* () {
        const dynamo = yield* DynamoDb
        // the fence items the 9,900 drained partitions leave behind (seq counter kept, no longer listed)
        const busySet = new Set(busy)
        const drained = Array.from({ length: total }, (_, i) => key(i)).filter((k) => !busySet.has(k))
        for (let from = 0; from < drained.length; from += 25) {
          let items: Record<string, Array<WriteRequest>> | undefined = {
            [tableName]: drained.slice(from, from + 25).map((partitionKey) => ({
              PutRequest: {
                Item: { ...RecordItem.fenceKey(partitionKey), seq_counter: { N: "1" }, max_claim_version: { N: "1" } }
              }
            }))
          }
          while (items !== undefined && Object.keys(items).length > 0) {
            const out: { readonly UnprocessedItems?: Record<string, Array<WriteRequest>> | undefined } =
              yield* dynamo.batchWriteItem({ RequestItems: items })
            items = out.UnprocessedItems
          }
        }
        const store = yield* OutboxStore
        yield* store.persist(
          busy.map(
            (partitionKey, i) =>
              new NewOutboxRecord({
                id: `d-${i}`,
                partitionKey,
                envelopeId: "e",
                bindingId: "b",
                payload: new Uint8Array([1])
              })
          )
        )
        let scanned = 0
        const counting = Layer.effect(
          DynamoDb,
          Effect.map(DynamoDb, (inner) =>
            DynamoDb.of({
              ...inner,
              query: (input) =>
                Effect.tap(inner.query(input), (out) =>
                  Effect.sync(() => {
                    scanned += out.ScannedCount ?? 0
                  })
                )
            })
          )
        )
        const keys = yield* listed.pipe(
          Effect.provide(
            DynamoDbOutboxStore.layerWith({ tableName, ensureTable: false, indexLagRetries: 0 }).pipe(
              Layer.provide(counting),
              Layer.provide(dynamoLayer)
            )
          )
        )
        expect(keys).toEqual(busy)
        expect(scanned).toBe(withWork)
      }).pipe(Effect.provide(Layer.merge(makeLayer({}), dynamoLayer)))
    )
  })
})
