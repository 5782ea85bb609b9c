import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import { type ContractLayerOptions, outboxStoreContract } from "./contract/OutboxStoreContract.js"

const capabilities = { multiIdAtomic: false } as const

const storeOn = (filename: string) => (options: ContractLayerOptions) =>
  SqliteOutboxStore.layerWith(
    options.staleClaimAfter === undefined ? {} : { staleClaimAfter: options.staleClaimAfter }
  ).pipe(Layer.provide(SqliteDatabase.layer({ filename })))

outboxStoreContract("sqlite-memory", storeOn(":memory:"), capabilities)

// one temporary file shared by every test of the file (each test uses its own partitions)
const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-sqlite-contract-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))

outboxStoreContract("sqlite-file", storeOn(path.join(directory, "outbox.db")), capabilities)
