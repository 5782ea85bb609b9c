import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

// `effect-outbox` and its entries (as the examples import them) resolve to the sources, as in tsconfig.json's paths
const src = fileURLToPath(new URL("./src/", import.meta.url))

export default defineConfig({
  resolve: {
    alias: [
      { find: /^effect-outbox$/, replacement: `${src}index.ts` },
      { find: /^effect-outbox\/(\w+)$/, replacement: `${src}$1.ts` }
    ]
  },
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/globalSetup.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: "forks"
  }
})
