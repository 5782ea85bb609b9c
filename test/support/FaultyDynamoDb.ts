/**
 * A fault-injecting (and request-counting) decorator of the DynamoDb service, for the paths DynamoDB
 * Local never takes by itself (SPEC §3.3): transaction conflicts, throttling of the k-th transaction, a
 * fence raised by someone else mid-batch, and a ClaimIndex view that lags behind the table.
 *
 * It also injects random throttles and transaction conflicts at a rate (`enabled`, `rate`, `burst`), for
 * the fault histories of `test/properties/dynamodbFaults.property.test.ts`.
 *
 * Build a {@link Faults} controller, set the faults a test needs (fields are plain and mutable; change
 * them between operations), and provide {@link layer} on top of a real DynamoDb layer:
 * `Faulty.layer(faults).pipe(Layer.provide(DynamoDb.layer(config)))`.
 */
import type { AttributeValue, ConsumedCapacity, QueryCommandInput } from "@aws-sdk/client-dynamodb"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as OutboxTable from "../../src/layers/dynamodb/OutboxTable.js"
import * as RecordItem from "../../src/layers/dynamodb/RecordItem.js"
import { DynamoDb, DynamoDbError, type DynamoDbService } from "../../src/services/DynamoDb.js"

type Item = Record<string, AttributeValue>

/** The faults to inject and the counters of what went through. */
export class Faults {
  /** Transactions whose record key (the Update/Put of item 2) matches fail with a TransactionConflict. */
  conflictFor: ((key: Item) => boolean) | undefined = undefined
  /** The k-th TransactWriteItems (1-based, counted since the last `reset`) fails with throttling. */
  throttleTransactionAt: number | undefined = undefined
  /** After this many TransactWriteItems, the fence of `partitionKey` is raised to `version` by "someone else". */
  raiseFenceAfter:
    { readonly transactions: number; readonly partitionKey: string; readonly version: number } | undefined = undefined
  /** Items hidden from ClaimIndex queries (the index has not caught up with them yet). */
  hideFromClaimIndex: ((item: Item) => boolean) | undefined = undefined
  /** The k-th Query (1-based, counted since the last `reset`) fails with throttling. */
  failQueryAt: number | undefined = undefined
  /** The next this-many RecordIdIndex queries find nothing (the index has not caught up yet). */
  recordIdIndexMisses = 0
  /** Runs before every Query (e.g. to slow pages down or to signal a test). */
  beforeQuery: ((input: QueryCommandInput) => Effect.Effect<void>) | undefined = undefined
  /** Ask DynamoDB for consumed capacity on reads and sum it in `readCapacity`. */
  captureCapacity = false

  /**
   * Random faults for generated histories: while `enabled`, each request whose operation `match`es fails
   * before it reaches DynamoDB (nothing applied) with probability `rate`, and the first `burst` matching
   * requests fail whatever the rate. A failing TransactWriteItems is cancelled with `TransactionConflict`
   * with probability `conflictShare`, else throttled; any other operation is throttled.
   */
  enabled = false
  rate = 0
  burst = 0
  /** The first this-many matching requests pass untouched (faults strike later in an operation). */
  after = 0
  conflictShare = 0.5
  /**
   * A failing UpdateItem is rejected with `TransactionConflictException` with this probability (the item
   * was in a transaction at that instant — the fence item is, during claims), else throttled.
   */
  updateConflictShare = 0
  match: (operation: string) => boolean = () => true
  random: () => number = Math.random
  /** Random faults injected since the last `reset` (`injectedConflicts` of them conflicts). */
  injected = 0
  injectedConflicts = 0

  /** Counters since the last `reset`. */
  transactions = 0
  queries = 0
  claimIndexQueries = 0
  baseTableQueries = 0
  getItems = 0
  /** Items read: Query `ScannedCount` plus items returned by GetItem. */
  itemsRead = 0
  readCapacity = 0
  requests = 0

  /** Zeroes the counters (faults stay as they are). */
  reset(): void {
    this.transactions = 0
    this.queries = 0
    this.claimIndexQueries = 0
    this.baseTableQueries = 0
    this.getItems = 0
    this.itemsRead = 0
    this.readCapacity = 0
    this.requests = 0
    this.injected = 0
    this.injectedConflicts = 0
  }

  /** Clears every fault. */
  clear(): void {
    this.conflictFor = undefined
    this.throttleTransactionAt = undefined
    this.raiseFenceAfter = undefined
    this.hideFromClaimIndex = undefined
    this.beforeQuery = undefined
    this.recordIdIndexMisses = 0
    this.failQueryAt = undefined
    this.enabled = false
    this.rate = 0
    this.burst = 0
    this.after = 0
    this.updateConflictShare = 0
  }
}

const sumCapacity = (capacity: ConsumedCapacity | ReadonlyArray<ConsumedCapacity> | undefined): number => {
  if (capacity === undefined) return 0
  const list: ReadonlyArray<ConsumedCapacity> = Array.isArray(capacity) ? capacity : [capacity]
  return list.reduce((total, c) => total + (c.CapacityUnits ?? 0), 0)
}

