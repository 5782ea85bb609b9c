/**
 * The peer the latency bench measures beside effect-outbox: `pg-transactional-outbox` (a PostgreSQL outbox
 * and inbox on npm that hands records to its handler through logical replication), pinned in
 * bench/peer/package.json — a dependency of the bench only, installed on demand with `npm ci` into
 * bench/peer/node_modules, never part of the library's install.
 *
 * The modules are loaded at run time and checked against the small surface the bench uses.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const peerDirectory = path.join(path.dirname(fileURLToPath(import.meta.url)), "peer")

/** A message as the peer stores it. */
export interface PeerMessage {
  readonly id: string
  readonly aggregateType: string
  readonly aggregateId: string
  readonly messageType: string
  readonly payload: unknown
}

/** A `pg` client, as far as the bench uses one. */
export interface PgClient {
  readonly connect: () => Promise<void>
  readonly query: (text: string) => Promise<unknown>
  readonly end: () => Promise<void>
}

/** The listener and storage configuration the peer takes. */
export interface PeerConfig {
  readonly outboxOrInbox: "outbox"
  readonly dbListenerConfig: { readonly connectionString: string }
  readonly settings: {
    readonly dbSchema: string
    readonly dbTable: string
    readonly dbPublication: string
    readonly dbReplicationSlot: string
    readonly enableMaxAttemptsProtection: boolean
    readonly enablePoisonousMessageProtection: boolean
  }
}

/** The surface of `pg-transactional-outbox` (and `pg`) the bench uses. */
export interface Peer {
  readonly initializeReplicationMessageListener: (
    config: PeerConfig,
    handler: { readonly handle: (message: PeerMessage) => Promise<void> },
    logger: unknown
  ) => [shutdown: () => Promise<void>]
  readonly initializeMessageStorage: (
    config: PeerConfig,
    logger: unknown
  ) => (message: PeerMessage, client: PgClient) => Promise<void>
  readonly getDisabledLogger: () => unknown
  readonly DatabaseSetup: {
    readonly dropAndCreateTable: (config: SetupConfig) => string
    readonly setupReplicationCore: (config: SetupConfig) => string
    readonly setupReplicationSlot: (config: SetupConfig) => string
  }
  readonly newClient: (connectionString: string) => PgClient
}

/** What `DatabaseSetup` takes. */
export interface SetupConfig {
  readonly outboxOrInbox: "outbox"
  readonly database: string
  readonly schema: string
  readonly table: string
  readonly listenerRole: string
  readonly publication: string
  readonly replicationSlot: string
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null

const hasFunctions = (value: unknown, names: ReadonlyArray<string>): value is Record<string, unknown> =>
  isRecord(value) && names.every((name) => typeof value[name] === "function")

const isPeerModule = (value: unknown): value is Omit<Peer, "newClient"> =>
  hasFunctions(value, ["initializeReplicationMessageListener", "initializeMessageStorage", "getDisabledLogger"]) &&
  hasFunctions(value["DatabaseSetup"], ["dropAndCreateTable", "setupReplicationCore", "setupReplicationSlot"])

const isPgModule = (value: unknown): value is { readonly Client: new (config: object) => PgClient } =>
  hasFunctions(value, ["Client"])

/** Installs the pinned peer into bench/peer/node_modules when it is not there. */
export const ensureInstalled = (): void => {
  if (fs.existsSync(path.join(peerDirectory, "node_modules", "pg-transactional-outbox"))) return
  console.log("… installing the peer (bench/peer: npm ci)")
  execFileSync("npm", ["ci", "--no-audit", "--no-fund"], { cwd: peerDirectory, stdio: "inherit" })
}

/** Loads the peer (installed by {@link ensureInstalled}). */
export const load = (): Peer => {
  const require = createRequire(path.join(peerDirectory, "package.json"))
  const peer: unknown = require("pg-transactional-outbox")
  const pg: unknown = require("pg")
  if (!isPeerModule(peer)) throw new Error("pg-transactional-outbox: unexpected module shape")
  if (!isPgModule(pg)) throw new Error("pg: unexpected module shape")
  return { ...peer, newClient: (connectionString) => new pg.Client({ connectionString }) }
}

/** The peer's configuration for one outbox table. */
export const config = (connectionString: string, schema: string): PeerConfig => ({
  outboxOrInbox: "outbox",
  dbListenerConfig: { connectionString },
  settings: {
    dbSchema: schema,
    dbTable: "outbox",
    dbPublication: `${schema}_pub`,
    dbReplicationSlot: `${schema}_slot`,
    enableMaxAttemptsProtection: false,
    enablePoisonousMessageProtection: false
  }
})
