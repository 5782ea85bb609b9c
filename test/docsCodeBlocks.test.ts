/**
 * Every ```ts block of README.md and docs/guide.md is a complete module that compiles: each is written
 * to its own file and type-checked with the project's compiler options, `effect-outbox` and its entries
 * (`effect-outbox/sqlite`, …) mapped to the entry files in src/ as the exports map maps them to dist/.
 * There are no fragment blocks: a block that does not compile fails here.
 */
import { describe, expect, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { afterAll } from "vitest"

const execFileAsync = promisify(execFile)
const repoRoot = fileURLToPath(new URL("..", import.meta.url))
const documents = ["README.md", path.join("docs", "guide.md")]

/** One fenced block: where it came from and its code. */
interface CodeBlock {
  readonly document: string
  readonly line: number
  readonly info: string
  readonly code: string
}

/** The fenced blocks of a Markdown text whose info string starts with `ts` or `typescript`. */
const typeScriptBlocks = (document: string, text: string): ReadonlyArray<CodeBlock> => {
  const blocks: Array<CodeBlock> = []
  const lines = text.split("\n")
  for (let index = 0; index < lines.length; index++) {
    const opening = /^```(ts|typescript)\b(.*)$/.exec(lines[index] ?? "")
    if (opening === null) continue
    const start = index
    const body: Array<string> = []
    for (index++; index < lines.length && lines[index] !== "```"; index++) body.push(lines[index] ?? "")
    blocks.push({ document, line: start + 1, info: (opening[2] ?? "").trim(), code: body.join("\n") + "\n" })
  }
  return blocks
}

fs.mkdirSync(path.join(repoRoot, ".tmp"), { recursive: true })
const directory = fs.mkdtempSync(path.join(repoRoot, ".tmp", "docs-blocks-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))

const blocks = documents.flatMap((document) =>
  typeScriptBlocks(document, fs.readFileSync(path.join(repoRoot, document), "utf8"))
)

const fileOf = (block: CodeBlock): string =>
  path.join(directory, `${block.document.replace(/[^A-Za-z0-9]+/g, "-")}-line-${block.line}.ts`)

describe("documentation code blocks", () => {
  it("README.md and docs/guide.md hold complete blocks only (no info string after the language)", () => {
    expect(blocks.filter((block) => block.document === "README.md").length).toBeGreaterThanOrEqual(1)
    expect(blocks.filter((block) => block.document !== "README.md").length).toBeGreaterThanOrEqual(7)
    expect(blocks.filter((block) => block.info !== "").map((block) => `${block.document}:${block.line}`)).toEqual([])
  })

  it("every block type-checks against the package's entries", { timeout: 240_000 }, async () => {
    const files = blocks.map((block) => {
      const file = fileOf(block)
      fs.writeFileSync(file, block.code)
      return path.basename(file)
    })
    const relativeRoot = path.relative(directory, repoRoot)
    fs.writeFileSync(
      path.join(directory, "tsconfig.json"),
      JSON.stringify({
        extends: path.join(relativeRoot, "tsconfig.json"),
        compilerOptions: {
          noEmit: true,
          paths: {
            "effect-outbox": [path.join(relativeRoot, "src", "index.ts")],
            "effect-outbox/*": [path.join(relativeRoot, "src", "*.ts")]
          }
        },
        include: [],
        exclude: [],
        files
      })
    )
    // a separate process: the checker runs for a while and must not block this worker
    const tsc = path.join(repoRoot, "node_modules", "typescript", "bin", "tsc")
    const result = await execFileAsync(process.execPath, [tsc, "-p", directory, "--listFiles", "--pretty", "false"], {
      cwd: repoRoot,
      maxBuffer: 64 * 1024 * 1024
    }).then(
      ({ stdout }) => ({ failed: false, stdout }),
      (error: unknown) => ({
        failed: true,
        stdout: typeof error === "object" && error !== null && "stdout" in error ? String(error.stdout) : String(error)
      })
    )
    const lines = result.stdout.split("\n").filter(Boolean)
    expect(lines.filter((line) => line.includes("error TS"))).toEqual([])
    expect(result.failed).toBe(false)
    const sources = lines.map((line) => path.relative(repoRoot, line))
    // the blocks compiled against the sources, not a stale build
    expect(sources).toContain(path.join("src", "index.ts"))
    expect(sources.filter((source) => source.startsWith("dist"))).toEqual([])
  })
})
