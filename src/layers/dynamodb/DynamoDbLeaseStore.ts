/**
 * The DynamoDB `LeaseStore` (SPEC §4).
 *
 * **Layout.** One `LEASE` item per partition in the outbox table: `PK` = partition key, `SK = "LEASE"`,
 * with `lease_owner` (S), `lease_version` (N), `lease_expires_at` (N, epoch ms) and `lease_released`
 * (BOOL). The item carries none of the attributes the outbox indexes are keyed on (`claim_sort`,
 * `record_id`, `has_expiry`, `partitions_shard`), so it never shows up in `ClaimIndex`, `RecordIdIndex`,
 * `ExpiryIndex` or `PartitionIndex`; the claim scan path reads only `begins_with(SK, "OUTBOX#")`; and it
 * has no `ttl`, so it is never expired away. The item is kept after release: `lease_version` is the
 * partition's version high-water mark and survives release.
 *
 * **Requests** (conditional writes only, one request each on the happy path):
 * - `acquire`: one `UpdateItem` `SET lease_owner, lease_expires_at, lease_released = false ADD
 *   lease_version 1`, conditional on `attribute_not_exists(PK) OR lease_released = true OR
 *   lease_expires_at <= now`. DynamoDB applies conditional writes to one item one at a time, so of
 *   concurrent acquirers exactly one wins; the version is the old high-water mark plus one. A loser
 *   makes one consistent `GetItem` so the core can name the holder in `LeaseHeld`.
 * - `renew`: one `UpdateItem` `SET lease_expires_at` conditional on owner, version and not released
 *   (no expiry check: an expired lease nobody took over may be renewed by its owner).
 * - `release`: one `UpdateItem` `SET lease_released = true` with the same condition.
 * - `current`: one consistent `GetItem`.
 * A failed renew/release condition is followed by one consistent `GetItem` the core explains it with.
 * These are the storage primitives of `LeaseStore.make`.
 *
 * Lease versions and the outbox fence high-water mark (the `FENCE` item) are separate: claims raise the
 * fence to the version they present. Time comes from `Clock`: expiry is judged by the acquirer's clock,
 * so a lease ttl must exceed the worst clock skew between the nodes (fencing keeps a pre-empted owner
 * safe either way: its stale version is refused by the store).
 *
 * @since 0.1.0
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as SchemaIssues from "../../domain/SchemaIssues.js"
import * as Schema from "effect/Schema"
import type { LeaseTokenLike } from "../../domain/LeaseToken.js"
import { InvalidConfiguration, StoreUnavailable } from "../../domain/OutboxError.js"
import { DynamoDb, type DynamoDbError, type DynamoDbService } from "../../services/DynamoDb.js"
import * as LeaseStore from "../../services/LeaseStore.js"
import * as OutboxTable from "./OutboxTable.js"
import * as RecordItem from "./RecordItem.js"

/**
 * Options of the DynamoDB lease store.
 *
 * @since 0.1.0
 */
export interface DynamoDbLeaseStoreOptions {
  /** The outbox table that holds the `LEASE` items (default `effect-outbox`). */
  readonly tableName?: string | undefined
  /**
   * Create the outbox table (exactly as the outbox store does) when it does not exist (default `true`).
   * Either way the layer checks that the table is keyed `PK` (S, HASH), `SK` (S, RANGE) and fails with
   * `InvalidConfiguration` otherwise.
   */
  readonly ensureTable?: boolean | undefined
}

/**
 * Default table name: the outbox table's.
 *
 * @since 0.1.0
 */
export const DefaultTableName = "effect-outbox"

/**
 * Sort key of a partition's lease item.
 *
 * @since 0.1.0
 */
export const LeaseSortKey = "LEASE"

/**
 * The primary key of a partition's lease item.
 *
 * @since 0.1.0
 */
export const leaseKey = (partitionKey: string): Record<string, AttributeValue> => ({
  PK: { S: partitionKey },
  SK: { S: LeaseSortKey }
})

const N = Schema.Struct({ N: Schema.NumberFromString.pipe(Schema.int()) })

