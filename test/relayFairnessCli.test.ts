/**
 * The command-line reproduction of starving partitions (SPEC §6): `relay stdout --max-partitions 5` over
 * a SQLite file with 20 partitions of one record each delivers all 20, then `inspect` shows no pending
 * record and no partition left waiting for a lease.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Schema from "effect/Schema"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"
import { buildCli } from "./support/CliBundle.js"
import { cliRunner, finish, waitFor } from "./support/CliProcess.js"

const bundle = await buildCli()
afterAll(() => bundle.remove())
const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-fair-cli-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))

const { run, spawnCli } = cliRunner(bundle, directory)

const Inspect = Schema.Struct({
  totals: Schema.Struct({ pending: Schema.Number, claimed: Schema.Number }),
  unleased: Schema.Struct({ partitions: Schema.Number, oldestPendingAgeMillis: Schema.NullOr(Schema.Number) })
})

describe("relay --max-partitions through the CLI", { timeout: 180_000 }, () => {
  it("relay stdout --max-partitions 5 with 20 partitions of one record each delivers all 20", async () => {
    const file = path.join(directory, "outbox.db")
    const records = Array.from({ length: 20 }, (_, n) => ({
      partitionKey: `customer-${n}`,
      envelopeId: `env-${n}`,
      bindingId: "b",
      payload: { n }
    }))
    const enqueued = await run(["enqueue", "--sqlite-file", file], records.map((r) => JSON.stringify(r)).join("\n"))
    expect(enqueued.code, enqueued.stderr).toBe(0)
    const before = Schema.decodeUnknownSync(Schema.parseJson(Inspect))(
      (await run(["inspect", "--sqlite-file", file, "--json"])).stdout
    )
    expect(before.unleased.partitions).toBe(20)

    const relay = spawnCli(["relay", "stdout", "--sqlite-file", file, "--owner", "fair-cli", "--max-partitions", "5"])
    const { exited, output } = finish(relay)
    const delivered = () =>
      new Set(
        output.stdout
          .split("\n")
          .filter((line) => line.length > 0)
          .map((line) =>
            Schema.decodeUnknownSync(Schema.parseJson(Schema.Struct({ partitionKey: Schema.String })))(line)
          )
          .map((r) => r.partitionKey)
      )
    await waitFor("all 20 partitions delivered", () => delivered().size === 20, 90_000)
    relay.kill("SIGTERM")
    expect(await exited, output.stderr).toBe(0)
    expect(delivered()).toEqual(new Set(records.map((r) => r.partitionKey)))

    const after = Schema.decodeUnknownSync(Schema.parseJson(Inspect))(
      (await run(["inspect", "--sqlite-file", file, "--json"])).stdout
    )
    expect(after.totals).toEqual({ pending: 0, claimed: 0 })
    expect(after.unleased).toEqual({ partitions: 0, oldestPendingAgeMillis: null })
  })
})
