/**
 * NatsSink against a real `nats-server -js` on 127.0.0.1 (started once per run by globalSetup; the
 * restart test starts its own): per-key order at the consumer, exactly-once at the consumer through
 * `Nats-Msg-Id`, a broker restart mid-drain, and permanent vs transient classification (SPEC §10).
 */
import { describe, expect, inject, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"
import { connect, type JetStreamManager, type NatsConnection } from "nats"
import { OutboxRecord } from "../src/domain/OutboxRecord.js"
import * as NatsSink from "../src/layers/sinks/NatsSink.js"
import {
  claimedRecord as record,
  recordTo,
  disposeThrough,
  expectOrdered,
  keyedRecords,
  holdAfter,
  relayUntil
} from "./support/BrokerRelay.js"
import { killedRelayTakenOver } from "./support/BrokerCrash.js"
import { buildCli } from "./support/CliBundle.js"
import { cliRunner, finish, waitFor } from "./support/CliProcess.js"
import { startNats } from "./support/NatsServer.js"

const natsUrl = inject("natsUrl")
const bundle = await buildCli()
afterAll(() => bundle.remove())
const directory = fs.mkdtempSync(path.join(os.tmpdir(), "outbox-nats-cli-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))
const { run, spawnCli } = cliRunner(bundle, directory)

/** An admin connection and a fresh stream capturing `<prefix>.>`; both removed afterwards. */
const withStream = <A, E>(
  url: string,
  use: (prefix: string, jsm: JetStreamManager, nc: NatsConnection) => Effect.Effect<A, E>
) =>
  Effect.acquireUseRelease(
    Effect.promise(async () => {
      const nc = await connect({ servers: url, maxReconnectAttempts: -1, reconnectTimeWait: 100 })
      const jsm = await nc.jetstreamManager()
      const prefix = `t${crypto.randomBytes(4).toString("hex")}`
      await jsm.streams.add({ name: prefix, subjects: [`${prefix}.>`], duplicate_window: 120_000_000_000 })
      return { nc, jsm, prefix }
    }),
    ({ jsm, nc, prefix }) => use(prefix, jsm, nc),
    ({ nc }) => Effect.promise(() => nc.close())
  )

interface Seen {
  readonly id: string
  readonly partition: string
  readonly orderingKey: string
  readonly subject: string
  readonly body: string
  readonly test: string
}

/** Every message of the stream, in stream order. */
const readStream = (jsm: JetStreamManager, stream: string) =>
  Effect.promise(async (): Promise<ReadonlyArray<Seen>> => {
    const info = await jsm.streams.info(stream)
    const seen: Array<Seen> = []
    for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
      const message = await jsm.streams.getMessage(stream, { seq })
      seen.push({
        id: message.header.get("Nats-Msg-Id"),
        partition: message.header.get("Outbox-Partition"),
        orderingKey: message.header.get("Outbox-Ordering-Key"),
        subject: message.subject,
        body: new TextDecoder().decode(message.data),
        test: message.header.get("x-test")
      })
    }
    return seen
  })

const messageCount = (jsm: JetStreamManager, stream: string) =>
  Effect.promise(() => jsm.streams.info(stream)).pipe(Effect.map((info) => info.state.messages))

const restrictedPassword = "restricted-pw"
const restrictedStream = "restricted"

/**
 * A NATS server of its own with two users, `admin` and `restricted` (with `permissions`, nats-server's own
 * syntax), and a stream `restricted` capturing `subjects`; `use` gets the restricted user's URL and the admin's
 * stream manager. The server is removed afterwards.
 */
const withRestrictedUser = <A, E>(
  permissions: string,
  subjects: ReadonlyArray<string>,
  use: (url: string, jsm: JetStreamManager) => Effect.Effect<A, E, Scope.Scope>
) =>
  Effect.acquireUseRelease(
    Effect.promise(() =>
      startNats({
        config: [
          "authorization {",
          "  users = [",
          '    { user: "admin", password: "admin-pw" }',
          `    { user: "restricted", password: "${restrictedPassword}", permissions: ${permissions} }`,
          "  ]",
          "}"
        ].join("\n")
      })
    ),
    (server) =>
      Effect.gen(function* () {
        const admin = yield* Effect.acquireRelease(
          Effect.promise(() => connect({ servers: server.url, user: "admin", pass: "admin-pw" })),
          (nc) => Effect.promise(() => nc.close())
        )
        const jsm = yield* Effect.promise(() => admin.jetstreamManager())
        yield* Effect.promise(() => jsm.streams.add({ name: restrictedStream, subjects: [...subjects] }))
        return yield* use(`nats://restricted:${restrictedPassword}@127.0.0.1:${server.port}`, jsm)
      }).pipe(Effect.scoped),
    (server) => Effect.promise(() => server.dispose())
  )

describe("NatsSink", { timeout: 120_000 }, () => {
  it.live("a relay publishes every record once, in per-key order, with Nats-Msg-Id = record id and headers", () =>
    withStream(natsUrl, (prefix, jsm) =>
      Effect.gen(function* () {
        const partitions = ["a", "b", "c"]
        const records = keyedRecords(partitions, 20)
        const left = yield* relayUntil(
          NatsSink.layer({ servers: natsUrl, subject: `${prefix}.{partitionKey}` }),
          records,
          Effect.map(messageCount(jsm, prefix), (n) => n >= 60)
        )
        expect(left).toBe(0)
        const seen = yield* readStream(jsm, prefix)
        expect(seen).toHaveLength(60)
        expect(new Set(seen.map((m) => m.id)).size).toBe(60)
        expectOrdered(seen, partitions, 20)
        const first = seen.find((m) => m.id === "a-0000")
        expect(first).toMatchObject({ subject: `${prefix}.a`, partition: "a", orderingKey: "k0", test: "yes" })
        expect(JSON.parse(first?.body ?? "null")).toEqual({ partitionKey: "a", n: 0 })
      })
    )
  )

  it.live("re-sending the same record ids is exactly-once at the consumer (Nats-Msg-Id)", () =>
    withStream(natsUrl, (prefix, jsm) =>
      Effect.gen(function* () {
        const sink = yield* NatsSink.make({ servers: natsUrl })
        const records = ["r1", "r2", "r3"].map((id) => record(id, `${prefix}.x`))
        yield* Effect.forEach(records, (r) => sink.send(r))
        yield* Effect.forEach(records, (r) => sink.send(r))
        yield* Effect.forEach(records, (r) => sink.send(r))
        const seen = yield* readStream(jsm, prefix)
        expect(seen.map((m) => m.id)).toEqual(["r1", "r2", "r3"])
      }).pipe(Effect.scoped)
    )
  )

  it.live(
    "a relay process killed between the stream's ack and the complete: its successor re-sends, the stream keeps each record once, in per-key order",
    () =>
      withStream(natsUrl, (prefix, jsm) =>
        Effect.gen(function* () {
          const partitions = ["a", "b", "c", "d"]
          const outcome = yield* killedRelayTakenOver({
            broker: "nats",
            url: natsUrl,
            target: `${prefix}.{partitionKey}`,
            records: keyedRecords(partitions, 30),
            killAfter: 50
          })
          expect(outcome.left).toBe(0)
          expect(outcome.killedSent).toHaveLength(50)
          expect(outcome.claimedAtKill).toBeGreaterThan(0)
          // the last record the killed relay had acknowledged was never completed: the successor sent it again
          expect(outcome.successorSent).toContain(outcome.killedSent.at(-1))
          expect(outcome.killedSent.length + outcome.successorSent.length).toBeGreaterThan(120)
          const seen = yield* readStream(jsm, prefix)
          expect(seen).toHaveLength(120)
          expect(new Set(seen.map((m) => m.id)).size).toBe(120)
          expectOrdered(seen, partitions, 30)
        })
      )
  )

  it.live("the broker restarted mid-drain: nothing lost, nothing duplicated, per-key order held", () =>
    Effect.acquireUseRelease(
      Effect.promise(() => startNats()),
      (server) =>
        withStream(server.url, (prefix, jsm) =>
          Effect.gen(function* () {
            const partitions = ["a", "b", "c", "d"]
            const records = keyedRecords(partitions, 60)
            const atRestart = { stored: 0 }
            // sends after the first 30 wait for the server to be stopped, so the restart always comes mid-drain
            const held = yield* holdAfter(
              NatsSink.layer({ servers: server.url, subject: `${prefix}.{partitionKey}`, timeout: "1 second" }),
              30
            )
            const left = yield* relayUntil(
              held.layer,
              records,
              Effect.map(messageCount(jsm, prefix).pipe(Effect.timeout("2 seconds"), Effect.option), (n) =>
                Option.exists(n, (count) => count >= 240)
              ),
              Effect.gen(function* () {
                yield* Effect.map(messageCount(jsm, prefix), (n) => n >= 30).pipe(
                  Effect.repeat({ until: (ok) => ok, schedule: Schedule.spaced("20 millis") })
                )
                atRestart.stored = yield* messageCount(jsm, prefix)
                yield* Effect.promise(() => server.stop())
                yield* held.open
                yield* Effect.promise(() => server.restart())
              })
            )
            expect(left).toBe(0)
            expect(atRestart.stored).toBeLessThan(240)
            const seen = yield* readStream(jsm, prefix)
            expect(new Set(seen.map((m) => m.id)).size).toBe(240)
            expect(seen).toHaveLength(240)
            expectOrdered(seen, partitions, 60)
          })
        ),
      (server) => Effect.promise(() => server.dispose())
    )
  )

  it.live(
    "classification: no stream, a bad subject and an oversize payload are permanent; a stopped broker is transient",
    () =>
      Effect.acquireUseRelease(
        Effect.promise(() => startNats()),
        (server) =>
          withStream(server.url, (prefix) =>
            Effect.gen(function* () {
              const sink = yield* NatsSink.make({ servers: server.url, timeout: "500 millis" })
              const noStream = yield* Effect.flip(sink.send(record("n1", `nostream${prefix}.x`)))
              expect(noStream).toMatchObject({ retryable: false, code: "no-stream" })
              const badSubject = yield* Effect.flip(sink.send(record("n2", `${prefix}.has space`)))
              expect(badSubject).toMatchObject({ retryable: false, code: "invalid-subject" })
              const huge = yield* Effect.flip(sink.send(record("n3", `${prefix}.x`, new Uint8Array(2 * 1024 * 1024))))
              expect(huge).toMatchObject({ retryable: false, code: "max_payload_exceeded" })
              const noAddress = yield* Effect.flip(sink.send(record("n4", "")))
              expect(noAddress).toMatchObject({ retryable: false, code: "no-address" })
              yield* sink.send(record("n5", `${prefix}.x`))
              yield* Effect.promise(() => server.stop())
              const down = yield* Effect.flip(sink.send(record("n6", `${prefix}.x`)))
              expect(down.retryable).toBe(true)
            }).pipe(Effect.scoped)
          ),
        (server) => Effect.promise(() => server.dispose())
      )
  )

  it.live("permission denied on a subject is permanent: the record is dead-lettered or dropped per policy", () =>
    withRestrictedUser('{ publish: { deny: ["forbidden.>"] } }', ["allowed.>", "forbidden.>"], (url, jsm) =>
      Effect.gen(function* () {
        const sink = yield* NatsSink.make({ servers: url, timeout: "2 seconds" })
        yield* sink.send(record("ok1", "allowed.x"))
        const denied = yield* Effect.flip(sink.send(record("no1", "forbidden.x")))
        expect(denied).toMatchObject({ retryable: false, code: "permission-denied" })
        expect(denied.message).toContain("forbidden.x")
        expect(denied.message).not.toContain(restrictedPassword)

        const forbidden = (id: string) => recordTo(id, "forbidden.{partitionKey}")
        const layer = NatsSink.layer({ servers: url, timeout: "2 seconds" })
        const deadLettered = yield* disposeThrough(layer, [forbidden("d1")], "dlq")
        expect(deadLettered).toHaveLength(1)
        expect(deadLettered[0]).toMatchObject({
          recordId: "d1",
          category: "permanent",
          errorCode: "permission-denied",
          address: "forbidden.{partitionKey}"
        })
        expect(yield* disposeThrough(layer, [forbidden("d2")], "drop")).toEqual([])
        const info = yield* Effect.promise(() => jsm.streams.info(restrictedStream))
        expect(info.state.messages).toBe(1)
      })
    )
  )

  it.live(
    "a record addressed to $JS.API.STREAM.PURGE / DELETE is refused as a system subject and dead-lettered; the streams keep their messages",
    () =>
      withStream(natsUrl, (prefix, jsm) =>
        Effect.gen(function* () {
          const sink = yield* NatsSink.make({ servers: natsUrl })
          yield* sink.send(record("kept", `${prefix}.x`))
          const purge = yield* Effect.flip(sink.send(record("p1", `$JS.API.STREAM.PURGE.${prefix}`)))
          expect(purge).toMatchObject({ retryable: false, code: "system-subject" })
          expect(purge.message).toContain("$-prefixed NATS system subject")
          const deadLettered = yield* disposeThrough(
            NatsSink.layer({ servers: natsUrl }),
            [recordTo("d1", `$JS.API.STREAM.PURGE.${prefix}`), recordTo("d2", `$JS.API.STREAM.DELETE.${prefix}`)],
            "dlq"
          )
          expect(deadLettered.map((e) => [e.recordId, e.category, e.errorCode]).sort()).toEqual([
            ["d1", "permanent", "system-subject"],
            ["d2", "permanent", "system-subject"]
          ])
          expect(yield* messageCount(jsm, prefix)).toBe(1)
        }).pipe(Effect.scoped)
      )
  )

  it.live(
    "only a JetStream publish ack (stream and sequence) is a delivery: a core subscriber's reply is permanent no-pub-ack",
    () =>
      withStream(natsUrl, (prefix, _jsm, nc) =>
        Effect.gen(function* () {
          const subject = `core${prefix}.x`
          const subscription = nc.subscribe(subject, {
            callback: (_error, message) => {
              message.respond(
                new TextEncoder().encode(
                  '{"type":"io.nats.jetstream.api.v1.stream_purge_response","success":true,"purged":3}'
                )
              )
            }
          })
          yield* Effect.promise(() => nc.flush())
          const sink = yield* NatsSink.make({ servers: natsUrl, timeout: "2 seconds" })
          const answered = yield* Effect.flip(sink.send(record("c1", subject)))
          expect(answered).toMatchObject({ retryable: false, code: "no-pub-ack" })
          subscription.unsubscribe()
          expect(NatsSink.isPubAck({ stream: prefix, seq: 4, duplicate: false })).toBe(true)
          expect(NatsSink.isPubAck({ success: true, purged: 3 })).toBe(false)
        }).pipe(Effect.scoped)
      )
  )

  it.live(
    "answers read on the sink's reply subscription: a JetStream API error below 500 is permanent, from 500 transient; a silent responder times out; a record header cannot replace Nats-Msg-Id",
    () =>
      withStream(natsUrl, (prefix, jsm, nc) =>
        Effect.gen(function* () {
          const sink = yield* NatsSink.make({ servers: natsUrl, timeout: "300 millis" })
          const withHeaders = (id: string, subject: string, headers: Record<string, string>) =>
            new OutboxRecord({ ...record(id, subject), headers })
          // the stream itself refuses: the publish expects another stream
          const wrongStream = yield* Effect.flip(
            sink.send(withHeaders("e1", `${prefix}.x`, { "Nats-Expected-Stream": "other" }))
          )
          expect(wrongStream).toMatchObject({ retryable: false, code: "jetstream-400" })
          expect(wrongStream.message).toContain(`${prefix}.x`)
          // an API error of 500 and above, answered as the JetStream API answers it
          const busy = nc.subscribe(`busy${prefix}.x`, {
            callback: (_error, message) => {
              message.respond(
                new TextEncoder().encode(
                  '{"error":{"code":503,"err_code":10039,"description":"JetStream not enabled"}}'
                )
              )
            }
          })
          // a responder that never answers: no 503 from the server, so only the timeout ends the publish
          const silent = nc.subscribe(`silent${prefix}.x`, { callback: () => undefined })
          yield* Effect.promise(() => nc.flush())
          const unavailable = yield* Effect.flip(sink.send(record("b1", `busy${prefix}.x`)))
          expect(unavailable).toMatchObject({ retryable: true, code: "jetstream-503" })
          expect(unavailable.message).toContain("JetStream not enabled")
          const timedOut = yield* Effect.flip(sink.send(record("s1", `silent${prefix}.x`)))
          expect(timedOut).toMatchObject({ retryable: true, code: "timeout" })
          busy.unsubscribe()
          silent.unsubscribe()
          // the stream's duplicate window keys on the record id, whatever the record's headers say
          yield* sink.send(withHeaders("m1", `${prefix}.y`, { "Nats-Msg-Id": "same" }))
          yield* sink.send(withHeaders("m2", `${prefix}.y`, { "Nats-Msg-Id": "same" }))
          expect((yield* readStream(jsm, prefix)).map((m) => m.id)).toEqual(["m1", "m2"])
        }).pipe(Effect.scoped)
      )
  )

  it.live("a connection not allowed to subscribe to its reply inbox fails each publish as permission-denied", () =>
    withRestrictedUser('{ subscribe: { deny: ["_INBOX.>"] } }', ["inbox.>"], (url) =>
      Effect.gen(function* () {
        const sink = yield* NatsSink.make({ servers: url, timeout: "10 seconds" })
        // each send subscribes again and is refused again: neither waits for the timeout
        for (const id of ["i1", "i2"]) {
          const denied = yield* Effect.flip(sink.send(record(id, "inbox.x")))
          expect(denied).toMatchObject({ retryable: false, code: "permission-denied" })
          expect(denied.message).toContain("_INBOX")
          expect(denied.message).not.toContain(restrictedPassword)
        }
      }).pipe(Effect.timeout("8 seconds"))
    )
  )

  it.live("with allowed subject prefixes a record's address outside them is permanent subject-not-allowed", () =>
    withStream(natsUrl, (prefix, jsm) =>
      Effect.gen(function* () {
        const sink = yield* NatsSink.make({
          servers: natsUrl,
          subject: `${prefix}.default`,
          allowedSubjectPrefixes: [`${prefix}.orders.`]
        })
        yield* sink.send(record("o1", `${prefix}.orders.created`))
        // the configured subject is trusted
        yield* sink.send(record("o2", ""))
        const outside = yield* Effect.flip(sink.send(record("o3", `${prefix}.audit.x`)))
        expect(outside).toMatchObject({ retryable: false, code: "subject-not-allowed" })
        expect(outside.message).toContain(`${prefix}.audit.x`)
        expect(yield* messageCount(jsm, prefix)).toBe(2)
        const refused = yield* Effect.flip(
          Effect.scoped(NatsSink.make({ servers: natsUrl, subject: "$SYS.x", allowedSubjectPrefixes: ["", "$JS."] }))
        )
        expect(refused.problems).toEqual([
          "the default subject is a $-prefixed system subject",
          "an allowed subject prefix is empty",
          "an allowed subject prefix is a $-prefixed system subject"
        ])
      }).pipe(Effect.scoped)
    )
  )

  it.live("relay nats --allow-subject-prefix dead-letters a record addressed outside the prefixes", () =>
    withStream(natsUrl, (prefix, jsm) =>
      Effect.promise(async () => {
        const file = path.join(directory, `${prefix}-allow.db`)
        const input = [
          { partitionKey: "a", envelopeId: "in", bindingId: "b", payload: 1, address: `${prefix}.orders.x` },
          { partitionKey: "b", envelopeId: "out", bindingId: "b", payload: 2, address: `${prefix}.audit.x` },
          {
            partitionKey: "c",
            envelopeId: "sys",
            bindingId: "b",
            payload: 3,
            address: `$JS.API.STREAM.PURGE.${prefix}`
          }
        ]
          .map((r) => JSON.stringify(r))
          .join("\n")
        const enqueued = await run(["enqueue", "--sqlite-file", file], input)
        expect(enqueued.code, enqueued.stderr).toBe(0)
        const relay = spawnCli([
          "relay",
          "nats",
          natsUrl,
          "--allow-subject-prefix",
          `${prefix}.orders.`,
          "--sqlite-file",
          file,
          "--discovery-interval",
          "200 millis"
        ])
        const { exited } = finish(relay)
        await waitFor("2 dead letters", async () => {
          const listed = await run(["dlq", "list", "--json", "--sqlite-file", file])
          return (
            listed.stdout
              .trim()
              .split("\n")
              .filter((line) => line.length > 0).length >= 2
          )
        })
        relay.kill("SIGTERM")
        expect(await exited).toBe(0)
        const listed = await run(["dlq", "list", "--json", "--sqlite-file", file])
        const codes = listed.stdout
          .trim()
          .split("\n")
          .map((line) => {
            const entry: unknown = JSON.parse(line)
            return typeof entry === "object" && entry !== null ? Reflect.get(entry, "errorCode") : undefined
          })
          .sort()
        expect(codes).toEqual(["subject-not-allowed", "system-subject"])
        expect((await jsm.streams.info(prefix)).state.messages).toBe(1)
      })
    )
  )

  it.effect("an invalid URL or an empty subject is refused as configuration", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(
        Effect.scoped(NatsSink.make({ servers: "http://u:s3cret@127.0.0.1:1", subject: " " }))
      )
      expect(error._tag).toBe("InvalidConfiguration")
      expect(error.problems).toEqual([
        "http://***@127.0.0.1:1/ is not a nats:// or tls:// URL",
        "the default subject is empty"
      ])
    })
  )

  it.live("relay nats <url> delivers through the CLI; the URL's credentials are never logged", () =>
    withStream(natsUrl, (prefix, jsm) =>
      Effect.promise(async () => {
        const file = path.join(directory, `${prefix}.db`)
        const input = ["a", "b"]
          .flatMap((p) => [0, 1, 2].map((n) => ({ partitionKey: p, envelopeId: `e${n}`, bindingId: "b", payload: n })))
          .map((r) => JSON.stringify(r))
          .join("\n")
        const enqueued = await run(["enqueue", "--sqlite-file", file], input)
        expect(enqueued.code, enqueued.stderr).toBe(0)
        const secretUrl = natsUrl.replace("nats://", "nats://natsuser:N-S3CRET@")
        const relay = spawnCli([
          "relay",
          "nats",
          secretUrl,
          "--subject",
          `${prefix}.{partitionKey}`,
          "--sqlite-file",
          file,
          "--discovery-interval",
          "200 millis"
        ])
        const { exited, output } = finish(relay)
        await waitFor("6 messages", async () => (await jsm.streams.info(prefix)).state.messages >= 6)
        relay.kill("SIGTERM")
        expect(await exited).toBe(0)
        expect(output.stderr).toContain(`sink="nats nats://***@127.0.0.1:${new URL(natsUrl).port}"`)
        expect(output.stderr).not.toMatch(/S3CRET|natsuser/)
        const subjects = (await Effect.runPromise(readStream(jsm, prefix))).map((m) => m.subject)
        expect(subjects.filter((s) => s === `${prefix}.a`)).toHaveLength(3)
      })
    )
  )

  it.live("the effect-outbox/nats entry exports the sink", () =>
    Effect.map(
      Effect.promise(() => import("../src/nats.js")),
      (entry) => expect(entry.NatsSink.layer).toBe(NatsSink.layer)
    )
  )
})
