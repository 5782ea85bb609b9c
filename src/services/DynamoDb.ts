/**
 * The DynamoDB client as an Effect service (SPEC §3.3, §9).
 *
 * Stores never call `DynamoDBClient` directly: they go through the {@link DynamoDb} service, whose
 * methods return Effects that fail with one typed {@link DynamoDbError}. Because it is a service, it
 * can be decorated (fault injection in tests, request accounting in benchmarks) without touching the
 * stores.
 *
 * @since 0.1.0
 */
import {
  BatchWriteItemCommand,
  type BatchWriteItemCommandInput,
  type BatchWriteItemCommandOutput,
  CreateTableCommand,
  type CreateTableCommandInput,
  type CreateTableCommandOutput,
  DeleteItemCommand,
  type DeleteItemCommandInput,
  type DeleteItemCommandOutput,
  DeleteTableCommand,
  type DeleteTableCommandInput,
  type DeleteTableCommandOutput,
  DescribeTableCommand,
  type DescribeTableCommandInput,
  type DescribeTableCommandOutput,
  DescribeTimeToLiveCommand,
  type DescribeTimeToLiveCommandInput,
  type DescribeTimeToLiveCommandOutput,
  DynamoDBClient,
  type DynamoDBClientConfig,
  GetItemCommand,
  type GetItemCommandInput,
  type GetItemCommandOutput,
  PutItemCommand,
  type PutItemCommandInput,
  type PutItemCommandOutput,
  QueryCommand,
  type QueryCommandInput,
  type QueryCommandOutput,
  TransactWriteItemsCommand,
  type TransactWriteItemsCommandInput,
  type TransactWriteItemsCommandOutput,
  UpdateItemCommand,
  type UpdateItemCommandInput,
  type UpdateItemCommandOutput,
  UpdateTimeToLiveCommand,
  type UpdateTimeToLiveCommandInput,
  type UpdateTimeToLiveCommandOutput
} from "@aws-sdk/client-dynamodb"
import type * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"

/**
 * What went wrong, as far as a store needs to know:
 *
 * - `Throttling`: throughput exceeded, request limit, throttling (transient).
 * - `Validation`: the request is malformed or violates a limit (e.g. item over 400 KB); a bug or bad input.
 * - `ConditionalCheckFailed`: a single-item write's condition was false.
 * - `TransactionCanceled`: a `TransactWriteItems` was cancelled; `cancellationReasons` holds one code
 *   per item, in item order (`None`, `ConditionalCheckFailed`, `TransactionConflict`, `ThrottlingError`, …).
 * - `TransactionConflict`: a request conflicted with an ongoing transaction (transient).
 * - `ResourceNotFound`: the table or index does not exist.
 * - `ResourceInUse`: the table already exists or is being changed.
 * - `Other`: anything else (network, 5xx, unknown): treat as transient.
 *
 * @since 0.1.0
 */
export const DynamoDbErrorKind = Schema.Literal(
  "Throttling",
  "Validation",
  "ConditionalCheckFailed",
  "TransactionCanceled",
  "TransactionConflict",
  "ResourceNotFound",
  "ResourceInUse",
  "Other"
)

/**
 * @since 0.1.0
 */
export type DynamoDbErrorKind = typeof DynamoDbErrorKind.Type

/**
 * A failed DynamoDB request. `cause` is a sanitised copy of the SDK error (name, message, HTTP status,
 * request id): it never carries the request, its signature or credentials.
 *
 * @since 0.1.0
 */
export class DynamoDbError extends Schema.TaggedError<DynamoDbError>()("DynamoDbError", {
  kind: DynamoDbErrorKind,
  /** The command that failed, e.g. `TransactWriteItems`. */
  operation: Schema.String,
  /** The SDK error name, e.g. `TransactionCanceledException`. */
  errorName: Schema.String,
  detail: Schema.String,
  /** For `TransactionCanceled`: one code per transaction item, in item order. */
  cancellationReasons: Schema.optional(Schema.Array(Schema.String)),
  cause: Schema.optional(Schema.Defect)
}) {
  override get message(): string {
    const reasons = this.cancellationReasons !== undefined ? ` [reasons: ${this.cancellationReasons.join(", ")}]` : ""
    return `DynamoDB ${this.operation} failed (${this.kind}: ${this.errorName}): ${this.detail}${reasons}`
  }

  /** True for failures worth retrying later (throttling, conflicts, unknown/network errors). */
  get isTransient(): boolean {
    return this.kind === "Throttling" || this.kind === "TransactionConflict" || this.kind === "Other"
  }
}

/**
 * The DynamoDB operations the stores use. Inputs and outputs are the SDK's own command types.
 *
 * @since 0.1.0
 */
