/**
 * The `OutboxInspection` port on every backend (memory, SQLite with and without a table prefix, DynamoDB
 * Local): one suite, one line per backend. It pins what `inspect` and an operations dashboard read: depths,
 * oldest pending record, fence high-water mark (R-CLAIM-4), lease, stranded heads, dead-letter counts, and
 * which facts a backend declares unsupported.
 */
import * as PostgresDeadLetterStore from "../src/layers/postgres/PostgresDeadLetterStore.js"
import * as MysqlDeadLetterStore from "../src/layers/mysql/MysqlDeadLetterStore.js"
import * as MysqlInspection from "../src/layers/mysql/MysqlInspection.js"
import * as MysqlLeaseStore from "../src/layers/mysql/MysqlLeaseStore.js"
import * as MysqlOutboxStore from "../src/layers/mysql/MysqlOutboxStore.js"
import * as PostgresInspection from "../src/layers/postgres/PostgresInspection.js"
import * as PostgresLeaseStore from "../src/layers/postgres/PostgresLeaseStore.js"
import * as PostgresOutboxStore from "../src/layers/postgres/PostgresOutboxStore.js"
import { clientLayer as mysqlClientLayer, createDatabase as createMysqlDatabase } from "./support/MysqlServer.js"
import { clientLayer, createDatabase } from "./support/PostgresServer.js"
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, inject } from "vitest"
import { DeadLetterEntry } from "../src/domain/DeadLetterEntry.js"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as DynamoDbDeadLetterStore from "../src/layers/dynamodb/DynamoDbDeadLetterStore.js"
import * as DynamoDbInspection from "../src/layers/dynamodb/DynamoDbInspection.js"
import * as DynamoDbLeaseStore from "../src/layers/dynamodb/DynamoDbLeaseStore.js"
import * as DynamoDbOutboxStore from "../src/layers/dynamodb/DynamoDbOutboxStore.js"
import * as MemoryDeadLetterStore from "../src/layers/memory/MemoryDeadLetterStore.js"
import * as MemoryInspection from "../src/layers/memory/MemoryInspection.js"
import * as MemoryLeaseStore from "../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteDeadLetterStore from "../src/layers/sqlite/SqliteDeadLetterStore.js"
import * as SqliteInspection from "../src/layers/sqlite/SqliteInspection.js"
import * as SqliteLeaseStore from "../src/layers/sqlite/SqliteLeaseStore.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import { DeadLetterStore } from "../src/services/DeadLetterStore.js"
import * as DynamoDb from "../src/services/DynamoDb.js"
import { LeaseStore } from "../src/services/LeaseStore.js"
import { OutboxInspection } from "../src/services/OutboxInspection.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { makeTestClientConfig, randomTableName } from "./support/DynamoLocal.js"

type Stores = OutboxStore | LeaseStore | DeadLetterStore | OutboxInspection

/** What the backend answers: memory has no fence, claim age or emptied partitions. */
interface Capabilities {
  readonly fence: boolean
  readonly claimAge: boolean
  readonly emptiedPartitions: boolean
}

let counter = 0
const unique = (prefix: string): string => `${prefix}-${++counter}-${Math.random().toString(36).slice(2, 8)}`
const bytes = (text: string) => new TextEncoder().encode(text)
const at = (millis: number) => DateTime.unsafeMake(millis)

const entry = (partitionKey: string, category: "poison" | "permanent" | "expired") =>
  new DeadLetterEntry({
    id: unique("dlq"),
    recordId: unique("rec"),
    partitionKey,
    envelopeId: unique("env"),
    bindingId: "b",
    payload: bytes("x"),
    headers: {},
    orderingKey: undefined,
    routeId: undefined,
    address: undefined,
    category,
    reason: "sink rejected",
    errorCode: "E400",
    lastError: "400",
    attempts: 1,
    failedAt: at(1_000)
  })

