/**
 * What a new user reads first, checked against the repository: install lines pin the Effect 3 line and name
 * every package the code next to them imports, README links work from the npm page (absolute), the test
 * prerequisites are the ones scripts/test-servers.sh installs, the examples are listed and import the
 * package by name, and package.json says where the repository is.
 */
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as InstallLine from "./support/InstallLine.js"

const repoRoot = fileURLToPath(new URL("..", import.meta.url))
const read = (file: string): string => fs.readFileSync(path.join(repoRoot, file), "utf8")
const readme = read("README.md")
const guide = read(path.join("docs", "guide.md"))
const documents: ReadonlyArray<readonly [string, string]> = [
  ["README.md", readme],
  ...fs
    .readdirSync(path.join(repoRoot, "docs"))
    .filter((file) => file.endsWith(".md"))
    .map((file) => [`docs/${file}`, read(path.join("docs", file))] as const)
]

const Manifest = (): {
  readonly repository?: { readonly url?: string }
  readonly dependencies?: Record<string, string>
  readonly peerDependencies: Record<string, string>
  readonly devDependencies: Record<string, string>
} => JSON.parse(read("package.json"))

/** `major.minor` of a version or range (`^0.97.2` → `0.97`, `3.22.4` → `3.22`). */
const line = (version: string): string => /(\d+)\.(\d+)/.exec(version)?.slice(1, 3).join(".") ?? version

describe("install lines (README.md, docs/*.md)", () => {
  const lines = documents.flatMap(([document, text]) =>
    InstallLine.npmInstallLines(text).map((install) => ({ document, install }))
  )

  it("there are install lines in README.md and docs/guide.md", () => {
    expect(lines.map((entry) => entry.document)).toEqual(expect.arrayContaining(["README.md", "docs/guide.md"]))
  })

  it("every effect and @effect/* package on an install line is pinned to the Effect 3 line of package.json", () => {
    const manifest = Manifest()
    const unpinned: Array<string> = []
    for (const { document, install } of lines) {
      for (const spec of install.packages) {
        if (spec.name !== "effect" && !spec.name.startsWith("@effect/")) continue
        const ours =
          manifest.peerDependencies[spec.name] ??
          manifest.dependencies?.[spec.name] ??
          manifest.devDependencies[spec.name]
        if (spec.range === undefined || ours === undefined || line(spec.range) !== line(ours)) {
          unpinned.push(`${document}: ${spec.name}${spec.range === undefined ? "" : `@${spec.range}`}`)
        }
        if (spec.range !== undefined) expect(spec.range).toMatch(/^\^\d+\.\d+/)
      }
    }
    expect(unpinned).toEqual([])
    // the Effect 3 line, never a bare `effect`
    expect(lines.every(({ install }) => install.packages.some((spec) => spec.name === "effect"))).toBe(true)
    expect(lines.flatMap(({ install }) => install.packages.filter((spec) => spec.name === "effect"))).toSatisfy(
      (specs: ReadonlyArray<InstallLine.PackageSpec>) => specs.every((spec) => spec.range === "^3.22")
    )
  })

  it("the guide's first install line names every package its first code block imports (entries included)", () => {
    const install = InstallLine.npmInstallLines(guide)[0]
    const block = InstallLine.typeScriptBlocks(guide)[0]
    expect(install).toBeDefined()
    expect(block).toBeDefined()
    const installed = new Set(install?.packages.map((spec) => spec.name))
    const needed = InstallLine.packagesNeededBy(block ?? "")
    expect(needed).toEqual(
      expect.arrayContaining(["effect-outbox", "@effect/platform-node", "@effect/opentelemetry", "effect"])
    )
    expect(needed.filter((name) => !installed.has(name))).toEqual([])
  })

  it("README's install line names every package README's first code block imports", () => {
    const install = InstallLine.npmInstallLines(readme)[0]
    const block = InstallLine.typeScriptBlocks(readme)[0]
    const installed = new Set(install?.packages.map((spec) => spec.name))
    expect(InstallLine.packagesNeededBy(block ?? "").filter((name) => !installed.has(name))).toEqual([])
  })
})

