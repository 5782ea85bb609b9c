/**
 * The MySQL / MariaDB stores and inspection of the CLI (loaded on demand by `Backends.layer`): a
 * `MysqlClient` on the configured URL (redacted: never printed) and the MySQL stores, inspection and lease
 * fence (the relay's end-of-batch complete is its lease check) in the configured database (the URL's when
 * none is given). Read-only commands (`inspect`, `dlq list`,
 * `dashboard`) run no DDL and take no migration lock (a user with only `SELECT` can run them); a missing
 * database or table is "no such database/table", exit 2 (issue #32 item 13).
 *
 * @since 0.1.0
 */
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as MysqlDeadLetterStore from "../../layers/mysql/MysqlDeadLetterStore.js"
import * as MysqlInspection from "../../layers/mysql/MysqlInspection.js"
import * as MysqlLeaseFence from "../../layers/mysql/MysqlLeaseFence.js"
import * as MysqlLeaseStore from "../../layers/mysql/MysqlLeaseStore.js"
import * as MysqlOutboxStore from "../../layers/mysql/MysqlOutboxStore.js"
import { errno } from "../../layers/mysql/MysqlOutboxSchema.js"
import { DeadLetterStore } from "../../services/DeadLetterStore.js"
import { LeaseStore } from "../../services/LeaseStore.js"
import { type Stores, storeTables } from "./Backends.js"
import { CliFailure, type StoreSettings } from "./Settings.js"

const Names = Schema.Array(Schema.Struct({ name: Schema.NullOr(Schema.String) }))

/** The tables read-only commands read: the outbox store's, the lease store's and the dead-letter store's. */
const readTables: ReadonlyArray<string> = [...storeTables, "outbox_seq", "outbox_lease", "outbox_dead_letter"]

const refused = (message: string) =>
  new CliFailure({ message: `${message} (MySQL; read-only commands create nothing)`, exitCode: 2 })

/** Fails with "no such database" or "no such table" (exit 2) unless the database holds every table read. */
const tablesExist = (database: string | undefined) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const names = (text: string, params: ReadonlyArray<unknown>) =>
      Effect.flatMap(sql.unsafe(text, params), Schema.decodeUnknown(Names)).pipe(
        Effect.map((rows) => rows.flatMap((row) => (row.name === null ? [] : [row.name])))
      )
    const name = database ?? (yield* names("SELECT DATABASE() AS name", []))[0]
    if (name === undefined) {
      return yield* refused("no database: give --mysql-database or name one in --mysql-url")
    }
    const databases = yield* names(
      "SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
      [name]
    )
    if (databases.length === 0) return yield* refused(`no such database: ${name}`)
    const present = new Set(
      yield* names("SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", [name])
    )
    const missing = readTables.filter((table) => !present.has(table))
    if (missing.length > 0) {
      return yield* refused(`no such table: ${missing.map((table) => `${name}.${table}`).join(", ")}`)
    }
  })

/** The database a URL names (its path), when it names one. */
const databaseOfUrl = (url: Redacted.Redacted): string | undefined => {
  if (!URL.canParse(Redacted.value(url))) return undefined
  const path = new URL(Redacted.value(url)).pathname.replace(/^\//, "")
  return path === "" ? undefined : decodeURIComponent(path)
}

/** The URL's database does not exist (the server refuses the connection with 1049): "no such database". */
const unknownDatabase = (name: string | undefined) =>
  Layer.catchAll((error: unknown) =>
    errno(error) === 1049 ? Layer.fail(refused(`no such database: ${name ?? "of the URL"}`)) : Layer.fail(error)
  )

/**
 * The MySQL stores and inspection for the settings (tables created when missing, except for a read-only
 * command: then no migration runs and a missing database or table is "no such database/table", exit 2).
 *
 * @since 0.1.0
 */
export const layer = (
  settings: StoreSettings,
  options: { readonly readOnly: boolean } = { readOnly: false }
): Layer.Layer<Stores, unknown> => {
  if (Option.isNone(settings.mysqlUrl)) {
    return Layer.fail(
      new CliFailure({ message: "the mysql backend needs --mysql-url (or OUTBOX_MYSQL_URL)", exitCode: 2 })
    )
  }
  const database = Option.getOrUndefined(settings.mysqlDatabase)
  const names = { database }
  const client = MysqlClient.layer({ url: settings.mysqlUrl.value })
  if (!options.readOnly) {
    const stores = Layer.mergeAll(
      Layer.provideMerge(MysqlDeadLetterStore.layerWith(names), MysqlOutboxStore.layerWith(names)),
      MysqlLeaseStore.layerWith(names)
    )
    // the relay's end-of-batch complete doubles as its lease check (SPEC §13)
    return Layer.merge(
      Layer.provideMerge(MysqlInspection.layerWith(names), stores),
      MysqlLeaseFence.layerWith(names)
    ).pipe(Layer.provide(client))
  }
  // the stores' makers without their migrations, after the check
  const stores = Layer.mergeAll(
    Layer.provideMerge(
      Layer.effect(DeadLetterStore, MysqlDeadLetterStore.make(names)),
      MysqlOutboxStore.layerWith({ ...names, migrate: false })
    ),
    Layer.effect(LeaseStore, MysqlLeaseStore.make(names))
  )
  const checked = Layer.unwrapEffect(
    Effect.as(
      tablesExist(database),
      Layer.merge(Layer.provideMerge(MysqlInspection.layerWith(names), stores), MysqlLeaseFence.layerWith(names))
    )
  )
  return checked.pipe(Layer.provide(unknownDatabase(databaseOfUrl(settings.mysqlUrl.value))(client)))
}
