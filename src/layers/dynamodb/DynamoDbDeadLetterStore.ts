/**
 * The DynamoDB `DeadLetterStore` (SPEC §5).
 *
 * **Layout** — see `DeadLetterTable.ts`: a table of its own keyed by entry id, and three GSIs with range
 * key `age = ts(failedAt)#id` (so a time window is a key range and index order is `(failedAt, id)`
 * order): `AgeIndex` (every entry), `RouteIndex` (entries with a route) and `CategoryIndex` (every
 * entry), each hash key spread over `DeadLetterTable.Shards` shards. Nothing here ever scans the table
 * (the client service offers no Scan).
 *
 * **Requests**
 * - `write`: one `PutItem` conditional on `attribute_not_exists(entry_id)` (failure → `DuplicateRecord`).
 * - `get`: one consistent `GetItem`.
 * - `list(filter)`: the most selective index is chosen — `RouteIndex` when the filter names a route
 *   (a category is then a `FilterExpression`), else `CategoryIndex` when it names a category, else
 *   `AgeIndex`; `since`/`before` become the key condition on `age`. One `Query` per shard (in parallel),
 *   each paged with `LastEvaluatedKey`: to the end without a limit; with a limit `L`, until the shard
 *   has given `L` entries and every further entry of the same millisecond as its `L`-th (so ties are
 *   settled by id exactly as the other backends do, whatever byte order DynamoDB uses for ids). The
 *   shards' results are merged (the core sorts them by `(failedAt, id)` and cuts to `L`). Pages of a
 *   limited list ask for `L + 1` items, so a small limit reads one short page per shard.
 * - `delete(ids)`: one `DeleteItem` (`ReturnValues: ALL_OLD`) per distinct id; the count is the number
 *   of items that existed.
 * - `deleteWhere(filter)`: without a limit, the same index queries as `list` (projecting only the key),
 *   paged to the end, and one `DeleteItem` per entry seen; with a limit, `list` selects the oldest `L`
 *   first. Every delete is conditional on the entry still matching the filter, so an entry deleted by
 *   someone else meanwhile (indexes are eventually consistent) is not counted and nothing outside the
 *   filter is removed.
 * - `purge(before)`: `deleteWhere({ before })`: `AgeIndex` with `age < ts(before)`, all shards.
 * - `redrive(ids)` (the core's loop): one consistent `GetItem` per id, then per entry a persist through
 *   the `OutboxStore` and one `DeleteItem`. Not one transaction: a crash between the two leaves the entry
 *   in place, and redriving it again finds the record already queued and returns its id.
 *
 * These are the storage primitives of `DeadLetterStore.make`.
 *
 * The GSIs are eventually consistent: an entry written a moment ago may be missing from `list` and from
 * `deleteWhere`/`purge` for a short while (`get` and `delete` by id are exact).
 *
 * @since 0.1.0
 */
import type { AttributeValue, QueryCommandOutput } from "@aws-sdk/client-dynamodb"
import * as Chunk from "effect/Chunk"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type { DeadLetterEntry } from "../../domain/DeadLetterEntry.js"
import { type InvalidConfiguration, InvalidRecord, StoreUnavailable } from "../../domain/OutboxError.js"
import * as DeadLetterStore from "../../services/DeadLetterStore.js"
import { DynamoDb, type DynamoDbError, type DynamoDbService } from "../../services/DynamoDb.js"
import { OutboxStore, type OutboxStoreService } from "../../services/OutboxStore.js"
import * as DeadLetterTable from "./DeadLetterTable.js"
import { decodeAll } from "../DecodeAll.js"

/**
 * Options of the DynamoDB dead-letter store.
 *
 * @since 0.1.0
 */
export interface DynamoDbDeadLetterStoreOptions {
  /** Table name (default `effect-outbox-dead-letter`). */
  readonly tableName?: string | undefined
  /**
   * Create the table when it does not exist (default `true`). Either way the layer runs the schema
   * preflight and fails with `InvalidConfiguration` naming every mismatch.
   */
  readonly ensureTable?: boolean | undefined
  /** `Limit` of every index Query page (default: DynamoDB's 1 MB pages, `L + 1` for a limited list). For tests. */
  readonly pageSize?: number | undefined
  /** Concurrent `DeleteItem`/`GetItem` requests per operation (default 16). */
  readonly concurrency?: number | undefined
}

