/**
 * The command line in a fresh clone after `npm ci`: no `dist/` (nothing was built), the dependencies
 * installed. `npx effect-outbox …` runs the sources through tsx, as the README's quick start says. The clone
 * is a copy of what git holds for the command (package.json, tsconfig.json, bin/, src/) with the project's
 * node_modules linked in.
 */
import { describe, expect, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"
import { baseEnv, finish } from "./support/CliProcess.js"
import { projectRoot } from "./support/CliBundle.js"

const clone = fs.mkdtempSync(path.join(os.tmpdir(), "effect-outbox-clone-"))
for (const entry of ["package.json", "tsconfig.json", "bin", "src"]) {
  fs.cpSync(path.join(projectRoot, entry), path.join(clone, entry), { recursive: true })
}
fs.symlinkSync(path.join(projectRoot, "node_modules"), path.join(clone, "node_modules"), "dir")
afterAll(() => fs.rmSync(clone, { recursive: true, force: true }))

const npx = async (args: ReadonlyArray<string>, input = "") => {
  const child = spawn("npx", ["--offline", "effect-outbox", ...args], { cwd: clone, env: baseEnv() })
  const { exited, output } = finish(child, input)
  const code = await exited
  return { code, ...output }
}

describe("npx effect-outbox in a fresh clone (no dist/)", () => {
  it("enqueue then inspect work from the sources, without a build", { timeout: 120_000 }, async () => {
    expect(fs.existsSync(path.join(clone, "dist"))).toBe(false)
    const line = JSON.stringify({ partitionKey: "orders", envelopeId: "e-1", bindingId: "hook", payload: "hi" })
    const enqueued = await npx(["enqueue", "--sqlite-file", "clone.db"], `${line}\n`)
    expect(enqueued.stderr).not.toContain("Cannot find module")
    expect(enqueued.code).toBe(0)
    const inspected = await npx(["inspect", "--sqlite-file", "clone.db", "--json"])
    expect(inspected.stderr).toBe("")
    expect(inspected.code).toBe(0)
    expect(inspected.stdout).toContain('"orders"')
  })
})
