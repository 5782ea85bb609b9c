/**
 * The SQL statements both backends share are written once over a dialect, and their values are bound in
 * the order `SqlOutboxStatements.binds` produces. These tests pin that every statement's placeholders
 * and its bound values line up in both dialects (SQLite binds `?` by position, PostgreSQL `$n` by number),
 * and that no value is ever written into the text.
 */
import { describe, expect, it } from "@effect/vitest"
import * as SqlDialect from "../src/layers/sql/SqlDialect.js"
import * as SqlOutboxStatements from "../src/layers/sql/SqlOutboxStatements.js"

const names: SqlOutboxStatements.Names = {
  outbox: "outbox",
  partitions: "outbox_seq",
  claimIndex: "outbox_claim",
  keyIndex: "outbox_claimed_key",
  terminalIndex: "outbox_terminal"
}
const token = { owner: "owner-secret", version: 7 }
const ids = ["id-a", "id-b", "id-c"]

/** How many values the statement text expects, in the dialect's numbering. */
const slots = (dialect: SqlDialect.SqlDialect, text: string): number => {
  if (dialect.name !== "postgres") return (text.match(/\?/g) ?? []).length
  const numbers = Array.from(text.matchAll(/\$(\d+)/g), (m) => Number(m[1]))
  const highest = Math.max(0, ...numbers)
  // every number up to the highest is used: the values are bound in the order they are written
  expect(new Set(numbers).size).toBe(highest)
  return highest
}

describe("SqlOutboxStatements", () => {
  for (const dialect of [SqlDialect.sqlite, SqlDialect.postgres, SqlDialect.mysql]) {
    for (const staleReclaim of [false, true]) {
      it(`${dialect.name}, stale reclaim ${staleReclaim}: each statement takes exactly the values its binds produce`, () => {
        const st = SqlOutboxStatements.statements(dialect, names, { staleReclaim })
        const bind = SqlOutboxStatements.binds(dialect)
        const stale = staleReclaim ? 1_000 : undefined
        const cases: ReadonlyArray<readonly [string, string, ReadonlyArray<unknown>]> = [
          ["selectClaimable", st.selectClaimable, bind.selectClaimable("p", 7, stale, 100)],
          ["claimUpdate", st.claimUpdate(ids.length), bind.claimUpdate(ids, token, 5, "p", stale)],
          ["complete", st.complete(ids.length), bind.complete(ids, token, 5)],
          ["release", st.release(ids.length), bind.release(ids, token)],
          ["findIdentity", st.findIdentity, ["p", "e", "b"]],
          ["findById", st.findById, ["id-a"]],
          ["deleteTerminalIdentity", st.deleteTerminalIdentity, ["p", "e", "b"]],
          ["expire", st.expire, [5, "p", 4]],
          ["queryPending", st.queryPending, ["p", 10]],
          ["countPending", st.countPending, ["p"]],
          ["countClaimed", st.countClaimed, ["p"]],
          ["listPartitions", st.listPartitions, ["", 100]],
          ["sweep", st.sweep, [5, 500]]
        ]
        for (const [name, text, values] of cases) {
          expect({ name, slots: slots(dialect, text) }).toEqual({ name, slots: values.length })
          expect(text).not.toContain("owner-secret")
          expect(text).not.toContain("id-a")
        }
      })
    }
  }

  it("the id list of a SQLite statement follows its length; PostgreSQL binds it as one array", () => {
    const sqlite = SqlOutboxStatements.statements(SqlDialect.sqlite, names, { staleReclaim: false })
    const postgres = SqlOutboxStatements.statements(SqlDialect.postgres, names, { staleReclaim: false })
    expect(sqlite.complete(1)).not.toBe(sqlite.complete(3))
    expect(sqlite.complete(3)).toBe(sqlite.complete(3))
    expect(postgres.complete(1)).toBe(postgres.complete(3))
    expect(SqlOutboxStatements.binds(SqlDialect.postgres).release(ids, token)).toEqual([ids, "owner-secret", 7])
    expect(SqlOutboxStatements.binds(SqlDialect.sqlite).release(ids, token)).toEqual([...ids, "owner-secret", 7])
  })
})