const fabricated = (
  kind: "Throttling" | "TransactionCanceled",
  errorName: string,
  operation = "TransactWriteItems",
  reasons?: ReadonlyArray<string>
): DynamoDbError =>
  new DynamoDbError({
    kind,
    operation,
    errorName,
    detail: "injected by FaultyDynamoDb",
    ...(reasons !== undefined ? { cancellationReasons: reasons } : {})
  })

/** Wraps a DynamoDb service with the faults and counters of `faults`. */
export const decorate = (inner: DynamoDbService, faults: Faults): DynamoDbService => {
  /** The random fault for this request, if one is drawn (see {@link Faults.rate}). */
  const randomFault = (operation: string): DynamoDbError | undefined => {
    if (!faults.enabled || !faults.match(operation)) return undefined
    if (faults.after > 0) {
      faults.after--
      return undefined
    }
    const fail = faults.burst > 0 || faults.random() < faults.rate
    if (!fail) return undefined
    if (faults.burst > 0) faults.burst--
    faults.injected++
    if (operation === "TransactWriteItems" && faults.random() < faults.conflictShare) {
      faults.injectedConflicts++
      return fabricated("TransactionCanceled", "TransactionCanceledException", operation, [
        "None",
        "TransactionConflict"
      ])
    }
    if (operation === "UpdateItem" && faults.random() < faults.updateConflictShare) {
      faults.injectedConflicts++
      return new DynamoDbError({
        kind: "TransactionConflict",
        operation,
        errorName: "TransactionConflictException",
        detail: "injected by FaultyDynamoDb"
      })
    }
    return fabricated("Throttling", "ThrottlingException", operation)
  }
  const count = <A, E>(effect: Effect.Effect<A, E>, operation: string): Effect.Effect<A, E | DynamoDbError> =>
    Effect.suspend((): Effect.Effect<A, E | DynamoDbError> => {
      faults.requests++
      const fault = randomFault(operation)
      return fault === undefined ? effect : Effect.fail(fault)
    })
  return DynamoDb.of({
    ...inner,
    getItem: (input) =>
      count(
        inner.getItem(faults.captureCapacity ? { ...input, ReturnConsumedCapacity: "TOTAL" } : input).pipe(
          Effect.tap((output) =>
            Effect.sync(() => {
              faults.getItems++
              if (output.Item !== undefined) faults.itemsRead++
              faults.readCapacity += sumCapacity(output.ConsumedCapacity)
            })
          )
        ),
        "GetItem"
      ),
    putItem: (input) => count(inner.putItem(input), "PutItem"),
    updateItem: (input) => count(inner.updateItem(input), "UpdateItem"),
    deleteItem: (input) => count(inner.deleteItem(input), "DeleteItem"),
    batchWriteItem: (input) => count(inner.batchWriteItem(input), "BatchWriteItem"),
    query: (input) =>
      count(
        Effect.gen(function* () {
          if (faults.beforeQuery !== undefined) yield* faults.beforeQuery(input)
          faults.queries++
          if (faults.failQueryAt === faults.queries)
            return yield* fabricated("Throttling", "ThrottlingException", "Query")
          if (input.IndexName === OutboxTable.ClaimIndex) faults.claimIndexQueries++
          if (input.IndexName === undefined) faults.baseTableQueries++
          const output = yield* inner.query(
            faults.captureCapacity ? { ...input, ReturnConsumedCapacity: "TOTAL" } : input
          )
          faults.itemsRead += output.ScannedCount ?? 0
          faults.readCapacity += sumCapacity(output.ConsumedCapacity)
          if (input.IndexName === OutboxTable.RecordIdIndex && faults.recordIdIndexMisses > 0) {
            faults.recordIdIndexMisses--
            return { ...output, Items: [], Count: 0 }
          }
          const hide = faults.hideFromClaimIndex
          if (input.IndexName !== OutboxTable.ClaimIndex || hide === undefined || output.Items === undefined) {
            return output
          }
          const Items = output.Items.filter((item) => !hide(item))
          return { ...output, Items, Count: Items.length }
        }),
        "Query"
      ),
    transactWriteItems: (input) =>
      count(
        Effect.gen(function* () {
          const n = ++faults.transactions
          const raise = faults.raiseFenceAfter
          if (raise !== undefined && n === raise.transactions + 1) {
            yield* inner.updateItem({
              TableName: input.TransactItems?.[0]?.ConditionCheck?.TableName,
              Key: RecordItem.fenceKey(raise.partitionKey),
              UpdateExpression: "SET max_claim_version = :v",
              ExpressionAttributeValues: { ":v": RecordItem.num(raise.version) }
            })
          }
          if (faults.throttleTransactionAt === n) {
            return yield* fabricated("Throttling", "ThrottlingException")
          }
          const second = input.TransactItems?.[1]
          const key = second?.Update?.Key ?? second?.Put?.Item
          if (key !== undefined && faults.conflictFor?.(key) === true) {
            return yield* fabricated("TransactionCanceled", "TransactionCanceledException", "TransactWriteItems", [
              "None",
              "TransactionConflict"
            ])
          }
          return yield* inner.transactWriteItems(input)
        }),
        "TransactWriteItems"
      )
  })
}

/** The decorator as a layer over the real DynamoDb service. */
export const layer = (faults: Faults): Layer.Layer<DynamoDb, never, DynamoDb> =>
  Layer.effect(
    DynamoDb,
    Effect.map(DynamoDb, (inner) => decorate(inner, faults))
  )
