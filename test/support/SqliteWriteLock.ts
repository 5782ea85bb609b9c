/**
 * Another process's hold on a SQLite file's write lock, for tests of waits that must not block the thread: a
 * second connection (a database layer of its own) that takes the lock and keeps it, and a count of the test
 * fiber's own short sleeps while something else waits for it.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as SqliteDatabase from "../../src/layers/sqlite/SqliteDatabase.js"

/**
 * Another connection to `filename` takes SQLite's write lock and keeps it until `release` completes; `locked`
 * completes once it holds it.
 */
export const holdWriteLock = (filename: string, locked: Deferred.Deferred<void>, release: Deferred.Deferred<void>) =>
  Effect.gen(function* () {
    const other = yield* SqlClient.SqlClient
    yield* other.withTransaction(
      Effect.gen(function* () {
        yield* other`CREATE TABLE lock_holder (x INTEGER)`
        yield* Deferred.succeed(locked, undefined)
        yield* Deferred.await(release)
      })
    )
  }).pipe(Effect.provide(SqliteDatabase.layer({ filename })))

/**
 * Ten sleeps of 2 ms on the test's fiber; returns how many ran. SQLite's busy handler waiting on the thread for a
 * lock the test itself holds would keep them from running until its busy timeout: run while a wait that must
 * leave the thread free is under way.
 */
export const ticks: Effect.Effect<number> = Effect.gen(function* () {
  let ran = 0
  for (let i = 0; i < 10; i++) {
    yield* Effect.sleep("2 millis")
    ran += 1
  }
  return ran
})
