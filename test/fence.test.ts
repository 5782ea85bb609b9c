/**
 * The claim stamp of the fence rules (R-CLAIM-5): stamped in place, a stored record gets exactly the fields
 * `Fence.stampClaim` computes, on a first claim and on a later one.
 */
import { describe, expect, it } from "@effect/vitest"
import * as DateTime from "effect/DateTime"
import * as Equal from "effect/Equal"
import * as Option from "effect/Option"
import * as Fence from "../src/domain/Fence.js"

describe("Fence", () => {
  it("stampClaimInto stamps what stampClaim computes, firstAttemptedAt only when empty (R-CLAIM-5)", () => {
    const first = DateTime.unsafeMake(1_000)
    const later = DateTime.unsafeMake(2_000)
    const token = { owner: "relay-a", version: 3 }
    const fresh = {
      claimedBy: Option.none<string>(),
      claimVersion: 0,
      claimedAt: Option.none<DateTime.Utc>(),
      firstAttemptedAt: Option.none<DateTime.Utc>(),
      replayCount: 0
    }
    const expected = Fence.stampClaim(fresh, token, first)
    Fence.stampClaimInto(fresh, Fence.claimStamp(token, first))
    expect(Equal.equals(Option.getOrThrow(fresh.firstAttemptedAt), first)).toBe(true)
    expect({ ...fresh }).toEqual({ ...expected })
    // a later claim by another token keeps the first attempt and counts one more claim
    const next = { owner: "relay-b", version: 4 }
    const expectedAgain = Fence.stampClaim(fresh, next, later)
    Fence.stampClaimInto(fresh, Fence.claimStamp(next, later))
    expect({ ...fresh }).toEqual({ ...expectedAgain })
    expect([fresh.replayCount, Option.getOrThrow(fresh.claimedBy)]).toEqual([2, "relay-b"])
    expect(Equal.equals(Option.getOrThrow(fresh.firstAttemptedAt), first)).toBe(true)
  })
})
