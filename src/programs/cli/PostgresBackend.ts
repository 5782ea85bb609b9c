/**
 * The PostgreSQL stores and inspection of the CLI (loaded on demand by `Backends.layer`): a `PgClient` on
 * the configured URL (redacted: never printed) and the PostgreSQL stores and inspection in the configured
 * schema. Read-only commands (`inspect`, `dlq list`, `dashboard`) run no DDL and take no migration lock
 * (a role with only `USAGE` and `SELECT` can run them); a missing schema or table is "no such schema/table",
 * exit 2 (issue #32 item 13).
 *
 * @since 0.1.0
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Option from "effect/Option"
import * as PostgresDeadLetterStore from "../../layers/postgres/PostgresDeadLetterStore.js"
import * as PostgresInspection from "../../layers/postgres/PostgresInspection.js"
import * as PostgresLeaseFence from "../../layers/postgres/PostgresLeaseFence.js"
import * as PostgresLeaseStore from "../../layers/postgres/PostgresLeaseStore.js"
import * as PostgresOutboxStore from "../../layers/postgres/PostgresOutboxStore.js"
import * as PostgresWakeSignal from "../../layers/postgres/PostgresWakeSignal.js"
import { DeadLetterStore } from "../../services/DeadLetterStore.js"
import { LeaseStore } from "../../services/LeaseStore.js"
import { type OpenOptions, type Stores, storeTables } from "./Backends.js"
import { CliFailure, type StoreSettings } from "./Settings.js"

const Names = Schema.Array(Schema.Struct({ name: Schema.String }))

/** The tables read-only commands read: the outbox store's, the lease store's and the dead-letter store's. */
const readTables: ReadonlyArray<string> = [...storeTables, "outbox_seq", "outbox_lease", "outbox_dead_letter"]

/** Fails with "no such schema" or "no such table" (exit 2) unless the schema holds every table read. */
const tablesExist = (schema: string, prefix: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const schemas = yield* sql`SELECT nspname AS name FROM pg_namespace WHERE nspname = ${schema}`.pipe(
      Effect.flatMap(Schema.decodeUnknown(Names))
    )
    if (schemas.length === 0) {
      return yield* new CliFailure({
        message: `no such schema: ${schema} (PostgreSQL; read-only commands create nothing)`,
        exitCode: 2
      })
    }
    const rows = yield* sql`SELECT tablename AS name FROM pg_tables WHERE schemaname = ${schema}`.pipe(
      Effect.flatMap(Schema.decodeUnknown(Names))
    )
    const present = new Set(rows.map((row) => row.name))
    const missing = readTables.map((table) => `${prefix}${table}`).filter((table) => !present.has(table))
    if (missing.length > 0) {
      return yield* new CliFailure({
        message: `no such table: ${missing.map((table) => `${schema}.${table}`).join(", ")} (PostgreSQL; read-only commands create nothing)`,
        exitCode: 2
      })
    }
  })

/**
 * The PostgreSQL stores and inspection for the settings (tables created when missing, except for a
 * read-only command: then no migration runs and a missing schema or table is "no such schema/table", exit
 * 2); opened for the `relay` also the `PostgresWakeSignal` of the schema (`LISTEN` on the channel the store notifies on
 * commit).
 *
 * @since 0.1.0
 */
export const layer = (
  settings: StoreSettings,
  options: OpenOptions = { readOnly: false }
): Layer.Layer<Stores, unknown> => {
  if (Option.isNone(settings.postgresUrl)) {
    return Layer.fail(
      new CliFailure({ message: "the postgres backend needs --postgres-url (or OUTBOX_POSTGRES_URL)", exitCode: 2 })
    )
  }
  const schema = settings.postgresSchema
  const client = PgClient.layer({ url: settings.postgresUrl.value, applicationName: "effect-outbox-cli" })
  const names = { schema }
  const stores = options.readOnly
    ? // the stores' makers without their migrations
      Layer.mergeAll(
        Layer.provideMerge(
          Layer.effect(DeadLetterStore, PostgresDeadLetterStore.make(names)),
          PostgresOutboxStore.layerWith({ ...names, migrate: false })
        ),
        Layer.effect(LeaseStore, PostgresLeaseStore.make(names))
      )
    : Layer.mergeAll(
        Layer.provideMerge(PostgresDeadLetterStore.layerWith(names), PostgresOutboxStore.layerWith(names)),
        PostgresLeaseStore.layerWith(names)
      )
  // the relay's end-of-batch complete doubles as its lease check (SPEC §13)
  const withInspection = Layer.merge(
    Layer.provideMerge(PostgresInspection.layerWith(names), stores),
    PostgresLeaseFence.layerWith(names)
  )
  const withWake =
    options.relay === true ? Layer.merge(withInspection, PostgresWakeSignal.layerWith(names)) : withInspection
  const checked = options.readOnly ? Layer.unwrapEffect(Effect.as(tablesExist(schema, ""), withWake)) : withWake
  return checked.pipe(Layer.provide(client))
}
