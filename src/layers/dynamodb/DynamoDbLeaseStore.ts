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
 *   makes one consistent `GetItem` to name the holder in `LeaseHeld`; if that read shows no live lease
 *   any more (it was released or expired meanwhile) the acquire is tried again.
 * - `renew`: one `UpdateItem` `SET lease_expires_at` conditional on owner, version and not released
 *   (no expiry check: an expired lease nobody took over may be renewed by its owner).
 * - `release`: one `UpdateItem` `SET lease_released = true` with the same condition.
 * - `current`: one consistent `GetItem`.
 * A failed renew/release condition is explained by one consistent `GetItem`: no item or a released one →
 * `LeaseNotFound`, another holder → `StaleFencingToken`.
 *
 * Lease versions and the outbox fence high-water mark (the `FENCE` item) are separate: claims raise the
 * fence to the version they present. Time comes from `Clock`: expiry is judged by the acquirer's clock,
 * so a lease ttl must exceed the worst clock skew between the nodes (fencing keeps a pre-empted owner
 * safe either way: its stale version is refused by the store).
 *
 * @since 0.1.0
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb"
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as LeaseTokenModule from "../../domain/LeaseToken.js"
import {
  InvalidConfiguration,
  LeaseHeld,
  LeaseNotFound,
  StaleFencingToken,
  StoreUnavailable
} from "../../domain/OutboxError.js"
import { DynamoDb, type DynamoDbError, type DynamoDbService } from "../../services/DynamoDb.js"
import {
  checkAcquire,
  checkToken,
  type Lease,
  LeaseStore,
  type LeaseStoreService,
  notCurrentHolder,
  ttlMillis
} from "../../services/LeaseStore.js"
import * as OutboxTable from "./OutboxTable.js"

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

/** Times a write is retried when its failure turns out to be a race that the next attempt settles. */
const MaxAttempts = 5

const N = Schema.Struct({ N: Schema.NumberFromString.pipe(Schema.int()) })

const LeaseItem = Schema.Struct({
  lease_owner: Schema.Struct({ S: Schema.NonEmptyString }),
  lease_version: N,
  lease_expires_at: N,
  lease_released: Schema.Struct({ BOOL: Schema.Boolean })
})

interface Stored {
  readonly owner: string
  readonly version: number
  readonly expiresAtMillis: number
  readonly released: boolean
}

const decodeLeaseItem = Schema.decodeUnknownEither(LeaseItem)

const unavailable =
  (operation: string, partitionKey: string) =>
  (cause: unknown): StoreUnavailable =>
    new StoreUnavailable({ operation, partitionKey, cause })

/** Decodes a lease item (absent → `undefined`); a malformed one is `StoreUnavailable`. */
const decodeStored = (
  operation: string,
  partitionKey: string,
  item: Record<string, AttributeValue> | undefined
): Either.Either<Stored | undefined, StoreUnavailable> => {
  if (item === undefined) return Either.right(undefined)
  return Either.mapBoth(decodeLeaseItem(item), {
    onLeft: (error) =>
      new StoreUnavailable({
        operation,
        partitionKey,
        cause: new Error(
          `lease item of partition ${partitionKey} is malformed: ${ParseResult.TreeFormatter.formatErrorSync(error)}`
        )
      }),
    onRight: (v) => ({
      owner: v.lease_owner.S,
      version: v.lease_version.N,
      expiresAtMillis: v.lease_expires_at.N,
      released: v.lease_released.BOOL
    })
  })
}

const toLease = (partitionKey: string, stored: Stored): Lease => ({
  partitionKey,
  token: new LeaseTokenModule.LeaseToken({ owner: stored.owner, version: stored.version }, { disableValidation: true }),
  expiresAt: DateTime.unsafeMake(stored.expiresAtMillis)
})

