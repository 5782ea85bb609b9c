/**
 * The MySQL / MariaDB stores and inspection of the CLI (loaded on demand by `Backends.layer`): a
 * `MysqlClient` on the configured URL (redacted: never printed) and the MySQL stores and inspection in the
 * configured database (the URL's when none is given).
 *
 * @since 0.1.0
 */
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as MysqlDeadLetterStore from "../../layers/mysql/MysqlDeadLetterStore.js"
import * as MysqlInspection from "../../layers/mysql/MysqlInspection.js"
import * as MysqlLeaseStore from "../../layers/mysql/MysqlLeaseStore.js"
import * as MysqlOutboxStore from "../../layers/mysql/MysqlOutboxStore.js"
import type { Stores } from "./Backends.js"
import { CliFailure, type StoreSettings } from "./Settings.js"

/**
 * The MySQL stores and inspection for the settings (tables created when missing).
 *
 * @since 0.1.0
 */
export const layer = (settings: StoreSettings): Layer.Layer<Stores, unknown> => {
  if (Option.isNone(settings.mysqlUrl)) {
    return Layer.fail(
      new CliFailure({ message: "the mysql backend needs --mysql-url (or OUTBOX_MYSQL_URL)", exitCode: 2 })
    )
  }
  const names = { database: Option.getOrUndefined(settings.mysqlDatabase) }
  const client = MysqlClient.layer({ url: settings.mysqlUrl.value })
  const outbox = MysqlOutboxStore.layerWith(names)
  const stores = Layer.mergeAll(
    Layer.provideMerge(MysqlDeadLetterStore.layerWith(names), outbox),
    MysqlLeaseStore.layerWith(names)
  )
  return Layer.provideMerge(MysqlInspection.layerWith(names), stores).pipe(Layer.provide(client))
}
