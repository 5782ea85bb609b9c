/**
 * The wire metadata of SPEC §11: built from a record, read back from a delivery's headers
 * (case-insensitively), and a typed `DecodeError` naming the header when one is missing or malformed.
 */
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { OutboxRecord } from "../src/domain/OutboxRecord.js"
import * as WireHeaders from "../src/domain/WireHeaders.js"
import * as InboxMessage from "../src/domain/InboxMessage.js"

const record = (orderingKey: Option.Option<string>) =>
  OutboxRecord.make({
    id: "rec-1",
    partitionKey: "orders",
    envelopeId: "env-1",
    bindingId: "b",
    routeId: "r",
    address: "",
    payload: new Uint8Array([1]),
    headers: { "Outbox-Topic": "order.placed", custom: "x" },
    orderingKey,
    createdAt: DateTime.unsafeMake(1_700_000_000_123),
    expiresAt: Option.none(),
    seq: 42,
    status: "claimed",
    claimedBy: Option.none(),
    claimVersion: 1,
    claimedAt: Option.none(),
    firstAttemptedAt: Option.none(),
    replayCount: 1,
    completedAt: Option.none()
  })

describe("WireHeaders", () => {
  it("a record's headers carry id, topic, partition, ordering key, seq and creation time (SPEC §11)", () => {
    const headers = WireHeaders.fromRecord(record(Option.some("customer-7")))
    expect(headers).toMatchObject({
      custom: "x",
      "Outbox-Record-Id": "rec-1",
      "Outbox-Topic": "order.placed",
      "Outbox-Partition": "orders",
      "Outbox-Ordering-Key": "customer-7",
      "Outbox-Seq": "42",
      "Outbox-Created-At": "2023-11-14T22:13:20.123Z"
    })
    expect(WireHeaders.metadata(record(Option.none()))).not.toHaveProperty("Outbox-Ordering-Key")
  })

  it("parse reads them back, whatever the case of the names, into the inbox message", () => {
    const lower = Object.fromEntries(
      Object.entries(WireHeaders.fromRecord(record(Option.some("k")))).map(([k, v]) => [k.toLowerCase(), v])
    )
    const parsed = Either.getOrThrow(WireHeaders.parse(lower))
    expect(parsed.recordId).toBe("rec-1")
    expect(parsed.topic).toEqual(Option.some("order.placed"))
    expect(parsed.seq).toBe(42)
    expect(DateTime.toEpochMillis(parsed.createdAt)).toBe(1_700_000_000_123)
    expect(InboxMessage.fromMetadata(parsed)).toEqual({
      messageId: "rec-1",
      partitionKey: "orders",
      orderingKey: "k",
      seq: 42
    })
  })

  it("a missing or malformed header is a DecodeError naming it", () => {
    const good = WireHeaders.fromRecord(record(Option.none()))
    const cases: ReadonlyArray<readonly [Record<string, string>, string]> = [
      [{ ...good, "Outbox-Record-Id": "" }, "Outbox-Record-Id"],
      [Object.fromEntries(Object.entries(good).filter(([k]) => k !== "Outbox-Partition")), "Outbox-Partition"],
      [{ ...good, "Outbox-Seq": "-1" }, "Outbox-Seq"],
      [{ ...good, "Outbox-Seq": "1e3" }, "Outbox-Seq"],
      [{ ...good, "Outbox-Created-At": "yesterday" }, "Outbox-Created-At"]
    ]
    for (const [headers, name] of cases) {
      const result = WireHeaders.parse(headers)
      expect(Either.isLeft(result)).toBe(true)
      if (Either.isLeft(result)) {
        expect(result.left._tag).toBe("DecodeError")
        expect(result.left.reason).toContain(name)
      }
    }
  })
})
