/**
 * What the end-to-end test (test/endToEnd.test.ts) and its worker processes (./endToEndWorker.ts) share: the
 * worker configuration and the producer's orders.
 */

/** What the test driver passes (one JSON argument). */
export type WorkerConfig =
  | { readonly role: "producer"; readonly outbox: Outbox; readonly count: number; readonly customers: number }
  | { readonly role: "relay"; readonly outbox: Outbox; readonly transport: Transport }
  | { readonly role: "consumer"; readonly inboxDb: string; readonly transport: Transport }

/** Where the outbox lives: a SQLite file or a PostgreSQL database. */
export type Outbox =
  { readonly _tag: "sqlite"; readonly file: string } | { readonly _tag: "postgres"; readonly url: string }

/** Where a transport delivers. */
export type Transport =
  | { readonly _tag: "webhook"; readonly url: string; readonly port: number; readonly secret: string }
  | { readonly _tag: "nats"; readonly url: string; readonly stream: string; readonly subject: string }
  | { readonly _tag: "rabbitmq"; readonly url: string; readonly queue: string }

/** Order `i` of the producer. */
export const orderAt = (i: number, customers: number) => ({ orderId: `O-${i}`, customer: `c${i % customers}`, n: i })
