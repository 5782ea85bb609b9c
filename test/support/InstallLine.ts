/**
 * Reads install instructions and code out of Markdown: the `npm install` lines of its ```sh blocks (each
 * package with its version range), its ```ts blocks, and which packages a block's imports need installed
 * (an `effect-outbox/<entry>` import needs that entry's driver packages too).
 */

/** One package of an install line: `effect@^3.22` is `{ name: "effect", range: "^3.22" }`. */
export interface PackageSpec {
  readonly name: string
  readonly range: string | undefined
}

/** One `npm install …` command. */
export interface Install {
  readonly text: string
  readonly packages: ReadonlyArray<PackageSpec>
}

/** The bodies of the fenced blocks whose info string is one of `languages`, in order. */
export const fencedBlocks = (markdown: string, languages: ReadonlyArray<string>): ReadonlyArray<string> => {
  const blocks: Array<string> = []
  const lines = markdown.split("\n")
  for (let index = 0; index < lines.length; index++) {
    const opening = /^```(\w+)/.exec(lines[index] ?? "")
    if (opening === null || !languages.includes(opening[1] ?? "")) continue
    const body: Array<string> = []
    for (index++; index < lines.length && lines[index] !== "```"; index++) body.push(lines[index] ?? "")
    blocks.push(body.join("\n") + "\n")
  }
  return blocks
}

/** The ```ts blocks of a Markdown text. */
export const typeScriptBlocks = (markdown: string): ReadonlyArray<string> =>
  fencedBlocks(markdown, ["ts", "typescript"])

/** `name@range` (scoped names keep their leading `@`). */
export const parseSpec = (word: string): PackageSpec => {
  const at = word.indexOf("@", 1)
  return at < 0 ? { name: word, range: undefined } : { name: word.slice(0, at), range: word.slice(at + 1) }
}

/** Every `npm install` / `npm i` command of the text's ```sh / ```bash blocks, in order. */
export const npmInstallLines = (markdown: string): ReadonlyArray<Install> =>
  fencedBlocks(markdown, ["sh", "bash", "shell"]).flatMap((block) =>
    block
      .split("\n")
      .map((text) => text.replace(/#.*$/, "").trim())
      .flatMap((text) => {
        const match = /^npm (?:install|i|add) (.+)$/.exec(text)
        if (match === null) return []
        const packages = (match[1] ?? "")
          .split(/\s+/)
          .filter((word) => word.length > 0 && !word.startsWith("-"))
          .map(parseSpec)
        return [{ text, packages }]
      })
  )

/** What each entry of effect-outbox needs installed besides `effect` and `@effect/platform`. */
export const entryDrivers: Readonly<Record<string, ReadonlyArray<string>>> = {
  sqlite: ["@effect/sql", "@effect/experimental", "@effect/sql-sqlite-node"],
  postgres: ["@effect/sql", "@effect/experimental", "@effect/sql-pg"],
  dynamodb: ["@aws-sdk/client-dynamodb"],
  otel: ["@effect/opentelemetry"],
  nats: ["nats"],
  rabbitmq: ["amqplib"]
}

/** The package name of a bare import specifier (`@effect/sql/SqlClient` → `@effect/sql`). */
const packageName = (specifier: string): string => {
  const parts = specifier.split("/")
  return specifier.startsWith("@") ? `${parts[0]}/${parts[1]}` : (parts[0] ?? specifier)
}

/** The packages a module's imports need installed, sorted. */
export const packagesNeededBy = (code: string): ReadonlyArray<string> => {
  const needed = new Set<string>()
  for (const match of code.matchAll(/(?:^|\n)\s*(?:import|export)\b[^"']*?from\s+["']([^"']+)["']/g)) {
    const specifier = match[1] ?? ""
    if (specifier.startsWith(".") || specifier.startsWith("node:")) continue
    const name = packageName(specifier)
    needed.add(name)
    if (name === "effect-outbox") {
      needed.add("effect")
      needed.add("@effect/platform")
      const entry = specifier.split("/")[1]
      for (const driver of entry === undefined ? [] : (entryDrivers[entry] ?? [])) needed.add(driver)
    }
  }
  return Array.from(needed).sort()
}