const LeaseItem = Schema.Struct({
  lease_owner: Schema.Struct({ S: Schema.NonEmptyString }),
  lease_version: N,
  lease_expires_at: N,
  lease_released: Schema.Struct({ BOOL: Schema.Boolean })
})

const decodeLeaseItem = Schema.decodeUnknownEither(LeaseItem)

/** Decodes a lease item (absent → `undefined`); a malformed one is `StoreUnavailable`. */
const decodeStored = (
  operation: string,
  partitionKey: string,
  item: Record<string, AttributeValue> | undefined
): Either.Either<LeaseStore.StoredLease | undefined, StoreUnavailable> => {
  if (item === undefined) return Either.right(undefined)
  return Either.mapBoth(decodeLeaseItem(item), {
    onLeft: (error) =>
      new StoreUnavailable({
        operation,
        partitionKey,
        cause: new Error(`lease item of partition ${partitionKey} is malformed: ${SchemaIssues.describe(error)}`)
      }),
    onRight: (v) => ({
      owner: v.lease_owner.S,
      version: v.lease_version.N,
      expiresAtMillis: v.lease_expires_at.N,
      released: v.lease_released.BOOL
    })
  })
}

const isConditionFailure = (error: DynamoDbError): boolean => error.kind === "ConditionalCheckFailed"

/**
 * Checks that an existing table can hold lease items: key schema `PK` (S, HASH), `SK` (S, RANGE).
 *
 * @since 0.1.0
 */
export const checkTable = Effect.fn("DynamoDbLeaseStore.checkTable")(function* (tableName: string) {
  const dynamo = yield* DynamoDb
  const component = `DynamoDB lease table ${tableName}`
  const table = yield* dynamo.describeTable({ TableName: tableName }).pipe(
    Effect.map((output) => output.Table),
    Effect.catchIf(
      (error) => error.kind === "ResourceNotFound",
      () => Effect.succeed(undefined)
    ),
    Effect.mapError((cause) => new StoreUnavailable({ operation: "describeTable", cause }))
  )
  if (table === undefined) {
    return yield* new InvalidConfiguration({
      component,
      problems: [`table ${tableName} does not exist (create it, or set ensureTable: true)`]
    })
  }
  const keys = (table.KeySchema ?? []).map((k) => `${k.AttributeName ?? "?"} ${k.KeyType ?? "?"}`).join(", ")
  const types = new Map((table.AttributeDefinitions ?? []).map((d) => [d.AttributeName ?? "", d.AttributeType]))
  const problems: Array<string> = []
  if (keys !== "PK HASH, SK RANGE") {
    problems.push(`table ${tableName}: key schema is [${keys || "none"}], expected [PK HASH, SK RANGE]`)
  }
  for (const attribute of ["PK", "SK"]) {
    const type = types.get(attribute)
    if (type !== undefined && type !== "S") {
      problems.push(`table ${tableName}: attribute ${attribute} has type ${type}, expected S`)
    }
  }
  if (problems.length > 0) return yield* new InvalidConfiguration({ component, problems })
})

/**
 * Builds the store over a table that is known to exist (see {@link make} for the checks).
 *
 * @since 0.1.0
 */
