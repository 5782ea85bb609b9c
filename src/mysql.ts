/**
 * effect-outbox/mysql: the MySQL / MariaDB backend (SPEC §3.5), on `@effect/sql-mysql2`. Provide a client
 * with `MysqlClient.layer({ url })` from `@effect/sql-mysql2/MysqlClient`. Written to MySQL 8 semantics,
 * verified against MariaDB 10.11.
 *
 * @since 0.1.0
 */

/** The MySQL OutboxStore: `layer` / `layerWith({ database, tablePrefix, staleClaimAfter, retention })`. @since 0.1.0 */
export * as MysqlOutboxStore from "./layers/mysql/MysqlOutboxStore.js"

/** The MySQL LeaseStore: `layer` / `layerWith({ database, tablePrefix })`. @since 0.1.0 */
export * as MysqlLeaseStore from "./layers/mysql/MysqlLeaseStore.js"

/** The MySQL DeadLetterStore (redrive in one transaction): `layer` / `layerWith`. @since 0.1.0 */
export * as MysqlDeadLetterStore from "./layers/mysql/MysqlDeadLetterStore.js"

/** Read-only inspection of a MySQL outbox (the OutboxInspection port). @since 0.1.0 */
export * as MysqlInspection from "./layers/mysql/MysqlInspection.js"

/** The MySQL InboxStore (SPEC §12, the shared SQL inbox): `layer` / `layerWith({ database, tablePrefix })`. @since 0.1.0 */
export * as MysqlInboxStore from "./layers/mysql/MysqlInboxStore.js"

/** The MySQL LeaseFence: the relay's end-of-batch complete is its lease check (SPEC §13). @since 0.1.0 */
export * as MysqlLeaseFence from "./layers/mysql/MysqlLeaseFence.js"
