/**
 * The seed of a generated test: `OUTBOX_SEED` when set (replays a printed seed), a fixed seed derived
 * from the test's name on CI (so a landing is reproducible, and differently named registrations still
 * run different cases), else a fresh random seed (local runs keep exploring).
 */
import { randomBytes } from "node:crypto"

/** FNV-1a of the name mixed with a constant, as an int32. */
const fixedSeed = (name: string): number => {
  let hash = 0x811c9dc5 ^ 20261202
  for (let i = 0; i < name.length; i++) hash = Math.imul(hash ^ name.charCodeAt(i), 0x01000193)
  return hash | 0
}

/** `OUTBOX_SEED` when set and valid; throws on a value that is not an integer. */
export const seedFromEnvironment = (): number | undefined => {
  const raw = process.env["OUTBOX_SEED"]
  if (raw === undefined || raw.trim() === "") return undefined
  const seed = Number(raw)
  if (!Number.isSafeInteger(seed)) throw new Error(`OUTBOX_SEED must be an integer, got ${raw}`)
  return seed
}

/**
 * The seed for the generated test called `name` (see the module comment). A fresh random seed is printed before
 * the test runs, so that a run cut off by its timeout (which never reaches the test's own report) can be
 * replayed too.
 */
export const testSeed = (name: string): number => {
  const given = seedFromEnvironment() ?? (process.env["CI"] === "true" ? fixedSeed(name) : undefined)
  if (given !== undefined) return given
  const seed = randomBytes(4).readInt32LE(0)
  console.log(`[${name}] random seed ${seed} (replay with OUTBOX_SEED=${seed})`)
  return seed
}
