/**
 * The package as users install it (SPEC §9): `npm pack` (its `prepack` builds dist/ and the command-line
 * bundle dist/cli/), the tarball's contents, and a consumer project outside the repository installed
 * offline from the tarball with SQLite only — no `@aws-sdk/client-dynamodb`, no `@effect/opentelemetry`,
 * no command-line package. The consumer's program (test/support/consumer/project/app.ts) type-checks with
 * `strict` + `skipLibCheck` under NodeNext and under Bundler, runs with plain `node` and as an esbuild ESM
 * bundle; `npx effect-outbox` works there. A second consumer installs exactly what docs/guide.md's first
 * install line names and runs the guide's first code block.
 */
import { describe, expect, it } from "@effect/vitest"
import { build } from "esbuild"
import { execFile, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { afterAll, beforeAll } from "vitest"
import * as ConsumerProject from "./support/consumer/ConsumerProject.js"
import { baseEnv, finish, waitFor } from "./support/CliProcess.js"
import * as InstallLine from "./support/InstallLine.js"

const repoRoot = fileURLToPath(new URL("..", import.meta.url))
const projectSources = path.join(repoRoot, "test", "support", "consumer", "project")
const workDirectory = fs.mkdtempSync(path.join(os.tmpdir(), "effect-outbox-pack-"))
const consumer = path.join(workDirectory, "consumer")
const guideConsumer = path.join(workDirectory, "guide-consumer")
const guide = fs.readFileSync(path.join(repoRoot, "docs", "guide.md"), "utf8")
/** The guide's first install line (the packages besides effect-outbox) and its first code block. */
const guideInstall = InstallLine.npmInstallLines(guide)[0]
const guideBlock = InstallLine.typeScriptBlocks(guide)[0] ?? ""
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

/** `npx effect-outbox …` in a consumer project (offline: the bin is the installed package's). */
const npx = async (cwd: string, args: ReadonlyArray<string>, input = "", env: Record<string, string> = {}) => {
  const child = spawn("npx", ["--offline", "effect-outbox", ...args], { cwd, env: { ...baseEnv(), ...env } })
  const { exited, output } = finish(child, input)
  const code = await exited
  return { code, ...output }
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
  /^(?:@aws-sdk\/|@effect\/opentelemetry$|@opentelemetry\/|@effect\/sql-pg$|pg$|@effect\/sql-mysql2$|mysql2$|nats$|amqplib$|@effect\/cli$|@effect\/platform-node|undici$|tsx$)/

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
  if (guideInstall === undefined) throw new Error("docs/guide.md has no npm install line")
  await ConsumerProject.install({
    repoRoot,
    directory: guideConsumer,
    tarball: tarballPath,
    dependencies: guideInstall.packages.map((spec) => spec.name).filter((name) => name !== "effect-outbox"),
    ranges: Object.fromEntries(
      guideInstall.packages.flatMap((spec) => (spec.range === undefined ? [] : [[spec.name, spec.range]]))
    )
  })
  // the block as the guide shows it, its types stripped (a transform, no bundling: imports stay imports)
  const { transform } = await import("esbuild")
  fs.writeFileSync(
    path.join(guideConsumer, "guide-first.mjs"),
    (await transform(guideBlock, { loader: "ts", format: "esm", target: "node20" })).code
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
  it("ships built ESM, declarations, source maps, the bin, LICENSE, CHANGELOG and deploy/ — no sources, tests or benchmarks", () => {
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
      "package/dist/cli/main.mjs",
      "package/schemas/webhook-body.schema.json",
      "package/deploy/prometheus/outbox-alerts.yml",
      "package/deploy/prometheus/outbox-alerts.test.yml",
      "package/deploy/grafana/effect-outbox.json"
    ]) {
      expect(tarballFiles).toContain(file)
    }
    // the command line ships as its bundle only
    expect(tarballFiles.filter((file) => file.startsWith("package/dist/programs/cli/"))).toEqual([])
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
  it("has no command-line package installed: @effect/cli, @effect/printer*, @effect/platform-node, their trees", () => {
    for (const name of [
      "@effect/cli",
      "@effect/printer",
      "@effect/printer-ansi",
      "@effect/platform-node",
      "@effect/platform-node-shared",
      "@effect/cluster",
      "@effect/rpc",
      "@effect/workflow",
      "undici",
      "ws"
    ]) {
      expect(fs.existsSync(path.join(consumer, "node_modules", ...name.split("/"))), name).toBe(false)
    }
  })

  it("npx effect-outbox --help and a SQLite enqueue/inspect work with the bundled command line", async () => {
    const help = await npx(consumer, ["--help"])
    expect(help.stderr).toBe("")
    expect(help.stdout).toContain("- relay")
    expect(help.code).toBe(0)
    const relayHelp = await npx(consumer, ["relay", "--help"])
    expect(relayHelp.stdout).toContain("$ effect-outbox relay")
    expect(relayHelp.code).toBe(0)
    const line = JSON.stringify({ partitionKey: "orders", envelopeId: "e-1", bindingId: "hook", payload: "hi" })
    const enqueued = await npx(consumer, ["enqueue", "--sqlite-file", "cli.db"], `${line}\n`)
    expect(enqueued.code).toBe(0)
    const inspected = await npx(consumer, ["inspect", "--sqlite-file", "cli.db", "--json"])
    expect(inspected.stdout).toContain('"orders"')
    expect(inspected.code).toBe(0)
  }, 240_000)

  it("with OTEL_EXPORTER_OTLP_ENDPOINT set and no @effect/opentelemetry: one WARN line naming it, and the command runs", async () => {
    const result = await npx(consumer, ["inspect", "--backend", "memory"], "", {
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9"
    })
    const lines = result.stderr.split("\n").filter(Boolean)
    expect(lines).toHaveLength(1)
    expect(lines[0]).toContain("level=WARN")
    expect(lines[0]).toContain("@effect/opentelemetry is not installed")
    expect(lines[0]).toContain("running without telemetry")
    expect(result.stdout).toContain("dead letters")
    expect(result.code).toBe(0)
  }, 120_000)

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
      "SqliteCheckpoint,SqliteDatabase,SqliteDeadLetterStore,SqliteInboxStore,SqliteInspection,SqliteLeaseStore,SqliteOutboxStore,SqliteWakeSignal"
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

describe("a consumer installing exactly the guide's first install line", () => {
  it("the install line pins the Effect 3 line and the consumer has what it names", () => {
    expect(guideInstall?.packages.find((spec) => spec.name === "effect")?.range).toBe("^3.22")
    for (const spec of guideInstall?.packages ?? []) {
      expect(fs.existsSync(path.join(guideConsumer, "node_modules", ...spec.name.split("/"), "package.json"))).toBe(
        true
      )
    }
  })

  it("runs the guide's first code block (a relay on SQLite with effect-outbox/otel) and stops it on SIGTERM", async () => {
    const child = spawn(process.execPath, ["guide-first.mjs"], { cwd: guideConsumer, env: baseEnv() })
    const { exited, output } = finish(child)
    try {
      // the block logs the library's counters once at start, then once a minute
      await waitFor("the relay's first log line", () => output.stdout.includes("INFO") || child.exitCode !== null)
      expect(output.stderr).not.toContain("ERR_MODULE_NOT_FOUND")
      expect(fs.existsSync(path.join(guideConsumer, ".data", "outbox.db"))).toBe(true)
      child.kill("SIGTERM")
      expect(await exited).toBe(0)
      expect(output.stdout).toContain("relay stopped")
      expect(output.stderr).toBe("")
    } finally {
      child.kill("SIGKILL")
    }
  }, 120_000)
})
