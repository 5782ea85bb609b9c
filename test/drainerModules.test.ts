/**
 * Unit tests of the drainer's modules on their own: the turn order of a batch, the sink-failure streak,
 * the wave sender, the bound metrics, the dead-letter entry of a record and the run-time configuration check.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import * as Metric from "effect/Metric"
import * as MetricLabel from "effect/MetricLabel"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import { OutboxRecord } from "../src/domain/OutboxRecord.js"
import * as BatchState from "../src/programs/drainer/BatchState.js"
import * as Build from "../src/programs/drainer/Build.js"
import * as Disposal from "../src/programs/drainer/Disposal.js"
import * as Instance from "../src/programs/drainer/Instance.js"
import * as Sender from "../src/programs/drainer/Sender.js"
import { settings } from "../src/programs/drainer/Settings.js"
import * as SinkHealth from "../src/programs/drainer/SinkHealth.js"
import * as Turns from "../src/programs/drainer/Turns.js"
import * as Watchdog from "../src/programs/drainer/Watchdog.js"
import * as OutboxMetrics from "../src/services/OutboxMetrics.js"
import { fromRegister, registerOf, SendError, type SinkService } from "../src/services/Sink.js"

const record = (id: string, orderingKey?: string) =>
  new OutboxRecord({
    id,
    partitionKey: "p",
    envelopeId: `env-${id}`,
    bindingId: "b",
    payload: new Uint8Array([1, 2, 3]),
    headers: { trace: "t-1" },
    orderingKey: Option.fromNullable(orderingKey),
    address: "",
    routeId: "",
    seq: 1,
    status: "claimed",
    createdAt: DateTime.unsafeMake(0),
    expiresAt: Option.none(),
    claimedBy: Option.none(),
    claimedAt: Option.none(),
    claimVersion: 1,
    replayCount: 3,
    firstAttemptedAt: Option.none(),
    completedAt: Option.none()
  })

const ids = (lanes: ReadonlyArray<Turns.Lane>) => lanes.map((lane) => lane.group[lane.next]?.id)

/** Plays a batch: every lane goes on after its turn. Returns the ids of each wave. */
const play = (turns: Turns.Turns): Array<Array<string | undefined>> => {
  const waves: Array<Array<string | undefined>> = []
  while (!turns.done()) {
    const lanes = turns.take()
    waves.push(ids(lanes))
    const goOn: Array<Turns.Lane> = []
    for (const lane of lanes) {
      lane.next += 1
      if (lane.next < lane.group.length) goOn.push(lane)
    }
    turns.requeue(goOn)
  }
  return waves
}

