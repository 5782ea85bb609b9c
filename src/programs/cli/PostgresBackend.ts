/**
 * The PostgreSQL stores and inspection of the CLI (loaded on demand by `Backends.layer`): a `PgClient` on
 * the configured URL (redacted: never printed) and the PostgreSQL stores and inspection in the configured
 * schema.
 *
 * @since 0.1.0
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as PostgresDeadLetterStore from "../../layers/postgres/PostgresDeadLetterStore.js"
import * as PostgresInspection from "../../layers/postgres/PostgresInspection.js"
import * as PostgresLeaseStore from "../../layers/postgres/PostgresLeaseStore.js"
import * as PostgresOutboxStore from "../../layers/postgres/PostgresOutboxStore.js"
import * as PostgresWakeSignal from "../../layers/postgres/PostgresWakeSignal.js"
import type { Stores } from "./Backends.js"
import { CliFailure, type StoreSettings } from "./Settings.js"

/**
 * The PostgreSQL stores and inspection for the settings (tables created when missing); with `wake` also
 * the `PostgresWakeSignal` of the schema (`LISTEN` on the channel the store notifies on commit).
 *
 * @since 0.1.0
 */
export const layer = (settings: StoreSettings, wake = false): Layer.Layer<Stores, unknown> => {
  if (Option.isNone(settings.postgresUrl)) {
    return Layer.fail(
      new CliFailure({ message: "the postgres backend needs --postgres-url (or OUTBOX_POSTGRES_URL)", exitCode: 2 })
    )
  }
  const schema = settings.postgresSchema
  const client = PgClient.layer({ url: settings.postgresUrl.value, applicationName: "effect-outbox-cli" })
  const outbox = PostgresOutboxStore.layerWith({ schema })
  const stores = Layer.mergeAll(
    Layer.provideMerge(PostgresDeadLetterStore.layerWith({ schema }), outbox),
    PostgresLeaseStore.layerWith({ schema })
  )
  const withInspection = Layer.provideMerge(PostgresInspection.layerWith({ schema }), stores)
  const withWake = wake ? Layer.merge(withInspection, PostgresWakeSignal.layerWith({ schema })) : withInspection
  return withWake.pipe(Layer.provide(client))
}
