/**
 * The package as users install it (SPEC §9): `npm pack` (its `prepack` builds dist/), the tarball's
 * contents, and a consumer project outside the repository installed offline from the tarball with SQLite
 * only — no `@aws-sdk/client-dynamodb`, no `@effect/opentelemetry`. The consumer's program
 * (test/support/consumer/project/app.ts) type-checks with `strict` + `skipLibCheck` under NodeNext and
 * under Bundler, runs with plain `node` and as an esbuild ESM bundle.
 */
import { describe, expect, it } from "@effect/vitest"
import { build } from "esbuild"
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { afterAll, beforeAll } from "vitest"
import * as ConsumerProject from "./support/consumer/ConsumerProject.js"

const repoRoot = fileURLToPath(new URL("..", import.meta.url))
const projectSources = path.join(repoRoot, "test", "support", "consumer", "project")
const workDirectory = fs.mkdtempSync(path.join(os.tmpdir(), "effect-outbox-pack-"))
const consumer = path.join(workDirectory, "consumer")
let tarballFiles: ReadonlyArray<string> = []
let nodeNextCheck: CommandResult = { status: null, output: "" }
let bundlerCheck = nodeNextCheck
let rootBundleInputs: ReadonlyArray<string> = []
let appBundleInputs: ReadonlyArray<string> = []

/** What a finished command reported. */
interface CommandResult {
  readonly status: number | null
  readonly output: string
}

const execFileAsync = promisify(execFile)

/** Runs a command, returning its exit status and combined output (stdout, then stderr). */
const run = (command: string, args: ReadonlyArray<string>, cwd: string): Promise<CommandResult> =>
  execFileAsync(command, args, { cwd, encoding: "utf8" }).then(
    ({ stdout, stderr }) => ({ status: 0, output: `${stdout}${stderr}` }),
    (error: unknown) => ({ status: exitCodeOf(error), output: outputOf(error) })
  )

/** The exit code carried by a failed `execFile`. */
const exitCodeOf = (error: unknown): number | null =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "number" ? error.code : null

/** The stdout and stderr carried by a failed `execFile` (or its message). */
const outputOf = (error: unknown): string => {
  if (typeof error !== "object" || error === null) return String(error)
  const stdout = "stdout" in error && typeof error.stdout === "string" ? error.stdout : ""
  const stderr = "stderr" in error && typeof error.stderr === "string" ? error.stderr : ""
  return stdout + stderr || ("message" in error ? String(error.message) : "")
}

const tsc = (project: string) =>
  run(process.execPath, [path.join(repoRoot, "node_modules", "typescript", "bin", "tsc"), "-p", project], consumer)

/** Bundles `entry` (a file of the consumer) into `outfile` and returns the package files it reads. */
const bundle = async (entry: string, outfile: string): Promise<ReadonlyArray<string>> => {
  const result = await build({
    absWorkingDir: consumer,
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    external: ["better-sqlite3"],
    metafile: true,
    logLevel: "silent"
  })
  return Object.keys(result.metafile.inputs)
}

/** The package a bundled input file belongs to (`@scope/name` or `name`), or undefined outside node_modules. */
const packageOf = (input: string): string | undefined => {
  const at = input.lastIndexOf("node_modules/")
  if (at < 0) return undefined
  const parts = input.slice(at + "node_modules/".length).split("/")
  return parts[0]?.startsWith("@") === true ? `${parts[0]}/${parts[1]}` : parts[0]
}

const driverPackages =
  /^(?:@aws-sdk\/|@effect\/opentelemetry$|@opentelemetry\/|@effect\/sql-pg$|pg$|nats$|amqplib$|@effect\/cli$|@effect\/platform-node|undici$|tsx$)/

beforeAll(async () => {
  const packed = await run("npm", ["pack", "--pack-destination", workDirectory, "--loglevel=error"], repoRoot)
  if (packed.status !== 0) throw new Error(`npm pack failed:\n${packed.output}`)
  const tarball = fs.readdirSync(workDirectory).find((name) => name.endsWith(".tgz"))
  if (tarball === undefined) throw new Error("npm pack wrote no tarball")
  const tarballPath = path.join(workDirectory, tarball)
  tarballFiles = (await run("tar", ["-tzf", tarballPath], workDirectory)).output.split("\n").filter(Boolean)
  await ConsumerProject.install({
    repoRoot,
    directory: consumer,
    tarball: tarballPath,
    dependencies: [
      "effect",
      "@effect/platform",
      "@effect/sql",
      "@effect/experimental",
      "@effect/sql-sqlite-node",
      "@types/node"
    ]
  })
  for (const file of fs.readdirSync(projectSources)) {
    fs.copyFileSync(path.join(projectSources, file), path.join(consumer, file))
  }
  fs.writeFileSync(
    path.join(consumer, "root-only.mjs"),
    'import * as Outbox from "effect-outbox"\nconsole.log(Object.keys(Outbox).length)\n'
  )
  ;[nodeNextCheck, bundlerCheck, rootBundleInputs, appBundleInputs] = await Promise.all([
    tsc("tsconfig.nodenext.json"),
    tsc("tsconfig.bundler.json"),
    bundle("root-only.mjs", path.join("bundle", "root-only.mjs")),
    bundle("app.ts", path.join("bundle", "app.mjs"))
  ])
}, 300_000)

afterAll(() => fs.rmSync(workDirectory, { recursive: true, force: true }))

