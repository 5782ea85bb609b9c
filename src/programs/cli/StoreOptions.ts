/**
 * The options every store-backed command shares (`--backend`, `--sqlite-file`, `--dynamodb-*`, `--postgres-*`, `--mysql-*`,
 * `--config`), and how a command turns them into settings and opened stores.
 *
 * @since 0.1.0
 */
import * as Options from "@effect/cli/Options"
import type * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Backends from "./Backends.js"
import { type CliFailure, load, provider, type StoreSettings, storeConfig } from "./Settings.js"

/**
 * The shared options.
 *
 * @since 0.1.0
 */
export const storeOptions = {
  config: Options.text("config").pipe(
    Options.withDescription("JSON config file (same paths as the OUTBOX_* environment variables, nested)"),
    Options.optional
  ),
  backend: Options.choice("backend", ["sqlite", "dynamodb", "memory", "postgres", "mysql"]).pipe(
    Options.withDescription("Store backend (default sqlite; env OUTBOX_BACKEND)"),
    Options.optional
  ),
  sqliteFile: Options.text("sqlite-file").pipe(
    Options.withDescription("SQLite database file (default .data/outbox.db; env OUTBOX_SQLITE_FILE)"),
    Options.optional
  ),
  sqliteSynchronous: Options.choice("sqlite-synchronous", ["FULL", "NORMAL"]).pipe(
    Options.withDescription("SQLite PRAGMA synchronous (default FULL; env OUTBOX_SQLITE_SYNCHRONOUS)"),
    Options.optional
  ),
  sqliteTablePrefix: Options.text("sqlite-table-prefix").pipe(
    Options.withDescription("Prefix of the SQLite table names (default none; env OUTBOX_SQLITE_TABLE_PREFIX)"),
    Options.optional
  ),
  dynamodbEndpoint: Options.text("dynamodb-endpoint").pipe(
    Options.withDescription("DynamoDB endpoint, e.g. http://127.0.0.1:8000 (env OUTBOX_DYNAMODB_ENDPOINT)"),
    Options.optional
  ),
  dynamodbRegion: Options.text("dynamodb-region").pipe(
    Options.withDescription("DynamoDB region (default us-east-1; env OUTBOX_DYNAMODB_REGION)"),
    Options.optional
  ),
  dynamodbTable: Options.text("dynamodb-table").pipe(
    Options.withDescription("Outbox table, also holding the leases (default effect-outbox)"),
    Options.optional
  ),
  dynamodbDeadLetterTable: Options.text("dynamodb-dlq-table").pipe(
    Options.withDescription("Dead-letter table (default effect-outbox-dead-letter)"),
    Options.optional
  ),
  dynamodbLocalClaimIndex: Options.boolean("dynamodb-local-claim-index").pipe(
    Options.withDescription(
      "Claim through the local secondary index ClaimLocalIndex (age order for keyed partitions in O(limit) " +
        "reads); a new table is created with it, an existing table must already have it " +
        "(env OUTBOX_DYNAMODB_LOCAL_CLAIM_INDEX)"
    )
  ),
  postgresUrl: Options.redacted("postgres-url").pipe(
    Options.withDescription(
      "PostgreSQL URL, e.g. postgres://user:pass@host/db (env OUTBOX_POSTGRES_URL; never logged)"
    ),
    Options.optional
  ),
  postgresSchema: Options.text("postgres-schema").pipe(
    Options.withDescription("PostgreSQL schema of the outbox tables (default public; env OUTBOX_POSTGRES_SCHEMA)"),
    Options.optional
  ),
  mysqlUrl: Options.redacted("mysql-url").pipe(
    Options.withDescription(
      "MySQL / MariaDB URL, e.g. mysql://user:pass@host:3306/db (env OUTBOX_MYSQL_URL; never logged)"
    ),
    Options.optional
  ),
  mysqlDatabase: Options.text("mysql-database").pipe(
    Options.withDescription("MySQL database of the outbox tables (default: the URL's; env OUTBOX_MYSQL_DATABASE)"),
    Options.optional
  )
}

/**
 * The parsed shared options.
 *
 * @since 0.1.0
 */
export interface StoreFlags {
  readonly config: Option.Option<string>
  readonly backend: Option.Option<string>
  readonly sqliteFile: Option.Option<string>
  readonly sqliteSynchronous: Option.Option<string>
  readonly sqliteTablePrefix: Option.Option<string>
  readonly dynamodbEndpoint: Option.Option<string>
  readonly dynamodbRegion: Option.Option<string>
  readonly dynamodbTable: Option.Option<string>
  readonly dynamodbDeadLetterTable: Option.Option<string>
  /** `--dynamodb-local-claim-index` given (absent leaves the environment or config file to decide). */
  readonly dynamodbLocalClaimIndex: boolean
  readonly postgresUrl: Option.Option<Redacted.Redacted>
  readonly postgresSchema: Option.Option<string>
  readonly mysqlUrl: Option.Option<Redacted.Redacted>
  readonly mysqlDatabase: Option.Option<string>
}

/**
 * Collects present flags under their config paths.
 *
 * @since 0.1.0
 */
export const flagEntries = (
  entries: ReadonlyArray<readonly [path: string, value: Option.Option<string | number>]>
): Map<string, string> => {
  const map = new Map<string, string>()
  for (const [path, value] of entries) if (Option.isSome(value)) map.set(path, String(value.value))
  return map
}

/**
 * The config paths of the shared flags.
 *
 * @since 0.1.0
 */
export const storeFlagEntries = (flags: StoreFlags): Map<string, string> =>
  flagEntries([
    ["backend", flags.backend],
    ["sqlite.file", flags.sqliteFile],
    ["sqlite.synchronous", flags.sqliteSynchronous],
    ["sqlite.tablePrefix", flags.sqliteTablePrefix],
    ["dynamodb.endpoint", flags.dynamodbEndpoint],
    ["dynamodb.region", flags.dynamodbRegion],
    ["dynamodb.table", flags.dynamodbTable],
    ["dynamodb.deadLetterTable", flags.dynamodbDeadLetterTable],
    ["dynamodb.localClaimIndex", flags.dynamodbLocalClaimIndex ? Option.some("true") : Option.none()],
    ["postgres.url", Option.map(flags.postgresUrl, Redacted.value)],
    ["postgres.schema", flags.postgresSchema],
    ["mysql.url", Option.map(flags.mysqlUrl, Redacted.value)],
    ["mysql.database", flags.mysqlDatabase]
  ])

/**
 * Resolves the provider (flags → environment → config file) and the store settings.
 *
 * @since 0.1.0
 */
export const resolve = (
  flags: StoreFlags,
  extra: Map<string, string> = new Map()
): Effect.Effect<{ readonly provider: ConfigProvider.ConfigProvider; readonly store: StoreSettings }, CliFailure> =>
  Effect.gen(function* () {
    const all = new Map([...storeFlagEntries(flags), ...extra])
    const from = yield* provider(all, flags.config)
    const store = yield* load(storeConfig, from)
    return { provider: from, store }
  })

/**
 * Runs `program` with the stores of the settings; `readOnly` commands never create a database.
 *
 * @since 0.1.0
 */
export const withStores = <A, E, R>(
  settings: StoreSettings,
  program: Effect.Effect<A, E, R>,
  options: Backends.OpenOptions = { readOnly: false }
): Effect.Effect<A, E | CliFailure, Exclude<R, Backends.Stores>> =>
  Effect.provide(program, Backends.layer(settings, options))
