import { describe, expect, it } from "@effect/vitest"
import * as Reactivity from "@effect/experimental/Reactivity"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { inject } from "vitest"
import { createDatabase } from "./support/PostgresServer.js"

describe("PostgresServer harness", () => {
  it.live("serves a fresh database per call on 127.0.0.1 with fsync on", () =>
    Effect.gen(function* () {
      const url = yield* Effect.promise(() => createDatabase(inject("postgresUrl"), "harness"))
      expect(new URL(url).hostname).toBe("127.0.0.1")
      const sql = yield* PgClient.make({ url: Redacted.make(url) })
      const rows = yield* sql<{
        fsync: string
        db: string
      }>`SELECT current_setting('fsync') AS fsync, current_database() AS db`
      expect(rows[0]?.fsync).toBe("on")
      expect(rows[0]?.db).toBe(new URL(url).pathname.slice(1))
    }).pipe(Effect.scoped, Effect.provide(Reactivity.layer))
  )
})
