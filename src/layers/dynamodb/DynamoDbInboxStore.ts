/**
 * The DynamoDB `InboxStore` (SPEC §12), in the outbox table (default `effect-outbox`, created at layer
 * start like the outbox store's):
 *
 * - a processed id is the item `PK = "INBOX#" + esc(consumer) + "#" + esc(messageId)`, `SK = "INBOX"`
 *   with `processed_at` and the table's `ttl` attribute set to `processed_at + dedupeWindow` (DynamoDB's
 *   TTL removes it some time after that: ids are kept at least the window, and `trim` has nothing to do);
 * - a high-water mark is `PK = "INBOXMARK#" + esc(consumer) + "#" + esc(partitionKey) + "#" +
 *   esc(orderingKey)`, `SK = "MARK"` with `seq` (never expires).
 *
 * A unit reads the id and the mark with consistent reads, lets the handler add its own items
 * ({@link write}), then writes everything with one `TransactWriteItems`: the id's put under
 * `attribute_not_exists(PK)`, the mark's put under `attribute_not_exists(PK) OR seq < :seq`, then the
 * handler's items with their own conditions. A concurrent unit that recorded the id or raised the mark first
 * cancels the transaction, which the core reports as `Duplicate` or `Stale`: the handler's items are then
 * never written. A transaction holds at most 100 items, so a handler may add at most 98.
 *
 * @since 0.1.0
 */
import type { AttributeValue, TransactWriteItem } from "@aws-sdk/client-dynamodb"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import {
  InvalidArgument,
  type InvalidConfiguration,
  StoreUnavailable,
  TransactionConflict
} from "../../domain/OutboxError.js"
import { DynamoDb, type DynamoDbError } from "../../services/DynamoDb.js"
import * as InboxStore from "../../services/InboxStore.js"
import * as OutboxTable from "./OutboxTable.js"
import { escapeComponent } from "./RecordItem.js"

/**
 * Options of the DynamoDB inbox store.
 *
 * @since 0.1.0
 */
export interface DynamoDbInboxStoreOptions extends InboxStore.InboxOptions {
  /** The table holding the inbox items (default `effect-outbox`, the outbox table). */
  readonly tableName?: string | undefined
  /** Create the table (exactly as the outbox store does) when it does not exist (default `true`). */
  readonly ensureTable?: boolean | undefined
}

/**
 * The most items a handler may add to one unit (DynamoDB's 100 per transaction, less the id and the mark).
 *
 * @since 0.1.0
 */
export const maxHandlerItems = 98

const currentWrites = FiberRef.unsafeMake<Option.Option<Array<TransactWriteItem>>>(Option.none())

/**
 * Adds `TransactWriteItems` entries to the unit of the `Inbox.process` running this handler: they are
 * written in the same transaction as the inbox item, or not at all. Fails with `InvalidArgument` outside
 * a DynamoDB inbox unit.
 *
 * @since 0.1.0
 */
export const write = (items: ReadonlyArray<TransactWriteItem>): Effect.Effect<void, InvalidArgument> =>
  Effect.flatMap(FiberRef.get(currentWrites), (current) =>
    Option.isNone(current)
      ? Effect.fail(
          new InvalidArgument({
            operation: "DynamoDbInboxStore.write",
            argument: "context",
            reason: "must run inside the handler of Inbox.process on a DynamoDB inbox store"
          })
        )
      : Effect.sync(() => void current.value.push(...items))
  )

/**
 * The primary key of a processed id.
 *
 * @since 0.1.0
 */
export const processedKey = (consumer: string, messageId: string): Record<string, AttributeValue> => ({
  PK: { S: `INBOX#${escapeComponent(consumer)}#${escapeComponent(messageId)}` },
  SK: { S: "INBOX" }
})

/**
 * The primary key of a high-water mark.
 *
 * @since 0.1.0
 */
export const markKey = (key: InboxStore.MarkKey): Record<string, AttributeValue> => ({
  PK: {
    S: `INBOXMARK#${escapeComponent(key.consumer)}#${escapeComponent(key.partitionKey)}#${escapeComponent(key.orderingKey)}`
  },
  SK: { S: "MARK" }
})

const numberOf = (value: AttributeValue | undefined): number | undefined => {
  const text = value?.N
  if (text === undefined) return undefined
  const n = Number(text)
  return Number.isSafeInteger(n) ? n : undefined
}

/**
 * Builds the backend over the `DynamoDb` service (the table must exist).
 *
 * @since 0.1.0
 */
