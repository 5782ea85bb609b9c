/**
 * The DynamoDB form of publishing typed values (SPEC §11, R-PERSIST-6): the values of a topic become records
 * (`Topic.toRecords`: Schema encode, `InvalidRecord` naming topic and field) and then the conditional puts of
 * `DynamoDbOutboxStore.transactItems`, for the caller to add to its own `TransactWriteItems` next to its
 * business writes. An event already published cancels the caller's transaction (its put's condition fails).
 *
 * @since 0.2.0
 */
import type { TransactWriteItem } from "@aws-sdk/client-dynamodb"
import * as Effect from "effect/Effect"
import type { InvalidRecord, StoreUnavailable } from "../domain/OutboxError.js"
import type * as Topic from "../domain/Topic.js"
import * as Persist from "../layers/dynamodb/Persist.js"
import type { DynamoDb } from "../services/DynamoDb.js"
import { toRecords } from "./Publish.js"
import * as Traced from "../services/Traced.js"

/**
 * The `TransactWriteItems` entries that publish `values` of `topic` (plus one listing update per partition).
 *
 * @since 0.2.0
 */
export const transactItems = <A, I>(
  topic: Topic.Topic<A, I>,
  values: Iterable<A>,
  options: { readonly tableName?: string | undefined } = {}
): Effect.Effect<Array<TransactWriteItem>, InvalidRecord | StoreUnavailable, DynamoDb> =>
  Effect.flatMap(toRecords(topic, values), (records) => Persist.transactItems(records, options)).pipe(
    Traced.span("DynamoDbTopic.transactItems", { "outbox.topic": topic.name })
  )
