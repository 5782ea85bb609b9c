/**
 * The DynamoDB dead-letter table (SPEC §5): its layout, the stored form of an entry, `ensureTable`, and
 * the schema preflight that fails a layer with `InvalidConfiguration` naming every mismatch.
 *
 * Layout (a table of its own, default name `effect-outbox-dead-letter`):
 * - Table key: `entry_id` (S, HASH) = the entry id. `get` is one `GetItem`, `write` one conditional
 *   `PutItem` (`attribute_not_exists(entry_id)`), `delete` one `DeleteItem` per id.
 * - `age` (S) = `failedAt` as 17 zero-padded digits (epoch ms offset by 10^16, so instants before 1970
 *   sort too) + `#` + id: its lexical order is the `(failedAt, id)` order, and a time range is a key
 *   range (`since` inclusive = `age >= ts(since)`, `before` exclusive = `age < ts(before)`).
 * - Three GSIs, each with range key `age` and projection ALL (a list reads entries from the index with
 *   no per-entry `GetItem`):
 *   - `AgeIndex (all_key, age)`: every entry; `all_key = "<shard>"`.
 *   - `RouteIndex (route_key, age)`: entries with a route; `route_key = "<shard>#<routeId>"` (sparse).
 *   - `CategoryIndex (category_key, age)`: every entry; `category_key = "<shard>#<category>"`.
 *   `shard = fnv1a(id) mod` {@link Shards}: a mass failure (a sink rejecting everything) writes entries
 *   of one route and one category at the rate records fail, and an index key with a single value takes
 *   about 1000 writes/s at most; spreading every key over the shards lifts that bound. A query reads the
 *   shards (in parallel) and merges them.
 *
 * @since 0.1.0
 */
import type {
  AttributeDefinition,
  AttributeValue,
  CreateTableCommandInput,
  GlobalSecondaryIndexDescription,
  KeySchemaElement,
  TableDescription
} from "@aws-sdk/client-dynamodb"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as SchemaIssues from "../../domain/SchemaIssues.js"
import * as Schema from "effect/Schema"
import { DeadLetterCategory, DeadLetterEntry } from "../../domain/DeadLetterEntry.js"
import { InvalidConfiguration } from "../../domain/OutboxError.js"
import { createIfMissing, describeTable, fnv1a32 } from "./OutboxTable.js"

/**
 * A DynamoDB item in the SDK's attribute-value form.
 *
 * @since 0.1.0
 */
export type Item = Record<string, AttributeValue>

/** Default table name. @since 0.1.0 */
export const DefaultTableName = "effect-outbox-dead-letter"
/** Index over every entry by age. @since 0.1.0 */
export const AgeIndex = "AgeIndex"
/** Index over entries with a route, by route and age. @since 0.1.0 */
export const RouteIndex = "RouteIndex"
/** Index over every entry by category and age. @since 0.1.0 */
export const CategoryIndex = "CategoryIndex"

/**
 * Number of shards of every index key (part of the stored layout: changing it strands entries).
 *
 * @since 0.1.0
 */
export const Shards = 4

/**
 * The shard of an entry id (FNV-1a 32-bit of the UTF-16 code units, mod {@link Shards}).
 *
 * @since 0.1.0
 */
export const shardOf = (id: string): number => fnv1a32(id) % Shards

/** Offset added to epoch ms so every representable instant encodes as a non-negative 17-digit number. */
const TimeOffset = 10n ** 16n

/**
 * The time part of the `age` key: epoch ms + 10^16, zero-padded to 17 digits. Lexical order = time order.
 *
 * @since 0.1.0
 */
export const timeKey = (millis: number): string =>
  (BigInt(Math.trunc(millis)) + TimeOffset).toString().padStart(17, "0")

/**
 * The `age` key of an entry: {@link timeKey} of `failedAt`, `#`, the id.
 *
 * @since 0.1.0
 */
export const ageKey = (failedAtMillis: number, id: string): string => `${timeKey(failedAtMillis)}#${id}`

/** The `all_key` of a shard. @since 0.1.0 */
export const allKey = (shard: number): string => String(shard)
/** The `route_key` of a route in a shard. @since 0.1.0 */
export const routeKey = (shard: number, routeId: string): string => `${shard}#${routeId}`
/** The `category_key` of a category in a shard. @since 0.1.0 */
export const categoryKey = (shard: number, category: DeadLetterCategory): string => `${shard}#${category}`

/**
 * Why DynamoDB would refuse an entry's keys, naming the field and the limit, or `undefined` when they fit:
 * the entry id is the table's hash key (2048 bytes) and part of the `age` range key of every index (1024
 * bytes: 20 bytes of time prefix leave 1004 for the id); `route_key` is a hash key (2048 bytes); header names
 * must not be empty. Checked before the write so the error names the field rather than DynamoDB's message.
 *
 * @since 0.1.0
 */