type Item = DeadLetterTable.Item

const isConditionFailure = (error: DynamoDbError): boolean => error.kind === "ConditionalCheckFailed"

/** An expression and the values it uses. */
interface Expression {
  readonly expression: string
  readonly values: Record<string, AttributeValue>
}

/** How a selection is answered: which index, its hash key per shard, the key condition and the rest. */
interface Plan {
  readonly index: string
  readonly hashAttribute: string
  readonly hashKey: (shard: number) => string
  readonly range: Expression
  readonly filterExpression: string | undefined
  readonly filterValues: Record<string, AttributeValue>
}

const S = (value: string): AttributeValue => ({ S: value })

/** The key condition on `age` for a selection's time window (`since < before` when both are set). */
const rangeOf = (selection: DeadLetterStore.Selection): Expression => {
  const values: Record<string, AttributeValue> = {}
  if (selection.sinceMillis !== undefined) values[":since"] = S(DeadLetterTable.timeKey(selection.sinceMillis))
  if (selection.beforeMillis !== undefined) values[":before"] = S(DeadLetterTable.timeKey(selection.beforeMillis))
  const expression =
    selection.sinceMillis !== undefined && selection.beforeMillis !== undefined
      ? " AND #age BETWEEN :since AND :before"
      : selection.sinceMillis !== undefined
        ? " AND #age >= :since"
        : selection.beforeMillis !== undefined
          ? " AND #age < :before"
          : ""
  return { expression, values }
}

const planOf = (selection: DeadLetterStore.Selection): Plan => {
  const range = rangeOf(selection)
  const routeId = selection.routeId
  const category = selection.category
  if (routeId !== undefined) {
    return {
      index: DeadLetterTable.RouteIndex,
      hashAttribute: "route_key",
      hashKey: (shard) => DeadLetterTable.routeKey(shard, routeId),
      range,
      filterExpression: category !== undefined ? "#category = :category" : undefined,
      filterValues: category !== undefined ? { ":category": S(category) } : {}
    }
  }
  if (category !== undefined) {
    return {
      index: DeadLetterTable.CategoryIndex,
      hashAttribute: "category_key",
      hashKey: (shard) => DeadLetterTable.categoryKey(shard, category),
      range,
      filterExpression: undefined,
      filterValues: {}
    }
  }
  return {
    index: DeadLetterTable.AgeIndex,
    hashAttribute: "all_key",
    hashKey: DeadLetterTable.allKey,
    range,
    filterExpression: undefined,
    filterValues: {}
  }
}

/**
 * The condition under which a conditional delete removes an entry: it still exists and matches the
 * selection (route, category, time window).
 */
const matchCondition = (selection: DeadLetterStore.Selection): Expression => {
  const parts = ["attribute_exists(#id)"]
  const values: Record<string, AttributeValue> = {}
  if (selection.routeId !== undefined) {
    parts.push("#route = :route")
    values[":route"] = S(selection.routeId)
  }
  if (selection.category !== undefined) {
    parts.push("#category = :category")
    values[":category"] = S(selection.category)
  }
  if (selection.sinceMillis !== undefined) {
    parts.push("#age >= :since")
    values[":since"] = S(DeadLetterTable.timeKey(selection.sinceMillis))
  }
  if (selection.beforeMillis !== undefined) {
    parts.push("#age < :before")
    values[":before"] = S(DeadLetterTable.timeKey(selection.beforeMillis))
  }
  return { expression: parts.join(" AND "), values }
}

/** Attribute names used in expressions (all through placeholders: some are DynamoDB reserved words). */
const names = {
  "#id": "entry_id",
  "#age": "age",
  "#route": "route_id",
  "#category": "category"
} as const

