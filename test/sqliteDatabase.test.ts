/**
 * Opening a SQLite file: missing parent directories are created, and a path that cannot hold directories
 * (under /proc) fails at once with `StoreUnavailable` instead of spinning in a recursive mkdir.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"

const open = (filename: string) =>
  Effect.flatMap(OutboxStore, (store) => store.countPending("p")).pipe(
    Effect.provide(SqliteOutboxStore.layer.pipe(Layer.provide(SqliteDatabase.layer({ filename }))))
  )

describe("SqliteDatabase", () => {
  it.live("creates every missing parent directory of the file", () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-sqlite-open-"))
    const filename = path.join(root, "a", "b", "c", "outbox.db")
    return open(filename).pipe(
      Effect.map((pending) => {
        expect(pending).toBe(0)
        expect(fs.existsSync(filename)).toBe(true)
      }),
      Effect.ensuring(Effect.sync(() => fs.rmSync(root, { recursive: true, force: true })))
    )
  })

  it.live("fails with StoreUnavailable at once for a file under /proc (no directory can be made there)", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(open(`/proc/outbox-${process.pid}/x/y.db`)).pipe(Effect.timeout("10 seconds"))
      expect(error._tag).toBe("StoreUnavailable")
    })
  )
})
