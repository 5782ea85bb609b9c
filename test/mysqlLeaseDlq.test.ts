/**
 * The lease and dead-letter contracts on MySQL, plus the server-SQL lease/DLQ tests
 * (test/support/SqlLeaseDlqSuite.ts).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { inject } from "vitest"
import * as MysqlDeadLetterStore from "../src/layers/mysql/MysqlDeadLetterStore.js"
import * as MysqlLeaseStore from "../src/layers/mysql/MysqlLeaseStore.js"
import * as MysqlOutboxStore from "../src/layers/mysql/MysqlOutboxStore.js"
import { deadLetterStoreContract } from "./contract/DeadLetterStoreContract.js"
import { leaseStoreContract } from "./contract/LeaseStoreContract.js"
import { clientLayer, createDatabase } from "./support/MysqlServer.js"
import { sqlLeaseDlqSuite } from "./support/SqlLeaseDlqSuite.js"

const url = await createDatabase(inject("mysqlUrl"), "lease_dlq")

leaseStoreContract("mysql", () => MysqlLeaseStore.layer.pipe(Layer.provide(clientLayer(url))))

// every test of the DLQ contract gets its own database: the contract counts and purges across routes
let databases = 0
const dlqIn = (database: string, options: MysqlDeadLetterStore.MysqlDeadLetterStoreOptions = {}) =>
  MysqlDeadLetterStore.layerWith({ database, ...options }).pipe(
    Layer.provideMerge(MysqlOutboxStore.layerWith({ database })),
    Layer.provideMerge(clientLayer(url))
  )
deadLetterStoreContract("mysql", () => dlqIn(`dlq_${++databases}`, { deleteChunk: 64 }))

sqlLeaseDlqSuite({
  name: "MySQL",
  leases: (database, connections) =>
    MysqlLeaseStore.layerWith({ database }).pipe(Layer.provideMerge(clientLayer(url, connections))),
  deadLetters: (database) => dlqIn(database),
  rejectPartitionRb: (database) =>
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      Effect.asVoid(
        sql.unsafe(`CREATE TRIGGER ${database}.reject BEFORE INSERT ON ${database}.outbox FOR EACH ROW
        BEGIN IF NEW.partition_key = 'rb' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'rejected'; END IF; END`)
          .unprepared
      )
    ),
  dropReject: (database) =>
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      Effect.asVoid(sql.unsafe(`DROP TRIGGER ${database}.reject`).unprepared)
    )
})