export const keyProblem = (entry: DeadLetterEntry): string | undefined => {
  const idBytes = byteLength(entry.id)
  const ageBytes = byteLength(ageKey(DateTime.toEpochMillis(entry.failedAt), entry.id))
  if (ageBytes > MaxRangeKeyBytes) {
    return `id is ${idBytes} bytes: DynamoDB dead-letter ids are at most ${MaxRangeKeyBytes - (ageBytes - idBytes)} bytes (UTF-8)`
  }
  if (entry.routeId !== undefined) {
    const routeBytes = byteLength(routeKey(shardOf(entry.id), entry.routeId))
    if (routeBytes > MaxHashKeyBytes) {
      return `routeId is ${byteLength(entry.routeId)} bytes: DynamoDB dead-letter routes are at most ${MaxHashKeyBytes - (routeBytes - byteLength(entry.routeId))} bytes (UTF-8)`
    }
  }
  for (const name of Object.keys(entry.headers)) {
    if (name.length === 0) return "headers: an empty header name cannot be stored in DynamoDB"
  }
  return undefined
}

const MaxHashKeyBytes = 2048
const MaxRangeKeyBytes = 1024
const utf8 = new TextEncoder()
const byteLength = (s: string): number => utf8.encode(s).length

/**
 * The item of an entry.
 *
 * @since 0.1.0
 */
export const encode = (entry: DeadLetterEntry): Item => {
  const failedAt = DateTime.toEpochMillis(entry.failedAt)
  const shard = shardOf(entry.id)
  const headers: Record<string, AttributeValue> = {}
  for (const [name, value] of Object.entries(entry.headers)) headers[name] = { S: value }
  const item: Item = {
    entry_id: { S: entry.id },
    record_id: { S: entry.recordId },
    partition_key: { S: entry.partitionKey },
    envelope_id: { S: entry.envelopeId },
    binding_id: { S: entry.bindingId },
    payload: { B: new Uint8Array(entry.payload) },
    headers: { M: headers },
    category: { S: entry.category },
    reason: { S: entry.reason },
    error_code: { S: entry.errorCode },
    last_error: { S: entry.lastError },
    attempts: { N: String(entry.attempts) },
    failed_at: { N: String(failedAt) },
    age: { S: ageKey(failedAt, entry.id) },
    all_key: { S: allKey(shard) },
    category_key: { S: categoryKey(shard, entry.category) }
  }
  if (entry.orderingKey !== undefined) item["ordering_key"] = { S: entry.orderingKey }
  if (entry.routeId !== undefined) {
    item["route_id"] = { S: entry.routeId }
    item["route_key"] = { S: routeKey(shard, entry.routeId) }
  }
  if (entry.address !== undefined) item["address"] = { S: entry.address }
  return item
}

const S = Schema.Struct({ S: Schema.String })
const NonEmptyS = Schema.Struct({ S: Schema.NonEmptyString })
const N = Schema.Struct({ N: Schema.NumberFromString.pipe(Schema.int()) })

const StoredEntry = Schema.Struct({
  entry_id: NonEmptyS,
  record_id: NonEmptyS,
  partition_key: NonEmptyS,
  envelope_id: NonEmptyS,
  binding_id: NonEmptyS,
  payload: Schema.optional(Schema.Struct({ B: Schema.Uint8ArrayFromSelf })),
  headers: Schema.optional(Schema.Struct({ M: Schema.Record({ key: Schema.String, value: S }) })),
  ordering_key: Schema.optional(S),
  route_id: Schema.optional(S),
  address: Schema.optional(S),
  category: Schema.Struct({ S: DeadLetterCategory }),
  reason: S,
  error_code: S,
  last_error: S,
  attempts: Schema.Struct({ N: Schema.NumberFromString.pipe(Schema.int(), Schema.nonNegative()) }),
  failed_at: N
})

const decodeStored = Schema.decodeUnknownEither(StoredEntry)

/**
 * Decodes a stored item into a fresh entry (its own payload buffer and headers object), or describes
 * why the item is malformed.
 *
 * @since 0.1.0
 */
export const decode = (item: Item): Either.Either<DeadLetterEntry, string> =>
  Either.mapBoth(decodeStored(item), {
    onLeft: (error) => `dead-letter item ${item["entry_id"]?.S ?? "?"} is malformed: ${SchemaIssues.describe(error)}`,
    onRight: (v) => {
      const headers: Record<string, string> = {}
      for (const [name, value] of Object.entries(v.headers?.M ?? {})) headers[name] = value.S
      return new DeadLetterEntry(
        {
          id: v.entry_id.S,
          recordId: v.record_id.S,
          partitionKey: v.partition_key.S,
          envelopeId: v.envelope_id.S,
          bindingId: v.binding_id.S,
          payload: new Uint8Array(v.payload?.B ?? new Uint8Array(0)),
          headers,
          ...(v.ordering_key !== undefined ? { orderingKey: v.ordering_key.S } : {}),
          ...(v.route_id !== undefined ? { routeId: v.route_id.S } : {}),
          ...(v.address !== undefined ? { address: v.address.S } : {}),
          category: v.category.S,
          reason: v.reason.S,
          errorCode: v.error_code.S,
          lastError: v.last_error.S,
          attempts: v.attempts.N,
          failedAt: DateTime.unsafeMake(v.failed_at.N)
        },
        { disableValidation: true }
      )
    }
  })

