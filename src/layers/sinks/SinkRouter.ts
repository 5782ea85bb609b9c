/**
 * A `Sink` that routes (SPEC §11): one relay, several sinks keyed by route (`{ billing: webhook, orders:
 * nats }`), each record going to the sink of its `routeId`; the route `*` is the default for routes without a
 * sink of their own.
 *
 * - A record whose route has no sink (and no default) fails permanently (`no-route`, naming the route): the
 *   drainer dead-letters or drops it by policy; never a crash, never silent.
 * - Health is per route. A route's `Retry-After` pauses that route only: the router keeps the pause itself and
 *   hands the drainer a transient failure without `retryAfterMillis`, so the partition is not paused and the
 *   records of other routes in it keep flowing. A failure streak (`streakThreshold` transient failures in a
 *   row, default 3) pauses the route too, for `streakPause` doubling per further failure up to `maxPause`
 *   (defaults 1 s and 30 s), so an outage or a hanging destination costs one probe per pause instead of a
 *   timeout per record. While a route is paused its sends fail at once, transiently (`route-paused`); the
 *   first send after the pause probes the sink. Nothing of another route waits on it.
 * - Logs: a WARN per route when its streak starts and at most once per minute while it lasts (with the count,
 *   the start and the last error), and an INFO when it recovers; every line carries `route`. Metrics:
 *   `OutboxRouteSends{route, outcome}` and `OutboxRoutePauses{route}`.
 * - Ordering is the drainer's: a transient failure stops the rest of the record's ordering-key group, so a
 *   key shared by two routes is held back by either (R-HOL wins over route isolation).
 * - The router is built with `Sink.fromRegister`: routed to a sink in register form (NATS, RabbitMQ), a
 *   delivery on a healthy route is counted and handed on without running an effect, so a drainer waits for it
 *   without a fiber per send. Its counts carry the relay's metric labels either way.
 *
 * @since 0.2.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as DateTime from "effect/DateTime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as MetricLabel from "effect/MetricLabel"
import type * as Scope from "effect/Scope"
import type { OutboxRecord } from "../../domain/OutboxRecord.js"
import * as BoundMetric from "../../services/BoundMetric.js"
import * as OutboxMetrics from "../../services/OutboxMetrics.js"
import {
  fromRegister,
  type Register,
  registerOf,
  RoutePausedCode,
  SendError,
  Sink,
  type SinkService
} from "../../services/Sink.js"

/**
 * The route name of the default sink.
 *
 * @since 0.2.0
 */
export const DefaultRoute = "*"

/**
 * Options of the router.
 *
 * @since 0.2.0
 */
export interface SinkRouterOptions {
  /** Transient failures in a row after which a route pauses (default 3; 0 disables streak pauses). */
  readonly streakThreshold?: number | undefined
  /** The first streak pause (default 1 second); doubles per further failure. */
  readonly streakPause?: Duration.DurationInput | undefined
  /** The longest streak pause (default 30 seconds). A `Retry-After` is honoured as the sink reports it (capped there). */
  readonly maxPause?: Duration.DurationInput | undefined
}

/**
 * The health of one route, as the router sees it.
 *
 * @since 0.2.0
 */
export interface RouteHealth {
  readonly route: string
  /** Transient failures in a row (0 when healthy). */
  readonly failures: number
  /** Sends fail at once until this instant (epoch ms); 0 when not paused. */
  readonly pausedUntil: number
  readonly lastError: string
}

/**
 * A routing sink, with a view of each route's health.
 *
 * @since 0.2.0
 */
export interface SinkRouterService extends SinkService {
  /** The routes with a sink (`*` for the default). */
  readonly routes: ReadonlyArray<string>
  /** The current health of every route that has failed or been paused. */
  readonly health: Effect.Effect<ReadonlyArray<RouteHealth>>
}

interface State {
  failures: number
  since: number
  lastError: string
  lastWarnAt: number
  warned: boolean
  pausedUntil: number
}

const warnInterval = Duration.toMillis(Duration.minutes(1))
const iso = (millis: number): string => DateTime.formatIso(DateTime.unsafeMake(millis))

/**
 * Builds a router over the sinks of `routes` (route name → sink; `*` is the default).
 *
 * @since 0.2.0
 */