describe("Turns", () => {
  it("groups of several records take turns round robin; groups of one only fill the waves", () => {
    const groups = Turns.orderGroups([
      [record("s1")],
      [record("a1", "a"), record("a2", "a")],
      [record("s2")],
      [record("b1", "b"), record("b2", "b")],
      [record("c1", "c"), record("c2", "c")]
    ])
    expect(groups.map((g) => g[0]?.id)).toEqual(["a1", "b1", "c1", "s1", "s2"])
    expect(play(Turns.make(groups, 2))).toEqual([
      ["a1", "b1"],
      ["c1", "a2"],
      ["b2", "c2"],
      ["s1", "s2"]
    ])
  })

  it("a wider take lets groups of one fill it; lanes put back keep their turn ahead of the queue", () => {
    const turns = Turns.make(
      Turns.orderGroups([[record("a1", "a"), record("a2", "a")], [record("s1")], [record("s2")], [record("s3")]]),
      1
    )
    expect(turns.exhausted()).toBe(false)
    const wide = turns.take(Number.POSITIVE_INFINITY)
    expect(ids(wide)).toEqual(["a1", "s1", "s2", "s3"])
    expect(turns.exhausted()).toBe(true)
    // a1 and s1 went out; s2 and s3 did not start: they go back to the front, a's lane behind them
    const [a, , s2, s3] = wide
    if (a === undefined || s2 === undefined || s3 === undefined) throw new Error("lanes missing")
    a.next += 1
    turns.putBack([s2, s3])
    turns.requeue([a])
    expect(turns.exhausted()).toBe(false)
    expect(ids(turns.take())).toEqual(["s2"])
    expect(ids(turns.take())).toEqual(["s3"])
    expect(ids(turns.take())).toEqual(["a2"])
    expect(turns.done()).toBe(true)
  })

  it("lets go of a group when it starts and of each record its lane settles; untried and restOf keep the rest", () => {
    const a = [record("a1", "a"), record("a2", "a"), record("a3", "a")]
    const groups = Turns.orderGroups([a, [record("s1")]])
    const turns = Turns.make(groups, 1)
    const [lane] = turns.take()
    if (lane === undefined) throw new Error("no lane")
    // the lane holds the group now; the list of groups does not
    expect(groups[0]).toBeUndefined()
    expect(groups[1]?.map((r) => r?.id)).toEqual(["s1"])
    expect(Turns.advance(lane)).toBe(true)
    expect(lane.group.map((r) => r?.id)).toEqual([undefined, "a2", "a3"])
    expect(Turns.restOf(lane, lane.next).map((r) => r.id)).toEqual(["a2", "a3"])
    expect(Turns.restOf(lane, lane.next + 1).map((r) => r.id)).toEqual(["a3"])
    turns.requeue([lane])
    expect(turns.untried().map((r) => r.id)).toEqual(["a2", "a3", "s1"])
    expect(Turns.advance(lane)).toBe(true)
    expect(Turns.advance(lane)).toBe(false)
    expect(lane.group).toEqual([undefined, undefined, undefined])
  })

  it("untried lists the rest of the queued lanes, then every group not started", () => {
    const turns = Turns.make(
      Turns.orderGroups([[record("a1", "a"), record("a2", "a")], [record("s1")], [record("s2")]]),
      1
    )
    const first = turns.take()
    expect(ids(first)).toEqual(["a1"])
    first.forEach((lane) => (lane.next += 1))
    turns.requeue(first)
    expect(turns.untried().map((r) => r.id)).toEqual(["a2", "s1", "s2"])
  })
})

describe("SinkHealth", () => {
  it("warns at the first failure of a streak and then at most once per interval; recovery only after a warning", () => {
    const health = SinkHealth.make("p")
    const minute = Duration.toMillis(SinkHealth.interval)
    expect(SinkHealth.recordFailures(health, 1_000, 1, "503: busy")).toBe(
      "sink failing for partition p: 1 failures since 1970-01-01T00:00:01.000Z, last error 503: busy"
    )
    expect(SinkHealth.recordFailures(health, 2_000, 2, "503: busy")).toBeUndefined()
    expect(SinkHealth.recordFailures(health, 1_000 + minute, 1, "timeout: slow")).toBe(
      "sink failing for partition p: 4 failures since 1970-01-01T00:00:01.000Z, last error timeout: slow"
    )
    expect(SinkHealth.recordSuccess(health, 2_000 + minute)).toBe(
      "sink recovered for partition p after 4 failures over 1m 1s"
    )
    expect(SinkHealth.recordSuccess(health, 3_000 + minute)).toBeUndefined()
    // a new streak within the interval of the last warning is counted but not logged, nor is its end
    expect(SinkHealth.recordFailures(health, 4_000 + minute, 1, "503: busy")).toBeUndefined()
    expect(health.failures).toBe(1)
    expect(SinkHealth.recordSuccess(health, 5_000 + minute)).toBeUndefined()
    expect(health.failures).toBe(0)
  })
})

const batchRuntime = BatchState.runtime

const slotsOf = (records: ReadonlyArray<OutboxRecord>): Array<BatchState.Slot> =>
  records.map((r) => ({
    lane: { group: [r], next: 0 },
    record: r,
    hasNext: false,
    result: undefined,
    how: undefined,
    outcome: undefined
  }))