interface IndexSpec {
  readonly name: string
  readonly hash: string
}

const indexes: ReadonlyArray<IndexSpec> = [
  { name: AgeIndex, hash: "all_key" },
  { name: RouteIndex, hash: "route_key" },
  { name: CategoryIndex, hash: "category_key" }
]

const attributeTypes: Record<string, "S"> = {
  entry_id: "S",
  age: "S",
  all_key: "S",
  route_key: "S",
  category_key: "S"
}

const keySchema = (hash: string, range?: string): Array<KeySchemaElement> =>
  range === undefined
    ? [{ AttributeName: hash, KeyType: "HASH" }]
    : [
        { AttributeName: hash, KeyType: "HASH" },
        { AttributeName: range, KeyType: "RANGE" }
      ]

/**
 * The `CreateTable` input for a dead-letter table (on-demand billing).
 *
 * @since 0.1.0
 */
export const tableDefinition = (tableName: string): CreateTableCommandInput => ({
  TableName: tableName,
  BillingMode: "PAY_PER_REQUEST",
  AttributeDefinitions: Object.entries(attributeTypes).map(([AttributeName, AttributeType]): AttributeDefinition => ({
    AttributeName,
    AttributeType
  })),
  KeySchema: keySchema("entry_id"),
  GlobalSecondaryIndexes: indexes.map((index) => ({
    IndexName: index.name,
    KeySchema: keySchema(index.hash, "age"),
    Projection: { ProjectionType: "ALL" }
  }))
})

const describeKeys = (elements: ReadonlyArray<KeySchemaElement> | undefined): string =>
  (elements ?? []).map((e) => `${e.AttributeName ?? "?"} ${e.KeyType ?? "?"}`).join(", ") || "none"

/**
 * Every difference between a described table and the dead-letter layout.
 *
 * @since 0.1.0
 */
export const schemaProblems = (table: TableDescription): Array<string> => {
  const problems: Array<string> = []
  const name = table.TableName ?? "?"
  if (describeKeys(table.KeySchema) !== describeKeys(keySchema("entry_id"))) {
    problems.push(`table ${name}: key schema is [${describeKeys(table.KeySchema)}], expected [entry_id HASH]`)
  }
  const defined = new Map((table.AttributeDefinitions ?? []).map((d) => [d.AttributeName ?? "", d.AttributeType]))
  const gsis = new Map(
    (table.GlobalSecondaryIndexes ?? []).map((g): [string, GlobalSecondaryIndexDescription] => [g.IndexName ?? "", g])
  )
  for (const [attribute, expected] of Object.entries(attributeTypes)) {
    const actual = defined.get(attribute)
    if (actual !== undefined && actual !== expected) {
      problems.push(`table ${name}: attribute ${attribute} has type ${actual}, expected ${expected}`)
    }
  }
  for (const index of indexes) {
    const gsi = gsis.get(index.name)
    if (gsi === undefined) {
      problems.push(`table ${name}: global secondary index ${index.name} is missing`)
      continue
    }
    const expected = describeKeys(keySchema(index.hash, "age"))
    if (describeKeys(gsi.KeySchema) !== expected) {
      problems.push(
        `table ${name}: index ${index.name} has key schema [${describeKeys(gsi.KeySchema)}], expected [${expected}]`
      )
    }
    const projection = gsi.Projection?.ProjectionType
    if (projection !== "ALL") {
      problems.push(`table ${name}: index ${index.name} has projection ${projection ?? "none"}, expected ALL`)
    }
  }
  return problems
}

/**
 * Schema preflight: reads the table description and fails with `InvalidConfiguration` listing every
 * mismatch (missing table, key schema, indexes, projections, attribute types).
 *
 * @since 0.1.0
 */
export const preflight = Effect.fn("DynamoDbDeadLetterTable.preflight")(function* (tableName: string) {
  const table = yield* describeTable(tableName)
  const component = `DynamoDB dead-letter table ${tableName}`
  if (table === undefined) {
    return yield* new InvalidConfiguration({
      component,
      problems: [`table ${tableName} does not exist (create it, or set ensureTable: true)`]
    })
  }
  const problems = schemaProblems(table)
  if (problems.length > 0) return yield* new InvalidConfiguration({ component, problems })
})

/**
 * Creates the table exactly as {@link tableDefinition} says (when it does not exist), waits until it
 * and its indexes are active, then runs the {@link preflight}.
 *
 * @since 0.1.0
 */
export const ensureTable = Effect.fn("DynamoDbDeadLetterTable.ensureTable")(function* (tableName: string) {
  yield* createIfMissing(tableDefinition(tableName))
  yield* preflight(tableName)
})