export const make = (
  routes: Readonly<Record<string, SinkService>>,
  options: SinkRouterOptions = {}
): Effect.Effect<SinkRouterService> =>
  Effect.map(Effect.clock, (clock) => {
    const threshold = Math.max(0, Math.floor(options.streakThreshold ?? 3))
    const firstPause = Duration.toMillis(options.streakPause ?? "1 second")
    const maxPause = Duration.toMillis(options.maxPause ?? "30 seconds")
    const sinks = new Map(Object.entries(routes))
    const fallback = sinks.get(DefaultRoute)
    const states = new Map<string, State>()
    /** The register form of each sink that has one (`Sink.registerOf`): its sends need no fiber either. */
    const registers = new Map<SinkService, Register | undefined>()
    for (const sink of sinks.values()) registers.set(sink, registerOf(sink))
    /** `OutboxRouteSends{route, outcome}`, bound once per route and outcome. */
    const counters = new Map<string, BoundMetric.BoundMetric<number>>()
    const counter = (route: string, outcome: string): BoundMetric.BoundMetric<number> => {
      const key = `${route}\u0000${outcome}`
      let bound = counters.get(key)
      if (bound === undefined) {
        bound = BoundMetric.bind(OutboxMetrics.OutboxRouteSends, [
          MetricLabel.make("route", route),
          MetricLabel.make("outcome", outcome)
        ])
        counters.set(key, bound)
      }
      return bound
    }
    const count = (route: string, outcome: string): Effect.Effect<void> =>
      BoundMetric.updateAll(counter(route, outcome), [1])
    const stateOf = (route: string): State => {
      let state = states.get(route)
      if (state === undefined) {
        state = {
          failures: 0,
          since: 0,
          lastError: "",
          lastWarnAt: Number.NEGATIVE_INFINITY,
          warned: false,
          pausedUntil: 0
        }
        states.set(route, state)
      }
      return state
    }

    const pause = (route: string, state: State, until: number, why: string): Effect.Effect<void> => {
      if (until <= state.pausedUntil) return Effect.void
      state.pausedUntil = until
      return Effect.zipRight(
        Metric.increment(Metric.tagged(OutboxMetrics.OutboxRoutePauses, "route", route)),
        Effect.logDebug(`route ${route} paused until ${iso(until)}: ${why}`).pipe(Effect.annotateLogs({ route }))
      )
    }

    const failed = (route: string, error: SendError, now: number): Effect.Effect<void> =>
      Effect.suspend(() => {
        const state = stateOf(route)
        if (state.failures === 0) {
          state.since = now
          state.warned = false
        }
        state.failures += 1
        state.lastError = `${error.code}: ${error.message}`
        const effects: Array<Effect.Effect<void>> = []
        if (error.retryAfterMillis !== undefined && error.retryAfterMillis > 0) {
          effects.push(pause(route, state, now + error.retryAfterMillis, "Retry-After"))
        } else if (threshold > 0 && state.failures >= threshold) {
          const millis = Math.min(maxPause, firstPause * 2 ** Math.min(30, state.failures - threshold))
          effects.push(pause(route, state, now + millis, `${state.failures} failures in a row`))
        }
        if (now - state.lastWarnAt >= warnInterval) {
          state.lastWarnAt = now
          state.warned = true
          effects.push(
            Effect.logWarning(
              `sink failing for route ${route}: ${state.failures} failures since ${iso(state.since)}, last error ${state.lastError}`
            ).pipe(
              Effect.annotateLogs({
                route,
                failures: state.failures,
                since: iso(state.since),
                lastError: state.lastError
              })
            )
          )
        }
        return Effect.all(effects, { discard: true })
      })

    /** Whether the route is in no failure streak: a success on it has nothing to recover. */
    const healthy = (route: string): boolean => (states.get(route)?.failures ?? 0) === 0

    const recovered = (route: string, now: number): Effect.Effect<void> => {
      const state = states.get(route)
      if (state === undefined || healthy(route)) return Effect.void
      const failures = state.failures
      const warned = state.warned
      state.failures = 0
      state.warned = false
      state.pausedUntil = 0
      if (!warned) return Effect.void
      const over = Duration.format(Duration.millis(Math.max(0, now - state.since)))
      return Effect.logInfo(`sink recovered for route ${route} after ${failures} failures over ${over}`).pipe(
        Effect.annotateLogs({ route })
      )
    }

    /** What the route makes of a send's result: counts it and keeps the route's health. */
    const settled = (via: string, result: Effect.Effect<void, SendError>): Effect.Effect<void, SendError> =>
      Effect.matchCauseEffect(result, {
        onSuccess: () =>
          Effect.zipRight(
            count(via, "delivered"),
            Effect.flatMap(Clock.currentTimeMillis, (at) => recovered(via, at))
          ),
        onFailure: (cause) =>
          Effect.flatMap(Clock.currentTimeMillis, (at) => {
            const error = cause._tag === "Fail" ? cause.error : undefined
            if (error === undefined) return Effect.failCause(cause)
            if (!error.retryable) return Effect.zipRight(count(via, "permanent"), Effect.fail(error))
            // the route keeps the pause: the partition (and every other route in it) goes on
            const transient = new SendError({ retryable: true, code: error.code, message: error.message })
            return count(via, "transient").pipe(
              Effect.zipRight(failed(via, error, at)),
              Effect.zipRight(Effect.fail(transient))
            )
          })
      })

    /**
     * One send, in register form. A delivery on a healthy route through a sink in register form is counted
     * and handed on at once (no effect to run); refusals, failures and recoveries, and sinks without a
     * register, are handed on as effects that do the route's bookkeeping.
     */
    const register: Register = (record, resume, labels) => {
      const route = record.routeId
      const own = sinks.get(route)
      const sink = own ?? fallback
      const via = own === undefined ? DefaultRoute : route
      if (sink === undefined) {
        return resume(
          Effect.zipRight(
            count(route, "unrouted"),
            Effect.fail(
              new SendError({
                retryable: false,
                code: "no-route",
                message:
                  route.length === 0
                    ? `record ${record.id} has no route and there is no default sink`
                    : `no sink for route ${route} (record ${record.id})`
              })
            )
          )
        )
      }
      const state = states.get(via)
      if (state !== undefined && clock.unsafeCurrentTimeMillis() < state.pausedUntil) {
        return resume(
          Effect.zipRight(
            count(via, "paused"),
            Effect.fail(
              new SendError({
                retryable: true,
                code: RoutePausedCode,
                message: `route ${via} paused until ${iso(state.pausedUntil)} (last error ${state.lastError})`
              })
            )
          )
        )
      }
      const inner = registers.get(sink)
      if (inner === undefined) return resume(settled(via, sink.send(record)))
      return inner(
        record,
        (result) => {
          // a delivery on a healthy route: counted here, nothing to recover (see `recovered`)
          if (Exit.isExit(result) && Exit.isSuccess(result) && healthy(via)) {
            counter(via, "delivered").update(1, labels)
            return resume(result)
          }
          resume(settled(via, result))
        },
        labels
      )
    }
    const { send } = fromRegister(register)

    const health = Effect.sync(() =>
      Array.from(states, ([route, state]) => ({
        route,
        failures: state.failures,
        pausedUntil: state.pausedUntil,
        lastError: state.lastError
      }))
    )
    return { send, routes: Array.from(sinks.keys()), health }
  })