describe("Sender", () => {
  it.effect("sends that finish at once run on the spot; waiting sends are in flight together under one deadline", () =>
    Effect.gen(function* () {
      const started: Array<string> = []
      const sink: SinkService = {
        send: (r) =>
          Effect.suspend(() => {
            started.push(r.id)
            if (r.id === "quick") return Effect.void
            if (r.id === "refused") return Effect.fail(new SendError({ retryable: false, code: "400", message: "no" }))
            return Effect.sleep(r.id === "slow" ? "2 seconds" : "1 minute")
          })
      }
      const records = ["slow", "quick", "stuck", "refused"].map((id) => record(id))
      const slots = slotsOf(records)
      const state = BatchState.make(records)
      const fiber = yield* Effect.fork(Sender.sendAll(sink, slots, state, yield* batchRuntime, Duration.seconds(5)))
      yield* TestClock.adjust("1 second")
      // every send started before any waiting one finished
      expect(started).toEqual(["slow", "quick", "stuck", "refused"])
      expect([...state.inFlight].sort()).toEqual(["slow", "stuck"])
      yield* TestClock.adjust("4 seconds")
      yield* Fiber.join(fiber)
      const results = slots.map((s) => (s.result === undefined ? "none" : Either.isRight(s.result) ? "ok" : "failed"))
      // the stuck send outlived the deadline: interrupted, no result (the wave counts it as a timeout)
      expect(results).toEqual(["ok", "ok", "none", "failed"])
    })
  )

  it.effect(
    "with a cap, starting stops once that many sends wait; a send that ends later starts nothing; the result says so",
    () =>
      Effect.gen(function* () {
        const started: Array<string> = []
        const sink: SinkService = {
          send: (r) =>
            Effect.suspend(() => {
              started.push(r.id)
              return r.id.startsWith("q") ? Effect.void : Effect.sleep("1 second")
            })
        }
        const records = ["q1", "w1", "q2", "w2", "q3", "w3", "q4"].map((id) => record(id))
        const slots = slotsOf(records)
        const state = BatchState.make(records)
        const fiber = yield* Effect.fork(
          Sender.sendAll(sink, slots, state, yield* batchRuntime, Duration.seconds(5), 2)
        )
        yield* TestClock.adjust("2 seconds")
        const result = yield* Fiber.join(fiber)
        // q1 w1 q2 w2 started; then two sends waited, so q3 w3 q4 were not tried, not even after w1 and w2 ended
        expect(result).toEqual({ started: 4, atOnce: false })
        expect(started).toEqual(["q1", "w1", "q2", "w2"])
        expect(slots.slice(4).map((s) => s.result)).toEqual([undefined, undefined, undefined])
        // sends that all finish at once: every one started, at once
        const quick = ["q5", "q6", "q7"].map((id) => record(id))
        const quickSlots = slotsOf(quick)
        const all = yield* Sender.sendAll(
          sink,
          quickSlots,
          BatchState.make(quick),
          yield* batchRuntime,
          Duration.seconds(5),
          1
        )
        expect(all).toEqual({ started: 3, atOnce: true })
      })
  )

  it.effect("a sink defect stops the wave with that defect", () =>
    Effect.gen(function* () {
      const sink: SinkService = { send: () => Effect.dieMessage("sink bug") }
      const records = [record("r1"), record("r2")]
      const slots = slotsOf(records)
      const exit = yield* Effect.exit(
        Sender.sendAll(sink, slots, BatchState.make(records), yield* batchRuntime, Duration.seconds(5))
      )
      expect(exit._tag).toBe("Failure")
      expect(slots[1]?.result).toBeUndefined()
    })
  )

  it.effect("a defect of a waiting send ends the wave at once and interrupts the sends still running", () =>
    Effect.gen(function* () {
      const interrupted: Array<string> = []
      const sink: SinkService = {
        send: (r) =>
          r.id === "buggy"
            ? Effect.zipRight(Effect.sleep("1 second"), Effect.dieMessage("sink bug"))
            : Effect.onInterrupt(Effect.sleep("1 minute"), () => Effect.sync(() => interrupted.push(r.id)))
      }
      const records = [record("slow"), record("buggy"), record("later")]
      const slots = slotsOf(records)
      const state = BatchState.make(records)
      const fiber = yield* Effect.fork(
        Effect.exit(Sender.sendAll(sink, slots, state, yield* batchRuntime, Duration.seconds(30)))
      )
      yield* TestClock.adjust("1 second")
      // the defect ends the wave long before its 30 s deadline
      const exit = yield* Fiber.join(fiber)
      expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
      yield* Effect.yieldNow()
      expect(interrupted.sort()).toEqual(["later", "slow"])
      expect(slots.map((s) => s.result)).toEqual([undefined, undefined, undefined])
    })
  )
})

