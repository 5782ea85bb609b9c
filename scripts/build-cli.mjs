// Bundles the command line (src/programs/cli/main.ts) into dist/cli/ with esbuild, as the package ships it.
//
// The packages only the command line uses (@effect/cli, @effect/printer*, @effect/platform-node and what
// they import) are compiled into the bundle, so they are devDependencies and a library-only application
// installs none of them. Everything the user's application provides stays an import resolved at run time:
// `effect`, `@effect/platform` (required peers) and the optional drivers (`@effect/sql*`, the AWS SDK,
// `@effect/opentelemetry`, `nats`, `amqplib`). Code splitting keeps each on-demand `import()` (a backend, a
// sink, the exporter) in its own chunk, so a driver is only loaded when the command needs it.
import { build } from "esbuild"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const projectRoot = fileURLToPath(new URL("..", import.meta.url))

/** Packages compiled into the bundle: the CLI's own dependencies and their dependencies. */
export const bundledPackage =
  /^(?:@effect\/(?:cli|printer|printer-ansi|platform-node|platform-node-shared|typeclass)|ini|toml|yaml|mime|undici|ws|multipasta)(?:\/|$)/

/** Leaves every other bare import (a peer package or a `node:` builtin) to Node at run time. */
const externalPackages = {
  name: "external-packages",
  setup: (plugins) => {
    plugins.onResolve({ filter: /^[^./]/ }, (args) =>
      bundledPackage.test(args.path) ? undefined : { path: args.path, external: true }
    )
  }
}

/** Builds the bundle into `outdir` (default dist/cli), replacing what was there. */
export const buildCli = async (outdir = path.join(projectRoot, "dist", "cli")) => {
  fs.rmSync(outdir, { recursive: true, force: true })
  await build({
    absWorkingDir: projectRoot,
    entryPoints: { main: path.join(projectRoot, "src", "programs", "cli", "main.ts") },
    outdir,
    outExtension: { ".js": ".mjs" },
    bundle: true,
    splitting: true,
    platform: "node",
    format: "esm",
    target: "node20",
    // CommonJS dependencies compiled in (undici, ws) call `require` for Node's builtins
    banner: {
      js: 'import { createRequire as __cliRequire } from "node:module";const require = __cliRequire(import.meta.url);'
    },
    plugins: [externalPackages],
    legalComments: "none",
    logLevel: "warning"
  })
  return path.join(outdir, "main.mjs")
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await buildCli(process.argv[2])
}
