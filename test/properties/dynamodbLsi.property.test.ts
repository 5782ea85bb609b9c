/**
 * Generated histories of the DynamoDB store claiming through the local secondary index
 * `ClaimLocalIndex` (DynamoDB Local) against the pure model. Stale reclaim after 30 s (the store's
 * default). One table, created with the index, for the file; every history uses fresh partition keys.
 */
import { outboxTableForFile } from "../support/DynamoOutboxTable.js"
import { runOutboxHistories } from "./OutboxHistory.js"

const { makeLayer } = outboxTableForFile("outbox-lsi-histories", { localClaimIndex: true })

// 24 histories in two registrations: each gets its own time budget and draws its own seed (printed on
// failure; OUTBOX_SEED replays).
for (const part of [1, 2]) {
  runOutboxHistories(`dynamodb ClaimLocalIndex (DynamoDB Local), stale reclaim after 30 s, part ${part}/2`, makeLayer, {
    runs: 12,
    staleClaimAfterMillis: 30_000
  })
}