/** A sink in `register` form whose open sends the test resumes by hand (`resumes`), counting its cancels. */
const handResumed = (refuse: (id: string) => SendError | "ok" | undefined) => {
  const started: Array<string> = []
  const resumes = new Map<string, (result: Effect.Effect<void, SendError>) => void>()
  const cancelled: Array<string> = []
  const sink = fromRegister((r, resume) => {
    started.push(r.id)
    const now = refuse(r.id)
    if (now === "ok") return resume(Effect.void)
    if (now !== undefined) return resume(Effect.fail(now))
    resumes.set(r.id, resume)
    return Effect.sync(() => void cancelled.push(r.id))
  })
  return { sink, started, resumes, cancelled }
}

const outcomes = (slots: ReadonlyArray<BatchState.Slot>) =>
  slots.map((s) => (s.result === undefined ? "none" : Either.isRight(s.result) ? "ok" : s.result.left.code))

describe("Sender, a sink in register form (no fiber per send)", () => {
  for (const withTimer of [false, true]) {
    const label = withTimer ? "with the loop's send timer" : "with a race"
    it.scoped(
      `${label}: sends resumed at once are done on the spot; the others are in flight together until the deadline, then cancelled`,
      () =>
        Effect.gen(function* () {
          const refused = new SendError({ retryable: false, code: "400", message: "no" })
          const { sink, started, resumes, cancelled } = handResumed((id) =>
            id === "quick" ? "ok" : id === "refused" ? refused : undefined
          )
          const timer = withTimer ? yield* Watchdog.start(Duration.seconds(5)) : undefined
          const records = ["slow", "quick", "stuck", "refused"].map((id) => record(id))
          const slots = slotsOf(records)
          const state = BatchState.make(records)
          const fiber = yield* Effect.fork(
            Sender.sendAll(sink, slots, state, yield* batchRuntime, timer ?? Duration.seconds(5))
          )
          yield* TestClock.adjust("1 second")
          expect(started).toEqual(["slow", "quick", "stuck", "refused"])
          expect([...state.inFlight].sort()).toEqual(["slow", "stuck"])
          resumes.get("slow")?.(Effect.void)
          expect([...state.inFlight]).toEqual(["stuck"])
          yield* TestClock.adjust("3999 millis")
          expect(yield* Fiber.poll(fiber)).toEqual(Option.none())
          yield* TestClock.adjust("1 millis")
          expect(yield* Fiber.join(fiber)).toEqual({ started: 4, atOnce: false })
          // the stuck send outlived the deadline: cancelled, no result (the wave counts it as a timeout)
          expect(cancelled).toEqual(["stuck"])
          resumes.get("stuck")?.(Effect.void)
          expect(outcomes(slots)).toEqual(["ok", "ok", "none", "400"])
          if (timer !== undefined) expect(timer.armed.size).toBe(0)
        })
    )
  }

  it.effect("every send resumed at once: all started, the wave done at once; a cap counts only open sends", () =>
    Effect.gen(function* () {
      const { sink, started, resumes } = handResumed((id) => (id.startsWith("q") ? "ok" : undefined))
      const quick = ["q1", "q2", "q3"].map((id) => record(id))
      expect(
        yield* Sender.sendAll(sink, slotsOf(quick), BatchState.make(quick), yield* batchRuntime, Duration.seconds(5), 1)
      ).toEqual({ started: 3, atOnce: true })
      const records = ["q4", "w1", "q5", "w2", "q6", "w3"].map((id) => record(id))
      const slots = slotsOf(records)
      const fiber = yield* Effect.fork(
        Sender.sendAll(sink, slots, BatchState.make(records), yield* batchRuntime, Duration.seconds(5), 2)
      )
      yield* Effect.yieldNow()
      for (const resume of resumes.values()) resume(Effect.void)
      expect(yield* Fiber.join(fiber)).toEqual({ started: 4, atOnce: false })
      // two sends were open, so q6 and w3 were not tried, not even after w1 and w2 were resumed
      expect(started.slice(3)).toEqual(["q4", "w1", "q5", "w2"])
      expect(outcomes(slots)).toEqual(["ok", "ok", "ok", "ok", "none", "none"])
    })
  )

  it.effect(
    "a send resumed with an effect that is not yet its result: the effect runs, its failure is the result",
    () =>
      Effect.gen(function* () {
        const { sink, resumes } = handResumed(() => undefined)
        const records = [record("later"), record("fails")]
        const slots = slotsOf(records)
        const fiber = yield* Effect.fork(
          Sender.sendAll(sink, slots, BatchState.make(records), yield* batchRuntime, Duration.seconds(30))
        )
        yield* Effect.yieldNow()
        resumes.get("later")?.(Effect.sleep("2 seconds"))
        resumes.get("fails")?.(
          Effect.zipRight(
            Effect.sleep("1 second"),
            Effect.fail(new SendError({ retryable: true, code: "reconnecting", message: "later" }))
          )
        )
        yield* TestClock.adjust("1 second")
        expect(yield* Fiber.poll(fiber)).toEqual(Option.none())
        yield* TestClock.adjust("1 second")
        yield* Fiber.join(fiber)
        expect(outcomes(slots)).toEqual(["ok", "reconnecting"])
      })
  )

  it.effect("a sink wrapping a register-form sink with a send of its own: its own send runs, not the register", () =>
    Effect.gen(function* () {
      const { sink, started } = handResumed(() => "ok")
      expect(registerOf(sink)).toBeDefined()
      // a copy that keeps the send keeps the register with it
      expect(registerOf({ ...sink })).toBe(registerOf(sink))
      const wrapped: Array<string> = []
      const logging: SinkService = {
        ...sink,
        send: (r) =>
          Effect.zipRight(
            Effect.sync(() => wrapped.push(r.id)),
            sink.send(r)
          )
      }
      expect(registerOf(logging)).toBeUndefined()
      const records = [record("a"), record("b")]
      const slots = slotsOf(records)
      yield* Sender.sendAll(logging, slots, BatchState.make(records), yield* batchRuntime, Duration.seconds(5))
      expect(wrapped).toEqual(["a", "b"])
      expect(started).toEqual(["a", "b"])
      expect(outcomes(slots)).toEqual(["ok", "ok"])
    })
  )

  it.effect("a defect (register throws, or a resumed effect dies) stops the wave and cancels the open sends", () =>
    Effect.gen(function* () {
      const throwing = fromRegister(() => {
        throw new Error("sink bug")
      })
      const one = [record("r1"), record("r2")]
      const thrown = yield* Effect.exit(
        Sender.sendAll(throwing, slotsOf(one), BatchState.make(one), yield* batchRuntime, Duration.seconds(5))
      )
      expect(Exit.isFailure(thrown) && Cause.isDie(thrown.cause)).toBe(true)

      const { sink, resumes, cancelled } = handResumed(() => undefined)
      const records = [record("slow"), record("buggy")]
      const slots = slotsOf(records)
      const fiber = yield* Effect.fork(
        Effect.exit(Sender.sendAll(sink, slots, BatchState.make(records), yield* batchRuntime, Duration.seconds(30)))
      )
      yield* Effect.yieldNow()
      resumes.get("buggy")?.(Effect.zipRight(Effect.sleep("1 second"), Effect.dieMessage("sink bug")))
      yield* TestClock.adjust("1 second")
      const exit = yield* Fiber.join(fiber)
      expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
      expect(cancelled).toEqual(["slow"])
      expect(outcomes(slots)).toEqual(["none", "none"])
    })
  )
})

