/**
 * What the lease contract suites share: how a test runs against the backend under test, unique keys and
 * the default ttl.
 */
import { randomUUID } from "node:crypto"
import * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type { LeaseStore } from "../../../src/services/LeaseStore.js"

/** Runs one test's program with a fresh layer of the backend under test. */
export type Run = <A, E>(self: Effect.Effect<A, E, LeaseStore>) => Effect.Effect<A, unknown>

/** A partition key no other test (or earlier run against a shared table) uses. */
export const uniquePartition = (label: string): string => `lease-${label}-${randomUUID()}`

/** The ttl most tests acquire with. */
export const ttl = Duration.seconds(30)
