/**
 * Human-facing output stays inert: ESC, BEL, C1 and DEL from partition keys, routes and messages are
 * escaped in log lines, `inspect` and `dlq list` (tables and JSON), so a stored record cannot retitle or
 * clear the operator's terminal. One function, `Format.inert`, does the escaping.
 */
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"
import { DeadLetterEntry } from "../src/domain/DeadLetterEntry.js"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as SqliteDatabase from "../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteDeadLetterStore from "../src/layers/sqlite/SqliteDeadLetterStore.js"
import * as SqliteOutboxStore from "../src/layers/sqlite/SqliteOutboxStore.js"
import * as Format from "../src/programs/cli/Format.js"
import { stderrLogger } from "../src/programs/cli/Logging.js"
import { DeadLetterStore } from "../src/services/DeadLetterStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import { buildCli } from "./support/CliBundle.js"
import { cliRunner } from "./support/CliProcess.js"

const bundle = await buildCli()
afterAll(() => bundle.remove())
const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-escapes-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))
const { run } = cliRunner(bundle, directory)

/** An OSC title change, a screen clear (CSI 2J), an 8-bit CSI and DEL. */
const title = "\u001b]0;pwned\u0007"
const clear = "\u001b[2J\u001b[H"
const hostileKey = `p${title}${clear}\u009b31m\u007f`
const hostileRoute = `r${clear}`

/** Any control character a terminal acts on, except the line breaks between output lines. */
const raw = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/

describe("terminal escapes in human-facing output", { timeout: 60_000 }, () => {
  it("Format.inert escapes C0, DEL and C1 as \\uXXXX and leaves other text alone", () => {
    expect(Format.inert(`a${title}b`)).toBe("a\\u001b]0;pwned\\u0007b")
    expect(Format.inert("\u009b\u007f\t\n")).toBe("\\u009b\\u007f\\u0009\\u000a")
    expect(Format.inert("café ☕ 𝄞 ordinary")).toBe("café ☕ 𝄞 ordinary")
    expect(Format.inertLines(`one${clear}\ntwo`)).toBe("one\\u001b[2J\\u001b[H\ntwo")
    // inside JSON string literals the escapes decode to the same text
    expect(JSON.parse(Format.inert(JSON.stringify({ k: hostileKey })))).toEqual({ k: hostileKey })
  })

  it.effect("the CLI's log lines escape control characters in messages and annotations", () =>
    Effect.gen(function* () {
      const lines: Array<string> = []
      const capture = {
        ...globalThis.console,
        error: (...args: ReadonlyArray<unknown>) => {
          lines.push(args.map(String).join(" "))
        }
      }
      yield* Effect.logWarning(`sink failing for ${hostileKey}`).pipe(
        Effect.annotateLogs({ partition: hostileKey, route: hostileRoute }),
        Effect.provide(Logger.replace(Logger.defaultLogger, stderrLogger)),
        Effect.withConsole({
          ...(yield* Effect.console),
          unsafe: capture
        })
      )
      expect(lines).toHaveLength(1)
      expect(lines[0]).not.toMatch(raw)
      expect(lines[0]).toContain("\\u001b]0;pwned\\u0007")
      expect(lines[0]).toContain("\\u009b31m\\u007f")
    })
  )

  it("inspect and dlq list (table and --json) print no raw control character; JSON still decodes to the stored text", async () => {
    const file = path.join(directory, "escapes.db")
    await Effect.runPromise(
      Effect.gen(function* () {
        const store = yield* OutboxStore
        yield* store.persist([
          new NewOutboxRecord({
            partitionKey: hostileKey,
            envelopeId: `env${title}`,
            bindingId: "b",
            routeId: hostileRoute,
            payload: new TextEncoder().encode("{}")
          })
        ])
        const deadLetters = yield* DeadLetterStore
        yield* deadLetters.write(
          new DeadLetterEntry({
            id: "dlq-1",
            recordId: "rec-1",
            partitionKey: hostileKey,
            envelopeId: `env${title}`,
            bindingId: "b",
            payload: new TextEncoder().encode("{}"),
            headers: {},
            orderingKey: undefined,
            routeId: hostileRoute,
            address: undefined,
            category: "permanent",
            reason: `refused ${clear}`,
            errorCode: "http-400",
            lastError: `400 ${title}`,
            attempts: 1,
            failedAt: DateTime.unsafeMake(1_700_000_000_000)
          })
        )
      }).pipe(
        Effect.provide(
          Layer.mergeAll(
            SqliteOutboxStore.layer,
            SqliteDeadLetterStore.layer.pipe(Layer.provide(SqliteOutboxStore.layer))
          ).pipe(Layer.provide(SqliteDatabase.layer({ filename: file })))
        )
      )
    )
    for (const args of [
      ["inspect", "--sqlite-file", file],
      ["inspect", "--sqlite-file", file, "--json"],
      ["dlq", "list", "--sqlite-file", file],
      ["dlq", "list", "--sqlite-file", file, "--json"]
    ]) {
      const result = await run(args)
      expect(result.code, `${args.join(" ")}: ${result.stderr}`).toBe(0)
      expect(result.stdout, args.join(" ")).not.toMatch(raw)
      expect(result.stderr, args.join(" ")).not.toMatch(raw)
      expect(result.stdout, args.join(" ")).toContain("\\u001b")
    }
    const listed = await run(["dlq", "list", "--sqlite-file", file, "--json"])
    const entry: unknown = JSON.parse(listed.stdout.trim())
    expect(entry).toMatchObject({ partitionKey: hostileKey, routeId: hostileRoute, reason: `refused ${clear}` })
  })
})