export const backend = (tableName: string): Effect.Effect<InboxStore.InboxBackend, never, DynamoDb> =>
  Effect.map(DynamoDb, (dynamo) => {
    const readMark = (key: InboxStore.MarkKey) =>
      dynamo.getItem({ TableName: tableName, Key: markKey(key), ConsistentRead: true }).pipe(
        Effect.map((out) => Option.fromNullable(numberOf(out.Item?.["seq"]))),
        Effect.mapError(StoreUnavailable.wrap("Inbox.mark", key.partitionKey))
      )

    const isProcessed = (consumer: string, messageId: string) =>
      dynamo
        .getItem({
          TableName: tableName,
          Key: processedKey(consumer, messageId),
          ConsistentRead: true,
          ProjectionExpression: "PK"
        })
        .pipe(
          Effect.map((out) => out.Item !== undefined),
          Effect.mapError(StoreUnavailable.wrap("Inbox.isProcessed"))
        )

    const atomically = <A, E, R>(body: (unit: InboxStore.InboxUnit) => Effect.Effect<A, E, R>) =>
      Effect.gen(function* () {
        const own: Array<TransactWriteItem> = []
        const handlerItems: Array<TransactWriteItem> = []
        const unit: InboxStore.InboxUnit = {
          record: (entry) =>
            Effect.map(isProcessed(entry.consumer, entry.messageId), (found) => {
              if (found) return false
              own.push({
                Put: {
                  TableName: tableName,
                  Item: {
                    ...processedKey(entry.consumer, entry.messageId),
                    consumer: { S: entry.consumer },
                    message_id: { S: entry.messageId },
                    partition_key: { S: entry.partitionKey },
                    processed_at: { N: String(entry.processedAtMillis) },
                    ttl: { N: String(Math.ceil(entry.expiresAtMillis / 1000)) }
                  },
                  ConditionExpression: "attribute_not_exists(PK)"
                }
              })
              return true
            }),
          raiseMark: (key, seq, nowMillis) =>
            Effect.map(readMark(key), (stored): InboxStore.RaiseResult => {
              if (Option.isSome(stored) && stored.value >= seq) return { raised: false, mark: stored.value }
              own.push({
                Put: {
                  TableName: tableName,
                  Item: {
                    ...markKey(key),
                    seq: { N: String(seq) },
                    updated_at: { N: String(nowMillis) }
                  },
                  ConditionExpression: "attribute_not_exists(PK) OR #seq < :seq",
                  ExpressionAttributeNames: { "#seq": "seq" },
                  ExpressionAttributeValues: { ":seq": { N: String(seq) } }
                }
              })
              return { raised: true }
            })
        }
        const value = yield* Effect.locally(body(unit), currentWrites, Option.some(handlerItems))
        const items = [...own, ...handlerItems]
        if (items.length === 0) return value
        if (items.length > 100) {
          return yield* new InboxStore.CommitRefused({
            reason: "handler",
            retryable: false,
            detail: `the handler added ${handlerItems.length} items; at most ${maxHandlerItems} fit in the inbox's transaction`
          })
        }
        yield* dynamo
          .transactWriteItems({ TransactItems: items })
          .pipe(Effect.catchAll((error) => Effect.fail(commitFailure(error, own.length))))
        return value
      })

    return {
      name: "dynamodb",
      atomically,
      isProcessed,
      readMark,
      trimBatch: () => Effect.succeed(0)
    } satisfies InboxStore.InboxBackend
  })

/** What a failed commit means: a refused condition of ours or of the handler, a conflict, or an outage. */
const commitFailure = (
  error: DynamoDbError,
  ownItems: number
): InboxStore.CommitRefused | TransactionConflict | StoreUnavailable => {
  const reasons = error.cancellationReasons ?? []
  if (error.kind === "TransactionCanceled") {
    if (reasons[0] === "ConditionalCheckFailed") {
      return new InboxStore.CommitRefused({ reason: "duplicate", retryable: false, detail: "id recorded concurrently" })
    }
    if (ownItems > 1 && reasons[1] === "ConditionalCheckFailed") {
      return new InboxStore.CommitRefused({ reason: "stale", retryable: false, detail: "mark raised concurrently" })
    }
    const refused = reasons.findIndex((reason, i) => i >= ownItems && reason === "ConditionalCheckFailed")
    if (refused >= 0) {
      return new InboxStore.CommitRefused({
        reason: "handler",
        retryable: true,
        detail: `the condition of the handler's item ${refused - ownItems} was not met`
      })
    }
    if (reasons.some((reason) => reason === "TransactionConflict")) {
      return new TransactionConflict({ partitionKey: "", operation: "Inbox.process", cause: error })
    }
  }
  if (error.kind === "TransactionConflict") {
    return new TransactionConflict({ partitionKey: "", operation: "Inbox.process", cause: error })
  }
  return new StoreUnavailable({ operation: "Inbox.process", cause: error })
}

/**
 * Builds the store: ensures the table when asked (default), then returns the service.
 *
 * @since 0.1.0
 */
export const make = (
  options: DynamoDbInboxStoreOptions = {}
): Effect.Effect<InboxStore.InboxStoreService, InvalidConfiguration | StoreUnavailable, DynamoDb> =>
  Effect.gen(function* () {
    const valid = yield* InboxStore.validateOptions("DynamoDbInboxStore", options)
    const tableName = options.tableName ?? "effect-outbox"
    if (options.ensureTable ?? true) yield* OutboxTable.ensureTable(tableName)
    return InboxStore.make(yield* backend(tableName), valid)
  })

/**
 * The DynamoDB inbox store as a layer with the given options.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: DynamoDbInboxStoreOptions
): Layer.Layer<InboxStore.InboxStore, InvalidConfiguration | StoreUnavailable, DynamoDb> =>
  Layer.effect(InboxStore.InboxStore, make(options))

/**
 * The DynamoDB inbox store with defaults: items in the table `effect-outbox` (created if missing).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<InboxStore.InboxStore, InvalidConfiguration | StoreUnavailable, DynamoDb> = layerWith(
  {}
)
