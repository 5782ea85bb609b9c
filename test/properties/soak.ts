/**
 * Soak run of the generated-history property test outside vitest:
 *
 *   npx tsx test/properties/soak.ts --backend memory --runs 5000 --seed 42 [--steps 60] [--stale-ms 30000]
 *
 * Backends: `memory`, `sqlite` (`:memory:` database per history). `--stale-ms 0` runs version-only
 * reclaim. Prints what the histories exercised; on a mismatch prints the seed to replay and exits 1.
 */
import * as Layer from "effect/Layer"
import * as MemoryOutboxStore from "../../src/layers/memory/MemoryOutboxStore.js"
import * as SqliteDatabase from "../../src/layers/sqlite/SqliteDatabase.js"
import * as SqliteOutboxStore from "../../src/layers/sqlite/SqliteOutboxStore.js"
import type { OutboxStore } from "../../src/services/OutboxStore.js"
import type { ContractLayerOptions } from "../contract/OutboxStoreContract.js"
import { checkOutboxHistories } from "./OutboxHistory.js"

const backends: Record<string, (options: ContractLayerOptions) => Layer.Layer<OutboxStore, unknown>> = {
  memory: (options) =>
    options.staleClaimAfter === undefined
      ? MemoryOutboxStore.layer
      : MemoryOutboxStore.layerWith({ staleClaimAfter: options.staleClaimAfter }),
  sqlite: (options) =>
    SqliteOutboxStore.layerWith(
      options.staleClaimAfter === undefined ? {} : { staleClaimAfter: options.staleClaimAfter }
    ).pipe(Layer.provide(SqliteDatabase.layer({ filename: ":memory:" })))
}

const argument = (name: string): string | undefined => {
  const index = process.argv.indexOf(`--${name}`)
  return index >= 0 ? process.argv[index + 1] : undefined
}

const integer = (name: string, fallback: number | undefined): number | undefined => {
  const raw = argument(name)
  if (raw === undefined) return fallback
  const value = Number(raw)
  if (!Number.isSafeInteger(value)) throw new Error(`--${name} must be an integer, got ${raw}`)
  return value
}

const main = async (): Promise<void> => {
  const backend = argument("backend") ?? "memory"
  const makeLayer = backends[backend]
  if (makeLayer === undefined)
    throw new Error(`unknown backend ${backend} (known: ${Object.keys(backends).join(", ")})`)
  const runs = integer("runs", 1000) ?? 1000
  const seed = integer("seed", undefined)
  const maxSteps = integer("steps", 40) ?? 40
  const staleMs = integer("stale-ms", 30_000) ?? 30_000
  const started = process.hrtime.bigint()
  const result = await checkOutboxHistories(`soak ${backend}`, makeLayer, {
    runs,
    maxSteps,
    ...(seed !== undefined ? { seed } : {}),
    ...(staleMs > 0 ? { staleClaimAfterMillis: staleMs } : {}),
    // both backends claim atomically, so concurrent claims must match a serial order
    concurrentClaims: true
  })
  const seconds = Number(process.hrtime.bigint() - started) / 1e9
  console.log(
    `backend ${backend}: ${result.runs} histories (seed ${result.seed}) agree with the model in ${seconds.toFixed(1)} s`
  )
  console.log(JSON.stringify(result.stats, null, 2))
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : String(error))
  process.exit(1)
})
