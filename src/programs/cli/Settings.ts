/**
 * Settings of the `effect-outbox` command line: every setting can come from a flag, from the
 * environment (`OUTBOX_` + the path in CONSTANT_CASE, e.g. `OUTBOX_RELAY_BATCH_SIZE`) or from a JSON
 * config file (`--config file.json`, the same paths as nested objects, e.g.
 * `{ "relay": { "batchSize": 200 } }`). Flags win over the environment, the environment over the file.
 *
 * Settings are read with Effect `Config`, so a bad value fails with a `ConfigError` naming its path; the
 * CLI prints it as a {@link CliFailure}.
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as ConfigProvider from "effect/ConfigProvider"
import * as PathPatch from "effect/ConfigProviderPathPatch"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as HashSet from "effect/HashSet"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as fs from "node:fs"
import * as os from "node:os"

/**
 * A failure the CLI reports as one clear line on stderr and turns into a process exit code (2 for bad
 * usage or configuration, 1 for anything else).
 *
 * @since 0.1.0
 */
export class CliFailure extends Schema.TaggedError<CliFailure>()("CliFailure", {
  message: Schema.String,
  exitCode: Schema.Number
}) {}

/**
 * The backends the CLI can open.
 *
 * @since 0.1.0
 */
export type BackendName = "sqlite" | "dynamodb" | "memory" | "postgres"

/**
 * Where the records live.
 *
 * @since 0.1.0
 */
export interface StoreSettings {
  readonly backend: BackendName
  /** SQLite database file. */
  readonly sqliteFile: string
  /**
   * `PRAGMA synchronous` of the SQLite file (default `FULL`: a commit survives power loss; `NORMAL` in WAL
   * mode survives a process crash but may lose the last commits on power loss, and is far faster where
   * an fsync is slow).
   */
  readonly sqliteSynchronous: "FULL" | "NORMAL"
  /** Prefix of the SQLite table names (the stores' `tablePrefix`; default none). */
  readonly sqliteTablePrefix: string
  /** DynamoDB endpoint (DynamoDB Local, a VPC endpoint); absent → the SDK default for the region. */
  readonly dynamodbEndpoint: Option.Option<string>
  readonly dynamodbRegion: string
  /** The outbox table (also holds the leases). */
  readonly dynamodbTable: string
  /** The dead-letter table. */
  readonly dynamodbDeadLetterTable: string
  /** Create the DynamoDB tables when missing. */
  readonly dynamodbEnsureTables: boolean
  /**
   * Claim through the local secondary index `ClaimLocalIndex` (consistent, age-ordered, O(limit) reads for
   * keyed partitions too). A table created by the CLI then gets the index; an existing table must already
   * have it (an LSI can only be created with the table), else opening the store fails naming the index.
   */
  readonly dynamodbLocalClaimIndex: boolean
  /** PostgreSQL connection URL (`postgres.url`; redacted: never logged). */
  readonly postgresUrl: Option.Option<Redacted.Redacted>
  /** PostgreSQL schema of the outbox tables (`postgres.schema`, default `public`). */
  readonly postgresSchema: string
}

/**
 * The default SQLite file (relative to the working directory).
 *
 * @since 0.1.0
 */
export const DefaultSqliteFile = ".data/outbox.db"

const positiveInt = (name: string, fallback: number): Config.Config<number> =>
  Config.integer(name).pipe(
    Config.validate({ message: "Expected an integer of at least 1", validation: (n) => n >= 1 }),
    Config.withDefault(fallback)
  )

const positiveDuration = (name: string, fallback: Duration.DurationInput): Config.Config<Duration.Duration> =>
  Config.duration(name).pipe(
    Config.validate({
      message: "Expected a positive duration such as 30 seconds, 500 millis or 2 minutes",
      validation: (d) => Duration.toMillis(d) > 0
    }),
    Config.withDefault(Duration.decode(fallback))
  )

const trimmed: Config.Config<string> = Config.nonEmptyString().pipe(Config.mapAttempt((s) => s.trim()))

const nonEmpty = (name: string): Config.Config<string> => Config.nested(trimmed, name)

