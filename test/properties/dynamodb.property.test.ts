/**
 * Generated histories of the DynamoDB store (DynamoDB Local) against the pure model. The store always
 * has stale reclaim (default 30 s), so histories run with that threshold. One table for the file; every
 * history uses fresh partition keys.
 */
import { outboxTableForFile } from "../support/DynamoOutboxTable.js"
import { runOutboxHistories } from "./OutboxHistory.js"

const { makeLayer } = outboxTableForFile("outbox-histories")

// 36 histories in three registrations: each gets its own time budget (DynamoDB Local is slow, and CI
// machines are shared), and each draws its own seed (printed on failure; OUTBOX_SEED replays).
for (const part of [1, 2, 3]) {
  runOutboxHistories(`dynamodb (DynamoDB Local), stale reclaim after 30 s, part ${part}/3`, makeLayer, {
    runs: 12,
    staleClaimAfterMillis: 30_000
  })
}
