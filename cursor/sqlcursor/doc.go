// Package sqlcursor implements the cursor semantics shared by the SQL
// drivers (postgres, sqlite, and any SQL driver a host writes): claim
// rendering, key and attempt extraction, poison rows, and the ack,
// release and dead_letter statements. A driver supplies an Executor that
// runs SQL atomically on its database and returns JSON-friendly values;
// New turns it into a cursor.Cursor.
//
// The semantics are documented in package drivers (drivers/doc.go):
//
//   - The claim (Spec.Claim) is rendered for every Claim with a copy of
//     Spec.Scope plus __frame_max_rows (the claim's max) and
//     __worker_slot_id (Spec.SlotID). The rows of the last statement
//     that returns a result set are the claimed rows; a claim with no
//     result set at all is an error, never "drained".
//   - Option "key" names the key column(s); by default "id" if returned,
//     else the first column. Row.Key is its string form; composite keys
//     are joined with "/".
//   - A column attempts, attempt or attempt_count is the delivery
//     counter: Lease.Attempt. Rows past Spec.MaxAttempts are run through
//     the dead_letter statement and not returned.
//   - Options ack, release and dead_letter are SQL templates compiled once
//     per Open and rendered per call with the scope plus keys (list of
//     Row.Key), rows (list of row value maps), reason (dead_letter) and
//     __worker_slot_id.
//   - Values go to the database bound, not spliced: a statement option may
//     be {sql: ..., params: [...]} and the claim takes option
//     claim_params; each param is rendered like its statement and bound
//     to the driver's placeholders ($1 or ?), lists and maps as their JSON
//     text. Such a statement is one statement. Values spliced into SQL
//     text go through the sql_literal and sql_ident filters.
package sqlcursor
