/**
 * A sink wrapped to note each record it delivered, for the benches that count deliveries. The wrapper keeps
 * the sink's form: a sink built with `Sink.fromRegister` (the broker sinks) stays in register form, so the
 * relay runs it as it runs the sink itself (no fiber per send).
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import type { OutboxRecord } from "../src/domain/OutboxRecord.js"
import { fromRegister, registerOf, Sink } from "../src/services/Sink.js"

/** `inner` with `delivered(record)` called after each send that succeeded. */
export const noting = (
  inner: Layer.Layer<Sink, unknown>,
  delivered: (record: OutboxRecord) => void
): Layer.Layer<Sink, unknown> =>
  Layer.effect(
    Sink,
    Effect.map(Sink, (sink) => {
      const register = registerOf(sink)
      if (register === undefined) {
        return Sink.of({ send: (record) => Effect.tap(sink.send(record), () => Effect.sync(() => delivered(record))) })
      }
      return Sink.of(
        fromRegister((record, resume, labels) =>
          register(
            record,
            (result) => {
              if (!Exit.isExit(result)) return resume(Effect.tap(result, () => Effect.sync(() => delivered(record))))
              if (Exit.isSuccess(result)) delivered(record)
              resume(result)
            },
            labels
          )
        )
      )
    })
  ).pipe(Layer.provide(inner))
