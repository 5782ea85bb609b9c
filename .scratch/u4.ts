import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.ts"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.ts"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.ts"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.ts"
import { OutboxStore } from "../src/services/OutboxStore.ts"
const r = (env: string, id?: string) => new NewOutboxRecord({ partitionKey: "p", envelopeId: env, bindingId: "b", payload: new Uint8Array([1]), ...(id ? { id } : {}) })
const prog = Effect.gen(function* () {
  const s = yield* OutboxStore
  yield* s.persist([r("e1", "x")])
  const e = yield* Effect.either(s.persist([r("e3"), r("e2", "x"), r("e4")]))
  console.log(JSON.stringify(e), e._tag === "Left" ? e.left.message : "")
})
await Effect.runPromise(prog.pipe(Effect.provide(MemoryOutboxStore.layer)))
await Effect.runPromise(prog.pipe(Effect.provide(SqliteOutboxStore.layer.pipe(Layer.provide(SqliteDatabase.layer({ filename: ":memory:" }))))))
