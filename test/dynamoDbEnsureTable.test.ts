/**
 * `ensureTable` run by several store layers (or processes) at once on a table that does not exist yet:
 * each of them must end with the table created, TTL on, and the preflight passed.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { afterAll } from "vitest"
import * as OutboxTable from "../src/layers/dynamodb/OutboxTable.js"
import * as DynamoDb from "../src/services/DynamoDb.js"
import { makeTestClientConfig, randomTableName } from "./support/DynamoLocal.js"

const dynamoLayer = DynamoDb.layer(makeTestClientConfig())
const tables: Array<string> = []

afterAll(() =>
  Effect.runPromise(
    Effect.forEach(
      tables,
      (name) =>
        Effect.flatMap(DynamoDb.DynamoDb, (d) => d.deleteTable({ TableName: name })).pipe(
          Effect.catchAll(() => Effect.void)
        ),
      { discard: true }
    ).pipe(Effect.provide(dynamoLayer))
  )
)

describe("OutboxTable.ensureTable", () => {
  it.live("§3.3 four concurrent ensureTable calls on a missing table all succeed and leave TTL enabled", () =>
    Effect.gen(function* () {
      const name = randomTableName("ensure-race")
      tables.push(name)
      yield* Effect.all(
        Array.from({ length: 4 }, () => OutboxTable.ensureTable(name)),
        { concurrency: "unbounded" }
      )
      const dynamo = yield* DynamoDb.DynamoDb
      const ttl = yield* dynamo.describeTimeToLive({ TableName: name })
      expect(ttl.TimeToLiveDescription?.TimeToLiveStatus).toBe("ENABLED")
      expect(ttl.TimeToLiveDescription?.AttributeName).toBe(OutboxTable.TtlAttribute)
      // and once more on the existing table: nothing to do, still fine
      yield* OutboxTable.ensureTable(name)
    }).pipe(Effect.provide(dynamoLayer))
  )

  it.live("§3.3 ensureTable tolerates TTL enabled by someone else between its read and its update", () =>
    Effect.gen(function* () {
      const name = randomTableName("ensure-ttl")
      tables.push(name)
      yield* OutboxTable.ensureTable(name)
      // a view of the service whose first TTL read is stale (says DISABLED although it is enabled), as
      // when another process enables TTL right after this one looked
      let staleReads = 1
      const staleFirstRead = Layer.effect(
        DynamoDb.DynamoDb,
        Effect.map(DynamoDb.DynamoDb, (real) =>
          DynamoDb.DynamoDb.of({
            ...real,
            describeTimeToLive: (input) =>
              Effect.map(real.describeTimeToLive(input), (output) =>
                staleReads-- > 0
                  ? { ...output, TimeToLiveDescription: { TimeToLiveStatus: "DISABLED" as const } }
                  : output
              )
          })
        )
      ).pipe(Layer.provide(dynamoLayer))
      yield* OutboxTable.ensureTable(name).pipe(Effect.provide(staleFirstRead))
      expect(staleReads).toBeLessThan(0)
    }).pipe(Effect.provide(dynamoLayer))
  )
})
