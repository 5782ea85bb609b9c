/**
 * Shared pieces of the broker sink tests: records with ordering keys, a relay over the memory store
 * delivering through a given sink layer, and the per-key order check applied to what a consumer saw.
 */
import { expect } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type { DeadLetterEntry } from "../../src/domain/DeadLetterEntry.js"
import { NewOutboxRecord, OutboxRecord } from "../../src/domain/OutboxRecord.js"
import * as MemoryDeadLetterStore from "../../src/layers/memory/MemoryDeadLetterStore.js"
import * as MemoryLeaseStore from "../../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../../src/layers/memory/MemoryOutboxStore.js"
import * as Relay from "../../src/programs/Relay.js"
import { DeadLetterStore } from "../../src/services/DeadLetterStore.js"
import { OutboxStore } from "../../src/services/OutboxStore.js"
import { Sink } from "../../src/services/Sink.js"

/** `count` records per partition, keyed `k0`/`k1` alternately, ids `<partition>-<nnnn>`. */
export const keyedRecords = (partitions: ReadonlyArray<string>, count: number): ReadonlyArray<NewOutboxRecord> =>
  partitions.flatMap((partitionKey) =>
    Array.from(
      { length: count },
      (_, n) =>
        new NewOutboxRecord({
          id: `${partitionKey}-${String(n).padStart(4, "0")}`,
          partitionKey,
          envelopeId: `env-${n}`,
          bindingId: "b",
          payload: new TextEncoder().encode(JSON.stringify({ partitionKey, n })),
          headers: { "x-test": "yes" },
          orderingKey: `k${n % 2}`
        })
    )
  )

/**
 * Persists `records` and runs a relay over the memory store delivering through `sink` until `done`
 * succeeds (polled every 100 ms); returns the number of records still pending or claimed after it stops.
 */
export const relayUntil = <E, E2, E3 = never>(
  sink: Layer.Layer<Sink, E>,
  records: ReadonlyArray<NewOutboxRecord>,
  done: Effect.Effect<boolean, E2, OutboxStore>,
  whileRunning: Effect.Effect<void, E3> = Effect.void
) =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    yield* store.persist(records)
    yield* Effect.scoped(
      Effect.gen(function* () {
        yield* Relay.start({
          owner: "broker-test",
          discoveryInterval: "100 millis",
          drainer: {
            onExpired: "drop",
            onPermanentFailure: "drop",
            onPoison: "drop",
            maxReplayAttempts: 1_000,
            idleBackoffMax: "200 millis"
          }
        })
        yield* whileRunning
        yield* done.pipe(
          Effect.filterOrFail((ok) => ok),
          Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo("90 seconds")))
        )
      })
    )
    const partitions = Array.from(new Set(records.map((r) => r.partitionKey)))
    let left = 0
    for (const partition of partitions) {
      left += (yield* store.countPending(partition)) + (yield* store.countClaimed(partition))
    }
    return left
  }).pipe(Effect.provide(Layer.mergeAll(MemoryOutboxStore.layer, MemoryLeaseStore.layer, sink)))

/**
 * Persists `records` (one partition) and runs a relay over the memory stores with `onPermanentFailure` =
 * `policy` until none of them is pending or claimed; returns the dead-letter entries then.
 */
export const disposeThrough = <E>(
  sink: Layer.Layer<Sink, E>,
  records: ReadonlyArray<NewOutboxRecord>,
  policy: "dlq" | "drop"
): Effect.Effect<ReadonlyArray<DeadLetterEntry>, E> =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    yield* store.persist(records)
    const partitions = Array.from(new Set(records.map((r) => r.partitionKey)))
    yield* Effect.scoped(
      Effect.gen(function* () {
        yield* Relay.start({
          owner: "broker-test",
          discoveryInterval: "50 millis",
          drainer: { onExpired: "drop", onPermanentFailure: policy, onPoison: "drop", idleBackoffMax: "100 millis" }
        })
        yield* allCompleted(partitions).pipe(
          Effect.filterOrFail((ok) => ok),
          Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("30 seconds")))
        )
      })
    )
    const deadLetters = yield* DeadLetterStore
    return yield* deadLetters.list({})
  }).pipe(
    Effect.orDie,
    Effect.provide(
      Layer.mergeAll(MemoryDeadLetterStore.layer, MemoryLeaseStore.layer, sink).pipe(
        Layer.provideMerge(MemoryOutboxStore.layer)
      )
    )
  )