/** Only the placeholders an expression uses (DynamoDB rejects unused ones). */
const namesFor = (...expressions: ReadonlyArray<string | undefined>): Record<string, string> => {
  const text = expressions.join(" ")
  const used: Record<string, string> = {}
  for (const [placeholder, name] of Object.entries(names)) if (text.includes(placeholder)) used[placeholder] = name
  return used
}

const decodeItems = (
  operation: string,
  items: ReadonlyArray<Item>
): Either.Either<Array<DeadLetterEntry>, StoreUnavailable> =>
  Either.mapLeft(
    decodeAll(items, DeadLetterTable.decode),
    (problem) => new StoreUnavailable({ operation, cause: new Error(problem) })
  )

interface Cursor {
  readonly cursor: Item | undefined
}

const noCursor: Cursor = { cursor: undefined }

/** What the storage steps work against: the client, the table and the paging and concurrency settings. */
interface Resolved {
  readonly dynamo: DynamoDbService
  readonly tableName: string
  readonly pageSize: number | undefined
  readonly concurrency: number
}

const shards = Array.from({ length: DeadLetterTable.Shards }, (_, shard) => shard)

/** The pages of one shard of a plan, as a stream of raw items. */
const shardItems = (
  resolved: Resolved,
  operation: string,
  plan: Plan,
  shard: number,
  extra: { readonly limit?: number | undefined; readonly projection?: string | undefined }
): Stream.Stream<Item, StoreUnavailable> => {
  const keyCondition = `#hash = :hash${plan.range.expression}`
  const pageLimit = resolved.pageSize ?? extra.limit
  return Stream.paginateChunkEffect(noCursor, ({ cursor }) =>
    resolved.dynamo
      .query({
        TableName: resolved.tableName,
        IndexName: plan.index,
        KeyConditionExpression: keyCondition,
        ...(plan.filterExpression !== undefined ? { FilterExpression: plan.filterExpression } : {}),
        ...(extra.projection !== undefined ? { ProjectionExpression: extra.projection } : {}),
        ExpressionAttributeNames: {
          "#hash": plan.hashAttribute,
          ...namesFor(keyCondition, plan.filterExpression, extra.projection)
        },
        ExpressionAttributeValues: {
          ":hash": { S: plan.hashKey(shard) },
          ...plan.range.values,
          ...plan.filterValues
        },
        ScanIndexForward: true,
        ...(pageLimit !== undefined ? { Limit: pageLimit } : {}),
        ...(cursor !== undefined ? { ExclusiveStartKey: cursor } : {})
      })
      .pipe(
        StoreUnavailable.refail(operation),
        Effect.map(
          (output: QueryCommandOutput) =>
            [
              Chunk.fromIterable(output.Items ?? []),
              Option.map(Option.fromNullable(output.LastEvaluatedKey), (next): Cursor => ({ cursor: next }))
            ] as const
        )
      )
  )
}

/** The entries matching a selection, including its oldest `limit` (every shard's first `limit`). */
const select = (
  resolved: Resolved,
  operation: string,
  selection: DeadLetterStore.Selection
): Effect.Effect<Array<DeadLetterEntry>, StoreUnavailable> =>
  Effect.gen(function* () {
    const limit = selection.limit
    const plan = planOf(selection)
    const finite = Number.isFinite(limit)
    const perShard = yield* Effect.forEach(
      shards,
      (shard) => {
        const entries = Stream.mapChunksEffect(
          shardItems(resolved, operation, plan, shard, { limit: finite ? Math.min(limit + 1, 1000) : undefined }),
          (items) => Effect.map(decodeItems(operation, Chunk.toReadonlyArray(items)), Chunk.unsafeFromArray)
        )
        if (!finite) return Stream.runCollect(entries)
        // The shard's first `limit` entries, then every further one of the same millisecond as the last
        // of them: the index orders ids within a millisecond by bytes, the result by `byAge`.
        return Stream.runCollect(
          Stream.suspend(() => {
            let taken = 0
            let boundary = 0
            return Stream.takeWhile(entries, (entry) => {
              const millis = DateTime.toEpochMillis(entry.failedAt)
              if (taken < limit) {
                taken++
                boundary = millis
                return true
              }
              return millis === boundary
            })
          })
        )
      },
      { concurrency: "unbounded" }
    )
    return perShard.flatMap((chunk) => Chunk.toArray(chunk))
  })

