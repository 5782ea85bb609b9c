/**
 * A throw-away consumer project of the packed `effect-outbox`, installed offline from the local npm cache.
 *
 * `npm install --offline` needs every package's registry document in the cache, which a machine that ran
 * `npm ci` does not hold; `npm ci --offline` with a lockfile that names each tarball only needs the
 * tarballs. So the consumer's lockfile is cut out of the repository's own: the packed tarball as
 * `node_modules/effect-outbox`, plus every package Node's resolution reaches from it and from the
 * consumer's own dependencies (dependencies, optional dependencies, required peers), at the same paths and
 * versions as in the repository. Optional peers the consumer does not list (the AWS SDK,
 * `@effect/opentelemetry`, `@effect/sql-pg`, `nats`, `amqplib`) are not installed.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { promisify } from "node:util"
import { Schema } from "effect"

/** One package entry of a lockfile (v3), the fields used here. */
const LockEntry = Schema.Struct({
  version: Schema.optional(Schema.String),
  resolved: Schema.optional(Schema.String),
  integrity: Schema.optional(Schema.String),
  link: Schema.optional(Schema.Boolean),
  optional: Schema.optional(Schema.Boolean),
  dependencies: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  optionalDependencies: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  peerDependencies: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  peerDependenciesMeta: Schema.optional(
    Schema.Record({ key: Schema.String, value: Schema.Struct({ optional: Schema.optional(Schema.Boolean) }) })
  )
})
type LockEntry = typeof LockEntry.Type

const Lockfile = Schema.Struct({
  packages: Schema.Record({ key: Schema.String, value: Schema.Record({ key: Schema.String, value: Schema.Unknown }) })
})

const decodeEntry = Schema.decodeUnknownSync(LockEntry)

const run = promisify(execFile)

/** The manifest fields of the packed package that its lockfile entry repeats. */
const Manifest = Schema.Struct({
  name: Schema.String,
  version: Schema.String,
  dependencies: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  peerDependencies: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  peerDependenciesMeta: Schema.optional(
    Schema.Record({ key: Schema.String, value: Schema.Struct({ optional: Schema.optional(Schema.Boolean) }) })
  ),
  bin: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  engines: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String }))
})

/** Names an entry needs at run time: dependencies, optional dependencies, peers not marked optional. */
const needs = (entry: LockEntry): ReadonlyArray<string> => [
  ...Object.keys(entry.dependencies ?? {}),
  ...Object.keys(entry.optionalDependencies ?? {}),
  ...Object.keys(entry.peerDependencies ?? {}).filter((name) => entry.peerDependenciesMeta?.[name]?.optional !== true)
]

/** The lockfile path Node's resolution finds `name` at, looking up from the package at `from`. */
const resolveIn = (packages: Map<string, LockEntry>, from: string, name: string): string | undefined => {
  let base = from
  for (;;) {
    const candidate = base === "" ? `node_modules/${name}` : `${base}/node_modules/${name}`
    if (packages.has(candidate)) return candidate
    if (base === "") return undefined
    const cut = base.lastIndexOf("/node_modules/")
    base = cut < 0 ? "" : base.slice(0, cut)
  }
}

/** The registry tarball URL of a lockfile entry (`resolved` is not recorded by every npm). */
const tarballUrl = (entryPath: string, version: string): string => {
  const name = entryPath.slice(entryPath.lastIndexOf("node_modules/") + "node_modules/".length)
  const base = name.slice(name.lastIndexOf("/") + 1)
  return `https://registry.npmjs.org/${name}/-/${base}-${version}.tgz`
}

/** The `os` and `cpu` fields of a raw lockfile entry (platform-specific optional packages). */
const platformFields = (raw: Record<string, unknown>): Record<string, unknown> =>
  Object.fromEntries(Object.entries(raw).filter(([key]) => key === "os" || key === "cpu"))

/** Settings of a consumer project. */
export interface ConsumerOptions {
  /** The repository root (its package-lock.json and node_modules are the source of every package). */
  readonly repoRoot: string
  /** The consumer's directory (created). */
  readonly directory: string
  /** The packed tarball of effect-outbox. */
  readonly tarball: string
  /** The consumer's own dependencies, by name; versions come from the repository's lockfile. */
  readonly dependencies: ReadonlyArray<string>
  /** Caret ranges (`^0.97`) the repository's version of a dependency must satisfy, as an install line asks. */
  readonly ranges?: Readonly<Record<string, string>>
}

