/**
 * What every part of the `OutboxStore` contract suite shares: the backend's capabilities, the layer
 * factory's options, fixed test data and a {@link Harness} of helpers bound to one backend.
 *
 * Each test builds its own layer with `makeLayer(...)` and uses its own unique partition keys, so a
 * backend may share one table or database across the tests of a file. Tests run with `it.effect`
 * (TestClock): time only moves when a test moves it.
 */
import * as DateTime from "effect/DateTime"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import { randomBytes } from "node:crypto"
import type { LeaseTokenLike } from "../../../src/domain/LeaseToken.js"
import { NewOutboxRecord } from "../../../src/domain/OutboxRecord.js"
import { type ClaimBatch, OutboxStore, type OutboxStoreService } from "../../../src/services/OutboxStore.js"

/**
 * What a backend does differently within the contract; tests depending on it branch on these.
 */
export interface ContractCapabilities {
  /** complete/release with several ids is all-or-nothing (memory only) */
  readonly multiIdAtomic: boolean
  /** payload size limit of the backend, if any (for an InvalidRecord test) */
  readonly maxPayloadBytes?: number
}

/**
 * Options a test asks of the layer factory.
 */
export interface ContractLayerOptions {
  readonly staleClaimAfter?: Duration.DurationInput
}

/**
 * Builds a fresh store layer for one test.
 */
export type MakeLayer = (options: ContractLayerOptions) => Layer.Layer<OutboxStore, unknown>

/** The invalid tokens every fenced operation must reject before touching state (R-CLAIM-1, R-DONE-1). */
export const invalidTokens: ReadonlyArray<LeaseTokenLike> = [
  { owner: "", version: 1 },
  { owner: "x", version: 0 },
  { owner: "", version: 0 },
  { owner: "x", version: -1 },
  { owner: "x", version: 1.5 },
  { owner: "", version: 7 }
]

/** The instant every test starts at (epoch milliseconds). */
export const START = 1_700_000_000_000

/** A token of the given owner and version. */
export const token = (owner: string, version: number): LeaseTokenLike => ({ owner, version })

/** UTF-8 bytes of a text. */
export const payloadOf = (text: string): Uint8Array => new TextEncoder().encode(text)

/** Epoch milliseconds of an optional instant. */
export const millisOf = (value: Option.Option<DateTime.Utc>): number | undefined =>
  Option.getOrUndefined(Option.map(value, DateTime.toEpochMillis))

/** The ids of a claim batch, in order. */
export const idsOf = (batch: ClaimBatch): ReadonlyArray<string> => batch.records.map((record) => record.id)

/** A new record in short: envelope, optional binding, id, ordering key, times and payload. */
export interface RecordSpec {
  readonly env: string
  readonly binding?: string
  readonly id?: string
  readonly key?: string
  readonly createdAt?: number
  readonly expiresAt?: number
  readonly payload?: Uint8Array
}

/**
 * Builds the helpers of one backend's suite.
 *
 * @param name suite name (also used in partition keys)
 * @param makeLayer builds a fresh store layer for one test
 */
export const makeHarness = (name: string, makeLayer: MakeLayer) => {
  const runId = randomBytes(4).toString("hex")
  const prefix = name.replace(/[^A-Za-z0-9]/g, "_")
  let counter = 0
  /** A partition key no other test of this run uses. */
  const freshPartition = (label: string): string => `${prefix}-${label}-${runId}-${++counter}`

  /** The id a record spec gets in partition `pk` (unique across the run because `pk` is). */
  const idFor = (pk: string, spec: RecordSpec): string => spec.id ?? `${pk}.${spec.env}.${spec.binding ?? "b"}`

  const record = (pk: string, spec: RecordSpec): NewOutboxRecord =>
    new NewOutboxRecord({
      id: idFor(pk, spec),
      partitionKey: pk,
      envelopeId: spec.env,
      bindingId: spec.binding ?? "b",
      payload: spec.payload ?? payloadOf(`payload of ${spec.env}`),
      ...(spec.key !== undefined ? { orderingKey: spec.key } : {}),
      ...(spec.createdAt !== undefined ? { createdAt: DateTime.unsafeMake(spec.createdAt) } : {}),
      ...(spec.expiresAt !== undefined ? { expiresAt: DateTime.unsafeMake(spec.expiresAt) } : {})
    })

  const records = (pk: string, specs: ReadonlyArray<RecordSpec | string>): Array<NewOutboxRecord> =>
    specs.map((spec) => record(pk, typeof spec === "string" ? { env: spec } : spec))

  /** Persists envelopes `envs` (keyless unless given as specs) and returns their ids in order. */
  const seed = (store: OutboxStoreService, pk: string, specs: ReadonlyArray<RecordSpec | string>) =>
    Effect.gen(function* () {
      const batch = records(pk, specs)
      yield* store.persist(batch)
      return batch.map((r) => r.id ?? "")
    })

  const pendingIds = (store: OutboxStoreService, pk: string) =>
    Effect.map(store.queryPending(pk, 1000), (rows) => rows.map((r) => r.id))

  /** An observable summary of a partition: pending ids in age order with their claim facts, and counts. */
  const snapshot = (store: OutboxStoreService, pk: string) =>
    Effect.gen(function* () {
      const pending = yield* store.queryPending(pk, 1000)
      return {
        pending: pending.map((r) => ({
          id: r.id,
          status: r.status,
          claimVersion: r.claimVersion,
          replayCount: r.replayCount,
          claimedBy: Option.getOrUndefined(r.claimedBy)
        })),
        countPending: yield* store.countPending(pk),
        countClaimed: yield* store.countClaimed(pk)
      }
    })

  const findPending = (store: OutboxStoreService, pk: string, id: string) =>
    Effect.map(store.queryPending(pk, 1000), (rows) => rows.find((r) => r.id === id))

  /** Runs a test body against a fresh store, with the clock set to a realistic instant. */
  const withStore = <A, E>(
    body: (store: OutboxStoreService) => Effect.Effect<A, E>,
    options: ContractLayerOptions = {}
  ) =>
    Effect.gen(function* () {
      yield* TestClock.setTime(START)
      const store = yield* OutboxStore
      return yield* body(store)
    }).pipe(Effect.provide(makeLayer(options)))

  /** Layer options with wall-clock stale reclaim after 30 seconds (R-CLAIM-6). */
  const stale = { staleClaimAfter: "30 seconds" } as const

  return { freshPartition, idFor, record, records, seed, pendingIds, snapshot, findPending, withStore, stale }
}

/**
 * The helpers of one backend's suite (see {@link makeHarness}).
 */
export type Harness = ReturnType<typeof makeHarness>