/** A lease is live while `now` is strictly before its expiry. */
const isLive = (stored: Stored, now: number): boolean => !stored.released && now < stored.expiresAtMillis

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
export const fromService = (dynamo: DynamoDbService, tableName: string): LeaseStoreService => {
  const read = (operation: string, partitionKey: string) =>
    dynamo.getItem({ TableName: tableName, Key: leaseKey(partitionKey), ConsistentRead: true }).pipe(
      Effect.mapError(unavailable(operation, partitionKey)),
      Effect.flatMap((output) => decodeStored(operation, partitionKey, output.Item))
    )

  /** The new lease from an `ALL_NEW` write result. */
  const written = (operation: string, partitionKey: string, attributes: Record<string, AttributeValue> | undefined) =>
    Effect.flatMap(decodeStored(operation, partitionKey, attributes), (stored) =>
      stored === undefined
        ? Effect.dieMessage(`${operation} of partition ${partitionKey}: DynamoDB returned no attributes`)
        : Effect.succeed(toLease(partitionKey, stored))
    )

  const acquireOnce = (
    partitionKey: string,
    owner: string,
    now: number,
    expiresAt: number
  ): Effect.Effect<Either.Either<Lease, LeaseHeld> | "retry", StoreUnavailable> =>
    dynamo
      .updateItem({
        TableName: tableName,
        Key: leaseKey(partitionKey),
        UpdateExpression:
          "SET lease_owner = :owner, lease_expires_at = :expires, lease_released = :false ADD lease_version :one",
        ConditionExpression: "attribute_not_exists(PK) OR lease_released = :true OR lease_expires_at <= :now",
        ExpressionAttributeValues: {
          ":owner": { S: owner },
          ":expires": { N: String(expiresAt) },
          ":now": { N: String(now) },
          ":one": { N: "1" },
          ":true": { BOOL: true },
          ":false": { BOOL: false }
        },
        ReturnValues: "ALL_NEW"
      })
      .pipe(
        Effect.map((output) => output.Attributes),
        Effect.catchIf(isConditionFailure, () => Effect.succeed("held" as const)),
        Effect.mapError(unavailable("acquire", partitionKey)),
        Effect.flatMap((result): Effect.Effect<Either.Either<Lease, LeaseHeld> | "retry", StoreUnavailable> => {
          if (result !== "held") return Effect.map(written("acquire", partitionKey, result), Either.right)
          return Effect.map(read("acquire", partitionKey), (stored) =>
            stored !== undefined && isLive(stored, now)
              ? Either.left(
                  new LeaseHeld({
                    partitionKey,
                    heldBy: stored.owner,
                    version: stored.version,
                    expiresAt: DateTime.unsafeMake(stored.expiresAtMillis)
                  })
                )
              : ("retry" as const)
          )
        })
      )

  const acquire = (partitionKey: string, owner: string, ttl: Duration.DurationInput) =>
    Effect.gen(function* () {
      yield* checkAcquire(partitionKey, owner)
      const millis = yield* ttlMillis(ttl)
      const now = yield* Clock.currentTimeMillis
      for (let attempt = 1; attempt <= MaxAttempts; attempt++) {
        const outcome = yield* acquireOnce(partitionKey, owner, now, now + millis)
        if (outcome !== "retry") return yield* outcome
      }
      return yield* new StoreUnavailable({
        operation: "acquire",
        partitionKey,
        cause: new Error(`the lease of partition ${partitionKey} kept changing during ${MaxAttempts} acquire attempts`)
      })
    }).pipe(Effect.withSpan("LeaseStore.acquire", { attributes: { "outbox.partition": partitionKey } }))

  /**
   * Renew and release: one conditional update on owner, version and not released; a failed condition is
   * explained by a consistent read.
   */
  const updateHeld = (
    operation: "renew" | "release",
    partitionKey: string,
    token: LeaseTokenModule.LeaseTokenLike,
    update: { readonly expression: string; readonly values: Record<string, AttributeValue> }
  ): Effect.Effect<Lease, StaleFencingToken | LeaseNotFound | StoreUnavailable> =>
    Effect.gen(function* () {
      yield* checkToken(operation, partitionKey, token)
      for (let attempt = 1; attempt <= MaxAttempts; attempt++) {
        const result = yield* dynamo
          .updateItem({
            TableName: tableName,
            Key: leaseKey(partitionKey),
            UpdateExpression: update.expression,
            ConditionExpression: "lease_owner = :owner AND lease_version = :version AND lease_released = :false",
            ExpressionAttributeValues: {
              ...update.values,
              ":owner": { S: token.owner },
              ":version": { N: String(token.version) },
              ":false": { BOOL: false }
            },
            ReturnValues: "ALL_NEW"
          })
          .pipe(
            Effect.map((output) => output.Attributes),
            Effect.catchIf(isConditionFailure, () => Effect.succeed("rejected" as const)),
            Effect.mapError(unavailable(operation, partitionKey))
          )
        if (result !== "rejected") return yield* written(operation, partitionKey, result)
        const stored = yield* read(operation, partitionKey)
        if (stored === undefined || stored.released) return yield* new LeaseNotFound({ partitionKey })
        if (stored.owner !== token.owner || stored.version !== token.version) {
          return yield* notCurrentHolder(operation, partitionKey, token, stored)
        }
        // The read shows the token's lease: it was written after the failed condition (a token issued
        // by an acquire that was still in flight). Try again.
      }
      return yield* new StoreUnavailable({
        operation,
        partitionKey,
        cause: new Error(
          `the lease of partition ${partitionKey} kept changing during ${MaxAttempts} ${operation} attempts`
        )
      })
    })

  const renew = (partitionKey: string, token: LeaseTokenModule.LeaseTokenLike, ttl: Duration.DurationInput) =>
    Effect.gen(function* () {
      const millis = yield* ttlMillis(ttl)
      const now = yield* Clock.currentTimeMillis
      return yield* updateHeld("renew", partitionKey, token, {
        expression: "SET lease_expires_at = :expires",
        values: { ":expires": { N: String(now + millis) } }
      })
    }).pipe(Effect.withSpan("LeaseStore.renew", { attributes: { "outbox.partition": partitionKey } }))

  const release = (partitionKey: string, token: LeaseTokenModule.LeaseTokenLike) =>
    updateHeld("release", partitionKey, token, {
      expression: "SET lease_released = :true",
      values: { ":true": { BOOL: true } }
    }).pipe(Effect.asVoid, Effect.withSpan("LeaseStore.release", { attributes: { "outbox.partition": partitionKey } }))

  const current = (partitionKey: string) =>
    read("current", partitionKey).pipe(
      Effect.flatMap((stored) =>
        stored === undefined || stored.released
          ? Effect.fail(new LeaseNotFound({ partitionKey }))
          : Effect.succeed(toLease(partitionKey, stored))
      )
    )

  return LeaseStore.of({ acquire, renew, release, current })
}

/**
 * Builds the store: ensures the outbox table when asked (default), checks its key schema (fails with
 * `InvalidConfiguration`), and returns the lease store service.
 *
 * @since 0.1.0
 */
export const make = (
  options: DynamoDbLeaseStoreOptions = {}
): Effect.Effect<LeaseStoreService, InvalidConfiguration | StoreUnavailable, DynamoDb> =>
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
): Layer.Layer<LeaseStore, InvalidConfiguration | StoreUnavailable, DynamoDb> => Layer.effect(LeaseStore, make(options))

/**
 * The DynamoDB lease store with defaults: `LEASE` items in the table `effect-outbox` (created if missing).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<LeaseStore, InvalidConfiguration | StoreUnavailable, DynamoDb> = layerWith({})
