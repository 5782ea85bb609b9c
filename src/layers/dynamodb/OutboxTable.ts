/**
 * The DynamoDB outbox table (SPEC §3.3): its definition, `ensureTable`, and the schema preflight that
 * fails a layer with `InvalidConfiguration` naming every mismatch of an existing table.
 *
 * Layout: `PK` (S) = partition key, `SK` (S) = `"OUTBOX#" + esc(envelopeId) + "#" + esc(bindingId)` for
 * records (identity = primary key) or `"FENCE"` for the partition's fence item; GSIs `ClaimIndex (PK,
 * claim_sort)` ALL (non-terminal records, age order), `RecordIdIndex (record_id)`, `ExpiryIndex
 * (has_expiry, expires_at)` and `PartitionIndex (partitions_shard, PK)` keys only; TTL attribute `ttl`;
 * optionally the LSI `ClaimLocalIndex (PK, claim_sort)` ALL, which only a new table can have. Rationale:
 * docs/design/dynamodb.md.
 *
 * @since 0.1.0
 */
import type {
  AttributeDefinition,
  LocalSecondaryIndexDescription,
  CreateTableCommandInput,
  GlobalSecondaryIndexDescription,
  KeySchemaElement,
  TableDescription
} from "@aws-sdk/client-dynamodb"
import * as Effect from "effect/Effect"
import { InvalidConfiguration, StoreUnavailable } from "../../domain/OutboxError.js"
import { DynamoDb } from "../../services/DynamoDb.js"

/** Name of the age-ordered index over non-terminal records. @since 0.1.0 */
export const ClaimIndex = "ClaimIndex"
/**
 * Name of the optional local secondary index `(PK, claim_sort)`, projection ALL, read consistently by
 * claims when the store is built with `localClaimIndex: true`.
 *
 * @since 0.1.0
 */
export const ClaimLocalIndex = "ClaimLocalIndex"
/**
 * Options of the table definition, the preflight and `ensureTable`.
 *
 * @since 0.1.0
 */
export interface TableOptions {
  /**
   * The table has (or, when created, gets) the local secondary index {@link ClaimLocalIndex}. Default
   * `false`. An LSI can only be created with the table: the preflight fails on an existing table that
   * lacks it.
   */
  readonly localClaimIndex?: boolean | undefined
}
/** Name of the id → key index. @since 0.1.0 */
export const RecordIdIndex = "RecordIdIndex"
/** Name of the sparse expiry index. @since 0.1.0 */
export const ExpiryIndex = "ExpiryIndex"
/** Name of the sparse index over fence items used by `listPartitions`. @since 0.1.0 */
export const PartitionIndex = "PartitionIndex"
/** The TTL attribute (epoch seconds). @since 0.1.0 */
export const TtlAttribute = "ttl"

/**
 * Number of shards of {@link PartitionIndex}. `listPartitions` must not scan the table (R-READ-3), and a
 * GSI hash key with one constant value would put every fence item of the table on one index partition
 * (a write hot spot when partitions are created quickly). Each fence item therefore carries
 * `partitions_shard = hash(PK) mod PartitionShards`; listing queries the shards one by one and reads
 * only fence items (one per partition), never records.
 *
 * @since 0.1.0
 */
export const PartitionShards = 16

/**
 * The shard of a partition key in {@link PartitionIndex} (FNV-1a 32-bit of the UTF-16 code units).
 *
 * @since 0.1.0
 */
export const partitionShard = (partitionKey: string): number => fnv1a32(partitionKey) % PartitionShards

/**
 * FNV-1a 32-bit hash of a string's UTF-16 code units: the shard function of every sharded index key
 * (part of the stored layout: changing it strands items on the wrong shard).
 *
 * @since 0.1.0
 */
export const fnv1a32 = (value: string): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < value.length; i++) {
    hash ^= value.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193) >>> 0
  }
  return hash
}

interface IndexSpec {
  readonly name: string
  readonly hash: string
  readonly range?: string
  /** `ALL` must be ALL; `KEYS_ONLY` accepts any projection (it only needs the keys). */
  readonly projection: "ALL" | "KEYS_ONLY"
}

const attributeTypes: Record<string, "S" | "N"> = {
  PK: "S",
  SK: "S",
  claim_sort: "S",
  record_id: "S",
  has_expiry: "S",
  expires_at: "N",
  partitions_shard: "N"
}

const indexes: ReadonlyArray<IndexSpec> = [
  { name: ClaimIndex, hash: "PK", range: "claim_sort", projection: "ALL" },
  { name: RecordIdIndex, hash: "record_id", projection: "KEYS_ONLY" },
  { name: ExpiryIndex, hash: "has_expiry", range: "expires_at", projection: "KEYS_ONLY" },
  { name: PartitionIndex, hash: "partitions_shard", range: "PK", projection: "KEYS_ONLY" }
]

const keySchema = (hash: string, range?: string): Array<KeySchemaElement> =>
  range === undefined
    ? [{ AttributeName: hash, KeyType: "HASH" }]
    : [
        { AttributeName: hash, KeyType: "HASH" },
        { AttributeName: range, KeyType: "RANGE" }
      ]