describe("bound metrics", () => {
  it.effect(
    "a bound update reaches the series OutboxMetrics.tagged names, with or without a route and fiber labels",
    () =>
      Effect.gen(function* () {
        const partition = `bound-${Math.random().toString(36).slice(2)}`
        const plain = Instance.routeMetricsFor(partition, undefined)
        const routed = Instance.routeMetricsFor(partition, "orders")
        const drainer = Instance.metricsFor(partition, "orders")
        const labels = yield* FiberRef.get(FiberRef.currentMetricLabels)
        plain.bound.delivered.update(3, labels)
        plain.bound.delivered.update(2, labels)
        routed.bound.delivered.update(7, labels)
        drainer.bound.latency.update(5, labels)
        drainer.bound.latency.update(300, labels)
        expect((yield* Metric.value(plain.delivered)).count).toBe(5)
        expect((yield* Metric.value(routed.delivered)).count).toBe(7)
        const latency = yield* Metric.value(OutboxMetrics.tagged(OutboxMetrics.OutboxDrainLatency, partition, "orders"))
        expect([latency.count, latency.sum]).toEqual([2, 305])
        // under fiber metric labels, both reach the same labelled series, apart from the unlabelled one
        yield* Effect.sync(() => routed.bound.delivered.update(4, [MetricLabel.make("relay", "r1")])).pipe(
          Effect.zipRight(
            Effect.gen(function* () {
              const fiberLabels = yield* FiberRef.get(FiberRef.currentMetricLabels)
              routed.bound.delivered.update(1, fiberLabels)
              expect((yield* Metric.value(routed.delivered)).count).toBe(5)
            })
          ),
          Effect.tagMetrics("relay", "r1")
        )
        expect((yield* Metric.value(routed.delivered)).count).toBe(7)
      })
  )
})