/**
 * The `SinkRouter` recorder tag: the router behind the `Sink` of {@link layer}, for its route health.
 *
 * @since 0.2.0
 */
export class SinkRouter extends Context.Tag("effect-outbox/SinkRouter")<SinkRouter, SinkRouterService>() {}

/**
 * The sink a sink layer builds, in the current scope — to put sinks of several layers into one router.
 *
 * @since 0.2.0
 */
export const sinkOf = <E, R>(layer: Layer.Layer<Sink, E, R>): Effect.Effect<SinkService, E, R | Scope.Scope> =>
  Effect.map(Layer.build(layer), (context) => Context.get(context, Sink))

/**
 * The router as the `Sink` (and as `SinkRouter`), over the sinks `routes` builds, e.g.
 * `SinkRouter.layer(Effect.all({ billing: SinkRouter.sinkOf(WebhookSink.layerWith({ url })), orders:
 * SinkRouter.sinkOf(NatsSink.layer({ servers })) }))`. The sinks live as long as the layer.
 *
 * @since 0.2.0
 */
export const layer = <E, R>(
  routes: Effect.Effect<Readonly<Record<string, SinkService>>, E, R>,
  options: SinkRouterOptions = {}
): Layer.Layer<Sink | SinkRouter, E, Exclude<R, Scope.Scope>> =>
  Layer.scopedContext(
    Effect.gen(function* () {
      const router = yield* make(yield* routes, options)
      return Context.make(SinkRouter, router).pipe(Context.add(Sink, Sink.of({ send: router.send })))
    })
  )
