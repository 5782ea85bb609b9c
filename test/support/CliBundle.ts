/**
 * The `effect-outbox` command line bundled once for end-to-end tests: esbuild compiles
 * `src/programs/cli/main.ts` into a fresh directory under `node_modules/.cache` (inside the project, so the
 * bundle's external package imports resolve from the project's `node_modules`), and tests spawn
 * `node <bundle>` — a real process, without compiling TypeScript on every start as `tsx` does.
 *
 * Packages stay external (they are loaded from `node_modules` as at run time) and code splitting is on, so
 * a dynamic `import()` in the CLI (a backend or exporter loaded on demand) stays a separate chunk that is
 * only loaded when the command needs it.
 */
import { build } from "esbuild"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

/** The project root. */
export const projectRoot: string = fileURLToPath(new URL("../..", import.meta.url))

/** The CLI's TypeScript entry point. */
export const cliEntry: string = path.join(projectRoot, "src", "programs", "cli", "main.ts")

/** A bundled CLI on disk. */
export interface CliBundle {
  /** The bundle's entry file (`main.mjs`). */
  readonly entry: string
  /** The Node.js argv (after the executable) that runs the CLI with `args`. */
  readonly argv: (args: ReadonlyArray<string>) => ReadonlyArray<string>
  /** Removes the bundle's directory. */
  readonly remove: () => void
}

/**
 * Bundles the CLI into `node_modules/.cache/effect-outbox-cli/<random>/main.mjs` (git-ignored with
 * `node_modules/`). Fails with esbuild's errors when the CLI does not compile.
 */
export const buildCli = async (): Promise<CliBundle> => {
  const directory = path.join(
    projectRoot,
    "node_modules",
    ".cache",
    "effect-outbox-cli",
    crypto.randomBytes(8).toString("hex")
  )
  fs.mkdirSync(directory, { recursive: true })
  try {
    await build({
      absWorkingDir: projectRoot,
      entryPoints: { main: cliEntry },
      outdir: directory,
      outExtension: { ".js": ".mjs" },
      bundle: true,
      splitting: true,
      platform: "node",
      format: "esm",
      target: "node20",
      packages: "external",
      logLevel: "silent"
    })
  } catch (error) {
    fs.rmSync(directory, { recursive: true, force: true })
    throw error
  }
  const entry = path.join(directory, "main.mjs")
  return {
    entry,
    argv: (args) => [entry, ...args],
    remove: () => fs.rmSync(directory, { recursive: true, force: true })
  }
}
