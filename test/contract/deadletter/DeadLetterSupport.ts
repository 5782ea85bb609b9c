/**
 * What the dead-letter contract suites share: how a test runs against the backend under test (a
 * dead-letter store and the outbox store it redrives into), entries with unique ids, routes, partition
 * keys and time windows, and the `(failedAt, id)` order.
 */
import { expect } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import type * as Effect from "effect/Effect"
import { randomInt, randomUUID } from "node:crypto"
import { type DeadLetterCategory, DeadLetterEntry } from "../../../src/domain/DeadLetterEntry.js"
import type { DeadLetterStore } from "../../../src/services/DeadLetterStore.js"
import type { OutboxStore } from "../../../src/services/OutboxStore.js"

/** Runs one test's program with a fresh layer of the backend under test. */
export type Run = <A, E>(self: Effect.Effect<A, E, DeadLetterStore | OutboxStore>) => Effect.Effect<A, unknown>

/** A time window no other test uses: a random minute-aligned start well after the purge test's region. */
export const uniqueWindowStart = (): number => 1_600_000_000_000 + randomInt(0, 2 ** 28) * 60_000

export const unique = (label: string): string => `${label}-${randomUUID()}`

export const bytes = (text: string): Uint8Array => new TextEncoder().encode(text)

export interface EntrySpec {
  readonly id?: string
  readonly routeId?: string
  readonly category?: DeadLetterCategory
  readonly failedAt: number
  readonly partitionKey?: string
  readonly envelopeId?: string
  readonly bindingId?: string
  readonly orderingKey?: string
  readonly address?: string
  readonly headers?: Record<string, string>
  readonly payload?: Uint8Array
}

export const entry = (spec: EntrySpec): DeadLetterEntry =>
  new DeadLetterEntry({
    id: spec.id ?? unique("dlq"),
    recordId: unique("rec"),
    partitionKey: spec.partitionKey ?? unique("pk"),
    envelopeId: spec.envelopeId ?? unique("env"),
    bindingId: spec.bindingId ?? "binding-1",
    payload: spec.payload ?? bytes("payload"),
    headers: spec.headers ?? {},
    orderingKey: spec.orderingKey,
    routeId: spec.routeId,
    address: spec.address,
    category: spec.category ?? "permanent",
    reason: "sink rejected",
    errorCode: "E400",
    lastError: "400 Bad Request",
    attempts: 1,
    failedAt: DateTime.unsafeMake(spec.failedAt)
  })

export const idsOf = (entries: ReadonlyArray<DeadLetterEntry>): ReadonlyArray<string> => entries.map((e) => e.id)

export const expectSameEntry = (actual: DeadLetterEntry, expected: DeadLetterEntry): void => {
  expect(actual.id).toBe(expected.id)
  expect(actual.recordId).toBe(expected.recordId)
  expect(actual.partitionKey).toBe(expected.partitionKey)
  expect(actual.envelopeId).toBe(expected.envelopeId)
  expect(actual.bindingId).toBe(expected.bindingId)
  expect(Array.from(actual.payload)).toEqual(Array.from(expected.payload))
  expect(actual.headers).toEqual(expected.headers)
  expect(actual.orderingKey).toBe(expected.orderingKey)
  expect(actual.routeId).toBe(expected.routeId)
  expect(actual.address).toBe(expected.address)
  expect(actual.category).toBe(expected.category)
  expect(actual.reason).toBe(expected.reason)
  expect(actual.errorCode).toBe(expected.errorCode)
  expect(actual.lastError).toBe(expected.lastError)
  expect(actual.attempts).toBe(expected.attempts)
  expect(DateTime.toEpochMillis(actual.failedAt)).toBe(DateTime.toEpochMillis(expected.failedAt))
}

export const byId = (a: DeadLetterEntry, b: DeadLetterEntry): number => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

export const byAge = (a: DeadLetterEntry, b: DeadLetterEntry): number =>
  DateTime.toEpochMillis(a.failedAt) - DateTime.toEpochMillis(b.failedAt) || byId(a, b)
