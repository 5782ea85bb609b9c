/**
 * The DynamoDB backend of the CLI, loaded only when `backend` is `dynamodb` (the AWS SDK is the
 * heaviest import of the command line).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as DynamoDbDeadLetterStore from "../../layers/dynamodb/DynamoDbDeadLetterStore.js"
import * as DynamoDbInspection from "../../layers/dynamodb/DynamoDbInspection.js"
import * as DynamoDbLeaseStore from "../../layers/dynamodb/DynamoDbLeaseStore.js"
import * as DynamoDbOutboxStore from "../../layers/dynamodb/DynamoDbOutboxStore.js"
import type { DeadLetterStore } from "../../services/DeadLetterStore.js"
import * as DynamoDb from "../../services/DynamoDb.js"
import type { LeaseStore } from "../../services/LeaseStore.js"
import type { OutboxInspection } from "../../services/OutboxInspection.js"
import type { OutboxStore } from "../../services/OutboxStore.js"
import { CliFailure, type StoreSettings } from "./Settings.js"

/**
 * The DynamoDB stores and inspection for the settings (tables created when missing unless disabled). With
 * `dynamodbLocalClaimIndex` the outbox store claims through `ClaimLocalIndex` and a table it creates gets
 * that index; the outbox store is built before the lease store (same table), so that the table is created
 * with the index rather than without it by the lease store.
 *
 * @since 0.1.0
 */
export const layer = (
  settings: StoreSettings,
  options: { readonly readOnly: boolean } = { readOnly: false }
): Layer.Layer<OutboxStore | LeaseStore | DeadLetterStore | OutboxInspection, unknown> => {
  const client = DynamoDb.layer({
    region: settings.dynamodbRegion,
    ...(Option.isSome(settings.dynamodbEndpoint) ? { endpoint: settings.dynamodbEndpoint.value } : {})
  })
  // read-only commands (inspect, dlq list, dashboard) never create a table
  const ensureTable = settings.dynamodbEnsureTables && !options.readOnly
  const outbox = DynamoDbOutboxStore.layerWith({
    tableName: settings.dynamodbTable,
    ensureTable,
    localClaimIndex: settings.dynamodbLocalClaimIndex
  })
  const dlqAndLeases = Layer.merge(
    DynamoDbDeadLetterStore.layerWith({ tableName: settings.dynamodbDeadLetterTable, ensureTable }),
    DynamoDbLeaseStore.layerWith({ tableName: settings.dynamodbTable, ensureTable })
  )
  const inspection = DynamoDbInspection.layerWith({
    tableName: settings.dynamodbTable,
    deadLetterTableName: settings.dynamodbDeadLetterTable
  })
  const stores = Layer.provideMerge(inspection, Layer.provideMerge(dlqAndLeases, outbox))
  const checked = options.readOnly
    ? Layer.unwrapEffect(
        Effect.as(
          tablesExist(settings.dynamodbRegion, [settings.dynamodbTable, settings.dynamodbDeadLetterTable]),
          stores
        )
      )
    : stores
  return checked.pipe(Layer.provide(client))
}

/** Fails with "no such table" (exit 2) for the first of `tables` that does not exist. */
const tablesExist = (region: string, tables: ReadonlyArray<string>) =>
  Effect.flatMap(DynamoDb.DynamoDb, (dynamo) =>
    Effect.forEach(tables, (TableName) =>
      dynamo.describeTable({ TableName }).pipe(
        Effect.catchIf(
          (error) => error.kind === "ResourceNotFound",
          () =>
            Effect.fail(
              new CliFailure({
                message: `no such table: ${TableName} (DynamoDB, region ${region}; read-only commands create nothing)`,
                exitCode: 2
              })
            )
        )
      )
    )
  )
