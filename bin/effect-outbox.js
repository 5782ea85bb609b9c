#!/usr/bin/env node
// The `effect-outbox` command. The package ships the command line bundled in dist/cli/ (`npm run build`
// writes it). In a clone without a build (after `npm ci`), it runs the TypeScript sources through tsx, a
// devDependency, so `npx effect-outbox …` works there too.
import { existsSync } from "node:fs"

const bundle = new URL("../dist/cli/main.mjs", import.meta.url)
if (existsSync(bundle)) {
  await import(bundle.href)
} else {
  const sources = new URL("../src/programs/cli/main.ts", import.meta.url)
  const tsx = await import("tsx/esm/api").catch(() => undefined)
  if (tsx === undefined || !existsSync(sources)) {
    process.stderr.write("effect-outbox: the command line is not built: run `npm run build` (or `npm ci` in a clone)\n")
    process.exit(2)
  }
  tsx.register()
  await import(sources.href)
}
