/**
 * A fault-injecting decorator over the `OutboxStore` in context: records every call and fails chosen
 * calls (the next N of an operation, or those touching given record ids) with a typed error, so the
 * drainer's failure paths can be driven deterministically.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { DepthUnsupported, StoreUnavailable } from "../../src/domain/OutboxError.js"
import { OutboxStore } from "../../src/services/OutboxStore.js"

/** The operations that can be observed and failed. */
export type Operation =
  "persist" | "claim" | "complete" | "release" | "expire" | "queryPending" | "countPending" | "countClaimed"

/** One observed call. `ids` for complete/release, `limit` for claim, `partitionKey` where scoped. */
export interface Call {
  readonly operation: Operation
  readonly partitionKey?: string | undefined
  readonly ids?: ReadonlyArray<string> | undefined
  readonly limit?: number | undefined
  /** Whether the call was failed by injection. */
  readonly injected: boolean
}

/** A fault: which calls fail, how many times, and with what. */
export interface Fault {
  readonly operation: Operation
  /** Only calls touching one of these record ids (complete/release). */
  readonly ids?: ReadonlyArray<string> | undefined
  /** How many matching calls fail (default 1; `Infinity` for all). */
  readonly times?: number | undefined
  /** For counts: fail with `DepthUnsupported` instead of `StoreUnavailable`. */
  readonly unsupported?: boolean | undefined
}

/** Control of the decorator. */
export interface FaultControl {
  readonly inject: (fault: Fault) => Effect.Effect<void>
  readonly calls: Effect.Effect<ReadonlyArray<Call>>
  readonly clearFaults: Effect.Effect<void>
}

/** The control tag. */
export class FaultyOutboxStore extends Context.Tag("test/FaultyOutboxStore")<FaultyOutboxStore, FaultControl>() {}

interface Armed {
  readonly fault: Fault
  remaining: number
}

/** Wraps the `OutboxStore` in context; provides the wrapped store and its control. */
export const layer: Layer.Layer<OutboxStore | FaultyOutboxStore, never, OutboxStore> = Layer.effectContext(
  Effect.gen(function* () {
    const inner = yield* OutboxStore
    let faults: Array<Armed> = []
    const calls: Array<Call> = []

    const take = (operation: Operation, ids: ReadonlyArray<string> | undefined): Armed | undefined => {
      const armed = faults.find(
        (a) =>
          a.remaining > 0 &&
          a.fault.operation === operation &&
          (a.fault.ids === undefined || (ids !== undefined && ids.some((id) => a.fault.ids?.includes(id) === true)))
      )
      if (armed !== undefined) armed.remaining -= 1
      return armed
    }

    const observe = (
      operation: Operation,
      details: { partitionKey?: string; ids?: ReadonlyArray<string>; limit?: number }
    ): Armed | undefined => {
      const armed = take(operation, details.ids)
      calls.push({ operation, ...details, injected: armed !== undefined })
      return armed
    }

    const unavailable = (operation: Operation, partitionKey?: string) =>
      new StoreUnavailable({ operation, partitionKey, cause: new Error(`injected ${operation} failure`) })

    const store = OutboxStore.of({
      persist: (records, options) =>
        Effect.suspend(() =>
          observe("persist", {}) !== undefined ? Effect.fail(unavailable("persist")) : inner.persist(records, options)
        ),
      claim: (partitionKey, token, limit) =>
        Effect.suspend(() =>
          observe("claim", { partitionKey, limit }) !== undefined
            ? Effect.fail(unavailable("claim", partitionKey))
            : inner.claim(partitionKey, token, limit)
        ),
      complete: (ids, token) =>
        Effect.suspend(() =>
          observe("complete", { ids }) !== undefined ? Effect.fail(unavailable("complete")) : inner.complete(ids, token)
        ),
      release: (ids, token) =>
        Effect.suspend(() =>
          observe("release", { ids }) !== undefined ? Effect.fail(unavailable("release")) : inner.release(ids, token)
        ),
      expire: (before, partitionKey, token) =>
        Effect.suspend(() =>
          observe("expire", { partitionKey }) !== undefined
            ? Effect.fail(unavailable("expire", partitionKey))
            : inner.expire(before, partitionKey, token)
        ),
      queryPending: (partitionKey, limit) =>
        Effect.suspend(() =>
          observe("queryPending", { partitionKey, limit }) !== undefined
            ? Effect.fail(unavailable("queryPending", partitionKey))
            : inner.queryPending(partitionKey, limit)
        ),
      countPending: (partitionKey) =>
        Effect.suspend(() => {
          const armed = observe("countPending", { partitionKey })
          if (armed === undefined) return inner.countPending(partitionKey)
          return armed.fault.unsupported === true
            ? Effect.fail(new DepthUnsupported({ operation: "countPending", backend: "faulty" }))
            : Effect.fail(unavailable("countPending", partitionKey))
        }),
      countClaimed: (partitionKey) =>
        Effect.suspend(() => {
          const armed = observe("countClaimed", { partitionKey })
          if (armed === undefined) return inner.countClaimed(partitionKey)
          return armed.fault.unsupported === true
            ? Effect.fail(new DepthUnsupported({ operation: "countClaimed", backend: "faulty" }))
            : Effect.fail(unavailable("countClaimed", partitionKey))
        }),
      listPartitions: inner.listPartitions
    })

    const control: FaultControl = {
      inject: (fault) =>
        Effect.sync(() => {
          faults.push({ fault, remaining: fault.times ?? 1 })
        }),
      calls: Effect.sync(() => calls.slice()),
      clearFaults: Effect.sync(() => {
        faults = []
      })
    }
    return Context.make(OutboxStore, store).pipe(Context.add(FaultyOutboxStore, control))
  })
)
