/**
 * A consumer program of the packed `effect-outbox`, installed from its tarball into a throw-away project
 * by test/packaging.test.ts (SQLite-only: no `@aws-sdk/client-dynamodb`, no `@effect/opentelemetry`).
 * It persists inside its own `sql.withTransaction` on SQLite `:memory:` (one commit, one rollback), runs
 * a `Relay` delivering to a custom `Sink`, and runs the memory backend with `Enqueue` backpressure. Each
 * step prints one `ok …` line; any mismatch fails the process.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Deferred, Effect, Layer, Ref, Schema } from "effect"
import {
  Enqueue,
  LeaseToken,
  MemoryDeadLetterStore,
  MemoryLeaseStore,
  MemoryOutboxStore,
  OutboxRecord,
  OutboxStore,
  Relay,
  Sink
} from "effect-outbox"
import { SqliteDatabase, SqliteDeadLetterStore, SqliteLeaseStore, SqliteOutboxStore } from "effect-outbox/sqlite"

class OrderRejected extends Schema.TaggedError<OrderRejected>()("OrderRejected", { orderId: Schema.String }) {}

const encoder = new TextEncoder()

const record = (partitionKey: string, envelopeId: string): OutboxRecord.NewOutboxRecord =>
  new OutboxRecord.NewOutboxRecord({
    partitionKey,
    envelopeId,
    bindingId: "billing",
    orderingKey: envelopeId.split("-")[1],
    payload: encoder.encode(JSON.stringify({ envelopeId }))
  })

const check = (label: string, actual: unknown, expected: unknown): Effect.Effect<void, Error> => {
  const a = JSON.stringify(actual)
  const e = JSON.stringify(expected)
  return a === e
    ? Effect.sync(() => console.log(`ok ${label}: ${a}`))
    : Effect.fail(new Error(`${label}: ${a} !== ${e}`))
}

const placeOrder = (orderId: string, reject: boolean) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const store = yield* OutboxStore.OutboxStore
    yield* sql.withTransaction(
      Effect.gen(function* () {
        yield* sql`INSERT INTO orders (id) VALUES (${orderId})`
        yield* store.persist([record("orders", `placed-${orderId}`)])
        if (reject) return yield* new OrderRejected({ orderId })
      })
    )
  })

const transactionalEnqueue = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const store = yield* OutboxStore.OutboxStore
  yield* sql`CREATE TABLE orders (id TEXT PRIMARY KEY NOT NULL)`
  yield* placeOrder("A1", false)
  const rejected = yield* placeOrder("A2", true).pipe(
    Effect.as("committed"),
    Effect.catchTag("OrderRejected", (error) => Effect.succeed(`rolled back ${error.orderId}`))
  )
  const orders = yield* sql<{ id: string }>`SELECT id FROM orders ORDER BY id`
  const pending = yield* store.queryPending("orders", 10)
  yield* check(
    "sqlite transaction",
    { orders: orders.map((row) => row.id), rejected },
    {
      orders: ["A1"],
      rejected: "rolled back A2"
    }
  )
  yield* check(
    "sqlite pending after rollback",
    pending.map((r) => r.envelopeId),
    ["placed-A1"]
  )
})

/** A custom sink: collects payloads and signals once `expected` records arrived. */
const collectingSink = (expected: number, delivered: Ref.Ref<ReadonlyArray<string>>, done: Deferred.Deferred<void>) =>
  Layer.succeed(
    Sink.Sink,
    Sink.Sink.of({
      send: (outboxRecord) =>
        Ref.updateAndGet(delivered, (all) => [...all, outboxRecord.envelopeId]).pipe(
          Effect.flatMap((all) => (all.length >= expected ? Deferred.succeed(done, undefined) : Effect.void)),
          Effect.asVoid
        )
    })
  )

const relayToCustomSink = Effect.gen(function* () {
  const store = yield* OutboxStore.OutboxStore
  yield* store.persist([record("orders", "placed-B1"), record("orders", "placed-B2"), record("invoices", "sent-C1")])
  const delivered = yield* Ref.make<ReadonlyArray<string>>([])
  const done = yield* Deferred.make<void>()
  yield* Effect.scoped(
    Effect.gen(function* () {
      yield* Relay.start({ owner: "consumer-relay", discoveryInterval: "50 millis" })
      yield* Deferred.await(done).pipe(
        Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => new Error("relay timed out") })
      )
    }).pipe(Effect.provide(collectingSink(4, delivered, done)))
  )
  const seen = yield* Ref.get(delivered)
  yield* check("relay to custom sink", [...seen].sort(), ["placed-A1", "placed-B1", "placed-B2", "sent-C1"])
  yield* check("nothing pending after relay", yield* store.countPending("orders"), 0)
})

const sqliteLayer = Layer.mergeAll(SqliteLeaseStore.layer, SqliteDeadLetterStore.layer).pipe(
  Layer.provideMerge(SqliteOutboxStore.layer),
  Layer.provideMerge(SqliteDatabase.layer({ filename: ":memory:" }))
)

const memoryLayer = Layer.mergeAll(
  MemoryLeaseStore.layer,
  MemoryDeadLetterStore.layer,
  Enqueue.layerWith({ maxOutboxDepth: 2 })
).pipe(Layer.provideMerge(MemoryOutboxStore.layer))

const memoryBackend = Effect.gen(function* () {
  const store = yield* OutboxStore.OutboxStore
  yield* Enqueue.enqueue([record("p", "e-1"), record("p", "e-2")])
  const full = yield* Enqueue.enqueue([record("p", "e-3")]).pipe(Effect.flip)
  yield* check("memory enqueue backpressure", full._tag, "OutboxFull")
  const token = new LeaseToken.LeaseToken({ owner: "test", version: 1 })
  const batch = yield* store.claim("p", token, 10)
  yield* store.complete(
    batch.records.map((r) => r.id),
    token
  )
  yield* check(
    "memory claim and complete",
    { claimed: batch.records.length, pending: yield* store.countPending("p") },
    {
      claimed: 2,
      pending: 0
    }
  )
})

const main = Effect.gen(function* () {
  yield* Effect.zipRight(transactionalEnqueue, relayToCustomSink).pipe(Effect.provide(sqliteLayer))
  yield* memoryBackend.pipe(Effect.provide(memoryLayer))
  console.log("consumer ok")
})

Effect.runPromise(main).catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
