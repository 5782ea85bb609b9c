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
    pool: "forks",
    // Two test files at a time, whatever the machine reports: most files wait on their servers (DynamoDB
    // Local, PostgreSQL, MariaDB, brokers) or on child processes, and vitest's default on a 2-core machine
    // (one file at a time) left the run at about 17 minutes where two at a time take about 12. Every server a
    // file shares is shared per run with a database, table, stream or queue of the file's own.
    maxWorkers: 2,
    minWorkers: 1
  }
})
