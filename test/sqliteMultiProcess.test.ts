/**
 * Several OS processes drain one SQLite WAL file at the same time (SPEC §3.2); the test itself is
 * test/support/MultiProcessDrainSuite.ts. No SQLITE_BUSY may reach a caller.
 */
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import { multiProcessDrainSuite } from "./support/MultiProcessDrainSuite.js"

multiProcessDrainSuite({
  name: "SQLite",
  shared: "one WAL file",
  worker: "sqlite",
  failure: "SQLITE_BUSY",
  makeTarget: async () => {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-sqlite-mp-"))
    const dbFile = path.join(directory, "outbox.db")
    return {
      location: dbFile,
      layer: Layer.provideMerge(SqliteOutboxStore.layer, SqliteDatabase.layer({ filename: dbFile })),
      cleanup: () => fs.rmSync(directory, { recursive: true, force: true })
    }
  },
  types: {
    autoId: "INTEGER PRIMARY KEY AUTOINCREMENT",
    integer: "INTEGER",
    text: "TEXT",
    number: "INTEGER"
  }
})
