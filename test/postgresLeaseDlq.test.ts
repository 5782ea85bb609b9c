/**
 * The lease and dead-letter contracts on PostgreSQL, plus the server-SQL lease/DLQ tests
 * (test/support/SqlLeaseDlqSuite.ts).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { inject } from "vitest"
import * as PostgresDeadLetterStore from "../src/layers/postgres/PostgresDeadLetterStore.js"
import * as PostgresLeaseStore from "../src/layers/postgres/PostgresLeaseStore.js"
import * as PostgresOutboxStore from "../src/layers/postgres/PostgresOutboxStore.js"
import { deadLetterStoreContract } from "./contract/DeadLetterStoreContract.js"
import { leaseStoreContract } from "./contract/LeaseStoreContract.js"
import { clientLayer, createDatabase } from "./support/PostgresServer.js"
import { sqlLeaseDlqSuite } from "./support/SqlLeaseDlqSuite.js"

const url = await createDatabase(inject("postgresUrl"), "lease_dlq")

leaseStoreContract("postgres", () => PostgresLeaseStore.layer.pipe(Layer.provide(clientLayer(url))))

// every test of the DLQ contract gets its own schema: the contract counts and purges across routes
let schemas = 0
const dlqIn = (schema: string, options: PostgresDeadLetterStore.PostgresDeadLetterStoreOptions = {}) =>
  PostgresDeadLetterStore.layerWith({ schema, ...options }).pipe(
    Layer.provideMerge(PostgresOutboxStore.layerWith({ schema })),
    Layer.provideMerge(clientLayer(url))
  )
deadLetterStoreContract("postgres", () => dlqIn(`dlq_${++schemas}`, { deleteChunk: 64 }))

sqlLeaseDlqSuite({
  name: "PostgreSQL",
  leases: (schema, connections) =>
    PostgresLeaseStore.layerWith({ schema }).pipe(Layer.provideMerge(clientLayer(url, connections))),
  deadLetters: (schema) => dlqIn(schema),
  rejectPartitionRb: (schema) =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql.unsafe(`CREATE FUNCTION ${schema}.reject() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF NEW.partition_key = 'rb' THEN RAISE EXCEPTION 'rejected'; END IF; RETURN NEW; END $$`)
      yield* sql.unsafe(`CREATE TRIGGER reject BEFORE INSERT ON ${schema}.outbox FOR EACH ROW
        EXECUTE FUNCTION ${schema}.reject()`)
    }),
  dropReject: (schema) =>
    Effect.asVoid(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`DROP TRIGGER reject ON ${schema}.outbox`)))
})