/** Whether `version` satisfies the caret range `range` (`^3.22` → `>=3.22.0 <4`, `^0.97` → `>=0.97.0 <0.98`). */
export const satisfiesCaret = (version: string, range: string): boolean => {
  const parse = (text: string) =>
    (/^(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(text) ?? []).slice(1).map((n) => Number(n ?? 0))
  if (!range.startsWith("^")) return version === range
  const [major = 0, minor = 0, patch = 0] = parse(version)
  const [wantMajor = 0, wantMinor = 0, wantPatch = 0] = parse(range.slice(1))
  if (major !== wantMajor) return false
  if (major === 0 && minor !== wantMinor) return false
  return minor > wantMinor || (minor === wantMinor && patch >= wantPatch)
}

/**
 * Writes the consumer's package.json and lockfile and runs `npm ci --offline --ignore-scripts`; then copies
 * the compiled better-sqlite3 addon from the repository (its install script would compile it again).
 */
export const install = async (options: ConsumerOptions): Promise<void> => {
  const lock = Schema.decodeUnknownSync(Lockfile)(
    JSON.parse(fs.readFileSync(path.join(options.repoRoot, "package-lock.json"), "utf8"))
  )
  const repoPackages = new Map<string, LockEntry>()
  for (const [entryPath, raw] of Object.entries(lock.packages)) {
    if (entryPath !== "") repoPackages.set(entryPath, decodeEntry(raw))
  }
  const tarballName = path.basename(options.tarball)
  fs.mkdirSync(options.directory, { recursive: true })
  fs.copyFileSync(options.tarball, path.join(options.directory, tarballName))

  const manifest = Schema.decodeUnknownSync(Manifest)(
    JSON.parse((await run("tar", ["-xOzf", options.tarball, "package/package.json"])).stdout)
  )
  const outboxEntry: LockEntry = {
    version: manifest.version,
    resolved: `file:${tarballName}`,
    ...(manifest.dependencies === undefined ? {} : { dependencies: manifest.dependencies }),
    ...(manifest.peerDependencies === undefined ? {} : { peerDependencies: manifest.peerDependencies }),
    ...(manifest.peerDependenciesMeta === undefined ? {} : { peerDependenciesMeta: manifest.peerDependenciesMeta })
  }

  const rootDependencies: Record<string, string> = { [manifest.name]: `file:${tarballName}` }
  for (const name of options.dependencies) {
    const version = repoPackages.get(`node_modules/${name}`)?.version
    if (version === undefined) throw new Error(`${name} is not installed in the repository`)
    const range = options.ranges?.[name]
    if (range !== undefined && !satisfiesCaret(version, range)) {
      throw new Error(`${name}@${range} is not satisfied by the repository's ${version}`)
    }
    rootDependencies[name] = version
  }

  const chosen = new Map<string, Record<string, unknown>>()
  const queue: Array<[string, ReadonlyArray<string>]> = [
    ["", options.dependencies],
    [`node_modules/${manifest.name}`, needs(outboxEntry)]
  ]
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    const [from, names] = next
    for (const name of names) {
      const found = resolveIn(repoPackages, from, name)
      const entry = found === undefined ? undefined : repoPackages.get(found)
      if (found === undefined || entry === undefined) {
        if (from !== "" && repoPackages.get(from)?.optionalDependencies?.[name] !== undefined) continue
        throw new Error(`${name} (needed by ${from === "" ? "the consumer" : from}) is not in the repository lockfile`)
      }
      if (chosen.has(found) || entry.link === true || entry.version === undefined) continue
      const { dependencies, optionalDependencies, peerDependencies, peerDependenciesMeta, optional, version } = entry
      chosen.set(found, {
        version,
        resolved: entry.resolved ?? tarballUrl(found, version),
        ...(entry.integrity === undefined ? {} : { integrity: entry.integrity }),
        ...(optional === true ? { optional } : {}),
        ...(dependencies === undefined ? {} : { dependencies }),
        ...(optionalDependencies === undefined ? {} : { optionalDependencies }),
        ...(peerDependencies === undefined ? {} : { peerDependencies }),
        ...(peerDependenciesMeta === undefined ? {} : { peerDependenciesMeta }),
        ...platformFields(lock.packages[found] ?? {})
      })
      queue.push([found, needs(entry)])
    }
  }

  const packageJson = { name: "effect-outbox-consumer", private: true, type: "module", dependencies: rootDependencies }
  const packages: Record<string, unknown> = {
    "": { name: packageJson.name, dependencies: rootDependencies },
    [`node_modules/${manifest.name}`]: {
      ...outboxEntry,
      ...(manifest.bin === undefined ? {} : { bin: manifest.bin }),
      ...(manifest.engines === undefined ? {} : { engines: manifest.engines })
    }
  }
  for (const key of Array.from(chosen.keys()).sort()) packages[key] = chosen.get(key)
  fs.writeFileSync(path.join(options.directory, "package.json"), JSON.stringify(packageJson, null, 2))
  fs.writeFileSync(
    path.join(options.directory, "package-lock.json"),
    JSON.stringify({ name: packageJson.name, lockfileVersion: 3, requires: true, packages }, null, 2)
  )
  await run("npm", ["ci", "--offline", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], {
    cwd: options.directory
  })

  const addon = path.join("better-sqlite3", "build", "Release", "better_sqlite3.node")
  const target = path.join(options.directory, "node_modules", addon)
  if (fs.existsSync(path.dirname(path.dirname(path.dirname(target))))) {
    fs.mkdirSync(path.dirname(target), { recursive: true })
    fs.copyFileSync(path.join(options.repoRoot, "node_modules", addon), target)
  }
}
