/**
 * The producer process of the peer's latency run (bench/latency.ts, backend `peer`): a second OS process
 * storing messages in `pg-transactional-outbox`'s outbox table, each in its own transaction, as that
 * library's producer does. Reads `<partitionKey> <id>` lines on stdin (the key is not used; `<id>` is a UUID); for each prints `<id> <before> <committed>` (epoch
 * milliseconds with a fraction). Prints `ready` once connected.
 *
 * Usage: `node --import tsx bench/peerProducer.ts <url> <schema>`
 */
import * as readline from "node:readline"
import * as Peer from "./Peer.js"

const [url, schema] = process.argv.slice(2)
if (url === undefined || schema === undefined) {
  process.stderr.write("usage: peerProducer <url> <schema>\n")
  process.exit(2)
}

const now = (): number => performance.timeOrigin + performance.now()

const peer = Peer.load()
const store = peer.initializeMessageStorage(Peer.config(url, schema), peer.getDisabledLogger())
const client = peer.newClient(url)
await client.connect()
process.stdout.write("ready\n")
for await (const line of readline.createInterface({ input: process.stdin })) {
  const [, id] = line.trim().split(" ")
  if (id === undefined || id === "") continue
  const at = now()
  await client.query("BEGIN")
  await store({ id, aggregateType: "bench", aggregateId: id, messageType: "latency", payload: { n: 64 } }, client)
  await client.query("COMMIT")
  process.stdout.write(`${id} ${at} ${now()}\n`)
}
await client.end()
process.exit(0)
