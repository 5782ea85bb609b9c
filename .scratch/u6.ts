import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "@effect/sql/SqlClient"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.ts"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.ts"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.ts"
import { OutboxStore } from "../src/services/OutboxStore.ts"
import * as fs from "node:fs"
fs.rmSync("/tmp/clitry/small/full.db", { force: true }); fs.rmSync("/tmp/clitry/small/full.db-wal", { force: true })
const r = (env: string) => new NewOutboxRecord({ partitionKey: "p", envelopeId: env, bindingId: "b", payload: new Uint8Array(2000) })
const prog = Effect.gen(function* () {
  const s = yield* OutboxStore
  const sql = yield* SqlClient.SqlClient
  const pages = yield* sql.unsafe("PRAGMA page_count")
  console.log(pages)
  
  for (let i = 0; i < 30; i++) {
    const e = yield* Effect.either(s.persist(Array.from({ length: 10 }, (_, j) => r(`e${i}-${j}`))))
    console.log(i, e._tag, e._tag === "Left" ? e.left.message : "", e._tag === "Left" ? String((e.left as any).cause?.cause?.code) : "")
  }
})
await Effect.runPromise(prog.pipe(Effect.provide(SqliteOutboxStore.layer.pipe(Layer.provideMerge(SqliteDatabase.layer({ filename: "/tmp/clitry/small/full.db" }))))))