const inspectionSuite = (name: string, capabilities: Capabilities, layer: () => Layer.Layer<Stores, unknown>) =>
  describe(`OutboxInspection on ${name}`, () => {
    it.effect("reports depths, oldest pending, fence, lease and dead letters of each partition", () =>
      Effect.gen(function* () {
        yield* TestClock.setTime(1_000_000)
        const store = yield* OutboxStore
        const leases = yield* LeaseStore
        const dlq = yield* DeadLetterStore
        const inspection = yield* OutboxInspection
        const busy = unique("busy")
        const emptied = unique("emptied")
        const record = (partitionKey: string, n: number, createdAt: number) =>
          new NewOutboxRecord({
            partitionKey,
            envelopeId: `env-${n}`,
            bindingId: "b",
            payload: bytes(`p${n}`),
            createdAt: at(createdAt)
          })
        yield* store.persist([record(busy, 1, 900_000), record(busy, 2, 910_000), record(busy, 3, 920_000)])
        yield* store.persist([record(emptied, 4, 950_000)])

        const lease = yield* leases.acquire(busy, "relay-a", "30 seconds")
        const claimed = yield* store.claim(busy, lease.token, 1)
        expect(claimed.records.map((r) => r.envelopeId)).toEqual(["env-1"])
        const other = yield* leases.acquire(emptied, "relay-b", "30 seconds")
        const drained = yield* store.claim(emptied, other.token, 10)
        yield* store.complete(
          drained.records.map((r) => r.id),
          other.token
        )
        yield* leases.release(emptied, other.token)
        yield* dlq.write(entry(busy, "poison"))
        yield* dlq.write(entry(busy, "poison"))
        yield* dlq.write(entry(busy, "expired"))

        const known = yield* inspection.partitions
        expect(known).toContain(busy)
        expect(known.includes(emptied)).toBe(capabilities.emptiedPartitions)

        const p = yield* inspection.partition(busy)
        expect(p.partitionKey).toBe(busy)
        expect(p.pending).toEqual(Either.right(2))
        expect(p.claimed).toEqual(Either.right(1))
        expect(Either.map(p.oldestPendingAt, Option.map(DateTime.toEpochMillis))).toEqual(
          Either.right(Option.some(910_000))
        )
        if (capabilities.fence) expect(p.fence).toEqual(Either.right(lease.token.version))
        else expect(Either.isLeft(p.fence)).toBe(true)
        if (capabilities.claimAge) {
          expect(Either.map(p.oldestClaimedAt, Option.map(DateTime.toEpochMillis))).toEqual(
            Either.right(Option.some(1_000_000))
          )
        } else {
          expect(Either.isLeft(p.oldestClaimedAt)).toBe(true)
        }
        const view = Either.getOrThrow(p.lease)
        expect(Option.map(view, (l) => [l.owner, l.version])).toEqual(Option.some(["relay-a", lease.token.version]))
        expect(p.stranded).toEqual(Option.none())

        const snapshot = yield* inspection.snapshot()
        expect(snapshot.backend).toBe(inspection.backend)
        expect(snapshot.partitions.map((q) => q.partitionKey)).toEqual(known)
        expect(snapshot.deadLetters).toEqual({ poison: 2, permanent: 0, expired: 1 })
        if (capabilities.emptiedPartitions) {
          const gone = snapshot.partitions.find((q) => q.partitionKey === emptied)
          expect(gone?.pending).toEqual(Either.right(0))
          expect(gone?.lease).toEqual(Either.right(Option.none()))
          expect(Option.isNone(gone?.stranded ?? Option.some("claimedTooLong"))).toBe(true)
        }
      }).pipe(Effect.provide(layer()))
    )

    it.effect("flags a stranded head: claims left without a live lease, or held past the threshold", () =>
      Effect.gen(function* () {
        yield* TestClock.setTime(2_000_000)
        const store = yield* OutboxStore
        const leases = yield* LeaseStore
        const inspection = yield* OutboxInspection
        const key = unique("stranded")
        yield* store.persist([
          new NewOutboxRecord({ partitionKey: key, envelopeId: "e1", bindingId: "b", payload: bytes("x") })
        ])
        const lease = yield* leases.acquire(key, "relay-a", "30 seconds")
        yield* store.claim(key, lease.token, 10)
        // claimed, nothing pending, lease live: a relay at work
        expect((yield* inspection.partition(key)).stranded).toEqual(Option.none())
        // the relay died: its lease ran out with the claim still held
        yield* TestClock.adjust("1 minute")
        expect((yield* inspection.partition(key)).stranded).toEqual(Option.some("claimedWithoutPending"))
        if (capabilities.claimAge) {
          yield* store.persist([
            new NewOutboxRecord({ partitionKey: key, envelopeId: "e2", bindingId: "b", payload: bytes("y") })
          ])
          expect((yield* inspection.partition(key, { strandedAfter: "10 minutes" })).stranded).toEqual(Option.none())
          expect((yield* inspection.partition(key, { strandedAfter: "30 seconds" })).stranded).toEqual(
            Option.some("claimedTooLong")
          )
        }
      }).pipe(Effect.provide(layer()))
    )
  })

// ---------------------------------------------------------------------------------------------------

inspectionSuite("memory", { fence: false, claimAge: false, emptiedPartitions: false }, () =>
  Layer.provideMerge(
    MemoryInspection.layer,
    Layer.mergeAll(Layer.provideMerge(MemoryDeadLetterStore.layer, MemoryOutboxStore.layer), MemoryLeaseStore.layer)
  )
)

const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-inspection-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))
let files = 0

const sqliteStores = (filename: string, tablePrefix: string) =>
  Layer.provideMerge(
    SqliteInspection.layerWith({ tablePrefix }),
    Layer.mergeAll(
      Layer.provideMerge(
        SqliteDeadLetterStore.layerWith({ tablePrefix }),
        SqliteOutboxStore.layerWith({ tablePrefix })
      ),
      SqliteLeaseStore.layerWith({ tablePrefix })
    )
  ).pipe(Layer.provide(SqliteDatabase.layer({ filename })))