/**
 * The store settings as a `Config` (paths `backend`, `sqlite.file`, `sqlite.synchronous`, `sqlite.tablePrefix`,
 * `dynamodb.endpoint`,
 * `dynamodb.region`, `dynamodb.table`, `dynamodb.deadLetterTable`, `dynamodb.ensureTables`,
 * `dynamodb.localClaimIndex`, `postgres.url`, `postgres.schema`).
 *
 * @since 0.1.0
 */
export const storeConfig: Config.Config<StoreSettings> = Config.all({
  backend: Config.literal(
    "sqlite",
    "dynamodb",
    "memory",
    "postgres"
  )("backend").pipe(Config.withDefault("sqlite" as const)),
  sqliteFile: nonEmpty("file").pipe(Config.nested("sqlite"), Config.withDefault(DefaultSqliteFile)),
  sqliteSynchronous: Config.literal(
    "FULL",
    "NORMAL"
  )("synchronous").pipe(Config.nested("sqlite"), Config.withDefault("FULL" as const)),
  sqliteTablePrefix: Config.string("tablePrefix").pipe(
    Config.validate({
      message: "Expected letters, digits and _, not starting with a digit",
      validation: (prefix) => prefix.length === 0 || /^[A-Za-z_][A-Za-z0-9_]*$/.test(prefix)
    }),
    Config.nested("sqlite"),
    Config.withDefault("")
  ),
  dynamodbEndpoint: Config.option(nonEmpty("endpoint").pipe(Config.nested("dynamodb"))),
  dynamodbRegion: nonEmpty("region").pipe(Config.nested("dynamodb"), Config.withDefault("us-east-1")),
  dynamodbTable: nonEmpty("table").pipe(Config.nested("dynamodb"), Config.withDefault("effect-outbox")),
  dynamodbDeadLetterTable: nonEmpty("deadLetterTable").pipe(
    Config.nested("dynamodb"),
    Config.withDefault("effect-outbox-dead-letter")
  ),
  dynamodbEnsureTables: Config.boolean("ensureTables").pipe(Config.nested("dynamodb"), Config.withDefault(true)),
  dynamodbLocalClaimIndex: Config.boolean("localClaimIndex").pipe(Config.nested("dynamodb"), Config.withDefault(false)),
  postgresUrl: Config.option(Config.redacted("url").pipe(Config.nested("postgres"))),
  postgresSchema: nonEmpty("schema").pipe(Config.nested("postgres"), Config.withDefault("public"))
})

/**
 * Settings of the webhook sink (see `WebhookSink`): `headers` and `signingSecret` are never logged.
 *
 * @since 0.1.0
 */
export interface WebhookSettings {
  readonly _tag: "webhook"
  /** The fixed URL; none when records' addresses are used (then `allowedOrigins` is required). */
  readonly url: Option.Option<string>
  readonly timeout: Duration.Duration
  /** Request headers, from `sink.headers` lines `Name: value` (flag `--header`, repeatable). */
  readonly headers: Readonly<Record<string, string>>
  readonly signingSecret: Option.Option<Redacted.Redacted<string>>
  readonly maxRetryAfter: Duration.Duration
  /** Origins a record's address may name (`sink.allowedOrigins`, flag `--allow-origin`). */
  readonly allowedOrigins: Option.Option<ReadonlyArray<string>>
}

/**
 * Settings of the NATS JetStream sink (see `NatsSink`).
 *
 * @since 0.1.0
 */
export interface NatsSettings {
  readonly _tag: "nats"
  readonly url: string
  /** The subject for records without an address (`sink.subject`). */
  readonly subject: Option.Option<string>
  readonly timeout: Duration.Duration
  /** Subject prefixes a record's address may use (`sink.allowedSubjectPrefixes`, `--allow-subject-prefix`). */
  readonly allowedSubjectPrefixes: Option.Option<ReadonlyArray<string>>
}

/**
 * Settings of the RabbitMQ sink (see `RabbitMqSink`).
 *
 * @since 0.1.0
 */