describe("README.md from the npm page", () => {
  const links = [...readme.matchAll(/!?\[[^\]]*\]\(([^)\s]+)\)/g)].map((match) => match[1] ?? "")

  it("every link and image into the repository is an absolute URL to a file that exists", () => {
    const relative = links.filter((target) => !/^[a-z]+:/.test(target) && !target.startsWith("#"))
    expect(relative).toEqual([])
    const ours = links.flatMap((target) => {
      const match =
        /^https:\/\/github\.com\/effect-outbox\/effect-outbox\/(?:blob|tree)\/main\/([^#]+)/.exec(target) ??
        /^https:\/\/raw\.githubusercontent\.com\/effect-outbox\/effect-outbox\/main\/([^#]+)/.exec(target)
      return match?.[1] === undefined ? [] : [match[1]]
    })
    expect(ours).toEqual(expect.arrayContaining(["docs/guide.md", "docs/operations.md", "docs/dashboard-live.png"]))
    expect(ours.filter((file) => !fs.existsSync(path.join(repoRoot, file)))).toEqual([])
  })

  it("package.json names the repository the links point into", () => {
    expect(Manifest().repository?.url).toBe("git+https://github.com/effect-outbox/effect-outbox.git")
  })

  it("'Running the tests' lists what scripts/test-servers.sh installs", () => {
    const section = readme.split("## Running the tests")[1]?.split("\n## ")[0] ?? ""
    const script = read(path.join("scripts", "test-servers.sh"))
    for (const [name, debianPackage] of [
      ["JDK", "openjdk"],
      ["PostgreSQL", "postgresql"],
      ["MariaDB", "mariadb-server"],
      ["NATS", "nats-server"],
      ["RabbitMQ", "rabbitmq-server"],
      ["Prometheus", "prometheus"],
      ["Chromium", "chromium"]
    ] as const) {
      expect(section).toContain(name)
      expect(script).toContain(debianPackage)
    }
    expect(section).toContain("scripts/test-servers.sh")
    expect(section).toContain("npm test")
  })

  it("says to run a relay with node or exec rather than under npx (SIGTERM goes to npm)", () => {
    const commandLine = readme.split("## Command line")[1]?.split("\n## ")[0] ?? ""
    expect(commandLine).toContain("SIGTERM")
    expect(commandLine).toContain("exec node node_modules/effect-outbox/bin/effect-outbox.js relay")
  })

  it("the examples list names every example, the PostgreSQL one included", () => {
    const examples = fs.readdirSync(path.join(repoRoot, "examples")).filter((file) => file.endsWith(".ts"))
    expect(examples).toContain("postgres-transactional-enqueue.ts")
    const section = readme.split("## Examples")[1]?.split("\n## ")[0] ?? ""
    for (const example of examples) {
      expect(section).toContain(`https://github.com/effect-outbox/effect-outbox/blob/main/examples/${example}`)
    }
  })
})

describe("the guide and the examples", () => {
  it("the guide has a PostgreSQL section with a code block on effect-outbox/postgres", () => {
    const section = guide.split("\n## PostgreSQL\n")[1]?.split("\n## ")[0] ?? ""
    const block = InstallLine.typeScriptBlocks(section)[0] ?? ""
    expect(block).toContain('from "effect-outbox/postgres"')
    expect(block).toContain("sql.withTransaction")
  })

  it("examples import the package by name (effect-outbox, effect-outbox/<entry>), never ../src", () => {
    for (const example of fs.readdirSync(path.join(repoRoot, "examples"))) {
      const text = read(path.join("examples", example))
      expect(text).not.toMatch(/from "\.\.?\//)
      expect(text).toMatch(/from "effect-outbox"/)
    }
  })
})