inspectionSuite("sqlite", { fence: true, claimAge: true, emptiedPartitions: true }, () => sqliteStores(":memory:", ""))

// PostgreSQL: a fresh schema per test in one database of the run's server
const postgresUrl = await createDatabase(inject("postgresUrl"), "inspection")
let postgresSchemas = 0
inspectionSuite("postgres", { fence: true, claimAge: true, emptiedPartitions: true }, () => {
  const schema = `inspection_${++postgresSchemas}`
  return Layer.provideMerge(
    PostgresInspection.layerWith({ schema }),
    Layer.mergeAll(
      Layer.provideMerge(PostgresDeadLetterStore.layerWith({ schema }), PostgresOutboxStore.layerWith({ schema })),
      PostgresLeaseStore.layerWith({ schema })
    )
  ).pipe(Layer.provide(clientLayer(postgresUrl)))
})

// MySQL (MariaDB): a fresh database per test on the run's server
const mysqlUrl = await createMysqlDatabase(inject("mysqlUrl"), "inspection")
let mysqlDatabases = 0
inspectionSuite("mysql", { fence: true, claimAge: true, emptiedPartitions: true }, () => {
  const database = `inspection_${++mysqlDatabases}`
  return Layer.provideMerge(
    MysqlInspection.layerWith({ database }),
    Layer.mergeAll(
      Layer.provideMerge(MysqlDeadLetterStore.layerWith({ database }), MysqlOutboxStore.layerWith({ database })),
      MysqlLeaseStore.layerWith({ database })
    )
  ).pipe(Layer.provide(mysqlClientLayer(mysqlUrl)))
})

// A prefixed outbox beside an unprefixed one in the same file: inspection reads only its own tables.
const sharedFile = path.join(directory, `db-${++files}.db`)
inspectionSuite("sqlite with tablePrefix", { fence: true, claimAge: true, emptiedPartitions: true }, () =>
  sqliteStores(sharedFile, "ops_")
)

describe("OutboxInspection on sqlite: table prefixes", () => {
  it.effect("an inspection sees the partitions and dead letters of its own prefix only", () =>
    Effect.gen(function* () {
      const file = path.join(directory, `db-${++files}.db`)
      const write = (prefix: string, partitionKey: string) =>
        Effect.gen(function* () {
          const store = yield* OutboxStore
          const dlq = yield* DeadLetterStore
          yield* store.persist([
            new NewOutboxRecord({ partitionKey, envelopeId: "e", bindingId: "b", payload: bytes("x") })
          ])
          yield* dlq.write(entry(partitionKey, "permanent"))
          return yield* Effect.flatMap(OutboxInspection, (i) => i.snapshot())
        }).pipe(Effect.provide(sqliteStores(file, prefix)))
      const plain = yield* write("", "plain")
      const prefixed = yield* write("tenant_a_", "tenant")
      expect(plain.partitions.map((p) => p.partitionKey)).toEqual(["plain"])
      expect(prefixed.partitions.map((p) => p.partitionKey)).toEqual(["tenant"])
      expect(prefixed.partitions[0]?.pending).toEqual(Either.right(1))
      expect(prefixed.deadLetters).toEqual({ poison: 0, permanent: 1, expired: 0 })
    })
  )

  it.effect("a bad prefix is InvalidConfiguration", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(Layer.build(sqliteStores(":memory:", "1-bad")).pipe(Effect.scoped))
      expect(error._tag).toBe("InvalidConfiguration")
    })
  )
})

const outboxTable = randomTableName("inspection-outbox")
const deadLetterTable = randomTableName("inspection-dlq")
const dynamoLayer = DynamoDb.layer(makeTestClientConfig())

afterAll(() =>
  Effect.runPromise(
    Effect.flatMap(DynamoDb.DynamoDb, (d) =>
      Effect.all([d.deleteTable({ TableName: outboxTable }), d.deleteTable({ TableName: deadLetterTable })], {
        concurrency: 2,
        discard: true
      })
    ).pipe(Effect.provide(dynamoLayer), Effect.ignore)
  )
)

inspectionSuite("dynamodb", { fence: true, claimAge: false, emptiedPartitions: true }, () =>
  Layer.provideMerge(
    DynamoDbInspection.layerWith({ tableName: outboxTable, deadLetterTableName: deadLetterTable }),
    Layer.mergeAll(
      Layer.provideMerge(
        DynamoDbDeadLetterStore.layerWith({ tableName: deadLetterTable, ensureTable: true }),
        DynamoDbOutboxStore.layerWith({ tableName: outboxTable, ensureTable: true })
      ),
      DynamoDbLeaseStore.layerWith({ tableName: outboxTable, ensureTable: true })
    )
  ).pipe(Layer.provide(dynamoLayer))
)
