/**
 * The `effect-outbox` command line bundled once for end-to-end tests: esbuild compiles
 * `src/programs/cli/main.ts` into a fresh directory under `node_modules/.cache` (inside the project, so the
 * bundle's external package imports resolve from the project's `node_modules`), and tests spawn
 * `node <bundle>` — a real process, without compiling TypeScript on every start as `tsx` does.
 *
 * Most of a CLI start is Node's ESM loader resolving, reading and linking the ~600 module files of `effect`,
 * `@effect/*` and `fast-check` (which `effect/Schema` loads), which every command needs: those ESM packages
 * are bundled too (~0.7 s of CPU per start instead of ~1.9 s). Every other package stays external and is
 * loaded by Node from `node_modules` as at run time — the CommonJS ones (`@aws-sdk/*`, `undici`,
 * `better-sqlite3` with its native addon) keep going through Node's own CommonJS interop. Code splitting is
 * on, so a dynamic `import()` in the CLI (a backend or exporter loaded on demand) stays a separate chunk
 * that is only loaded when the command needs it. The CLI as users start it (`tsx`, all of `node_modules`)
 * is run by `demo.test.ts`.
 */
import { build, type Plugin } from "esbuild"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

/** The project root. */
export const projectRoot: string = fileURLToPath(new URL("../..", import.meta.url))

/** The CLI's TypeScript entry point. */
export const cliEntry: string = path.join(projectRoot, "src", "programs", "cli", "main.ts")

/** Packages compiled into the bundle (ESM packages of many small modules); every other package is external. */
const bundledPackage = /^(?:effect|@effect\/[^/]+|fast-check|pure-rand)(?:\/|$)/

/** Leaves every bare import (a package or `node:` builtin) external unless it names a bundled package. */
const externalPackages: Plugin = {
  name: "external-packages",
  setup: (plugins) => {
    plugins.onResolve({ filter: /^[^./]/ }, (args) =>
      bundledPackage.test(args.path) ? undefined : { path: args.path, external: true }
    )
  }
}

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
      plugins: [externalPackages],
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
