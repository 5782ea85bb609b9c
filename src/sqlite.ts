/**
 * effect-outbox/sqlite: the SQLite backend (SPEC §3.2, §9). Needs `@effect/sql` and
 * `@effect/sql-sqlite-node` installed.
 *
 * @since 0.1.0
 */

/** SQLite database layer (WAL, synchronous=FULL, busy timeout) providing `SqlClient`. @since 0.1.0 */
export * as SqliteDatabase from "./layers/sqlite/SqliteDatabase.js"

/** WAL checkpoints on a worker thread (`SqliteDatabase.layer`'s `checkpoint: "background"`). @since 0.2.0 */
export * as SqliteCheckpoint from "./layers/sqlite/SqliteCheckpoint.js"

/** SQLite OutboxStore backend: the embedded default. @since 0.1.0 */
export * as SqliteOutboxStore from "./layers/sqlite/SqliteOutboxStore.js"

/** SQLite LeaseStore backend. @since 0.1.0 */
export * as SqliteLeaseStore from "./layers/sqlite/SqliteLeaseStore.js"

/** SQLite DeadLetterStore backend. @since 0.1.0 */
export * as SqliteDeadLetterStore from "./layers/sqlite/SqliteDeadLetterStore.js"

/** SQLite OutboxInspection (honours the stores' tablePrefix). @since 0.1.0 */
export * as SqliteInspection from "./layers/sqlite/SqliteInspection.js"

/** SQLite WakeSignal: notices other processes' commits through `PRAGMA data_version`. @since 0.1.0 */
export * as SqliteWakeSignal from "./layers/sqlite/SqliteWakeSignal.js"

/** SQLite InboxStore backend (the handler's writes share the inbox's transaction). @since 0.1.0 */
export * as SqliteInboxStore from "./layers/sqlite/SqliteInboxStore.js"
