/**
 * effect-outbox: a durable transactional outbox for Effect applications. The root entry holds the domain,
 * the ports, the in-memory backend, the Drainer, Relay and Enqueue programs, the sinks and the metrics
 * (SPEC §9); it needs `effect` and `@effect/platform` only. Backends with a driver live in their own
 * entries: `effect-outbox/sqlite`, `effect-outbox/postgres`, `effect-outbox/dynamodb`, `effect-outbox/otel`.
 *
 * @since 0.1.0
 */

/** New and stored outbox records, record status, identities and time-ordered ids. @since 0.1.0 */
export * as OutboxRecord from "./domain/OutboxRecord.js"

/** Lease tokens `{ owner, version }` and their validity rule. @since 0.1.0 */
export * as LeaseToken from "./domain/LeaseToken.js"

/** Every typed error of the library (`Schema.TaggedError`, `_tag` = class name). @since 0.1.0 */
export * as OutboxError from "./domain/OutboxError.js"

/** Age order, claimability and head-of-line selection: the reference claim rules. @since 0.1.0 */
export * as ClaimOrder from "./domain/ClaimOrder.js"

/** Dead-letter entries, categories and filters. @since 0.1.0 */
export * as DeadLetterEntry from "./domain/DeadLetterEntry.js"

/** The OutboxStore port, ClaimBatch, PersistReport and the shared backend core. @since 0.1.0 */
export * as OutboxStore from "./services/OutboxStore.js"

/** The LeaseStore port and `Lease`. @since 0.1.0 */
export * as LeaseStore from "./services/LeaseStore.js"

/** The DeadLetterStore port. @since 0.1.0 */
export * as DeadLetterStore from "./services/DeadLetterStore.js"

/** The Sink port and `SendError`. @since 0.1.0 */
export * as Sink from "./services/Sink.js"

/** Every metric the library emits. @since 0.1.0 */
export * as OutboxMetrics from "./services/OutboxMetrics.js"

/** Read-only operator facts (depths, ages, fence, lease, stranded heads, dead-letter counts). @since 0.1.0 */
export * as OutboxInspection from "./services/OutboxInspection.js"

/** In-memory OutboxStore backend. @since 0.1.0 */
export * as MemoryOutboxStore from "./layers/memory/MemoryOutboxStore.js"

/** In-memory LeaseStore backend. @since 0.1.0 */
export * as MemoryLeaseStore from "./layers/memory/MemoryLeaseStore.js"

/** In-memory DeadLetterStore backend. @since 0.1.0 */
export * as MemoryDeadLetterStore from "./layers/memory/MemoryDeadLetterStore.js"

/** In-memory OutboxInspection. @since 0.1.0 */
export * as MemoryInspection from "./layers/memory/MemoryInspection.js"

/** In-memory recording sink (tests and demos). @since 0.1.0 */
export * as MemorySink from "./layers/sinks/MemorySink.js"

/** HTTP webhook sink. @since 0.1.0 */
export * as WebhookSink from "./layers/sinks/WebhookSink.js"

/** JSON-lines stdout sink. @since 0.1.0 */
export * as StdoutSink from "./layers/sinks/StdoutSink.js"

/** The JSON form of a record shared by the sinks. @since 0.1.0 */
export * as RecordJson from "./layers/sinks/RecordJson.js"

/** Drains one leased partition: claim, group by key, send, complete. @since 0.1.0 */
export * as Drainer from "./programs/Drainer.js"

/** Producer side: persist with backpressure. @since 0.1.0 */
export * as Enqueue from "./programs/Enqueue.js"

/** Runs drainers for every partition it can lease, renewing and releasing leases. @since 0.1.0 */
export * as Relay from "./programs/Relay.js"

/** The HTTP operations endpoint: `/metrics`, `/healthz`, `/readyz` and the dashboard. @since 0.1.0 */
export * as OpsServer from "./programs/ops/OpsServer.js"

/** Effect's metric registry in the Prometheus text exposition format. @since 0.1.0 */
export * as Prometheus from "./programs/ops/Prometheus.js"

/** Typed topics: declare a message once (Schema + key functions), publish, decode, wire metadata. @since 0.2.0 */
export * as Topic from "./programs/Topic.js"

/** A Sink routing each record to the sink of its route, with per-route health and pauses (SPEC §11). @since 0.2.0 */
export * as SinkRouter from "./layers/sinks/SinkRouter.js"

/** The optional WakeSignal port: a backend's signal that ends idle pauses (SPEC §3.4, §13). @since 0.1.0 */
export * as WakeSignal from "./services/WakeSignal.js"

/** The optional LeaseFence port: a complete that is also the drainer's lease check (SPEC §13). @since 0.1.0 */
export * as LeaseFence from "./services/LeaseFence.js"

/** The in-process wake-up: persists of this process end idle pauses of its drainers (SPEC §13). @since 0.1.0 */
export * as WakeHub from "./services/WakeHub.js"

/** What the inbox needs of a delivered message: id, partition, ordering key and seq. @since 0.1.0 */
export * as InboxMessage from "./domain/InboxMessage.js"

/** The outcomes of processing a message: `Processed`, `Duplicate`, `Stale`. @since 0.1.0 */
export * as InboxOutcome from "./domain/InboxOutcome.js"

/** The InboxStore port (consumer-side dedupe and per-key marks) and its shared core. @since 0.1.0 */
export * as InboxStore from "./services/InboxStore.js"

/** In-memory InboxStore backend. @since 0.1.0 */
export * as MemoryInboxStore from "./layers/memory/MemoryInboxStore.js"

/** Consumer side: effectively-once, in-order processing of delivered messages. @since 0.1.0 */
export * as Inbox from "./programs/Inbox.js"

/** The shared core of the receivers: decode, `Inbox.process`, and the disposition of a delivery. @since 0.2.0 */
export * as Receiver from "./layers/sinks/Receiver.js"

/** The webhook receiver: an `HttpRouter` route verifying signature and timestamp, then the inbox. @since 0.2.0 */
export * as WebhookReceiver from "./layers/sinks/WebhookReceiver.js"