const insert = (
  resolved: Resolved,
  entry: DeadLetterEntry
): Effect.Effect<boolean, InvalidRecord | StoreUnavailable> => {
  const problem = DeadLetterTable.keyProblem(entry)
  if (problem !== undefined) {
    return Effect.fail(
      new InvalidRecord({ index: 0, recordId: entry.recordId, partitionKey: entry.partitionKey, reason: problem })
    )
  }
  return resolved.dynamo
    .putItem({
      TableName: resolved.tableName,
      Item: DeadLetterTable.encode(entry),
      ConditionExpression: "attribute_not_exists(#id)",
      ExpressionAttributeNames: { "#id": "entry_id" }
    })
    .pipe(
      Effect.as(true),
      Effect.catchIf(isConditionFailure, () => Effect.succeed(false)),
      Effect.mapError((error): InvalidRecord | StoreUnavailable =>
        error.kind === "Validation"
          ? new InvalidRecord({
              index: 0,
              recordId: entry.recordId,
              partitionKey: entry.partitionKey,
              reason: `DynamoDB rejected dead-letter entry ${entry.id}: ${error.detail}`
            })
          : StoreUnavailable.wrap("write")(error)
      )
    )
}

const readEntry = (
  resolved: Resolved,
  operation: string,
  id: string
): Effect.Effect<DeadLetterEntry | undefined, StoreUnavailable> =>
  resolved.dynamo.getItem({ TableName: resolved.tableName, Key: { entry_id: { S: id } }, ConsistentRead: true }).pipe(
    StoreUnavailable.refail(operation),
    Effect.flatMap((output) => {
      if (output.Item === undefined) return Effect.succeed(undefined)
      return Either.match(DeadLetterTable.decode(output.Item), {
        onLeft: (reason) => Effect.fail(new StoreUnavailable({ operation, cause: new Error(reason) })),
        onRight: (decoded) => Effect.succeed(decoded)
      })
    })
  )

/** Deletes one entry; `true` when it existed. */
const deleteOne = (resolved: Resolved, operation: string, id: string): Effect.Effect<boolean, StoreUnavailable> =>
  resolved.dynamo
    .deleteItem({ TableName: resolved.tableName, Key: { entry_id: { S: id } }, ReturnValues: "ALL_OLD" })
    .pipe(
      Effect.map((output) => output.Attributes !== undefined),
      StoreUnavailable.refail(operation)
    )

/** Deletes one entry if it still matches the filter; `true` when it did. */
const deleteMatching = (
  resolved: Resolved,
  operation: string,
  id: string,
  condition: Expression
): Effect.Effect<boolean, StoreUnavailable> =>
  resolved.dynamo
    .deleteItem({
      TableName: resolved.tableName,
      Key: { entry_id: { S: id } },
      ConditionExpression: condition.expression,
      ExpressionAttributeNames: namesFor(condition.expression),
      ExpressionAttributeValues: condition.values
    })
    .pipe(
      Effect.as(true),
      Effect.catchIf(isConditionFailure, () => Effect.succeed(false)),
      StoreUnavailable.refail(operation)
    )

const countTrue = (results: ReadonlyArray<boolean>): number => results.filter((deleted) => deleted).length

