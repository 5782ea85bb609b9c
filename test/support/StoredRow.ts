/**
 * A well-formed stored outbox row as the SQL drivers return it (the columns of `SqlOutboxStatements.columns`),
 * for the row-decoding tests of the SQLite and the shared SQL path; `changes` replaces columns.
 */
export const storedRow = (changes: Record<string, unknown> = {}): Record<string, unknown> => ({
  id: "01a242ff-2f88-7001-8000-000000000001",
  partition_key: "p",
  envelope_id: "e",
  binding_id: "b",
  route_id: "",
  address: "",
  payload: new Uint8Array([1, 2]),
  headers: "{}",
  ordering_key: null,
  created_at: 1_700_000_000_000,
  expires_at: null,
  seq: 1,
  status: "pending",
  claimed_by: null,
  claim_version: 0,
  claimed_at: null,
  first_attempted_at: null,
  replay_count: 0,
  completed_at: null,
  ...changes
})
