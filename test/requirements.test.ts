/**
 * The requirements of `Drainer` and `Relay` follow their options (issue 17 item 4): a dead-letter policy
 * (the default) needs a `DeadLetterStore`, so forgetting one is a compile error; with every policy
 * `"drop"` it is not needed. These are type-level assertions, checked by `tsc`.
 */
import { describe, expect, expectTypeOf, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as MemoryLeaseStore from "../src/layers/memory/MemoryLeaseStore.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import * as MemorySink from "../src/layers/sinks/MemorySink.js"
import * as Drainer from "../src/programs/Drainer.js"
import * as Relay from "../src/programs/Relay.js"
import type { DeadLetterStore } from "../src/services/DeadLetterStore.js"
import type { LeaseStore } from "../src/services/LeaseStore.js"
import type { OutboxStore } from "../src/services/OutboxStore.js"
import type { Sink } from "../src/services/Sink.js"

type Base = OutboxStore | LeaseStore | Sink
const dropAll = { onExpired: "drop", onPermanentFailure: "drop", onPoison: "drop" } as const
const withoutDeadLetters = Layer.mergeAll(MemoryOutboxStore.layer, MemoryLeaseStore.layer, MemorySink.layer)

describe("Relay and Drainer requirements follow the disposal policies", () => {
  it("default policies dead-letter: DeadLetterStore is required", () => {
    expectTypeOf<Effect.Effect.Context<ReturnType<typeof Relay.start<{ owner: "a" }>>>>().toEqualTypeOf<
      Base | DeadLetterStore | Scope.Scope
    >()
    const run = Relay.run({ owner: "a" })
    expectTypeOf<Effect.Effect.Context<typeof run>>().toEqualTypeOf<Base | DeadLetterStore>()
    const drainer = Drainer.make({ partitionKey: "p", owner: "a" })
    expectTypeOf<Effect.Effect.Context<typeof drainer>>().toEqualTypeOf<Base | DeadLetterStore>()
    // providing the stores and the sink without a dead-letter store leaves it required: not runnable
    const provided = Effect.provide(run, withoutDeadLetters)
    expectTypeOf<Effect.Effect.Context<typeof provided>>().toEqualTypeOf<DeadLetterStore>()
    expect(Effect.isEffect(provided)).toBe(true)
  })

  it("every policy drop: no DeadLetterStore", () => {
    const run = Relay.run({ owner: "a", drainer: { ...dropAll, batchSize: 10 } })
    expectTypeOf<Effect.Effect.Context<typeof run>>().toEqualTypeOf<Base>()
    const provided = Effect.provide(run, withoutDeadLetters)
    expectTypeOf<Effect.Effect.Context<typeof provided>>().toEqualTypeOf<never>()
    const layer = Relay.layer({ owner: "a", drainer: dropAll })
    expectTypeOf<Layer.Layer.Context<typeof layer>>().toEqualTypeOf<Base>()
    const drainer = Drainer.run({ partitionKey: "p", owner: "a", ...dropAll })
    expectTypeOf<Effect.Effect.Context<typeof drainer>>().toEqualTypeOf<Base>()
    expect(Effect.isEffect(provided)).toBe(true)
  })

  it("one policy left to dead-letter, or a policy only known at run time: DeadLetterStore is required", () => {
    const oneLeft = Relay.run({ owner: "a", drainer: { onExpired: "drop", onPermanentFailure: "drop" } })
    expectTypeOf<Effect.Effect.Context<typeof oneLeft>>().toEqualTypeOf<Base | DeadLetterStore>()
    const policy: Drainer.Disposal = "drop"
    const widened: Relay.RelayOptions = { owner: "a", drainer: { ...dropAll, onPoison: policy } }
    expectTypeOf<Effect.Effect.Context<ReturnType<typeof Relay.run<typeof widened>>>>().toEqualTypeOf<
      Base | DeadLetterStore
    >()
    expectTypeOf<Relay.RelayRequirements>().toEqualTypeOf<Base | DeadLetterStore>()
    expectTypeOf<Drainer.DrainerRequirements<typeof dropAll>>().toEqualTypeOf<Base>()
    expect(Effect.isEffect(oneLeft)).toBe(true)
  })
})
