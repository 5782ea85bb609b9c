/**
 * effect-outbox/dynamodb: the DynamoDB client service and backend (SPEC §3.3, §9). Needs
 * `@aws-sdk/client-dynamodb` installed.
 *
 * @since 0.1.0
 */

/** The DynamoDB client service and its layer. @since 0.1.0 */
export * as DynamoDb from "./services/DynamoDb.js"

/** DynamoDB OutboxStore backend, table definition helpers and transactional enqueue items. @since 0.1.0 */
export * as DynamoDbOutboxStore from "./layers/dynamodb/DynamoDbOutboxStore.js"

/** DynamoDB LeaseStore backend (a LEASE item per partition, conditional writes). @since 0.1.0 */
export * as DynamoDbLeaseStore from "./layers/dynamodb/DynamoDbLeaseStore.js"

/** DynamoDB DeadLetterStore backend (own table, sharded age/route/category indexes). @since 0.1.0 */
export * as DynamoDbDeadLetterStore from "./layers/dynamodb/DynamoDbDeadLetterStore.js"

/** DynamoDB OutboxInspection (the stores' table names). @since 0.1.0 */
export * as DynamoDbInspection from "./layers/dynamodb/DynamoDbInspection.js"

/** Publishing typed topic values inside the caller's own `TransactWriteItems` (SPEC §11). @since 0.2.0 */
export * as DynamoDbTopic from "./programs/DynamoDbPublish.js"

/** DynamoDB InboxStore backend (the handler's items written with the inbox item). @since 0.1.0 */
export * as DynamoDbInboxStore from "./layers/dynamodb/DynamoDbInboxStore.js"
