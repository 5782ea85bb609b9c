/**
 * The shared SQL row decoding of the PostgreSQL and MySQL stores (`SqlOutboxRow`): a well-formed row is
 * read structurally into its record (the drivers' string integers included); a row that fails the
 * structural check goes through the schema, which accepts it or names the record in a `CorruptRecord`.
 */
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { isRowObject, decodeRow } from "../src/layers/sql/SqlOutboxRow.js"
import { storedRow } from "./support/StoredRow.js"

const row = (changes: Record<string, unknown> = {}) =>
  storedRow({
    envelope_id: "e1",
    payload: new Uint8Array([1, 2, 3]),
    headers: '{"h":"v"}',
    ordering_key: "k",
    seq: 7,
    ...changes
  })

describe("SqlOutboxRow.decodeRow", () => {
  it("reads a well-formed row, string integers included (as PostgreSQL's bigint columns arrive)", () => {
    for (const input of [row(), row({ created_at: "1700000000000", seq: "7" })]) {
      const decoded = decodeRow(input)
      if (Either.isLeft(decoded)) throw new Error(decoded.left.message)
      const record = decoded.right
      expect(record.id).toBe("01a242ff-2f88-7001-8000-000000000001")
      expect(record.seq).toBe(7)
      expect(DateTime.toEpochMillis(record.createdAt)).toBe(1_700_000_000_000)
      expect(record.orderingKey).toEqual(Option.some("k"))
      expect(record.headers).toEqual({ h: "v" })
      expect(Array.from(record.payload)).toEqual([1, 2, 3])
    }
  })

  it("names the record of a row that does not decode, and the column that is wrong", () => {
    for (const [changes, column] of [
      [{ status: "lost" }, "status"],
      [{ seq: -1 }, "seq"],
      [{ payload: "bytes" }, "payload"],
      [{ envelope_id: "" }, "envelope_id"]
    ] as const) {
      const decoded = decodeRow(row(changes))
      if (Either.isRight(decoded)) throw new Error(`accepted a row with a bad ${column}`)
      expect(decoded.left._tag).toBe("CorruptRecord")
      expect(decoded.left.recordId).toBe("01a242ff-2f88-7001-8000-000000000001")
      expect(decoded.left.partitionKey).toBe("p")
      expect(decoded.left.reason).toContain(column)
    }
  })

  it("a value that is not an object is not a row", () => {
    expect(isRowObject(row())).toBe(true)
    for (const input of [null, undefined, "row", 7]) {
      expect(isRowObject(input)).toBe(false)
      const decoded = decodeRow(input)
      expect(Either.isLeft(decoded) && decoded.left.recordId).toBe("<unknown>")
    }
  })
})
