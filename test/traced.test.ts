/**
 * The library's spans (`Traced`): made under a tracer the program installed, with their attributes and
 * parents; skipped under Effect's default tracer, where nothing would read them.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"
import { LeaseToken } from "../src/domain/LeaseToken.js"
import { NewOutboxRecord } from "../src/domain/OutboxRecord.js"
import * as MemoryOutboxStore from "../src/layers/memory/MemoryOutboxStore.js"
import { OutboxStore } from "../src/services/OutboxStore.js"
import * as Traced from "../src/services/Traced.js"

const defaultTracer = Effect.runSync(Effect.tracer)

/** A tracer that records each span it makes (name, attributes at the end, parent name) and otherwise is the default. */
const recording = () => {
  const spans: Array<Tracer.Span> = []
  const tracer = Tracer.make({
    span: (...args) => {
      const made = defaultTracer.span(...args)
      spans.push(made)
      return made
    },
    context: (f, fiber) => defaultTracer.context(f, fiber)
  })
  return { spans, tracer }
}

const parentName = (span: Tracer.Span): string | undefined =>
  Option.getOrUndefined(Option.map(span.parent, (parent) => (parent._tag === "Span" ? parent.name : undefined)))

const record = new NewOutboxRecord({ partitionKey: "p", envelopeId: "e1", bindingId: "b", payload: new Uint8Array() })
const token = new LeaseToken({ owner: "o", version: 1 })

describe("Traced", () => {
  it.effect("under an installed tracer the store's operations are spans with their attributes and parent", () =>
    Effect.gen(function* () {
      const { spans, tracer } = recording()
      yield* Effect.gen(function* () {
        const store = yield* OutboxStore
        yield* store.persist([record])
        yield* store.claim("p", token, 10)
      }).pipe(Effect.withSpan("caller"), Effect.withTracer(tracer))
      const names = spans.map((span) => span.name)
      expect(names).toEqual(["caller", "OutboxStore.persist", "OutboxStore.claim"])
      const claim = spans[2]
      expect(claim === undefined ? undefined : parentName(claim)).toBe("caller")
      expect(Object.fromEntries(claim?.attributes ?? [])).toEqual({ "outbox.partition": "p", "outbox.limit": 10 })
      expect(spans.every((span) => span.status._tag === "Ended")).toBe(true)
    }).pipe(Effect.provide(MemoryOutboxStore.layer))
  )

  it.effect("under Effect's default tracer no span is made: the operation runs in its caller's span", () =>
    Effect.gen(function* () {
      const seen = yield* Effect.currentSpan.pipe(Traced.span("inner", { a: 1 }), Effect.withSpan("caller"))
      expect(seen.name).toBe("caller")
      const { spans, tracer } = recording()
      const traced = yield* Effect.currentSpan.pipe(
        Traced.span("inner", { a: 1 }),
        Effect.withSpan("caller"),
        Effect.withTracer(tracer)
      )
      expect(traced.name).toBe("inner")
      expect(spans.map((span) => span.name)).toEqual(["caller", "inner"])
    })
  )
})
