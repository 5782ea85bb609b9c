/**
 * Generated inbox histories (test/properties/InboxHistory.ts) on every backend, with modest run counts
 * (the soak, `npm run soak -- --inbox --backend <b> --runs <n>`, runs thousands): duplicates, redeliveries
 * of old records, reordered keyless messages, handler failures and crashes between the handler and the
 * commit; outcomes and the consumer's final state must match applying each unique message once, per key in
 * `seq` order (SPEC §12).
 */
import { describe, expect, it } from "@effect/vitest"
import { inject } from "vitest"
import { makeTestClientConfig } from "../support/DynamoLocal.js"
import { createDatabase } from "../support/PostgresServer.js"
import { checkInboxHistories } from "./InboxHistory.js"
import * as InboxBackends from "./InboxBackends.js"

describe("Inbox generated histories", () => {
  it("memory: 200 histories agree with the model (SPEC §12)", async () => {
    const result = await checkInboxHistories("memory", InboxBackends.memory, { runs: 200, transactionalWrites: false })
    expect(result.stats.histories).toBe(200)
    expect(result.stats.crashes + result.stats.failures).toBeGreaterThan(0)
  }, 120_000)

  it("sqlite: 100 histories agree with the model (SPEC §12)", async () => {
    const result = await checkInboxHistories("sqlite", InboxBackends.sqlite, { runs: 100, transactionalWrites: true })
    expect(result.stats.histories).toBe(100)
  }, 120_000)

  it("postgres: 30 histories agree with the model (SPEC §12)", async () => {
    const backend = await InboxBackends.postgres(await createDatabase(inject("postgresUrl"), "inbox_hist"))
    try {
      const result = await checkInboxHistories("postgres", backend.makeLayer, { runs: 30, transactionalWrites: true })
      expect(result.stats.histories).toBe(30)
    } finally {
      await backend.close()
    }
  }, 180_000)

  it("dynamodb: 10 histories agree with the model (SPEC §12)", async () => {
    const backend = await InboxBackends.dynamodb(makeTestClientConfig())
    try {
      const result = await checkInboxHistories("dynamodb", backend.makeLayer, { runs: 10, transactionalWrites: true })
      expect(result.stats.histories).toBe(10)
    } finally {
      await backend.close()
    }
  }, 180_000)
})