export const fromService = (dynamo: DynamoDbService, tableName: string): LeaseStore.LeaseStoreService => {
  const read = (operation: string, partitionKey: string) =>
    dynamo.getItem({ TableName: tableName, Key: leaseKey(partitionKey), ConsistentRead: true }).pipe(
      StoreUnavailable.refail(operation, partitionKey),
      Effect.flatMap((output) => decodeStored(operation, partitionKey, output.Item))
    )

  /**
   * One conditional `UpdateItem` returning `ALL_NEW`; a failed condition is followed by a consistent read
   * of the item.
   */
  const conditional = (
    operation: string,
    partitionKey: string,
    update: {
      readonly expression: string
      readonly condition: string
      readonly values: Record<string, AttributeValue>
    }
  ): Effect.Effect<LeaseStore.WriteOutcome, StoreUnavailable> =>
    dynamo
      .updateItem({
        TableName: tableName,
        Key: leaseKey(partitionKey),
        UpdateExpression: update.expression,
        ConditionExpression: update.condition,
        ExpressionAttributeValues: update.values,
        ReturnValues: "ALL_NEW"
      })
      .pipe(
        Effect.map((output) => output.Attributes),
        Effect.catchIf(isConditionFailure, () => Effect.succeed("refused" as const)),
        StoreUnavailable.refail(operation, partitionKey),
        Effect.flatMap((result): Effect.Effect<LeaseStore.WriteOutcome, StoreUnavailable> => {
          if (result === "refused") {
            return Effect.map(read(operation, partitionKey), (stored) => ({ _tag: "Refused", stored }))
          }
          return Effect.flatMap(decodeStored(operation, partitionKey, result), (lease) =>
            lease === undefined
              ? Effect.dieMessage(`${operation} of partition ${partitionKey}: DynamoDB returned no attributes`)
              : Effect.succeed({ _tag: "Written", lease })
          )
        })
      )

  /** The condition of renew and release: the token's lease, not released. */
  const heldBy = (token: LeaseTokenLike) => ({
    condition: "lease_owner = :owner AND lease_version = :version AND lease_released = :false",
    values: {
      ":owner": { S: token.owner },
      ":version": { N: String(token.version) },
      ":false": { BOOL: false }
    }
  })

  return LeaseStore.make({
    keyProblem: (partitionKey) => {
      const bytes = RecordItem.byteLength(partitionKey)
      return bytes > RecordItem.MaxPartitionKeyBytes
        ? `is ${bytes} bytes; the DynamoDB store's limit is ${RecordItem.MaxPartitionKeyBytes} bytes`
        : undefined
    },
    tryAcquire: (partitionKey, owner, nowMillis, expiresAtMillis) =>
      conditional("acquire", partitionKey, {
        expression:
          "SET lease_owner = :owner, lease_expires_at = :expires, lease_released = :false ADD lease_version :one",
        condition: "attribute_not_exists(PK) OR lease_released = :true OR lease_expires_at <= :now",
        values: {
          ":owner": { S: owner },
          ":expires": { N: String(expiresAtMillis) },
          ":now": { N: String(nowMillis) },
          ":one": { N: "1" },
          ":true": { BOOL: true },
          ":false": { BOOL: false }
        }
      }),
    extend: (partitionKey, token, expiresAtMillis) => {
      const held = heldBy(token)
      return conditional("renew", partitionKey, {
        expression: "SET lease_expires_at = :expires",
        condition: held.condition,
        values: { ...held.values, ":expires": { N: String(expiresAtMillis) } }
      })
    },
    end: (partitionKey, token) => {
      const held = heldBy(token)
      return conditional("release", partitionKey, {
        expression: "SET lease_released = :true",
        condition: held.condition,
        values: { ...held.values, ":true": { BOOL: true } }
      })
    },
    read: (partitionKey) => read("current", partitionKey)
  })
}

/**
 * Builds the store: ensures the outbox table when asked (default), checks its key schema (fails with
 * `InvalidConfiguration`), and returns the lease store service.
 *
 * @since 0.1.0
 */
export const make = (
  options: DynamoDbLeaseStoreOptions = {}
): Effect.Effect<LeaseStore.LeaseStoreService, InvalidConfiguration | StoreUnavailable, DynamoDb> =>
  Effect.gen(function* () {
    const dynamo = yield* DynamoDb
    const tableName = options.tableName ?? DefaultTableName
    if (options.ensureTable ?? true) yield* OutboxTable.ensureTable(tableName)
    yield* checkTable(tableName)
    return fromService(dynamo, tableName)
  })

/**
 * The DynamoDB lease store as a layer with the given options.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: DynamoDbLeaseStoreOptions
): Layer.Layer<LeaseStore.LeaseStore, InvalidConfiguration | StoreUnavailable, DynamoDb> =>
  Layer.effect(LeaseStore.LeaseStore, make(options))

/**
 * The DynamoDB lease store with defaults: `LEASE` items in the table `effect-outbox` (created if missing).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<LeaseStore.LeaseStore, InvalidConfiguration | StoreUnavailable, DynamoDb> = layerWith(
  {}
)