/**
 * `sink` with its sends held back once `after` of them succeeded, until `open` runs: a test that stops its
 * broker after `after` deliveries then always has sends still to come, however fast the relay drains (the
 * held sends go on against the broker as it is when `open` runs).
 */
export const holdAfter = <E>(sink: Layer.Layer<Sink, E>, after: number) =>
  Effect.map(Deferred.make<void>(), (gate) => ({
    layer: Layer.effect(
      Sink,
      Effect.map(Sink, (inner) => {
        let succeeded = 0
        return Sink.of({
          send: (record) =>
            Effect.suspend(() =>
              succeeded >= after
                ? Effect.zipRight(Deferred.await(gate), inner.send(record))
                : Effect.tap(inner.send(record), () => {
                    succeeded += 1
                  })
            )
        })
      })
    ).pipe(Layer.provide(sink)),
    open: Deferred.succeed(gate, undefined)
  }))

/** Whether every record of these partitions is completed (none pending or claimed). */
export const allCompleted = (partitions: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const store = yield* OutboxStore
    for (const partition of partitions) {
      if ((yield* store.countPending(partition)) + (yield* store.countClaimed(partition)) > 0) return false
    }
    return true
  })

/** The sequence of record ids per `(partition, orderingKey)` in the order a consumer saw them (first sight). */
export const perKeyOrder = (
  seen: ReadonlyArray<{ readonly id: string; readonly partition: string; readonly orderingKey: string }>
): Map<string, Array<string>> => {
  const byKey = new Map<string, Array<string>>()
  const first = new Set<string>()
  for (const message of seen) {
    if (first.has(message.id)) continue
    first.add(message.id)
    const key = `${message.partition}/${message.orderingKey}`
    const list = byKey.get(key) ?? []
    list.push(message.id)
    byKey.set(key, list)
  }
  return byKey
}

/**
 * Checks what a consumer saw of `keyedRecords(partitions, perPartition)`: two keys per partition, each key's
 * records in id order, every record there.
 */
export const expectOrdered = (
  seen: ReadonlyArray<{ readonly id: string; readonly partition: string; readonly orderingKey: string }>,
  partitions: ReadonlyArray<string>,
  perPartition: number
): void => {
  const order = perKeyOrder(seen)
  expect(order.size).toBe(partitions.length * 2)
  for (const [, ids] of order) {
    expect(ids).toEqual([...ids].sort())
    expect(ids).toHaveLength(perPartition / 2)
  }
}

/** A new record of its own partition (`perm-<id>`) with the given id and address, its payload the id. */
export const recordTo = (id: string, address: string): NewOutboxRecord =>
  new NewOutboxRecord({
    id,
    partitionKey: `perm-${id}`,
    envelopeId: `env-${id}`,
    bindingId: "b",
    payload: new TextEncoder().encode(id),
    address
  })

/** A claimed record with the given id, address and payload, for calling a sink's `send` directly. */
export const claimedRecord = (id: string, address: string, payload = new TextEncoder().encode("x")): OutboxRecord =>
  new OutboxRecord({
    id,
    partitionKey: "p",
    envelopeId: `env-${id}`,
    bindingId: "b",
    routeId: "r",
    address,
    payload,
    headers: {},
    orderingKey: Option.none(),
    createdAt: DateTime.unsafeMake(0),
    expiresAt: Option.none(),
    seq: 1,
    status: "claimed",
    claimedBy: Option.some("o"),
    claimVersion: 1,
    claimedAt: Option.none(),
    firstAttemptedAt: Option.none(),
    replayCount: 1,
    completedAt: Option.none()
  })