describe("the packed package", () => {
  it("ships built ESM, declarations, source maps, the bin, LICENSE and CHANGELOG — no sources, tests or benchmarks", () => {
    for (const file of [
      "package/package.json",
      "package/README.md",
      "package/LICENSE",
      "package/CHANGELOG.md",
      "package/bin/effect-outbox.js",
      "package/dist/index.js",
      "package/dist/index.d.ts",
      "package/dist/index.js.map",
      "package/dist/sqlite.js",
      "package/dist/dynamodb.js",
      "package/dist/otel.js",
      "package/dist/programs/cli/main.js"
    ]) {
      expect(tarballFiles).toContain(file)
    }
    const stray = tarballFiles.filter(
      (file) =>
        /^package\/(?:src|test|bench|examples|\.ci|node_modules)\//.test(file) ||
        (file.endsWith(".ts") && !file.endsWith(".d.ts"))
    )
    expect(stray).toEqual([])
  })

  it("every entry file beside src/index.ts has an exports entry with types and import conditions, shipped", () => {
    const manifest: unknown = JSON.parse(fs.readFileSync(path.join(repoRoot, "package.json"), "utf8"))
    const exportsMap =
      typeof manifest === "object" && manifest !== null && "exports" in manifest ? manifest.exports : undefined
    const entries = fs
      .readdirSync(path.join(repoRoot, "src"))
      .filter((file) => file.endsWith(".ts"))
      .map((file) => file.slice(0, -".ts".length))
    for (const entry of entries) {
      const key = entry === "index" ? "." : `./${entry}`
      expect(exportsMap).toHaveProperty([key], { types: `./dist/${entry}.d.ts`, import: `./dist/${entry}.js` })
      expect(tarballFiles).toContain(`package/dist/${entry}.js`)
      expect(tarballFiles).toContain(`package/dist/${entry}.d.ts`)
    }
  })
})

describe("a SQLite-only consumer of the tarball", () => {
  it("has no DynamoDB or OpenTelemetry package installed", () => {
    expect(fs.existsSync(path.join(consumer, "node_modules", "effect-outbox", "dist", "index.js"))).toBe(true)
    expect(fs.existsSync(path.join(consumer, "node_modules", "@aws-sdk"))).toBe(false)
    expect(fs.existsSync(path.join(consumer, "node_modules", "@effect", "opentelemetry"))).toBe(false)
    expect(fs.existsSync(path.join(consumer, "node_modules", "tsx"))).toBe(false)
  })

  it("type-checks (strict, skipLibCheck, no exactOptionalPropertyTypes) under moduleResolution NodeNext", () => {
    expect(nodeNextCheck.output).toBe("")
    expect(nodeNextCheck.status).toBe(0)
  })

  it("type-checks under moduleResolution Bundler", () => {
    expect(bundlerCheck.output).toBe("")
    expect(bundlerCheck.status).toBe(0)
  })

  it("runs with plain node: SQLite transaction commit and rollback, a Relay to a custom Sink, the memory layers", async () => {
    const result = await run(process.execPath, [path.join("out", "app.js")], consumer)
    expect(result.output.split("\n").filter((line) => /^(?:ok |consumer ok)/.test(line))).toEqual([
      'ok sqlite transaction: {"orders":["A1"],"rejected":"rolled back A2"}',
      'ok sqlite pending after rollback: ["placed-A1"]',
      'ok relay to custom sink: ["placed-A1","placed-B1","placed-B2","sent-C1"]',
      "ok nothing pending after relay: 0",
      'ok memory enqueue backpressure: "OutboxFull"',
      'ok memory claim and complete: {"claimed":2,"pending":0}',
      "consumer ok"
    ])
    expect(result.status).toBe(0)
  })

  it("loads effect-outbox/sqlite without the AWS SDK; effect-outbox/dynamodb names the missing driver", async () => {
    const sqlite = await run(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        'const m = await import("effect-outbox/sqlite"); console.log(Object.keys(m).join())'
      ],
      consumer
    )
    expect(sqlite.output.trim()).toBe(
      "SqliteDatabase,SqliteDeadLetterStore,SqliteInspection,SqliteLeaseStore,SqliteOutboxStore,SqliteWakeSignal"
    )
    const dynamodb = await run(
      process.execPath,
      ["--input-type=module", "-e", 'await import("effect-outbox/dynamodb")'],
      consumer
    )
    expect(dynamodb.status).not.toBe(0)
    expect(dynamodb.output).toContain("Cannot find package '@aws-sdk/client-dynamodb'")
  })

  it("the root and /sqlite entries pull in no driver, exporter, CLI package or tsx", () => {
    const rootPackages = new Set(rootBundleInputs.map(packageOf))
    expect([...rootPackages].filter((name) => name !== undefined && driverPackages.test(name))).toEqual([])
    expect(rootPackages.has("@effect/sql")).toBe(false)
    const appPackages = new Set(appBundleInputs.map(packageOf))
    expect([...appPackages].filter((name) => name !== undefined && driverPackages.test(name))).toEqual([])
    expect(appPackages.has("@effect/sql-sqlite-node")).toBe(true)
  })

  it("runs as an esbuild ESM bundle", async () => {
    const result = await run(process.execPath, [path.join("bundle", "app.mjs")], consumer)
    expect(result.output).toContain("consumer ok")
    expect(result.status).toBe(0)
  })
})