describe("Disposal", () => {
  it("the dead-letter entry carries the record, its failure and its attempts, keyed by the record id", () => {
    const r = record("r1", "k")
    const entry = Disposal.entryFor(
      r,
      { category: "permanent", reason: "rejected", errorCode: "400", lastError: "bad request" },
      DateTime.unsafeMake(5_000)
    )
    expect(entry).toMatchObject({
      id: "r1",
      recordId: "r1",
      partitionKey: "p",
      envelopeId: "env-r1",
      orderingKey: "k",
      category: "permanent",
      reason: "rejected",
      errorCode: "400",
      lastError: "bad request",
      attempts: 3,
      headers: { trace: "t-1" }
    })
    expect(entry.payload).toEqual(new Uint8Array([1, 2, 3]))
  })
})

describe("Build", () => {
  it("names every dead-letter policy left without a DeadLetterStore, and empty ids", () => {
    const config = settings({ partitionKey: "", owner: "", onPoison: "drop" })
    expect(Build.problems(config, false)).toEqual([
      "partitionKey is empty",
      "owner is empty",
      'onExpired is "dlq" but no DeadLetterStore is provided',
      'onPermanentFailure is "dlq" but no DeadLetterStore is provided'
    ])
    expect(Build.problems(settings({ partitionKey: "p", owner: "o" }), true)).toEqual([])
  })
})
