/**
 * The InboxStore contract (SPEC §12), written once and run against every backend: dedupe per
 * `(consumer, messageId)`, the per-key high-water mark, the handler's writes committing with the inbox row
 * (or not at all), typed failures, concurrent deliveries, arguments and retention.
 *
 * The backend under test provides, besides the store, a {@link TestApp}: the consumer's own state, written
 * by handlers inside the inbox's unit (a table on the same SQL client; items added with
 * `DynamoDbInboxStore.write`; a plain map in memory). Each test uses consumers of its own.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import { randomUUID } from "node:crypto"
import type { InboxMessage } from "../../src/domain/InboxMessage.js"
import { PermanentFailure } from "../../src/domain/OutboxError.js"
import { InboxStore, type InboxOptions } from "../../src/services/InboxStore.js"
import * as Inbox from "../../src/programs/Inbox.js"

/**
 * The consumer's own state in the test: `write` runs inside a handler (so inside the inbox's unit);
 * `read` returns what was written under a key, sorted.
 */
export class TestApp extends Context.Tag("test/InboxTestApp")<
  TestApp,
  {
    readonly write: (key: string, value: string) => Effect.Effect<void, unknown>
    readonly read: (key: string) => Effect.Effect<ReadonlyArray<string>, unknown>
  }
>() {}

/** What a backend does differently within the contract. */
export interface InboxCapabilities {
  /** A failing handler's writes roll back with the inbox row (every backend but memory). */
  readonly transactionalWrites: boolean
  /** `trim` deletes ids itself (DynamoDB leaves it to TTL). */
  readonly trims: boolean
}

/** Builds a fresh store (and app state) for one test. */
export type MakeInboxLayer = (options: InboxOptions) => Layer.Layer<InboxStore | TestApp, unknown>

const consumerName = (label: string) => `consumer-${label}-${randomUUID()}`

const msg = (messageId: string, fields: Partial<InboxMessage> = {}): InboxMessage => ({
  messageId,
  partitionKey: "p1",
  ...fields
})

/** A handler writing `value` under `key` and counting its runs. */
const writing = (runs: { n: number }, key: string, value: string) =>
  Effect.flatMap(TestApp, (app) =>
    Effect.sync(() => void runs.n++).pipe(Effect.zipRight(app.write(key, value)), Effect.asVoid)
  )

const read = (key: string) => Effect.flatMap(TestApp, (app) => app.read(key))

/**
 * Runs the InboxStore contract suite against the layers built by `makeLayer` (one per test).
 */
