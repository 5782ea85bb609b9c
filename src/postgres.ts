/**
 * effect-outbox/postgres: the PostgreSQL backend (SPEC §3.4), on `@effect/sql-pg`. Provide a client with
 * `PgClient.layer({ url })` from `@effect/sql-pg/PgClient`.
 *
 * @since 0.1.0
 */

/** The PostgreSQL OutboxStore: `layer` / `layerWith({ schema, tablePrefix, staleClaimAfter, retention })`. @since 0.1.0 */
export * as PostgresOutboxStore from "./layers/postgres/PostgresOutboxStore.js"

/** The PostgreSQL LeaseStore: `layer` / `layerWith({ schema, tablePrefix })`. @since 0.1.0 */
export * as PostgresLeaseStore from "./layers/postgres/PostgresLeaseStore.js"

/** The PostgreSQL DeadLetterStore (redrive in one transaction): `layer` / `layerWith`. @since 0.1.0 */
export * as PostgresDeadLetterStore from "./layers/postgres/PostgresDeadLetterStore.js"

/** The PostgreSQL WakeSignal: LISTENs for the store's commit notifications; polling stays the fallback. @since 0.1.0 */
export * as PostgresWakeSignal from "./layers/postgres/PostgresWakeSignal.js"

/** Read-only inspection of a PostgreSQL outbox (the OutboxInspection port). @since 0.1.0 */
export * as PostgresInspection from "./layers/postgres/PostgresInspection.js"

/** The PostgreSQL InboxStore (the handler's writes share the inbox's transaction). @since 0.1.0 */
export * as PostgresInboxStore from "./layers/postgres/PostgresInboxStore.js"

/** The PostgreSQL LeaseFence: the relay's end-of-batch complete is its lease check (SPEC §13). @since 0.1.0 */
export * as PostgresLeaseFence from "./layers/postgres/PostgresLeaseFence.js"
