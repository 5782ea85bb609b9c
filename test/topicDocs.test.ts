/**
 * What a new user copies is on typed topics (SPEC §11): the guide's shortest path from an order row to a typed
 * event at NATS and at a webhook, README's first program, the guide's producer sections and every example
 * contain no hand-made bytes (`TextEncoder`, `JSON.stringify`), no hand-built `NewOutboxRecord` and no id
 * invented by hand (envelope, binding or record ids, `randomUUID`); the record API appears only in the
 * sections labelled as the low level.
 */
import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const repoRoot = fileURLToPath(new URL("..", import.meta.url))
const read = (file: string): string => fs.readFileSync(path.join(repoRoot, file), "utf8")
const readme = read("README.md")
const guide = read(path.join("docs", "guide.md"))

/** The text of the section under `heading` (a whole line) up to the next heading of the same or a higher level. */
const section = (text: string, heading: string): string => {
  const level = /^#+/.exec(heading)?.[0].length ?? 2
  const lines = text.split("\n")
  const start = lines.indexOf(heading)
  if (start < 0) return ""
  const end = lines.findIndex((line, i) => i > start && new RegExp(`^#{1,${level}} `).test(line))
  return lines.slice(start, end < 0 ? undefined : end).join("\n")
}

/** Everything in `text` that builds bytes or ids by hand, one entry per finding. */
const handMade = (text: string): ReadonlyArray<string> => {
  const patterns: ReadonlyArray<readonly [string, RegExp]> = [
    ["TextEncoder", /TextEncoder/],
    ["JSON.stringify", /JSON\.stringify/],
    ["NewOutboxRecord", /NewOutboxRecord/],
    ["an envelope id by hand", /envelopeId\s*:/],
    ["a binding id by hand", /bindingId\s*:/],
    ["a record id by hand", /\b(recordId|messageId)\s*:\s*["'`]/],
    ["randomUUID", /randomUUID|crypto\.random/],
    ["Date.now", /Date\.now\(/]
  ]
  return patterns.filter(([, pattern]) => pattern.test(text)).map(([name]) => name)
}

const shortestPath = section(guide, "## From an order row to NATS and a webhook (typed topics)")

describe("typed topics in the docs and examples (SPEC §11)", () => {
  it("the guide's shortest path from an order row to NATS and a webhook builds nothing by hand", () => {
    expect(shortestPath.length).toBeGreaterThan(1_000)
    // it is the whole path: topics, the publish in the order's transaction, one relay routing to NATS and a webhook
    for (const part of [
      "Topic.make",
      "Topic.publish",
      "sql.withTransaction",
      "SinkRouter",
      "NatsSink",
      "WebhookSink"
    ]) {
      expect(shortestPath).toContain(part)
    }
    expect(shortestPath).toContain("Topic.decode")
    expect(handMade(shortestPath)).toEqual([])
  })

  it("README's first program publishes through a topic and builds nothing by hand", () => {
    const using = section(readme, "## Using it in an Effect program")
    const lowLevel = section(readme, "### Low level: records")
    const typed = using.replace(lowLevel, "")
    expect(typed).toContain("Topic.publish")
    expect(handMade(typed)).toEqual([])
    // the record API stays, under its label
    expect(lowLevel).toContain("NewOutboxRecord")
  })

  it("the guide's producer sections (backpressure, SQLite, PostgreSQL, DynamoDB, testing) publish through topics", () => {
    const producers: ReadonlyArray<readonly [string, string]> = [
      ["## Enqueue with backpressure", "Topic.enqueue("],
      ["## Transactional enqueue on SQLite", "Topic.publish("],
      ["## PostgreSQL", "Topic.publish("],
      ["## Transactional enqueue on DynamoDB", "DynamoDbTopic.transactItems("],
      ["## Testing", "Topic.publish("]
    ]
    for (const [heading, call] of producers) {
      const text = section(guide, heading)
      expect(text, heading).toContain(call)
      expect(handMade(text), heading).toEqual([])
    }
  })

  it("the guide builds records by hand only in the section labelled as the low level", () => {
    const headings = guide.split("\n").filter((line) => /^## /.test(line))
    const building = headings.filter((heading) => /NewOutboxRecord|TextEncoder/.test(section(guide, heading)))
    expect(building).toEqual(["## Low level: records"])
  })

  it("no example builds a record by hand: every producer example publishes through a topic", () => {
    const examples = fs.readdirSync(path.join(repoRoot, "examples")).filter((file) => file.endsWith(".ts"))
    const producers = examples.filter((file) => file.includes("enqueue"))
    expect(producers.length).toBeGreaterThanOrEqual(4)
    for (const file of examples) expect(read(path.join("examples", file)), file).not.toContain("NewOutboxRecord")
    for (const file of producers) {
      const text = read(path.join("examples", file))
      expect(handMade(text), file).toEqual([])
      expect(text, file).toMatch(/Topic\.publish\(|DynamoDbTopic\.transactItems\(/)
    }
  })
})