export interface DynamoDbService {
  readonly getItem: (input: GetItemCommandInput) => Effect.Effect<GetItemCommandOutput, DynamoDbError>
  readonly putItem: (input: PutItemCommandInput) => Effect.Effect<PutItemCommandOutput, DynamoDbError>
  readonly updateItem: (input: UpdateItemCommandInput) => Effect.Effect<UpdateItemCommandOutput, DynamoDbError>
  readonly deleteItem: (input: DeleteItemCommandInput) => Effect.Effect<DeleteItemCommandOutput, DynamoDbError>
  readonly query: (input: QueryCommandInput) => Effect.Effect<QueryCommandOutput, DynamoDbError>
  readonly transactWriteItems: (
    input: TransactWriteItemsCommandInput
  ) => Effect.Effect<TransactWriteItemsCommandOutput, DynamoDbError>
  readonly batchWriteItem: (
    input: BatchWriteItemCommandInput
  ) => Effect.Effect<BatchWriteItemCommandOutput, DynamoDbError>
  readonly describeTable: (input: DescribeTableCommandInput) => Effect.Effect<DescribeTableCommandOutput, DynamoDbError>
  readonly createTable: (input: CreateTableCommandInput) => Effect.Effect<CreateTableCommandOutput, DynamoDbError>
  readonly deleteTable: (input: DeleteTableCommandInput) => Effect.Effect<DeleteTableCommandOutput, DynamoDbError>
  readonly updateTimeToLive: (
    input: UpdateTimeToLiveCommandInput
  ) => Effect.Effect<UpdateTimeToLiveCommandOutput, DynamoDbError>
  readonly describeTimeToLive: (
    input: DescribeTimeToLiveCommandInput
  ) => Effect.Effect<DescribeTimeToLiveCommandOutput, DynamoDbError>
}

/**
 * The DynamoDB client service tag.
 *
 * @since 0.1.0
 */
export class DynamoDb extends Context.Tag("effect-outbox/DynamoDb")<DynamoDb, DynamoDbService>() {}

/**
 * Client settings. `endpoint` is for DynamoDB Local or a VPC endpoint; leave `credentials` out to use
 * the SDK's default provider chain. The secret is kept `Redacted` so it never shows up in logs.
 *
 * @since 0.1.0
 */
export interface DynamoDbConfig {
  readonly region: string
  readonly endpoint?: string | undefined
  readonly credentials?:
    | {
        readonly accessKeyId: string
        readonly secretAccessKey: string | Redacted.Redacted<string>
        readonly sessionToken?: string | Redacted.Redacted<string> | undefined
      }
    | undefined
  /** SDK retry attempts per request (SDK default 3). */
  readonly maxAttempts?: number | undefined
}

const stringField = (u: unknown, field: string): string | undefined => {
  if (typeof u !== "object" || u === null) return undefined
  const value: unknown = Reflect.get(u, field)
  return typeof value === "string" ? value : undefined
}

const kindOf = (name: string): DynamoDbErrorKind => {
  switch (name) {
    case "ProvisionedThroughputExceededException":
    case "ThrottlingException":
    case "RequestLimitExceeded":
    case "LimitExceededException":
      return "Throttling"
    case "ValidationException":
    case "SerializationException":
      return "Validation"
    case "ConditionalCheckFailedException":
      return "ConditionalCheckFailed"
    case "TransactionCanceledException":
      return "TransactionCanceled"
    case "TransactionConflictException":
      return "TransactionConflict"
    case "ResourceNotFoundException":
    case "TableNotFoundException":
      return "ResourceNotFound"
    case "ResourceInUseException":
    case "TableAlreadyExistsException":
      return "ResourceInUse"
    default:
      return "Other"
  }
}

const cancellationCodes = (error: unknown): ReadonlyArray<string> | undefined => {
  if (typeof error !== "object" || error === null) return undefined
  const reasons: unknown = Reflect.get(error, "CancellationReasons")
  if (!Array.isArray(reasons)) return undefined
  return reasons.map((reason: unknown) => stringField(reason, "Code") ?? "None")
}

/**
 * Maps anything the SDK throws to a {@link DynamoDbError}, keeping only safe facts of the original.
 *
 * @since 0.1.0
 */
export const fromSdkError = (operation: string, error: unknown): DynamoDbError => {
  const errorName = stringField(error, "name") ?? "UnknownError"
  const detail = stringField(error, "message") ?? String(error)
  const metadata: unknown = typeof error === "object" && error !== null ? Reflect.get(error, "$metadata") : undefined
  const httpStatusCode: unknown =
    typeof metadata === "object" && metadata !== null ? Reflect.get(metadata, "httpStatusCode") : undefined
  const cause = {
    name: errorName,
    message: detail,
    httpStatusCode: typeof httpStatusCode === "number" ? httpStatusCode : undefined,
    requestId: stringField(metadata, "requestId")
  }
  const kind = kindOf(errorName)
  const reasons = kind === "TransactionCanceled" ? cancellationCodes(error) : undefined
  return new DynamoDbError({
    kind,
    operation,
    errorName,
    detail,
    ...(reasons !== undefined ? { cancellationReasons: reasons } : {}),
    cause
  })
}