export interface RabbitMqSettings {
  readonly _tag: "rabbitmq"
  readonly url: string
  /** The exchange for addresses without one (`sink.exchange`, default the default exchange). */
  readonly exchange: string
  /** The routing key for records without an address (`sink.routingKey`). */
  readonly routingKey: Option.Option<string>
  readonly timeout: Duration.Duration
  /** Exchanges a record's address may name (`sink.allowedExchanges`, flag `--allow-exchange`). */
  readonly allowedExchanges: Option.Option<ReadonlyArray<string>>
}

/**
 * The sink a relay delivers to.
 *
 * @since 0.1.0
 */
export type SinkSettings = WebhookSettings | NatsSettings | RabbitMqSettings | { readonly _tag: "stdout" }

/**
 * Relay tuning.
 *
 * @since 0.1.0
 */
export interface RelaySettings {
  readonly owner: string
  readonly maxPartitions: number
  readonly leaseTtl: Duration.Duration
  readonly discoveryInterval: Duration.Duration
  readonly batchSize: number
  readonly concurrency: number
  readonly sink: SinkSettings
}

const urlConfig = Config.nested(trimmed, "url").pipe(Config.nested("sink"))

const schemes = { webhook: ["http:", "https:"], nats: ["nats:", "tls:"], rabbitmq: ["amqp:", "amqps:"] } as const

