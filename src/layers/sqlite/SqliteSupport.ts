/**
 * What every SQLite store shares: recognising and retrying lock failures (`SQLITE_BUSY*`,
 * `SQLITE_LOCKED*`), and the table-prefix rule of the layers' `tablePrefix` option.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import { createRequire } from "node:module"
import { InvalidConfiguration } from "../../domain/OutboxError.js"

/**
 * A `require` that resolves from `@effect/sql-sqlite-node`, so a connection of the library's own (the wake signal's,
 * the checkpoint worker's) opens the `better-sqlite3` that `SqliteClient` itself loads.
 *
 * @since 0.2.0
 */
export const driverRequire = (): NodeJS.Require =>
  createRequire(createRequire(import.meta.url).resolve("@effect/sql-sqlite-node/SqliteClient"))

/**
 * True for a SQL failure caused by another connection's lock (`SQLITE_BUSY*`, `SQLITE_LOCKED*`).
 *
 * @since 0.1.0
 */
export const isBusy = (error: unknown): boolean => {
  if (typeof error !== "object" || error === null || Reflect.get(error, "_tag") !== "SqlError") return false
  const cause: unknown = Reflect.get(error, "cause")
  if (typeof cause !== "object" || cause === null) return false
  const code: unknown = Reflect.get(cause, "code")
  return typeof code === "string" && (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED"))
}

/**
 * Short, bounded retry of busy failures (they never happen on `:memory:`, so tests on TestClock never
 * sleep).
 *
 * @since 0.1.0
 */
export const busyRetry = Schedule.exponential(Duration.millis(5), 2).pipe(
  Schedule.jittered,
  Schedule.either(Schedule.spaced(Duration.millis(200))),
  Schedule.intersect(Schedule.recurs(12))
)

/**
 * `Effect.retry(effect, { schedule, while: busy })` with the same attempts and delays, but the schedule is
 * set up only once a first attempt has failed busy (the common path pays nothing). `busy` defaults to
 * {@link isBusy}, `schedule` (made when that first failure came) to {@link busyRetry}.
 *
 * @since 0.1.0
 */
export const retryBusy = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  busy: (error: E) => boolean = isBusy,
  schedule: () => Schedule.Schedule<unknown, E> = () => busyRetry
): Effect.Effect<A, E, R> =>
  Effect.catchIf(effect, busy, (first) => {
    // the retry loop starts by replaying the failure already seen, so its schedule decides the first delay
    let replayed = false
    return Effect.retry(
      Effect.suspend(() => {
        if (replayed) return effect
        replayed = true
        return Effect.fail(first)
      }),
      { schedule: schedule(), while: busy }
    )
  })

/**
 * {@link retryBusy} unless inside a caller's transaction, where only the caller may retry (the whole
 * transaction).
 *
 * @since 0.1.0
 */
export const retryBusyOutsideTransaction = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) =>
    Option.isSome(outer) ? effect : retryBusy(effect)
  )

const prefixPattern = /^[A-Za-z_][A-Za-z0-9_]*$/

/**
 * Checks a `tablePrefix` option: empty, or letters, digits and `_` not starting with a digit (it is
 * spliced into table and index names). Returns the prefix (`""` when absent).
 *
 * @since 0.1.0
 */
export const tablePrefix = (
  component: string,
  prefix: string | undefined
): Either.Either<string, InvalidConfiguration> => {
  const value = prefix ?? ""
  return value.length === 0 || prefixPattern.test(value)
    ? Either.right(value)
    : Either.left(
        new InvalidConfiguration({
          component,
          problems: [`tablePrefix ${JSON.stringify(value)} must match ${prefixPattern.source}`]
        })
      )
}
