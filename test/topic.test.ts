/**
 * Typed topics (SPEC §11): declaring a topic (types flow from the Schema into the key functions and into
 * `publish`), publishing through the store and through `Enqueue` (records built from the value, typed
 * `InvalidRecord` naming topic and field, the same event twice is `skipped`, joining the caller's SQLite
 * transaction), and decoding a record, a webhook body and a broker message back to the value with its
 * metadata (typed `DecodeError` for foreign or malformed input).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, expect, expectTypeOf, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import type { DecodeError } from "../src/domain/OutboxError.js"
import * as OutboxRecord from "../src/domain/OutboxRecord.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as RecordJson from "../src/layers/sinks/RecordJson.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import * as Enqueue from "../src/programs/Enqueue.js"
import * as Topic from "../src/programs/Topic.js"
import { OutboxStore } from "../src/services/OutboxStore.js"

class OrderPlaced extends Schema.Class<OrderPlaced>("OrderPlaced")({
  orderId: Schema.String,
  customer: Schema.String,
  totalCents: Schema.Number,
  placedAt: Schema.DateTimeUtc
}) {}

const OrderPlacedTopic = Topic.make({
  name: "order.placed",
  payload: OrderPlaced,
  partitionKey: (order) => `customer-${order.customer}`,
  orderingKey: (order) => `order-${order.orderId}`,
  idempotencyKey: (order) => order.orderId,
  route: "orders",
  headers: { source: "shop" }
})

const InvoiceIssued = Topic.make({
  name: "invoice.issued",
  payload: { invoiceId: Schema.String, amount: Schema.BigInt, note: Schema.optional(Schema.String) },
  partitionKey: (invoice) => `invoice-${invoice.invoiceId}`,
  idempotencyKey: (invoice) => invoice.invoiceId,
  address: (invoice) => `https://billing.example/invoices/${invoice.invoiceId}`,
  expiresIn: "1 hour"
})

const order = (orderId: string) =>
  new OrderPlaced({ orderId, customer: "ada", totalCents: 1250, placedAt: DateTime.unsafeMake(1_700_000_000_000) })

const memory = MemoryOutboxStore.layer

/** The one pending record of a partition. */
const onlyPending = (partitionKey: string) =>
  Effect.flatMap(OutboxStore, (store) => store.queryPending(partitionKey, 10)).pipe(
    Effect.tap((records) => expect(records).toHaveLength(1)),
    Effect.map((records) => records[0]),
    Effect.flatMap(Effect.fromNullable),
    Effect.orDie
  )

describe("Topic.make", () => {
  it("types flow from the payload Schema into the key functions, publish and decode", () => {
    expectTypeOf(OrderPlacedTopic).toEqualTypeOf<Topic.Topic<OrderPlaced, typeof OrderPlaced.Encoded>>()
    expectTypeOf<Topic.Type<typeof InvoiceIssued>>().toEqualTypeOf<{
      readonly invoiceId: string
      readonly amount: bigint
      readonly note?: string | undefined
    }>()
    Topic.make({
      name: "typed",
      payload: { orderId: Schema.String },
      partitionKey: (value) => {
        expectTypeOf(value).toEqualTypeOf<{ readonly orderId: string }>()
        return value.orderId
      },
      idempotencyKey: (value) => value.orderId
    })
    const Typed = Topic.make({
      name: "typed",
      payload: { orderId: Schema.String },
      partitionKey: (value) => value.orderId,
      idempotencyKey: (value) => value.orderId
    })
    expectTypeOf(Topic.publish<{ readonly orderId: string }, { readonly orderId: string }>)
      .parameter(1)
      .toEqualTypeOf<{ readonly orderId: string }>()
    // @ts-expect-error the schema says orderId is a string
    const wrong = () => Topic.publish(Typed, { orderId: 1 })
    expect(typeof wrong).toBe("function")
    expectTypeOf(Topic.decode(Typed, { body: "" })).toEqualTypeOf<
      Either.Either<Topic.Decoded<{ readonly orderId: string }>, DecodeError>
    >()
    Topic.make({
      name: "typed",
      payload: { orderId: Schema.String },
      // @ts-expect-error a key function returns a string
      partitionKey: (value) => value.orderId.length,
      idempotencyKey: (value) => value.orderId
    })
  })

  it("refuses a topic name or route that cannot travel in a header", () => {
    const make = (name: string, route?: string) => () =>
      Topic.make({ name, route, payload: Schema.String, partitionKey: (s) => s, idempotencyKey: (s) => s })
    expect(make("")).toThrow(/topic name/)
    expect(make("order placed")).toThrow(/topic name/)
    expect(make("100%")).toThrow(/topic name/)
    expect(make("ok", "ro ute")).toThrow(/route/)
    expect(make("order.placed")).not.toThrow()
  })
})