/** Whether `url` parses with one of the sink's schemes (the URL itself is never quoted: it may hold secrets). */
const checkUrl = (type: keyof typeof schemes, url: string): Either.Either<string, ConfigError.ConfigError> => {
  const allowed: ReadonlyArray<string> = schemes[type]
  try {
    if (allowed.includes(new URL(url).protocol)) return Either.right(url)
  } catch {
    // not a URL at all
  }
  return Either.left(
    ConfigError.InvalidData(["sink", "url"], `Expected an ${allowed.map((scheme) => `${scheme}//`).join(" or ")} URL`)
  )
}

/**
 * Parses header lines `Name: value` (blank lines ignored); a line without a colon is a `ConfigError`
 * naming its position, never its text (it may hold a secret).
 *
 * @since 0.1.0
 */
export const parseHeaderLines = (
  lines: ReadonlyArray<string>
): Either.Either<Readonly<Record<string, string>>, ConfigError.ConfigError> => {
  const headers: Record<string, string> = {}
  let index = 0
  for (const line of lines) {
    index += 1
    if (line.trim().length === 0) continue
    const colon = line.indexOf(":")
    if (colon <= 0) {
      return Either.left(
        ConfigError.InvalidData(["sink", "headers"], `header line ${index} is not of the form "Name: value"`)
      )
    }
    headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim()
  }
  return Either.right(headers)
}

const headersConfig: Config.Config<Readonly<Record<string, string>>> = Config.string("headers").pipe(
  Config.map((text) => text.split("\n")),
  Config.orElse(() => Config.array(Config.string(), "headers")),
  Config.nested("sink"),
  Config.withDefault<ReadonlyArray<string>>([]),
  Config.mapOrFail(parseHeaderLines)
)

/** A list setting: one string with items separated by newlines or commas (flags, env), or an array (file). */
const listConfig = (name: string): Config.Config<Option.Option<ReadonlyArray<string>>> =>
  Config.option(
    Config.string(name).pipe(
      Config.map((text): ReadonlyArray<string> => text.split(/[\n,]/)),
      Config.orElse(() => Config.array(Config.string(), name)),
      Config.map((items) => items.map((item) => item.trim()).filter((item) => item.length > 0)),
      Config.nested("sink")
    )
  )

const sinkConfig: Config.Config<SinkSettings> = Config.all({
  type: Config.literal(
    "webhook",
    "stdout",
    "nats",
    "rabbitmq"
  )("type").pipe(Config.nested("sink"), Config.withDefault("webhook" as const)),
  url: Config.option(urlConfig),
  timeout: positiveDuration("timeout", "10 seconds").pipe(Config.nested("sink")),
  headers: headersConfig,
  signingSecret: Config.option(Config.redacted("signingSecret").pipe(Config.nested("sink"))),
  maxRetryAfter: positiveDuration("maxRetryAfter", "60 seconds").pipe(Config.nested("sink")),
  subject: Config.option(nonEmpty("subject").pipe(Config.nested("sink"))),
  exchange: Config.string("exchange").pipe(Config.nested("sink"), Config.withDefault("")),
  routingKey: Config.option(nonEmpty("routingKey").pipe(Config.nested("sink"))),
  allowedOrigins: listConfig("allowedOrigins"),
  allowedSubjectPrefixes: listConfig("allowedSubjectPrefixes"),
  allowedExchanges: listConfig("allowedExchanges")
}).pipe(
  Config.mapOrFail(
    ({ allowedExchanges, allowedSubjectPrefixes, exchange, routingKey, subject, type, url, ...webhook }) => {
      if (type === "stdout") return Either.right<SinkSettings>({ _tag: "stdout" })
      if (type === "webhook" && Option.isNone(url) && Option.isSome(webhook.allowedOrigins)) {
        return Either.right<SinkSettings>({ _tag: "webhook", ...webhook, url: Option.none() })
      }
      return Option.match(url, {
        onNone: () =>
          Either.left(
            ConfigError.MissingData(
              ["sink", "url"],
              type === "webhook"
                ? "a relay needs a sink: relay webhook <url> (or --webhook-url, --allow-origin), relay nats <url>, " +
                    "relay rabbitmq <url> or relay stdout (config sink.type, sink.url)"
                : `a ${type} sink needs a URL: relay ${type} <url>`
            )
          ),
        onSome: (value) =>
          Either.map(checkUrl(type, value), (checked): SinkSettings => {
            switch (type) {
              case "webhook":
                return { _tag: "webhook", ...webhook, url: Option.some(checked) }
              case "nats":
                return { _tag: "nats", url: checked, subject, timeout: webhook.timeout, allowedSubjectPrefixes }
              case "rabbitmq":
                return {
                  _tag: "rabbitmq",
                  url: checked,
                  exchange,
                  routingKey,
                  timeout: webhook.timeout,
                  allowedExchanges
                }
            }
          })
      })
    }
  )
)

/**
 * The relay settings as a `Config` (paths under `relay.` plus `sink.type`, `sink.url`, `sink.timeout`;
 * webhook `sink.headers`, `sink.signingSecret`, `sink.maxRetryAfter`, `sink.allowedOrigins`; NATS
 * `sink.subject`, `sink.allowedSubjectPrefixes`; RabbitMQ `sink.exchange`, `sink.routingKey`,
 * `sink.allowedExchanges`).
 *
 * @since 0.1.0
 */
export const relayConfig: Config.Config<RelaySettings> = Config.all({
  owner: nonEmpty("owner").pipe(Config.nested("relay"), Config.withDefault(`relay-${os.hostname()}-${process.pid}`)),
  maxPartitions: positiveInt("maxPartitions", 64).pipe(Config.nested("relay")),
  leaseTtl: positiveDuration("leaseTtl", "30 seconds").pipe(Config.nested("relay")),
  discoveryInterval: positiveDuration("discoveryInterval", "5 seconds").pipe(Config.nested("relay")),
  batchSize: positiveInt("batchSize", 100).pipe(Config.nested("relay")),
  concurrency: positiveInt("concurrency", 10).pipe(Config.nested("relay")),
  sink: sinkConfig
})

/**
 * The config paths a `Config` reads (`relay.batchSize`), and the paths under which it reads any key (maps).
 * Found by running the config against a provider that records every path and answers none.
 *
 * @since 0.1.0
 */
export const pathsOf = (
  config: Config.Config<unknown>
): { readonly leaves: ReadonlySet<string>; readonly maps: ReadonlySet<string> } => {
  const leaves = new Set<string>()
  const maps = new Set<string>()
  const recording = ConfigProvider.fromFlat(
    ConfigProvider.makeFlat({
      load: (path) => {
        leaves.add(path.join("."))
        return Effect.fail(ConfigError.MissingData([...path], "recording"))
      },
      enumerateChildren: (path) => {
        maps.add(path.join("."))
        return Effect.succeed(HashSet.empty())
      },
      patch: PathPatch.empty
    })
  )
  Effect.runSync(Effect.either(Effect.withConfigProvider(config, recording)))
  return { leaves, maps }
}

/**
 * The operations endpoint settings.
 *
 * @since 0.1.0
 */
export interface HttpSettings {
  /** The port; none = no endpoint. 0 picks a free port. */
  readonly port: Option.Option<number>
  readonly host: string
  readonly allowMutations: boolean
  readonly showPayloads: boolean
  /** Host names accepted in the `Host` header besides loopback names and `host` (`http.allowedHosts`). */
  readonly allowedHosts: ReadonlyArray<string>
}

/**
 * The settings as a `Config` (paths `http.port`, `http.host`, `http.allowMutations`, `http.showPayloads`,
 * `http.allowedHosts`).
 *
 * @since 0.1.0
 */
export const httpConfig: Config.Config<HttpSettings> = Config.all({
  port: Config.option(
    Config.integer("port").pipe(
      Config.validate({ message: "Expected a port from 0 to 65535", validation: (n) => n >= 0 && n <= 65535 }),
      Config.nested("http")
    )
  ),
  host: Config.nonEmptyString("host").pipe(Config.nested("http"), Config.withDefault("127.0.0.1")),
  allowMutations: Config.boolean("allowMutations").pipe(Config.nested("http"), Config.withDefault(false)),
  showPayloads: Config.boolean("showPayloads").pipe(Config.nested("http"), Config.withDefault(false)),
  allowedHosts: Config.string("allowedHosts").pipe(
    Config.map((text): ReadonlyArray<string> => text.split(/[\n,]/)),
    Config.orElse(() => Config.array(Config.string(), "allowedHosts")),
    Config.map((items) => items.map((item) => item.trim()).filter((item) => item.length > 0)),
    Config.nested("http"),
    Config.withDefault<ReadonlyArray<string>>([])
  )
})

/**
 * Every config the CLI reads from a config file; a key of the file that none of them reads is refused.
 *
 * @since 0.1.0
 */
export const fileConfigs: ReadonlyArray<Config.Config<unknown>> = [storeConfig, relayConfig, httpConfig]

/**
 * The keys of a config file's JSON that no config of {@link fileConfigs} reads (as dotted paths).
 *
 * @since 0.1.0
 */
export const unknownKeys = (json: unknown): ReadonlyArray<string> => {
  const leaves = new Set<string>()
  const maps = new Set<string>()
  for (const config of fileConfigs) {
    const paths = pathsOf(config)
    for (const leaf of paths.leaves) leaves.add(leaf)
    for (const map of paths.maps) maps.add(map)
  }
  const prefixes = new Set<string>()
  for (const leaf of leaves) {
    const parts = leaf.split(".")
    for (let n = 1; n < parts.length; n++) prefixes.add(parts.slice(0, n).join("."))
  }
  const unknown: Array<string> = []
  const walk = (value: unknown, path: ReadonlyArray<string>): void => {
    const key = path.join(".")
    if (path.length > 0 && (leaves.has(key) || maps.has(key))) return
    if (path.length > 0 && !prefixes.has(key)) {
      unknown.push(key)
      return
    }
    if (typeof value === "object" && value !== null && !Array.isArray(value)) {
      for (const [child, inner] of Object.entries(value)) walk(inner, [...path, child])
    }
  }
  walk(json, [])
  return unknown
}

/**
 * Reads a JSON config file into a provider; a missing or malformed file, or one with a key the CLI does
 * not read (a typo would otherwise be ignored silently), is a {@link CliFailure} (exit code 2).
 *
 * @since 0.1.0
 */
export const fileProvider = (file: string): Effect.Effect<ConfigProvider.ConfigProvider, CliFailure> =>
  Effect.try({
    try: () => fs.readFileSync(file, "utf8"),
    catch: (error) => new CliFailure({ message: `cannot read config file ${file}: ${errorText(error)}`, exitCode: 2 })
  }).pipe(
    Effect.flatMap((text) =>
      Effect.try({
        try: (): unknown => JSON.parse(text),
        catch: (error) =>
          new CliFailure({ message: `config file ${file} is not valid JSON: ${errorText(error)}`, exitCode: 2 })
      })
    ),
    Effect.filterOrFail(
      (json) => typeof json === "object" && json !== null && !Array.isArray(json),
      () => new CliFailure({ message: `config file ${file} must hold a JSON object`, exitCode: 2 })
    ),
    Effect.tap((json) => {
      const unknown = unknownKeys(json)
      return unknown.length === 0
        ? Effect.void
        : new CliFailure({
            message: `config file ${file}: unknown ${unknown.length === 1 ? "key" : "keys"} ${unknown.join(", ")}`,
            exitCode: 2
          })
    }),
    Effect.map((json) => ConfigProvider.fromJson(json))
  )

/**
 * The environment provider: `OUTBOX_` + the config path in CONSTANT_CASE.
 *
 * @since 0.1.0
 */
export const envProvider = (env: Record<string, string | undefined> = process.env): ConfigProvider.ConfigProvider => {
  const entries = new Map<string, string>()
  for (const [key, value] of Object.entries(env)) if (value !== undefined) entries.set(key, value)
  return ConfigProvider.fromMap(entries, { pathDelim: "_" }).pipe(
    ConfigProvider.nested("OUTBOX"),
    ConfigProvider.constantCase
  )
}

/**
 * Flags, then environment, then the optional config file. `flags` maps config paths
 * (`relay.batchSize`) to the raw flag text; absent flags are left out.
 *
 * @since 0.1.0
 */
export const provider = (
  flags: ReadonlyMap<string, string>,
  configFile: Option.Option<string>,
  env: Record<string, string | undefined> = process.env
): Effect.Effect<ConfigProvider.ConfigProvider, CliFailure> =>
  Effect.gen(function* () {
    const fromFlags = ConfigProvider.fromMap(new Map(flags))
    const withEnv = ConfigProvider.orElse(fromFlags, () => envProvider(env))
    if (Option.isNone(configFile)) return withEnv
    const fromFile = yield* fileProvider(configFile.value)
    return ConfigProvider.orElse(withEnv, () => fromFile)
  })

/**
 * Renders a `ConfigError` as readable lines, one per problem, with the path that caused it.
 *
 * @since 0.1.0
 */
export const describeConfigError = (error: ConfigError.ConfigError): ReadonlyArray<string> =>
  ConfigError.reduceWithContext(error, undefined, {
    andCase: (_, left: ReadonlyArray<string>, right: ReadonlyArray<string>) => [...left, ...right],
    orCase: (_, left: ReadonlyArray<string>, right: ReadonlyArray<string>) =>
      // the flag/env/file providers are alternatives: the most specific failure is the interesting one
      left.length > 0 && !left.every((line) => line.startsWith("missing")) ? left : right.length > 0 ? right : left,
    invalidDataCase: (_, path, message) => [`${pathText(path)}: ${message}`],
    missingDataCase: (_, path, message) => [`missing ${pathText(path)}: ${message}`],
    sourceUnavailableCase: (_, path, message) => [`${pathText(path)}: ${message}`],
    unsupportedCase: (_, path, message) => [`${pathText(path)}: ${message}`]
  })

const camel = (segment: string): string =>
  /^[A-Z0-9_]+$/.test(segment)
    ? segment.toLowerCase().replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase())
    : segment

const constant = (segment: string): string => segment.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toUpperCase()

/** `relay.maxPartitions (env OUTBOX_RELAY_MAX_PARTITIONS)`, whichever provider reported the path. */
const pathText = (path: ReadonlyArray<string>): string => {
  const cleaned = (path[0] === "OUTBOX" ? path.slice(1) : path).map(camel)
  if (cleaned.length === 0) return "(root)"
  return `${cleaned.join(".")} (env OUTBOX_${cleaned.map(constant).join("_")})`
}

/**
 * Loads a `Config` from a provider, turning a `ConfigError` into a {@link CliFailure} (exit code 2).
 *
 * @since 0.1.0
 */
export const load = <A>(config: Config.Config<A>, from: ConfigProvider.ConfigProvider): Effect.Effect<A, CliFailure> =>
  Effect.withConfigProvider(config, from).pipe(
    Effect.mapError((error) => {
      const lines = Array.from(new Set(describeConfigError(error)))
      return new CliFailure({ message: `invalid configuration:\n  ${lines.join("\n  ")}`, exitCode: 2 })
    })
  )

/**
 * A readable message of anything thrown.
 *
 * @since 0.1.0
 */
export const errorText = (error: unknown): string => (error instanceof Error ? error.message : String(error))