/** Deletes the entries matching a selection: its oldest `limit` when limited, else every one the index shows. */
const removeWhere = (
  resolved: Resolved,
  operation: string,
  selection: DeadLetterStore.Selection
): Effect.Effect<number, StoreUnavailable> =>
  Effect.gen(function* () {
    const condition = matchCondition(selection)
    if (Number.isFinite(selection.limit)) {
      const oldest = (yield* select(resolved, operation, selection))
        .sort(DeadLetterStore.byAge)
        .slice(0, selection.limit)
      const deleted = yield* Effect.forEach(
        oldest,
        (entry) => deleteMatching(resolved, operation, entry.id, condition),
        { concurrency: resolved.concurrency }
      )
      return countTrue(deleted)
    }
    const plan = planOf(selection)
    const perShardConcurrency = Math.max(1, Math.ceil(resolved.concurrency / DeadLetterTable.Shards))
    const counts = yield* Effect.forEach(
      shards,
      (shard) =>
        shardItems(resolved, operation, plan, shard, { projection: "#id" }).pipe(
          Stream.mapEffect(
            (item) => {
              const id = item["entry_id"]?.S
              return id === undefined ? Effect.succeed(false) : deleteMatching(resolved, operation, id, condition)
            },
            { concurrency: perShardConcurrency }
          ),
          Stream.runFold(0, (total, deleted) => (deleted ? total + 1 : total))
        ),
      { concurrency: "unbounded" }
    )
    return counts.reduce((a, b) => a + b, 0)
  })

/**
 * Builds the store over a table that is known to match the layout (see {@link make} for the checks) and
 * the `OutboxStore` redrive persists into.
 *
 * @since 0.1.0
 */
export const fromServices = (
  dynamo: DynamoDbService,
  outbox: OutboxStoreService,
  options: {
    readonly tableName: string
    readonly pageSize?: number | undefined
    readonly concurrency?: number | undefined
  }
): DeadLetterStore.DeadLetterStoreService => {
  const resolved: Resolved = {
    dynamo,
    tableName: options.tableName,
    pageSize: options.pageSize,
    concurrency: Math.max(1, Math.floor(options.concurrency ?? 16))
  }
  return DeadLetterStore.make(
    {
      insert: (entry) => insert(resolved, entry),
      get: (operation, ids) =>
        Effect.map(
          Effect.forEach(ids, (id) => readEntry(resolved, operation, id), { concurrency: resolved.concurrency }),
          (found) => found.filter((entry) => entry !== undefined)
        ),
      select: (selection) => select(resolved, "list", selection),
      remove: (operation, ids) =>
        Effect.map(
          Effect.forEach(ids, (id) => deleteOne(resolved, operation, id), { concurrency: resolved.concurrency }),
          countTrue
        ),
      removeWhere: (operation, selection) => removeWhere(resolved, operation, selection),
      redriveScope: (redrive) => redrive
    },
    outbox
  )
}

/**
 * Builds the store: ensures the table when asked (default), runs the schema preflight (fails with
 * `InvalidConfiguration` naming every mismatch), and returns the store over the `OutboxStore` in context
 * (used by redrive).
 *
 * @since 0.1.0
 */
export const make = (
  options: DynamoDbDeadLetterStoreOptions = {}
): Effect.Effect<
  DeadLetterStore.DeadLetterStoreService,
  InvalidConfiguration | StoreUnavailable,
  DynamoDb | OutboxStore
> =>
  Effect.gen(function* () {
    const dynamo = yield* DynamoDb
    const outbox = yield* OutboxStore
    const tableName = options.tableName ?? DeadLetterTable.DefaultTableName
    if (options.ensureTable ?? true) yield* DeadLetterTable.ensureTable(tableName)
    else yield* DeadLetterTable.preflight(tableName)
    return fromServices(dynamo, outbox, { tableName, pageSize: options.pageSize, concurrency: options.concurrency })
  })

/**
 * The DynamoDB dead-letter store as a layer with the given options; redrive goes through the
 * `OutboxStore`.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: DynamoDbDeadLetterStoreOptions
): Layer.Layer<DeadLetterStore.DeadLetterStore, InvalidConfiguration | StoreUnavailable, DynamoDb | OutboxStore> =>
  Layer.effect(DeadLetterStore.DeadLetterStore, make(options))

/**
 * The DynamoDB dead-letter store with defaults: table `effect-outbox-dead-letter` (created if missing).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<
  DeadLetterStore.DeadLetterStore,
  InvalidConfiguration | StoreUnavailable,
  DynamoDb | OutboxStore
> = layerWith({})
