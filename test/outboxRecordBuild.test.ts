/**
 * `OutboxRecord.makeUnvalidated` builds the records every store reads back without running the class
 * constructor: for any well-formed fields it must build exactly what the constructor builds (the same
 * prototype, the same own keys in the same order, the same values, equal and with the same hash both ways),
 * and read only the record's fields from the object it is given. The check it makes when the module loads
 * covers one sample; these cover generated ones.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Arbitrary from "effect/Arbitrary"
import * as Equal from "effect/Equal"
import * as FastCheck from "effect/FastCheck"
import * as Hash from "effect/Hash"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import {
  fromPrepared,
  makeUnvalidated,
  OutboxRecord,
  type OutboxRecordFields,
  type PreparedRecord
} from "../src/domain/OutboxRecord.js"

const fieldsArbitrary = Arbitrary.make(Schema.Struct(OutboxRecord.fields))

/** The constructor's record, validation off (the fields are well-formed). */
const viaConstructor = (fields: OutboxRecordFields): OutboxRecord =>
  new OutboxRecord(fields, { disableValidation: true })

describe("OutboxRecord.makeUnvalidated", () => {
  it("builds what the constructor builds, for generated fields", () => {
    FastCheck.assert(
      FastCheck.property(fieldsArbitrary, (fields) => {
        const expected = viaConstructor(fields)
        const actual = makeUnvalidated(fields)
        expect(actual).toBeInstanceOf(OutboxRecord)
        expect(Object.getPrototypeOf(actual)).toBe(Object.getPrototypeOf(expected))
        expect(Reflect.ownKeys(actual)).toEqual(Reflect.ownKeys(expected))
        for (const key of Reflect.ownKeys(expected)) {
          expect(Reflect.get(actual, key)).toBe(Reflect.get(expected, key))
        }
        expect(Equal.equals(actual, expected)).toBe(true)
        expect(Equal.equals(expected, actual)).toBe(true)
        expect(Hash.hash(actual)).toBe(Hash.hash(expected))
        expect(actual).not.toBe(fields)
      }),
      { numRuns: 500 }
    )
  })

  it("reads only the record's fields from the object it is given", () => {
    FastCheck.assert(
      FastCheck.property(fieldsArbitrary, (fields) => {
        // a store's own object: its row's fields and more
        const row = { ...fields, terminal_at: 1, extra: "x" }
        const actual = makeUnvalidated(row)
        expect(Reflect.ownKeys(actual)).toEqual(Reflect.ownKeys(viaConstructor(fields)))
        expect(Equal.equals(actual, viaConstructor(fields))).toBe(true)
      }),
      { numRuns: 100 }
    )
  })

  it("fromPrepared builds the pending record of a prepared one, without its generatedId flag", () => {
    FastCheck.assert(
      FastCheck.property(fieldsArbitrary, FastCheck.boolean(), (fields, generatedId) => {
        const prepared: PreparedRecord = {
          id: fields.id,
          partitionKey: fields.partitionKey,
          envelopeId: fields.envelopeId,
          bindingId: fields.bindingId,
          routeId: fields.routeId,
          address: fields.address,
          payload: fields.payload,
          headers: fields.headers,
          orderingKey: fields.orderingKey,
          createdAt: fields.createdAt,
          expiresAt: fields.expiresAt,
          generatedId
        }
        const expected = viaConstructor({
          ...fields,
          status: "pending",
          claimedBy: Option.none(),
          claimVersion: 0,
          claimedAt: Option.none(),
          firstAttemptedAt: Option.none(),
          replayCount: 0,
          completedAt: Option.none()
        })
        const actual = fromPrepared(prepared, fields.seq)
        expect(Reflect.ownKeys(actual)).toEqual(Reflect.ownKeys(expected))
        expect(Equal.equals(actual, expected)).toBe(true)
      }),
      { numRuns: 200 }
    )
  })

  it("records built either way differ when a field differs", () => {
    FastCheck.assert(
      FastCheck.property(fieldsArbitrary, FastCheck.nat(), (fields, bump) => {
        const changed = makeUnvalidated({ ...fields, seq: fields.seq + bump + 1 })
        expect(Equal.equals(changed, viaConstructor(fields))).toBe(false)
        expect(changed.seq).toBe(fields.seq + bump + 1)
      }),
      { numRuns: 100 }
    )
  })
})
