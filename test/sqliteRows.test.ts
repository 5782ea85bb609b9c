/**
 * The SQLite store reads rows through a structural check and falls back to Schema decoding only for
 * rows the check does not accept. These tests pin that the two paths accept exactly the same rows, and
 * that the records a claim builds are the same values the `OutboxRecord` constructor builds.
 */
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Equal from "effect/Equal"
import * as Hash from "effect/Hash"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { NewOutboxRecord, OutboxRecord, Headers, RecordStatus } from "../src/domain/OutboxRecord.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteOutboxRows from "../src/layers/sqlite/SqliteOutboxRows.js"
import * as SqliteOutboxSchema from "../src/layers/sqlite/SqliteOutboxSchema.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import * as SqlOutboxStatements from "../src/layers/sql/SqlOutboxStatements.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { storedRow } from "./support/StoredRow.js"

const good = storedRow()

/** What the schemas alone say about a row (the reference the structural path must agree with). */
const schemaAccepts = (row: unknown): boolean => {
  const decoded = Schema.decodeUnknownEither(SqliteOutboxRows.Row)(row)
  if (Either.isLeft(decoded)) return false
  if (Either.isLeft(Schema.decodeUnknownEither(RecordStatus)(decoded.right.status))) return false
  return Either.isRight(Schema.decodeUnknownEither(Schema.parseJson(Headers))(decoded.right.headers))
}

const variants: ReadonlyArray<readonly [string, Record<string, unknown>]> = [
  ["well formed", {}],
  ["headers with values", { headers: '{"a":"1","traceparent":"00-x"}' }],
  ["headers with a number", { headers: '{"a":1}' }],
  ["headers an array", { headers: "[]" }],
  ["headers an array of strings", { headers: '["x"]' }],
  ["headers null", { headers: "null" }],
  ["headers not JSON", { headers: "{not json" }],
  ["headers with __proto__", { headers: '{"__proto__":"x"}' }],
  ["unknown status", { status: "sent" }],
  ["empty id", { id: "" }],
  ["numeric id", { id: 7 }],
  ["empty ordering key", { ordering_key: "" }],
  ["ordering key", { ordering_key: "k" }],
  ["fractional created_at", { created_at: 1.5 }],
  ["created_at as text", { created_at: "yesterday" }],
  ["unsafe integer", { created_at: 2 ** 60 }],
  ["negative seq", { seq: -1 }],
  ["claimed", { status: "claimed", claimed_by: "o", claim_version: 3, claimed_at: 5, first_attempted_at: 5 }],
  ["empty owner", { claimed_by: "" }],
  ["payload as text", { payload: "abc" }],
  ["missing column", { replay_count: undefined }],
  ["NaN version", { claim_version: Number.NaN }]
]

describe("SQLite row decoding", () => {
  it("the structural path accepts exactly the rows the schemas accept, and names the record otherwise", () => {
    for (const [name, change] of variants) {
      const row = { ...good, ...change }
      const decoded = SqliteOutboxRows.decodeRowFields(row)
      expect({ name, accepted: Either.isRight(decoded) }).toEqual({ name, accepted: schemaAccepts(row) })
      if (Either.isLeft(decoded) && typeof row.id === "string") expect(decoded.left.recordId).toBe(row.id)
    }
  })

  it("a row read as values becomes the row object of the columns the stores select, in their order", () => {
    // each value its column's name: a value under another column's name is a column out of place
    const row = SqliteOutboxRows.rowOfValues(SqlOutboxStatements.columns)
    expect(Object.keys(row)).toEqual(SqlOutboxStatements.columns)
    for (const [column, value] of Object.entries(row)) expect(value).toBe(column)
    // a short row (a column missing) is a corrupt row naming its id, not a record with a field unset
    const short = SqliteOutboxRows.decodeRowFields(
      SqliteOutboxRows.rowOfValues(SqlOutboxStatements.columns.slice(0, -1).map((column) => Reflect.get(good, column)))
    )
    expect(Either.isLeft(short) ? short.left.recordId : "accepted").toBe(good.id)
    const whole = SqliteOutboxRows.decodeRowFields(
      SqliteOutboxRows.rowOfValues(SqlOutboxStatements.columns.map((column) => Reflect.get(good, column)))
    )
    expect(Either.isRight(whole) ? whole.right.row : undefined).toEqual(good)
  })

  it("decoded headers are the parsed string map", () => {
    const decoded = SqliteOutboxRows.decodeRowFields({ ...good, headers: '{"a":"1","b":"2"}' })
    expect(Either.isRight(decoded) ? decoded.right.headers : undefined).toEqual({ a: "1", b: "2" })
  })

  it.effect("claimed records are OutboxRecord values equal to what the constructor builds", () =>
    Effect.gen(function* () {
      const store = yield* OutboxStore
      yield* store.persist([
        new NewOutboxRecord({
          id: "r1",
          partitionKey: "p",
          envelopeId: "e1",
          bindingId: "b",
          payload: new Uint8Array([1]),
          headers: { h: "v" },
          orderingKey: "k",
          expiresAt: DateTime.unsafeMake(1_900_000_000_000)
        }),
        new NewOutboxRecord({
          id: "r2",
          partitionKey: "p",
          envelopeId: "e2",
          bindingId: "b",
          payload: new Uint8Array()
        })
      ])
      const batch = yield* store.claim("p", { owner: "o", version: 1 }, 10)
      expect(batch.records.map((r) => r.id)).toEqual(["r1", "r2"])
      for (const record of batch.records) {
        const built = new OutboxRecord({ ...record }, { disableValidation: true })
        expect(record).toBeInstanceOf(OutboxRecord)
        expect(Schema.is(OutboxRecord)(record)).toBe(true)
        expect(Equal.equals(record, built)).toBe(true)
        expect(Hash.hash(record)).toBe(Hash.hash(built))
        expect(Reflect.ownKeys(record)).toEqual(Reflect.ownKeys(built))
      }
      const first = batch.records[0]
      expect(first?.headers).toEqual({ h: "v" })
      expect(first?.orderingKey).toEqual(Option.some("k"))
      expect(first?.claimedBy).toEqual(Option.some("o"))
      expect(first?.replayCount).toBe(1)
    }).pipe(Effect.provide(SqliteOutboxStore.layer.pipe(Layer.provide(SqliteDatabase.layer({ filename: ":memory:" })))))
  )
})
