/**
 * The PostgreSQL `WakeSignal` (SPEC §3.4): `LISTEN`s on the channel the PostgreSQL outbox store
 * `pg_notify`s on commit of a persist (payload: the partition key), and completes the waiters of that
 * partition and every `awaitAnyWork` waiter.
 *
 * A signal is a hint, never a source of truth: notifications sent before the listening connection is up,
 * or while it is down, are lost, and waiters then simply wait for their poll interval. The listening
 * connection (the `PgClient`'s one `LISTEN` connection) is checked every `checkInterval` with a
 * notification to itself on a second channel; a check not answered in time (the connection was dropped,
 * e.g. by `pg_terminate_backend`) ends the listeners, and listening starts again on a new connection,
 * with an exponential back-off while that fails. The checks' pings go through the client's pool and are
 * never cancelled half-way: a ping outliving its check finishes on its own. Use the same `schema` and
 * `tablePrefix` as the outbox store.
 *
 * @since 0.1.0
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Queue from "effect/Queue"
import * as Random from "effect/Random"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { InvalidConfiguration } from "../../domain/OutboxError.js"
import { WakeSignal } from "../../services/WakeSignal.js"
import { tableNames } from "./PostgresOutboxSchema.js"

/**
 * Options of the wake signal: the outbox store's `schema` and `tablePrefix` (they name the channel), and
 * how often the listening connection is checked.
 *
 * @since 0.1.0
 */
export interface PostgresWakeSignalOptions {
  readonly schema?: string | undefined
  readonly tablePrefix?: string | undefined
  /**
   * Time between two checks of the listening connection, and how long a check waits for its answer
   * (default 10 s): a dropped connection is replaced within about twice this.
   */
  readonly checkInterval?: Duration.DurationInput | undefined
}

/** First pause before listening again after the listeners ended; doubles up to {@link relistenMax}. */
const relistenMin = Duration.millis(100)
const relistenMax = Duration.seconds(30)
/** Shortest wait for the first answer after listening starts (the listening connection is opened first). */
const firstCheckMin = Duration.seconds(5)
/** Longest time between the pings of one check (the first ones may go out before `LISTEN` is in place). */
const pingEveryMax = Duration.millis(250)

/**
 * Builds the wake signal: listens in the background for the life of the scope, listening again on a new
 * connection whenever the listening connection is found dropped.
 *
 * @since 0.1.0
 */