describe("Topic.publish", () => {
  it.effect("SPEC §11 builds the record from the value: partition, keys, route, headers, JSON payload", () =>
    Effect.gen(function* () {
      const result = yield* Topic.publish(OrderPlacedTopic, order("A-1"))
      expect(result.outcome).toBe("published")
      const record = yield* onlyPending("customer-ada")
      expect(record.id).toBe(result.recordId)
      expect(record.envelopeId).toBe("order.placed:A-1")
      expect(record.bindingId).toBe("orders")
      expect(record.routeId).toBe("orders")
      expect(record.orderingKey).toEqual(Option.some("order-A-1"))
      expect(record.headers).toEqual({
        source: "shop",
        "Content-Type": "application/json",
        "Outbox-Topic": "order.placed"
      })
      expect(JSON.parse(new TextDecoder().decode(record.payload))).toEqual({
        orderId: "A-1",
        customer: "ada",
        totalCents: 1250,
        placedAt: "2023-11-14T22:13:20.000Z"
      })
    }).pipe(Effect.provide(memory))
  )

  it.effect("SPEC §11 address per value, expiresAt = now + expiresIn, route defaults to the name", () =>
    Effect.gen(function* () {
      yield* TestClock.adjust("10 seconds")
      yield* Topic.publish(InvoiceIssued, { invoiceId: "I-7", amount: 12n })
      const record = yield* onlyPending("invoice-I-7")
      expect(record.address).toBe("https://billing.example/invoices/I-7")
      expect(record.routeId).toBe("invoice.issued")
      expect(Option.map(record.expiresAt, DateTime.toEpochMillis)).toEqual(Option.some(10_000 + 3_600_000))
    }).pipe(Effect.provide(memory))
  )

  it.effect("R-PERSIST-1 publishing the same event twice is skipped, naming the record that holds it", () =>
    Effect.gen(function* () {
      const first = yield* Topic.publish(OrderPlacedTopic, order("A-2"))
      const second = yield* Topic.publish(OrderPlacedTopic, order("A-2"))
      expect(second).toEqual({ outcome: "skipped", recordId: first.recordId })
      const report = yield* Topic.publishAll(OrderPlacedTopic, [order("A-2"), order("A-3")])
      expect(report.persisted).toHaveLength(1)
      expect(report.skipped).toHaveLength(1)
      expect(report.existingIds).toEqual([first.recordId])
      expect(yield* Effect.flatMap(OutboxStore, (s) => s.countPending("customer-ada"))).toBe(2)
    }).pipe(Effect.provide(memory))
  )

  it.effect(
    "R-PERSIST-5 an encode failure is InvalidRecord naming topic and field, never the value; nothing stored",
    () =>
      Effect.gen(function* () {
        const Signup = Topic.make({
          name: "user.signed-up",
          payload: { email: Schema.String.pipe(Schema.pattern(/@/)), tier: Schema.Literal("free", "pro") },
          partitionKey: (u) => u.email,
          idempotencyKey: (u) => u.email
        })
        const error = yield* Effect.flip(
          Topic.publishAll(Signup, [
            { email: "ok@example.com", tier: "free" },
            { email: "secret-value-without-at", tier: "pro" }
          ])
        )
        assert(error._tag === "InvalidRecord")
        expect(error.topic).toBe("user.signed-up")
        expect(error.field).toBe("email")
        expect(error.index).toBe(1)
        expect(error.message).toContain("user.signed-up")
        expect(error.message).toContain("email")
        expect(error.message).not.toContain("secret-value")
        expect(yield* Effect.flatMap(OutboxStore, (s) => s.countPending("ok@example.com"))).toBe(0)
      }).pipe(Effect.provide(memory))
  )

  it.effect("a value without a JSON form (bigint without a string encoding) or an empty key is InvalidRecord", () =>
    Effect.gen(function* () {
      const Raw = Topic.make({
        name: "raw",
        payload: { n: Schema.BigIntFromSelf, key: Schema.String },
        partitionKey: (v) => v.key,
        idempotencyKey: (v) => v.key
      })
      const bigint = yield* Effect.flip(Topic.publish(Raw, { n: 1n, key: "k" }))
      assert(bigint._tag === "InvalidRecord")
      expect(bigint.reason).toContain("JSON")
      const empty = yield* Effect.flip(Topic.publish(Raw, { n: 1n, key: "" }))
      assert(empty._tag === "InvalidRecord")
      expect(empty.field).toBe("partitionKey")
    }).pipe(Effect.provide(memory))
  )

  it.effect(
    "a header value that is not a string, or a codec that returns no bytes, is InvalidRecord naming the field; nothing stored",
    () =>
      Effect.gen(function* () {
        // JavaScript callers are not held to the types: a number where a header value belongs
        const headers: Record<string, string> = JSON.parse('{"source":"shop","retries":3}')
        const Loose = Topic.make({
          name: "loose",
          payload: { id: Schema.String },
          partitionKey: (v) => `loose-${v.id}`,
          idempotencyKey: (v) => v.id,
          headers
        })
        const header = yield* Effect.flip(Topic.publish(Loose, { id: "L-1" }))
        assert(header._tag === "InvalidRecord")
        expect(header.field).toBe("headers")
        expect(header.message).toContain('"retries" is not a string')
        const text: Uint8Array = JSON.parse('"not bytes"')
        const NoBytes = Topic.make({
          name: "no-bytes",
          payload: { id: Schema.String },
          partitionKey: (v) => `loose-${v.id}`,
          idempotencyKey: (v) => v.id,
          codec: { ...Topic.json, encode: () => Either.right(text) }
        })
        const bytes = yield* Effect.flip(Topic.publish(NoBytes, { id: "L-2" }))
        assert(bytes._tag === "InvalidRecord")
        expect(bytes.field).toBe("(value)")
        expect(bytes.message).toContain("not encoded to bytes")
        expect(yield* Effect.flatMap(OutboxStore, (s) => s.countPending("loose-L-1"))).toBe(0)
        expect(yield* Effect.flatMap(OutboxStore, (s) => s.countPending("loose-L-2"))).toBe(0)
        // with well-formed headers the record carries them, beside the content type and topic
        const Fine = Topic.make({
          name: "fine",
          payload: { id: Schema.String },
          partitionKey: (v) => `loose-${v.id}`,
          idempotencyKey: (v) => v.id,
          headers: (v) => ({ id: v.id })
        })
        yield* Topic.publish(Fine, { id: "L-3" })
        expect((yield* onlyPending("loose-L-3")).headers).toEqual({
          id: "L-3",
          "Content-Type": "application/json",
          "Outbox-Topic": "fine"
        })
      }).pipe(Effect.provide(memory))
  )

  it.effect("SPEC §7 through Enqueue: OutboxFull stores nothing; a duplicate is skipped", () =>
    Effect.gen(function* () {
      const first = yield* Topic.enqueue(OrderPlacedTopic, order("E-1"))
      expect(first.outcome).toBe("published")
      expect((yield* Topic.enqueue(OrderPlacedTopic, order("E-1"))).outcome).toBe("skipped")
      yield* Topic.publish(OrderPlacedTopic, order("E-2"))
      yield* Effect.flatMap(Enqueue.Enqueue, (e) => e.invalidate)
      const full = yield* Effect.flip(Topic.enqueue(OrderPlacedTopic, order("E-3")))
      expect(full._tag).toBe("OutboxFull")
      expect(yield* Effect.flatMap(OutboxStore, (s) => s.countPending("customer-ada"))).toBe(2)
    }).pipe(Effect.provide(Layer.provideMerge(Enqueue.layerWith({ maxOutboxDepth: 2 }), memory)))
  )

  it.effect("R-PERSIST-6 publish joins the caller's SQLite transaction: a rollback removes the event too", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE orders (id TEXT PRIMARY KEY)`
      const place = (id: string, fail: boolean) =>
        sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`INSERT INTO orders (id) VALUES (${id})`
            yield* Topic.publish(OrderPlacedTopic, order(id))
            if (fail) return yield* Effect.fail("payment declined" as const)
          })
        )
      yield* place("T-1", false)
      expect(yield* Effect.flip(place("T-2", true))).toBe("payment declined")
      const pending = yield* Effect.flatMap(OutboxStore, (s) => s.queryPending("customer-ada", 10))
      expect(pending.map((r) => r.envelopeId)).toEqual(["order.placed:T-1"])
      expect(yield* sql<{ id: string }>`SELECT id FROM orders`).toEqual([{ id: "T-1" }])
    }).pipe(Effect.provide(Layer.provideMerge(SqliteOutboxStore.layer, SqliteDatabase.layer({ filename: ":memory:" }))))
  )
})

/** A stored record as a claim returns it. */
const stored = (record: OutboxRecord.NewOutboxRecord, seq: number) =>
  OutboxRecord.fromPrepared(
    {
      id: `rec-${seq}`,
      partitionKey: record.partitionKey,
      envelopeId: record.envelopeId,
      bindingId: record.bindingId,
      routeId: record.routeId ?? "",
      address: record.address ?? "",
      payload: record.payload,
      headers: record.headers ?? {},
      orderingKey: Option.fromNullable(record.orderingKey),
      createdAt: DateTime.unsafeMake(1_700_000_000_123),
      expiresAt: Option.none()
    },
    seq
  )

const recordOf = <A, I>(topic: Topic.Topic<A, I>, value: A, seq = 7) =>
  Either.map(Topic.toRecord(topic, value, DateTime.unsafeMake(0)), (r) => stored(r, seq)).pipe(Either.getOrThrow)

describe("Topic.decode", () => {
  const record = recordOf(OrderPlacedTopic, order("D-1"))
  const metadata: Topic.MessageMetadata = {
    recordId: "rec-7",
    topic: "order.placed",
    partitionKey: "customer-ada",
    orderingKey: Option.some("order-D-1"),
    seq: 7,
    createdAt: DateTime.unsafeMake(1_700_000_000_123),
    headers: { source: "shop", "Content-Type": "application/json", "Outbox-Topic": "order.placed" }
  }

  it("a stored record, a webhook body and a broker message decode to the value and the same metadata", () => {
    const fromRecord = Either.getOrThrow(Topic.decode(OrderPlacedTopic, record))
    expect(fromRecord.value).toEqual(order("D-1"))
    expect(fromRecord.metadata).toEqual(metadata)
    const fromWebhook = Either.getOrThrow(Topic.decode(OrderPlacedTopic, { body: RecordJson.encode(record) }))
    expect(fromWebhook).toEqual(fromRecord)
    const wire = { ...record.headers, ...Topic.wireHeaders(record), "Nats-Msg-Id": record.id }
    const fromWire = Either.getOrThrow(Topic.decode(OrderPlacedTopic, { headers: wire, data: record.payload }))
    expect(fromWire).toEqual(fromRecord)
    // header names are matched case-insensitively (HTTP servers lower-case them)
    const lower = Object.fromEntries(Object.entries(wire).map(([k, v]) => [k.toLowerCase(), v]))
    expect(Either.getOrThrow(Topic.decode(OrderPlacedTopic, { headers: lower, data: record.payload })).value).toEqual(
      order("D-1")
    )
  })

  it("SPEC §11 wire headers: Outbox-Record-Id, -Topic, -Partition, -Ordering-Key, -Seq, -Created-At", () => {
    expect(Topic.wireHeaders(record)).toEqual({
      "Outbox-Record-Id": "rec-7",
      "Outbox-Topic": "order.placed",
      "Outbox-Partition": "customer-ada",
      "Outbox-Ordering-Key": "order-D-1",
      "Outbox-Seq": "7",
      "Outbox-Created-At": "2023-11-14T22:13:20.123Z"
    })
  })

  it("writeWireHeaders writes the same headers into a sink's object, over the record's own of the same name", () => {
    const target: Record<string, string> = {
      source: "shop",
      "Outbox-Seq": "999",
      "Outbox-Ordering-Key": "forged"
    }
    const written = Topic.writeWireHeaders(record, target)
    expect(written).toBe(target)
    expect(written).toEqual({ source: "shop", ...Topic.wireHeaders(record) })
    // a keyless record writes no ordering key: a header of that name stays as the record had it
    const keyless = OutboxRecord.update(record, { orderingKey: Option.none() })
    expect(Topic.writeWireHeaders(keyless, { "Outbox-Ordering-Key": "mine" })).toEqual({
      ...Topic.wireHeaders(keyless),
      "Outbox-Ordering-Key": "mine"
    })
    expect(Topic.wireHeaders(keyless)).not.toHaveProperty("Outbox-Ordering-Key")
  })

  it("header values survive any key (unicode, spaces, %): escaped on the wire, decoded back", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.string({ unit: "binary", minLength: 1, maxLength: 24 }), (key) => {
        const escaped = Topic.encodeHeaderValue(key)
        expect(escaped).toMatch(/^[\x21-\x7e]*$/)
        expect(Topic.decodeHeaderValue(escaped)).toEqual(Option.some(key))
      })
    )
    expect(Topic.encodeHeaderValue("order-42")).toBe("order-42")
  })

  it("a message of another topic, without outbox headers, or with a malformed payload is a DecodeError", () => {
    const invoice = recordOf(InvoiceIssued, { invoiceId: "I-1", amount: 5n })
    const other = Either.flip(Topic.decode(OrderPlacedTopic, invoice)).pipe(Either.getOrThrow)
    expect(other).toMatchObject({ _tag: "DecodeError", topic: "order.placed", field: "Outbox-Topic" })
    const foreign = Either.flip(Topic.decode(OrderPlacedTopic, { headers: {}, data: new Uint8Array([1]) }))
    expect(Either.getOrThrow(foreign)).toMatchObject({ _tag: "DecodeError", field: "Outbox-Record-Id" })
    const notJson = Either.flip(
      Topic.decode(OrderPlacedTopic, { headers: Topic.wireHeaders(record), data: new Uint8Array([0xff, 0x00]) })
    )
    expect(Either.getOrThrow(notJson)).toMatchObject({ field: "(payload)" })
    const wrongShape = Either.flip(
      Topic.decode(OrderPlacedTopic, {
        headers: Topic.wireHeaders(record),
        data: new TextEncoder().encode(JSON.stringify({ orderId: "secret-42", customer: 3 }))
      })
    ).pipe(Either.getOrThrow)
    expect(wrongShape).toMatchObject({ field: "customer", recordId: "rec-7" })
    expect(wrongShape.message).not.toContain("secret-42")
    const badSeq = Either.flip(
      Topic.decode(OrderPlacedTopic, {
        headers: { ...Topic.wireHeaders(record), "Outbox-Seq": "x" },
        data: record.payload
      })
    )
    expect(Either.getOrThrow(badSeq)).toMatchObject({ field: "Outbox-Seq" })
    for (const body of ["not json", "{}", JSON.stringify({ ...RecordJson.toJson(record), payload: 42 })]) {
      expect(Either.isLeft(Topic.decode(OrderPlacedTopic, { body }))).toBe(true)
    }
  })
})
