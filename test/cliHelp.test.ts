/**
 * What the command line prints for help and for a relay without a sink, read through a pipe (as in CI, a
 * pager or a log): no ANSI styles, no padding runs, usage lines with the full command path, variadic
 * arguments that may be left out shown as optional, and the plain-text table of `inspect` naming a healthy
 * head "ok" as the dashboard does.
 */
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"
import { buildCli } from "./support/CliBundle.js"
import { cliRunner } from "./support/CliProcess.js"

const bundle = await buildCli()
afterAll(() => bundle.remove())
const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-cli-help-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))
const { run } = cliRunner(bundle, directory)

/** The longest run of spaces in a text. */
const longestSpaceRun = (text: string): number => Math.max(0, ...[...text.matchAll(/ +/g)].map((m) => m[0].length))

describe("--help through a pipe", () => {
  it("has no ANSI styles and no padding runs, with or without NO_COLOR", async () => {
    for (const args of [["--help"], ["relay", "--help"], ["dlq", "--help"], ["dlq", "redrive", "--help"]]) {
      for (const env of [{}, { NO_COLOR: "1" }]) {
        const result = await run(args, "", env)
        expect(result.code, args.join(" ")).toBe(0)
        expect(result.stdout).not.toContain("\u001b")
        expect(longestSpaceRun(result.stdout), args.join(" ")).toBeLessThan(20)
      }
    }
  })

  it("usage lines name the full command: $ effect-outbox relay, $ effect-outbox dlq redrive", async () => {
    const relay = await run(["relay", "--help"])
    expect(relay.stdout).toMatch(/^\$ effect-outbox relay /m)
    expect(relay.stdout).not.toMatch(/^\$ relay/m)
    const redrive = await run(["dlq", "redrive", "--help"])
    expect(redrive.stdout).toMatch(/^\$ effect-outbox dlq redrive /m)
  })

  it("arguments that may be left out are shown as optional: [--header text]..., [<id>...]", async () => {
    const relay = await run(["relay", "--help"])
    expect(relay.stdout).toContain("[--header text]...")
    expect(relay.stdout).not.toMatch(/[^[]--header text\.\.\./)
    const redrive = await run(["dlq", "redrive", "--help"])
    expect(redrive.stdout).toContain("[<id>...]")
    expect(redrive.stdout).not.toMatch(/ <id>\.\.\./)
  })

  it("the command table lists each command with its description, one line each", async () => {
    const root = await run(["--help"])
    expect(root.stdout).toMatch(/^ {2}- relay +Run a relay/m)
    expect(root.stdout).toMatch(/^ {2}- dlq redrive +Re-enqueue dead-letter entries/m)
  })
})

describe("messages a new user meets", () => {
  it("relay without a sink names every sink form (exit 2)", async () => {
    const result = await run(["relay", "--backend", "memory"])
    expect(result.code).toBe(2)
    for (const form of ["relay webhook <url>", "relay nats <url>", "relay rabbitmq <url>", "relay stdout"]) {
      expect(result.stderr).toContain(form)
    }
  })

  it("inspect's head column says ok where the dashboard does; counts read 1 record, 1 line", async () => {
    const file = path.join(directory, "head.db")
    const line = JSON.stringify({ partitionKey: "orders", envelopeId: "e-1", bindingId: "hook", payload: "x" })
    const enqueued = await run(["enqueue", "--sqlite-file", file], `${line}\n`)
    expect(enqueued.stdout).toContain("enqueued 1 record (0 duplicates skipped, 0 lines rejected) from 1 line in")
    const inspected = await run(["inspect", "--sqlite-file", file])
    expect(inspected.code).toBe(0)
    const [header, , row] = inspected.stdout.split("\n").filter((text) => /^(partition|---|orders)/.test(text))
    const headAt = header?.indexOf("head") ?? -1
    expect(headAt).toBeGreaterThan(0)
    expect(row?.slice(headAt, headAt + 4)).toBe("ok  ")
  })
})
