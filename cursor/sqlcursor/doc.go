// Package sqlcursor implements the cursor semantics shared by the SQL
// drivers (postgres, mysql, sqlite, and any SQL driver a host writes):
// claim rendering, key and attempt extraction, poison rows, psycopg-style
// placeholders, and the ack, release and dead_letter statements. A driver
// supplies an Executor that runs a claim in a transaction it leaves open
// (Executor.Claim returns the open Tx) and other statements atomically,
// returning JSON-friendly values; New turns it into a cursor.Cursor whose
// claims commit only when the engine commits them (cursor.Claim).
//
// The semantics are documented in package drivers (drivers/doc.go):
//
//   - The claim (Spec.Claim) is rendered for every Claim with a copy of
//     Spec.Scope plus __frame_max_rows (the claim's max),
//     __worker_slot_id (Spec.WorkerSlotID) and __worker_slot_index
//     (Spec.SlotID), then its %(name)s placeholders are filled
//     (FillParams). It runs in a transaction that Claim.Commit commits and
//     Claim.Abort (or Close, or the claimer's death) rolls back. The rows
//     of the last statement that returns a result set are the claimed
//     rows; a claim with no result set at all is an error, never
//     "drained", and a claim of zero rows that buried none commits at
//     once.
//   - Option "key" names the key column(s); by default "id" if returned,
//     else the first column. Row.Key is its string form; composite keys
//     are joined with "/", and when a part holds "/" the key is "/"
//     followed by the parts with "%" escaped as %25 and "/" as %2F
//     (RowKey), so that two rows share a key only when all their key
//     values are equal. A claim that returns a row with NULL in a key
//     column (ErrNullKey), or two rows with the same key
//     (ErrDuplicateKey), is refused and rolled back: such rows have no
//     identity of their own, so their outcomes would merge and ack,
//     release and dead_letter would settle both or neither.
//   - A column attempts, attempt or attempt_count is the delivery
//     counter: Lease.Attempt. Rows past Spec.MaxAttempts are run through
//     the dead_letter statement, in the claim's transaction, listed in
//     the claim's Dead and not returned. When a claim returns only such
//     rows, it runs again in the same transaction (Tx.Claim), so that
//     zero rows keeps meaning drained; after 100 such rounds it returns
//     what it set aside with Claim.More, and the engine claims again.
//     Every round commits with the claim, after the engine's record, or
//     rolls back with it.
//   - Options ack, release and dead_letter are SQL templates compiled once
//     per Open and rendered per call (Vars) with the scope plus keys
//     (list of Row.Key), rows (list of row value maps), errors (list of
//     {"key": Row.Key, "error": Row.Error}, one per row: a failed row's
//     error on Release, "" otherwise), reason (dead_letter),
//     __worker_slot_id and __worker_slot_index. Release without a release
//     statement reports cursor.ErrUnsupported.
//   - Values go to the database bound, not spliced: a statement option may
//     be {sql: ..., params: [...]} and the claim takes option
//     claim_params; each param is rendered like its statement and bound
//     to the driver's placeholders ($1 or ?), lists and maps as their JSON
//     text (an Executor that is a ListBinder gets lists as lists: the
//     postgres driver binds one as an array where the statement wants
//     one). Such a statement is one statement. Values spliced into SQL
//     text go through the sql_literal and sql_ident filters (or NoETL's
//     %(name)s placeholders, filled as literals).
package sqlcursor