/**
 * The `CreateTable` input for an outbox table (on-demand billing).
 *
 * @since 0.1.0
 */
export const tableDefinition = (tableName: string, options: TableOptions = {}): CreateTableCommandInput => ({
  TableName: tableName,
  BillingMode: "PAY_PER_REQUEST",
  AttributeDefinitions: Object.entries(attributeTypes).map(([AttributeName, AttributeType]): AttributeDefinition => ({
    AttributeName,
    AttributeType
  })),
  KeySchema: keySchema("PK", "SK"),
  GlobalSecondaryIndexes: indexes.map((index) => ({
    IndexName: index.name,
    KeySchema: keySchema(index.hash, index.range),
    Projection: { ProjectionType: index.projection }
  })),
  ...(options.localClaimIndex === true
    ? {
        LocalSecondaryIndexes: [
          {
            IndexName: ClaimLocalIndex,
            KeySchema: keySchema("PK", "claim_sort"),
            Projection: { ProjectionType: "ALL" }
          }
        ]
      }
    : {})
})

/**
 * Whether a described table has the local secondary index {@link ClaimLocalIndex} (any key schema).
 *
 * @since 0.1.0
 */
export const hasLocalClaimIndex = (table: TableDescription): boolean =>
  (table.LocalSecondaryIndexes ?? []).some((index) => index.IndexName === ClaimLocalIndex)

const describeKeys = (elements: ReadonlyArray<KeySchemaElement> | undefined): string =>
  (elements ?? []).map((e) => `${e.AttributeName ?? "?"} ${e.KeyType ?? "?"}`).join(", ") || "none"

const sameKeys = (elements: ReadonlyArray<KeySchemaElement> | undefined, hash: string, range?: string): boolean =>
  describeKeys(elements) === describeKeys(keySchema(hash, range))

/**
 * Every difference between a described table (and its TTL setting) and the outbox layout.
 *
 * @since 0.1.0
 */
export const schemaProblems = (
  table: TableDescription,
  ttl: { readonly status: string | undefined; readonly attribute: string | undefined },
  options: TableOptions = {}
): Array<string> => {
  const problems: Array<string> = []
  const name = table.TableName ?? "?"
  if (!sameKeys(table.KeySchema, "PK", "SK")) {
    problems.push(`table ${name}: key schema is [${describeKeys(table.KeySchema)}], expected [PK HASH, SK RANGE]`)
  }
  const defined = new Map((table.AttributeDefinitions ?? []).map((d) => [d.AttributeName ?? "", d.AttributeType]))
  const gsis = new Map(
    (table.GlobalSecondaryIndexes ?? []).map((g): [string, GlobalSecondaryIndexDescription] => [g.IndexName ?? "", g])
  )
  const checkType = (attribute: string): void => {
    const actual = defined.get(attribute)
    const expected = attributeTypes[attribute]
    if (actual !== undefined && actual !== expected) {
      problems.push(`table ${name}: attribute ${attribute} has type ${actual}, expected ${expected ?? "?"}`)
    }
  }
  checkType("PK")
  checkType("SK")
  for (const index of indexes) {
    const gsi = gsis.get(index.name)
    if (gsi === undefined) {
      problems.push(`table ${name}: global secondary index ${index.name} is missing`)
      continue
    }
    if (!sameKeys(gsi.KeySchema, index.hash, index.range)) {
      problems.push(
        `table ${name}: index ${index.name} has key schema [${describeKeys(gsi.KeySchema)}], expected [${describeKeys(
          keySchema(index.hash, index.range)
        )}]`
      )
    }
    checkType(index.hash)
    if (index.range !== undefined) checkType(index.range)
    const projection = gsi.Projection?.ProjectionType
    if (index.projection === "ALL" && projection !== "ALL") {
      problems.push(`table ${name}: index ${index.name} has projection ${projection ?? "none"}, expected ALL`)
    }
  }
  if (options.localClaimIndex === true) {
    const lsi = (table.LocalSecondaryIndexes ?? []).find(
      (index): index is LocalSecondaryIndexDescription => index.IndexName === ClaimLocalIndex
    )
    if (lsi === undefined) {
      problems.push(
        `table ${name}: local secondary index ${ClaimLocalIndex} (PK, claim_sort) is missing; an LSI can only be created together with the table, so using localClaimIndex needs a new table (created with the index) and a data migration, or set localClaimIndex: false`
      )
    } else {
      if (!sameKeys(lsi.KeySchema, "PK", "claim_sort")) {
        problems.push(
          `table ${name}: index ${ClaimLocalIndex} has key schema [${describeKeys(lsi.KeySchema)}], expected [PK HASH, claim_sort RANGE]`
        )
      }
      checkType("claim_sort")
      const projection = lsi.Projection?.ProjectionType
      if (projection !== "ALL") {
        problems.push(`table ${name}: index ${ClaimLocalIndex} has projection ${projection ?? "none"}, expected ALL`)
      }
    }
  }
  const ttlEnabled = ttl.status === "ENABLED" || ttl.status === "ENABLING"
  if (!ttlEnabled) {
    problems.push(`table ${name}: time to live is ${ttl.status ?? "unknown"}, expected ENABLED on attribute ttl`)
  } else if (ttl.attribute !== TtlAttribute) {
    problems.push(`table ${name}: time to live uses attribute ${ttl.attribute ?? "?"}, expected ttl`)
  }
  return problems
}