export const inboxStoreContract = (name: string, makeLayer: MakeInboxLayer, capabilities: InboxCapabilities): void => {
  const run = <A, E>(self: Effect.Effect<A, E, InboxStore | TestApp>, options: InboxOptions = {}) =>
    Effect.provide(self, makeLayer(options))

  describe(`InboxStore contract: ${name}`, () => {
    it.effect("a message is processed once per consumer; a redelivery is Duplicate and runs nothing (SPEC §12)", () =>
      run(
        Effect.gen(function* () {
          const consumer = consumerName("dup")
          const runs = { n: 0 }
          const first = yield* Inbox.process(consumer, msg("m1"), writing(runs, consumer, "m1"))
          const second = yield* Inbox.process(consumer, msg("m1"), writing(runs, consumer, "m1"))
          expect(first).toEqual({ _tag: "Processed", value: undefined })
          expect(second).toEqual({ _tag: "Duplicate" })
          expect(runs.n).toBe(1)
          expect(yield* read(consumer)).toEqual(["m1"])
          const store = yield* InboxStore
          expect(yield* store.isProcessed(consumer, "m1")).toBe(true)
          expect(yield* store.isProcessed(consumer, "m2")).toBe(false)
        })
      )
    )

    it.effect("dedupe is per consumer: another consumer processes the same id (SPEC §12)", () =>
      run(
        Effect.gen(function* () {
          const a = consumerName("a")
          const b = consumerName("b")
          const runs = { n: 0 }
          expect((yield* Inbox.process(a, msg("m1"), writing(runs, a, "m1")))._tag).toBe("Processed")
          expect((yield* Inbox.process(b, msg("m1"), writing(runs, b, "m1")))._tag).toBe("Processed")
          expect(runs.n).toBe(2)
        })
      )
    )

    it.effect("the handler's value comes back in Processed", () =>
      run(
        Effect.gen(function* () {
          const outcome = yield* Inbox.process(consumerName("value"), msg("m1"), Effect.succeed(42))
          expect(outcome).toEqual({ _tag: "Processed", value: 42 })
        })
      )
    )

    it.effect("an older seq of a key after a newer one is Stale, runs nothing and is not recorded (SPEC §12)", () =>
      run(
        Effect.gen(function* () {
          const consumer = consumerName("stale")
          const runs = { n: 0 }
          const newer = yield* Inbox.process(
            consumer,
            msg("m5", { orderingKey: "k", seq: 5 }),
            writing(runs, consumer, "5")
          )
          const older = yield* Inbox.process(
            consumer,
            msg("m3", { orderingKey: "k", seq: 3 }),
            writing(runs, consumer, "3")
          )
          const same = yield* Inbox.process(
            consumer,
            msg("m5b", { orderingKey: "k", seq: 5 }),
            writing(runs, consumer, "5b")
          )
          expect(newer._tag).toBe("Processed")
          expect(older).toEqual({ _tag: "Stale", mark: 5 })
          expect(same).toEqual({ _tag: "Stale", mark: 5 })
          expect(runs.n).toBe(1)
          expect(yield* read(consumer)).toEqual(["5"])
          const store = yield* InboxStore
          expect(yield* store.isProcessed(consumer, "m3")).toBe(false)
          expect(yield* store.mark(consumer, "p1", "k")).toEqual(Option.some(5))
          // a stale message stays stale when delivered again
          expect((yield* Inbox.process(consumer, msg("m3", { orderingKey: "k", seq: 3 }), Effect.void))._tag).toBe(
            "Stale"
          )
        })
      )
    )

    it.effect("marks are per (partition, ordering key); keyless messages ignore them (SPEC §12)", () =>
      run(
        Effect.gen(function* () {
          const consumer = consumerName("keys")
          const p = (id: string, fields: Partial<InboxMessage>) => Inbox.process(consumer, msg(id, fields), Effect.void)
          expect((yield* p("a", { orderingKey: "k", seq: 10 }))._tag).toBe("Processed")
          expect((yield* p("b", { orderingKey: "other", seq: 1 }))._tag).toBe("Processed")
          expect((yield* p("c", { partitionKey: "p2", orderingKey: "k", seq: 1 }))._tag).toBe("Processed")
          expect((yield* p("d", { seq: 1 }))._tag).toBe("Processed")
          expect((yield* p("e", { orderingKey: "", seq: 1 }))._tag).toBe("Processed")
          expect((yield* p("f", { orderingKey: "k", seq: 11 }))._tag).toBe("Processed")
          const store = yield* InboxStore
          expect(yield* store.mark(consumer, "p1", "k")).toEqual(Option.some(11))
          expect(yield* store.mark(consumer, "p2", "k")).toEqual(Option.some(1))
          expect(yield* store.mark(consumer, "p1", "none")).toEqual(Option.none())
        })
      )
    )

    it.effect("a Duplicate wins over Stale: a processed id delivered again is Duplicate (SPEC §12)", () =>
      run(
        Effect.gen(function* () {
          const consumer = consumerName("dup-stale")
          yield* Inbox.process(consumer, msg("m1", { orderingKey: "k", seq: 1 }), Effect.void)
          yield* Inbox.process(consumer, msg("m2", { orderingKey: "k", seq: 2 }), Effect.void)
          const again = yield* Inbox.process(consumer, msg("m1", { orderingKey: "k", seq: 1 }), Effect.void)
          expect(again).toEqual({ _tag: "Duplicate" })
        })
      )
    )

    it.effect(
      "a failing handler commits nothing: id, mark and (transactional) writes roll back; retryable (SPEC §12)",
      () =>
        run(
          Effect.gen(function* () {
            const consumer = consumerName("fail")
            const runs = { n: 0 }
            const failing = writing(runs, consumer, "x").pipe(Effect.zipRight(Effect.fail("boom")))
            const error = yield* Effect.flip(Inbox.process(consumer, msg("m1", { orderingKey: "k", seq: 1 }), failing))
            expect(error._tag).toBe("HandlerFailed")
            if (error._tag === "HandlerFailed") {
              expect(error.retryable).toBe(true)
              expect(error.consumer).toBe(consumer)
              expect(error.messageId).toBe("m1")
            }
            const store = yield* InboxStore
            expect(yield* store.isProcessed(consumer, "m1")).toBe(false)
            expect(yield* store.mark(consumer, "p1", "k")).toEqual(Option.none())
            if (capabilities.transactionalWrites) expect(yield* read(consumer)).toEqual([])
            // the redelivery is processed
            const retried = yield* Inbox.process(
              consumer,
              msg("m1", { orderingKey: "k", seq: 1 }),
              writing(runs, consumer, "y")
            )
            expect(retried._tag).toBe("Processed")
            expect(yield* store.mark(consumer, "p1", "k")).toEqual(Option.some(1))
            if (capabilities.transactionalWrites) expect(yield* read(consumer)).toEqual(["y"])
          })
        )
    )

    it.effect(
      "a handler failing with PermanentFailure (or through Inbox.permanent) is HandlerFailed, not retryable",
      () =>
        run(
          Effect.gen(function* () {
            const consumer = consumerName("permanent")
            const direct = yield* Effect.flip(
              Inbox.process(consumer, msg("m1"), Effect.fail(new PermanentFailure({ reason: "bad order" })))
            )
            const wrapped = yield* Effect.flip(Inbox.process(consumer, msg("m2"), Inbox.permanent(Effect.fail("nope"))))
            for (const error of [direct, wrapped]) {
              expect(error._tag).toBe("HandlerFailed")
              if (error._tag === "HandlerFailed") expect(error.retryable).toBe(false)
              expect(Inbox.dispositionOfError(error)._tag).toBe("Reject")
            }
            expect(yield* Effect.flatMap(InboxStore, (s) => s.isProcessed(consumer, "m1"))).toBe(false)
          })
        )
    )

    it.effect("a handler that dies leaves nothing recorded, and the message is processed on redelivery", () =>
      run(
        Effect.gen(function* () {
          const consumer = consumerName("die")
          const runs = { n: 0 }
          const exit = yield* Effect.exit(
            Inbox.process(consumer, msg("m1"), writing(runs, consumer, "x").pipe(Effect.zipRight(Effect.die("bug"))))
          )
          expect(Exit.isFailure(exit)).toBe(true)
          expect(Inbox.disposition(exit)._tag).toBe("Retry")
          expect(yield* Effect.flatMap(InboxStore, (s) => s.isProcessed(consumer, "m1"))).toBe(false)
          if (capabilities.transactionalWrites) expect(yield* read(consumer)).toEqual([])
          expect((yield* Inbox.process(consumer, msg("m1"), Effect.void))._tag).toBe("Processed")
        })
      )
    )

    it.effect("the same message delivered concurrently is processed once (SPEC §12)", () =>
      run(
        Effect.gen(function* () {
          const consumer = consumerName("race")
          const runs = { n: 0 }
          const outcomes = yield* Effect.forEach(
            Array.from({ length: 6 }, () => msg("m1", { orderingKey: "k", seq: 1 })),
            (m) => Effect.either(Inbox.process(consumer, m, writing(runs, consumer, "m1"))),
            { concurrency: "unbounded" }
          )
          const processed = outcomes.filter((o) => o._tag === "Right" && o.right._tag === "Processed")
          expect(processed).toHaveLength(1)
          for (const o of outcomes) {
            if (o._tag === "Right") expect(["Processed", "Duplicate"]).toContain(o.right._tag)
            else expect(Inbox.dispositionOfError(o.left)._tag).toBe("Retry")
          }
          expect(yield* read(consumer)).toEqual(["m1"])
        })
      )
    )

    it.effect("invalid arguments fail with InvalidArgument naming the argument, before anything is written", () =>
      run(
        Effect.gen(function* () {
          const consumer = consumerName("args")
          const runs = { n: 0 }
          const cases: ReadonlyArray<readonly [string, InboxMessage, string]> = [
            ["", msg("m1"), "consumer"],
            [consumer, msg(""), "messageId"],
            [consumer, msg("m1", { partitionKey: "" }), "partitionKey"],
            [consumer, msg("m1", { orderingKey: "k" }), "seq"],
            [consumer, msg("m1", { seq: -1 }), "seq"],
            [consumer, msg("m1", { seq: 1.5 }), "seq"]
          ]
          for (const [c, m, argument] of cases) {
            const error = yield* Effect.flip(Inbox.process(c, m, writing(runs, consumer, "x")))
            expect(error._tag).toBe("InvalidArgument")
            if (error._tag === "InvalidArgument") expect(error.argument).toBe(argument)
          }
          expect(runs.n).toBe(0)
          const store = yield* InboxStore
          const noConsumer = yield* Effect.flip(store.isProcessed("", "m"))
          expect(noConsumer._tag === "InvalidArgument" && noConsumer.argument).toBe("consumer")
          const noKey = yield* Effect.flip(store.mark(consumer, "p", ""))
          expect(noKey._tag === "InvalidArgument" && noKey.argument).toBe("orderingKey")
        })
      )
    )

    it.effect(
      "retention: ids older than dedupeWindow are trimmed in batches, younger ids and marks kept (SPEC §12)",
      () =>
        run(
          Effect.gen(function* () {
            const consumer = consumerName("trim")
            const store = yield* InboxStore
            for (let i = 0; i < 5; i++) {
              yield* Inbox.process(consumer, msg(`old-${i}`, { orderingKey: "k", seq: i + 1 }), Effect.void)
            }
            yield* TestClock.adjust(Duration.hours(2))
            yield* Inbox.process(consumer, msg("young"), Effect.void)
            const report = yield* store.trim
            if (capabilities.trims) {
              expect(report.deleted).toBeGreaterThanOrEqual(5)
              expect(yield* store.isProcessed(consumer, "old-0")).toBe(false)
              // batches of 2: at least 3 statements for 5 ids
              expect(report.batches).toBeGreaterThanOrEqual(3)
            } else {
              expect(report).toEqual({ deleted: 0, batches: 1 })
            }
            expect(yield* store.isProcessed(consumer, "young")).toBe(true)
            expect(yield* store.mark(consumer, "p1", "k")).toEqual(Option.some(5))
            // the mark still guards the key after its ids are gone
            expect((yield* Inbox.process(consumer, msg("old-0", { orderingKey: "k", seq: 1 }), Effect.void))._tag).toBe(
              capabilities.trims ? "Stale" : "Duplicate"
            )
          }),
          { dedupeWindow: Duration.hours(1), trimBatchSize: 2 }
        )
    )

    it.effect("ids younger than dedupeWindow are never trimmed", () =>
      run(
        Effect.gen(function* () {
          const consumer = consumerName("keep")
          const store = yield* InboxStore
          yield* Inbox.process(consumer, msg("m1"), Effect.void)
          yield* TestClock.adjust(Duration.minutes(59))
          yield* store.trim
          expect(yield* store.isProcessed(consumer, "m1")).toBe(true)
          expect((yield* Inbox.process(consumer, msg("m1"), Effect.void))._tag).toBe("Duplicate")
        }),
        { dedupeWindow: Duration.hours(1) }
      )
    )
  })
}