/**
 * Builds the service over an existing client (the caller owns its lifecycle). Requests are
 * interruptible: interrupting the Effect aborts the HTTP request.
 *
 * @since 0.1.0
 */
export const fromClient = (client: DynamoDBClient): DynamoDbService => {
  const call =
    <I, O>(operation: string, send: (input: I, abortSignal: AbortSignal) => Promise<O>) =>
    (input: I): Effect.Effect<O, DynamoDbError> =>
      Effect.tryPromise({
        try: (signal) => send(input, signal),
        catch: (error) => fromSdkError(operation, error)
      })
  return DynamoDb.of({
    getItem: call("GetItem", (input: GetItemCommandInput, abortSignal) =>
      client.send(new GetItemCommand(input), { abortSignal })
    ),
    putItem: call("PutItem", (input: PutItemCommandInput, abortSignal) =>
      client.send(new PutItemCommand(input), { abortSignal })
    ),
    updateItem: call("UpdateItem", (input: UpdateItemCommandInput, abortSignal) =>
      client.send(new UpdateItemCommand(input), { abortSignal })
    ),
    deleteItem: call("DeleteItem", (input: DeleteItemCommandInput, abortSignal) =>
      client.send(new DeleteItemCommand(input), { abortSignal })
    ),
    query: call("Query", (input: QueryCommandInput, abortSignal) =>
      client.send(new QueryCommand(input), { abortSignal })
    ),
    transactWriteItems: call("TransactWriteItems", (input: TransactWriteItemsCommandInput, abortSignal) =>
      client.send(new TransactWriteItemsCommand(input), { abortSignal })
    ),
    batchWriteItem: call("BatchWriteItem", (input: BatchWriteItemCommandInput, abortSignal) =>
      client.send(new BatchWriteItemCommand(input), { abortSignal })
    ),
    describeTable: call("DescribeTable", (input: DescribeTableCommandInput, abortSignal) =>
      client.send(new DescribeTableCommand(input), { abortSignal })
    ),
    createTable: call("CreateTable", (input: CreateTableCommandInput, abortSignal) =>
      client.send(new CreateTableCommand(input), { abortSignal })
    ),
    deleteTable: call("DeleteTable", (input: DeleteTableCommandInput, abortSignal) =>
      client.send(new DeleteTableCommand(input), { abortSignal })
    ),
    updateTimeToLive: call("UpdateTimeToLive", (input: UpdateTimeToLiveCommandInput, abortSignal) =>
      client.send(new UpdateTimeToLiveCommand(input), { abortSignal })
    ),
    describeTimeToLive: call("DescribeTimeToLive", (input: DescribeTimeToLiveCommandInput, abortSignal) =>
      client.send(new DescribeTimeToLiveCommand(input), { abortSignal })
    )
  })
}

const reveal = (value: string | Redacted.Redacted<string>): string =>
  typeof value === "string" ? value : Redacted.value(value)

/**
 * The SDK client configuration for a {@link DynamoDbConfig}.
 *
 * @since 0.1.0
 */
export const clientConfig = (config: DynamoDbConfig): DynamoDBClientConfig => {
  const credentials = config.credentials
  return {
    region: config.region,
    ...(config.endpoint !== undefined ? { endpoint: config.endpoint } : {}),
    ...(config.maxAttempts !== undefined ? { maxAttempts: config.maxAttempts } : {}),
    ...(credentials !== undefined
      ? {
          credentials: {
            accessKeyId: credentials.accessKeyId,
            secretAccessKey: reveal(credentials.secretAccessKey),
            ...(credentials.sessionToken !== undefined ? { sessionToken: reveal(credentials.sessionToken) } : {})
          }
        }
      : {})
  }
}

/**
 * Creates a client for the layer's lifetime and destroys it on release.
 *
 * @since 0.1.0
 */
export const make = (config: DynamoDbConfig): Effect.Effect<DynamoDbService, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => new DynamoDBClient(clientConfig(config))),
      (client) => Effect.sync(() => client.destroy())
    ),
    fromClient
  )

/**
 * The service as a scoped layer: one client, destroyed when the layer is released.
 *
 * @since 0.1.0
 */
export const layer = (config: DynamoDbConfig): Layer.Layer<DynamoDb> => Layer.scoped(DynamoDb, make(config))

/**
 * The service over a client the caller owns (not destroyed by the layer).
 *
 * @since 0.1.0
 */
export const layerFromClient = (client: DynamoDBClient): Layer.Layer<DynamoDb> =>
  Layer.succeed(DynamoDb, fromClient(client))

/**
 * The service as a scoped layer whose settings come from `Config` (e.g. `Config.all({ region:
 * Config.string("AWS_REGION"), … })`; keep the secret in `Config.redacted`).
 *
 * @since 0.1.0
 */
export const layerConfig = (config: Config.Config<DynamoDbConfig>): Layer.Layer<DynamoDb, ConfigError.ConfigError> =>
  Layer.scoped(
    DynamoDb,
    Effect.gen(function* () {
      return yield* make(yield* config)
    })
  )
