/**
 * The PostgreSQL `WakeSignal` (SPEC §3.4): `LISTEN`s on the channel the PostgreSQL outbox store
 * `pg_notify`s on commit of a persist (payload: the partition key), and completes the waiters of that
 * partition and every `awaitAnyWork` waiter.
 *
 * A signal is a hint, never a source of truth: notifications sent before the listening connection is up,
 * or while it is down, are lost, and a dropped listening connection is not re-established — waiters then
 * simply wait for their poll interval. Use the same `schema` and `tablePrefix` as the outbox store.
 *
 * @since 0.1.0
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as PubSub from "effect/PubSub"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { InvalidConfiguration } from "../../domain/OutboxError.js"
import { WakeSignal } from "../../services/WakeSignal.js"
import { tableNames } from "./PostgresOutboxSchema.js"

/**
 * Options of the wake signal: the outbox store's `schema` and `tablePrefix` (they name the channel).
 *
 * @since 0.1.0
 */
export interface PostgresWakeSignalOptions {
  readonly schema?: string | undefined
  readonly tablePrefix?: string | undefined
}

/**
 * Builds the wake signal: starts listening in the background for the life of the scope.
 *
 * @since 0.1.0
 */
export const make = (
  options: PostgresWakeSignalOptions = {}
): Effect.Effect<WakeSignal["Type"], InvalidConfiguration, PgClient.PgClient | Scope.Scope> =>
  Effect.gen(function* () {
    const sql = yield* PgClient.PgClient
    const names = yield* tableNames("PostgresWakeSignal", options.schema ?? "public", options.tablePrefix ?? "")
    const hub = yield* Effect.acquireRelease(PubSub.unbounded<string>(), PubSub.shutdown)
    yield* sql.listen(names.channel).pipe(
      Stream.runForEach((partitionKey) => PubSub.publish(hub, partitionKey)),
      Effect.catchAll((error) => Effect.logWarning("outbox wake-up listener stopped; polling only", error)),
      Effect.forkScoped
    )
    /** Waits, on a subscription taken when the call starts, for a signal `matches` accepts. */
    const awaitSignal = (matches: (partitionKey: string) => boolean): Effect.Effect<void> =>
      Effect.scoped(
        Effect.flatMap(PubSub.subscribe(hub), (queue) =>
          Effect.asVoid(Effect.repeat(Queue.take(queue), { until: matches }))
        )
      )
    return WakeSignal.of({
      awaitWork: (partitionKey) => awaitSignal((signalled) => signalled === partitionKey),
      awaitAnyWork: awaitSignal(() => true)
    })
  })

/**
 * The wake signal with the given options. Requires a `PgClient`.
 *
 * @since 0.1.0
 */
export const layerWith = (
  options: PostgresWakeSignalOptions
): Layer.Layer<WakeSignal, InvalidConfiguration, PgClient.PgClient> => Layer.scoped(WakeSignal, make(options))

/**
 * The wake signal for the default schema and prefix (`public`, none).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<WakeSignal, InvalidConfiguration, PgClient.PgClient> = layerWith({})