export const make = (
  options: PostgresWakeSignalOptions = {}
): Effect.Effect<WakeSignal["Type"], InvalidConfiguration, PgClient.PgClient | Scope.Scope> =>
  Effect.gen(function* () {
    const sql = yield* PgClient.PgClient
    const names = yield* tableNames("PostgresWakeSignal", options.schema ?? "public", options.tablePrefix ?? "")
    const checkInterval = Duration.decode(options.checkInterval ?? Duration.seconds(10))
    if (!Duration.isFinite(checkInterval) || Duration.toMillis(checkInterval) < 1) {
      return yield* new InvalidConfiguration({
        component: "PostgresWakeSignal",
        problems: ["checkInterval must be a finite duration of at least 1 millisecond"]
      })
    }
    const pingChannel = `${names.channel}.ping`
    const pingEvery = Duration.min(pingEveryMax, Duration.unsafeDivide(checkInterval, 5))
    const hub = yield* Effect.acquireRelease(PubSub.unbounded<string>(), PubSub.shutdown)

    /**
     * The ping query last started. It runs in a fiber of its own that nothing interrupts: interrupting a query
     * of the pool makes the driver send `pg_cancel_backend` for its connection, which may by then run a query
     * of the application's (the answer to a ping arrives as its query returns, so a check often ends while its
     * ping's query is still in flight). A check that ends leaves its ping to finish; while that one has not
     * finished, the next ping waits for it instead of starting another, so a stuck database holds one pool
     * connection for pings, not one per check.
     */
    let lastPing: Fiber.RuntimeFiber<void> | undefined
    const ping = (id: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        const running = lastPing !== undefined && lastPing.unsafePoll() === null ? lastPing : undefined
        const started =
          running !== undefined
            ? Effect.succeed(running)
            : Effect.tap(
                Effect.forkDaemon(
                  sql`SELECT pg_notify(${pingChannel}, ${id})`.pipe(
                    Effect.asVoid,
                    Effect.catchAll(() => Effect.void),
                    Effect.withTracerEnabled(false)
                  )
                ),
                (fiber) => {
                  lastPing = fiber
                }
              )
        return Effect.flatMap(started, Fiber.join)
      })

    /**
     * One check: pings (at least five times per `checkInterval`) until one of this check's pings comes back on
     * `pings`, or `window` passes (the first check after listening starts waits at least `firstCheckMin`).
     * Succeeds with whether an answer came.
     */
    const check = (pings: Queue.Queue<string>, window: Duration.Duration) =>
      Effect.gen(function* () {
        const id = `${yield* Random.nextIntBetween(0, 2 ** 30)}`
        const answered = Effect.repeat(Queue.take(pings), { until: (ping) => ping === id })
        const send = Effect.repeat(ping(id), Schedule.spaced(pingEvery))
        const outcome = yield* Effect.raceFirst(Effect.as(answered, true), Effect.as(send, false)).pipe(
          Effect.timeoutOption(window)
        )
        return Option.getOrElse(outcome, () => false)
      })

    /**
     * Listens on the store's channel and on the ping channel until a check goes unanswered, then ends both
     * listeners (without waiting for them: the dropped connection's clean-up is theirs). Returns whether a
     * check was ever answered.
     */
    const listenUntilDropped: Effect.Effect<boolean> = Effect.gen(function* () {
      const pings = yield* Queue.sliding<string>(16)
      const work = yield* Effect.forkDaemon(
        Stream.runForEach(sql.listen(names.channel), (partitionKey) => PubSub.publish(hub, partitionKey))
      )
      const answers = yield* Effect.forkDaemon(
        Stream.runForEach(sql.listen(pingChannel), (ping) => Queue.offer(pings, ping))
      )
      const stop = Effect.zipRight(
        Effect.zipRight(Fiber.interruptFork(work), Fiber.interruptFork(answers)),
        Queue.shutdown(pings)
      )
      let answered = false
      return yield* Effect.gen(function* () {
        while (yield* check(pings, answered ? checkInterval : Duration.max(checkInterval, firstCheckMin))) {
          if (!answered) yield* Effect.logDebug("outbox wake-up listener up")
          answered = true
          yield* Effect.sleep(checkInterval)
        }
        yield* Effect.logWarning("outbox wake-up listener lost its connection; listening again")
        return answered
      }).pipe(Effect.ensuring(stop))
    }).pipe(Effect.annotateLogs({ channel: names.channel }))

    /** Listens again after every drop: at once after a connection that was up, else after a growing pause. */
    yield* Effect.gen(function* () {
      let pause = relistenMin
      for (;;) {
        const wasUp = yield* listenUntilDropped
        if (wasUp) pause = relistenMin
        const jitter = yield* Random.nextRange(0.8, 1)
        yield* Effect.sleep(Duration.times(pause, jitter))
        pause = Duration.min(Duration.times(pause, 2), relistenMax)
      }
    }).pipe(Effect.forkScoped)

    /** Waits, on a subscription taken when the call starts, for a signal `matches` accepts. */
    const awaitSignal = (matches: (partitionKey: string) => boolean): Effect.Effect<void> =>
      Effect.scoped(
        Effect.flatMap(PubSub.subscribe(hub), (queue) =>
          Effect.asVoid(Effect.repeat(Queue.take(queue), { until: matches }))
        )
      )
    return WakeSignal.of({
      awaitWork: (partitionKey) => awaitSignal((signalled) => signalled === partitionKey),
      awaitAnyWork: awaitSignal(() => true),
      awaitWorkWhere: awaitSignal
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