/**
 * DescribeTable, with a missing table as `undefined`.
 *
 * @since 0.1.0
 */
export const describeTable = Effect.fnUntraced(function* (tableName: string) {
  const dynamo = yield* DynamoDb
  return yield* dynamo.describeTable({ TableName: tableName }).pipe(
    Effect.map((output) => output.Table),
    Effect.catchIf(
      (error) => error.kind === "ResourceNotFound",
      () => Effect.succeed(undefined)
    ),
    StoreUnavailable.refail("describeTable")
  )
})

const describeTtl = Effect.fnUntraced(function* (tableName: string) {
  const dynamo = yield* DynamoDb
  const output = yield* dynamo
    .describeTimeToLive({ TableName: tableName })
    .pipe(StoreUnavailable.refail("describeTimeToLive"))
  return {
    status: output.TimeToLiveDescription?.TimeToLiveStatus,
    attribute: output.TimeToLiveDescription?.AttributeName
  }
})

/**
 * Schema preflight: reads the table description and fails with `InvalidConfiguration` listing every
 * mismatch (missing table, key schema, indexes, projections, attribute types, TTL; with
 * `localClaimIndex`, a missing or different {@link ClaimLocalIndex}).
 *
 * @since 0.1.0
 */
export const preflight = Effect.fn("DynamoDbOutboxTable.preflight")(function* (
  tableName: string,
  options: TableOptions = {}
) {
  const table = yield* describeTable(tableName)
  if (table === undefined) {
    return yield* new InvalidConfiguration({
      component: `DynamoDB outbox table ${tableName}`,
      problems: [`table ${tableName} does not exist (create it, or set ensureTable: true)`]
    })
  }
  const ttl = yield* describeTtl(tableName)
  const problems = schemaProblems(table, ttl, options)
  if (problems.length > 0) {
    return yield* new InvalidConfiguration({ component: `DynamoDB outbox table ${tableName}`, problems })
  }
})

const waitActive = Effect.fnUntraced(function* (tableName: string) {
  for (let attempt = 0; attempt < 120; attempt++) {
    const table = yield* describeTable(tableName)
    const indexesActive = (table?.GlobalSecondaryIndexes ?? []).every((g) => g.IndexStatus === "ACTIVE")
    if (table?.TableStatus === "ACTIVE" && indexesActive) return
    yield* Effect.sleep("500 millis")
  }
  return yield* new StoreUnavailable({
    operation: "ensureTable",
    cause: new Error(`table ${tableName} did not become ACTIVE`)
  })
})

/**
 * Creates a table from its definition when it does not exist (another creator winning the race is
 * fine) and waits until the table and its indexes are ACTIVE. Shared by every table of the library.
 *
 * @since 0.1.0
 */
export const createIfMissing = Effect.fnUntraced(function* (definition: CreateTableCommandInput) {
  const dynamo = yield* DynamoDb
  const tableName = definition.TableName ?? ""
  const existing = yield* describeTable(tableName)
  if (existing === undefined) {
    yield* dynamo.createTable(definition).pipe(
      Effect.catchIf(
        (error) => error.kind === "ResourceInUse",
        () => Effect.void
      ),
      StoreUnavailable.refail("createTable")
    )
  }
  yield* waitActive(tableName)
})

/**
 * Creates the table exactly as {@link tableDefinition} says (when it does not exist), waits until it
 * is active, enables TTL on `ttl`, then runs the {@link preflight}. With `localClaimIndex` a new table
 * gets {@link ClaimLocalIndex}; an existing table without it is not changed (an LSI cannot be added
 * later) and the preflight fails with `InvalidConfiguration`.
 *
 * @since 0.1.0
 */
export const ensureTable = Effect.fn("DynamoDbOutboxTable.ensureTable")(function* (
  tableName: string,
  options: TableOptions = {}
) {
  const dynamo = yield* DynamoDb
  yield* createIfMissing(tableDefinition(tableName, options))
  const ttl = yield* describeTtl(tableName)
  if (ttl.status === "DISABLED" || ttl.status === undefined) {
    yield* dynamo
      .updateTimeToLive({
        TableName: tableName,
        TimeToLiveSpecification: { AttributeName: TtlAttribute, Enabled: true }
      })
      .pipe(
        // another process (or another store layer on the same table) may have enabled it meanwhile:
        // DynamoDB then rejects the second UpdateTimeToLive, which is fine when TTL is now on
        Effect.catchAll((error) =>
          describeTtl(tableName).pipe(
            Effect.flatMap((now) =>
              now.status === "ENABLED" || now.status === "ENABLING"
                ? Effect.void
                : Effect.fail(StoreUnavailable.wrap("updateTimeToLive")(error))
            )
          )
        )
      )
  }
  yield* preflight(tableName, options)
})
