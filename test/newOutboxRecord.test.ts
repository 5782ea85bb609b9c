/**
 * `NewOutboxRecord`'s constructor validates well-formed fields with a structural check (`NewRecordCheck`) and
 * runs the schema only for the rest: for any input, generated well-formed or broken, it must accept exactly what
 * the schema accepts and build exactly what the schema yields (the declared fields the input has, no others).
 */
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Schema from "effect/Schema"
import * as NewRecordCheck from "../src/domain/NewRecordCheck.js"
import { NewOutboxRecord, NewOutboxRecordFields } from "../src/domain/OutboxRecord.js"
import * as PrepareBatch from "../src/services/PrepareBatch.js"

const validate = Schema.validateEither(Schema.Struct(NewOutboxRecordFields))

/** The constructor's outcome: the instance, or the message it threw. */
const construct = (input: unknown): Either.Either<NewOutboxRecord, string> => {
  try {
    // the constructor is typed for well-formed fields; callers in JavaScript pass anything
    return Either.right(Reflect.construct(NewOutboxRecord, [input]))
  } catch (error) {
    return Either.left(error instanceof Error ? error.message : String(error))
  }
}

const utc = DateTime.unsafeMake(1_700_000_000_000)
const zoned = DateTime.unsafeMakeZoned(1_700_000_000_000, { timeZone: "Europe/Paris" })

/** A value for each field: well-formed ones and broken ones. */
const values = FastCheck.constantFrom<unknown>(
  undefined,
  null,
  "",
  "x",
  "p-1",
  0,
  1,
  true,
  [],
  {},
  { a: "1" },
  { a: 1 },
  ["a"],
  new Uint8Array([1, 2]),
  new Uint8Array(0),
  utc,
  zoned,
  Symbol.for("s")
)

const fieldNames = [
  "id",
  "partitionKey",
  "envelopeId",
  "bindingId",
  "payload",
  "headers",
  "orderingKey",
  "address",
  "routeId",
  "createdAt",
  "expiresAt"
] as const

/** A well-formed record's fields, some optional ones left out. */
const wellFormed = FastCheck.record(
  {
    id: FastCheck.constantFrom("r-1", "01JEXAMPLE"),
    partitionKey: FastCheck.constantFrom("p", "customer-7"),
    envelopeId: FastCheck.constantFrom("e", "env-1"),
    bindingId: FastCheck.constant("b"),
    payload: FastCheck.constant(new Uint8Array([7])),
    headers: FastCheck.constantFrom({}, { h: "v", "x-y": "" }),
    orderingKey: FastCheck.constantFrom("", "k"),
    address: FastCheck.constantFrom("", "https://example.test/x"),
    routeId: FastCheck.constantFrom("", "orders"),
    createdAt: FastCheck.constant(utc),
    expiresAt: FastCheck.constant(utc)
  },
  { requiredKeys: ["partitionKey", "envelopeId", "bindingId", "payload"] }
)

/** A well-formed record with some fields replaced, removed or set to undefined, and maybe an extra key. */
const inputs = FastCheck.tuple(
  wellFormed,
  FastCheck.array(FastCheck.tuple(FastCheck.constantFrom(...fieldNames), values), { maxLength: 3 }),
  FastCheck.boolean()
).map(([fields, changes, extra]) => {
  const input: Record<string, unknown> = { ...fields }
  for (const [name, value] of changes) input[name] = value
  if (extra) input["unexpected"] = "kept out"
  return input
})

describe("NewOutboxRecord constructor", () => {
  it("accepts exactly what the schema accepts and builds what it yields, for generated inputs", () => {
    FastCheck.assert(
      FastCheck.property(inputs, (input) => {
        const expected = validate(input)
        const actual = construct(input)
        expect(Either.isRight(actual)).toBe(Either.isRight(expected))
        if (Either.isRight(actual) && Either.isRight(expected)) {
          const built = new NewOutboxRecord(expected.right, true)
          expect(Object.keys(actual.right)).toEqual(Object.keys(built))
          expect(actual.right).toStrictEqual(built)
          expect(actual.right).not.toHaveProperty("unexpected")
          // the headers are the record's own copy
          if (typeof input["headers"] === "object" && input["headers"] !== null) {
            expect(actual.right.headers).not.toBe(input["headers"])
          }
        }
      }),
      { numRuns: 2_000 }
    )
  })

  it("names the field the schema rejects; options that disable validation are kept", () => {
    const message = construct({ partitionKey: "", envelopeId: "e", bindingId: "b", payload: new Uint8Array() })
    expect(Either.isLeft(message) ? message.left : "").toContain("partitionKey")
    const unchecked = new NewOutboxRecord(
      { partitionKey: "", envelopeId: "e", bindingId: "b", payload: new Uint8Array() },
      { disableValidation: true }
    )
    expect(unchecked.partitionKey).toBe("")
  })

  it.effect("a header named __proto__ is dropped as the schema drops it, by every backend's persist", () =>
    Effect.gen(function* () {
      // JSON gives an own property named `__proto__`; a literal would set the prototype instead
      const headers: unknown = JSON.parse('{"__proto__":"x","a":"1"}')
      const input = { partitionKey: "p", envelopeId: "e", bindingId: "b", payload: new Uint8Array(1), headers }
      expect(NewRecordCheck.quickFields(input)).toBeUndefined()
      const [prepared] = yield* PrepareBatch.prepare([input])
      expect(prepared?.headers).toEqual({ a: "1" })
      expect(Object.hasOwn(prepared?.headers ?? {}, "__proto__")).toBe(false)
    })
  )
})
