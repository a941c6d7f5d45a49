// Package postgres is the PostgreSQL cursor driver (pgx v5).
//
//	reg := cursor.NewRegistry()
//	reg.Register("postgres", postgres.New(postgres.Config{}))
//
// The credential (Spec.Credential, resolved by the engine from the cursor
// block's auth alias) is a postgres:// URL or a key=value DSN. The driver
// keeps one pgxpool per credential (Config.MaxConns connections, 8 by
// default); a cursor holds a connection only while a statement runs or a
// claim is pending, so it holds nothing between frames.
//
// Claims run with the simple query protocol, in a transaction: BEGIN and
// the rendered claim go in one round trip, and the transaction stays open
// until the engine has recorded the claimed rows (Claim.Commit) or gave
// up on recording them (Claim.Abort, a rollback). The transaction runs
// with synchronous_commit off, so its COMMIT does not wait for a WAL
// flush: the rows are on record in the engine's log by then, and a server
// crash that loses the commit hands them back to be claimed and run again,
// as a failed COMMIT does (a claim may SET LOCAL synchronous_commit = on
// to have its other writes flushed). The claim may hold
// several statements (for example SET LOCAL lock_timeout before the
// claim); the rows of the last statement that returns a result set are
// the claim. A claim of the form
//
//	WITH candidate AS (
//	  SELECT id FROM jobs WHERE status = 'pending'
//	  ORDER BY id FOR UPDATE SKIP LOCKED LIMIT {{ __frame_max_rows }})
//	UPDATE jobs j SET status = 'claimed', attempts = j.attempts + 1
//	  FROM candidate c WHERE j.id = c.id
//	RETURNING j.id, j.payload, j.attempts
//
// is safe under any number of concurrent claimers in any number of
// processes, and needs no reclaim clause: rows a frame claimed are either
// on record in the engine's log (a re-issued frame runs them) or, if the
// claimer died before the record, rolled back by PostgreSQL when its
// connection closed, or, if it stalled with its connection open (a paused
// process, a frozen VM), once the claim's transaction has sat idle for the
// frame lease (idle_in_transaction_session_timeout, set for the claim
// alone); the engine does not let the drain end before then. A claim may
// keep a reclaim clause of its own; it is
// never required. A statement that fails because the server dropped the
// connection (restart, failover, pg_terminate_backend) is retried once on
// a fresh connection after resetting the pool; a dropped connection never
// commits.
//
// A pending claim holds more than the rows it returns. Under READ
// COMMITTED, a row that another claim committed while this claim's scan
// was on its way to it is locked, re-checked against the WHERE clause and
// skipped, and PostgreSQL keeps that lock until the transaction ends. A
// write to such a row (the other frame's body marking its rows done)
// waits until this claim commits: once the engine's log has recorded the
// claimed rows, one append later. A slower log therefore slows the bodies
// of other slots too; it costs throughput, never correctness.
//
// The claim goes as text and is planned afresh at every frame, so the plan
// follows the table as rows are claimed, done and added. Give the claim an
// index it can walk to the pending rows without passing the claimed and
// done ones, such as a partial index on the pending rows:
//
//	CREATE INDEX ON jobs (id) WHERE status = 'pending';
//
// Without one, each claim scans past every row claimed before it, and a
// drain slows as it goes. (A claim prepared once would keep the plan made
// for the table it first saw, which for a queue analyzed while all its
// rows were pending may be that scan even with the index:
// BenchmarkClaimPlan.)
//
// Guarantee: at least once. A row's body runs again only when a frame is
// re-issued (its worker died or went silent after the record) or when the
// claim's COMMIT failed after the record (the engine runs the recorded
// rows, which may meanwhile be claimed again). No row is left claimed by a
// claim the engine does not know of. Statements may use NoETL's psycopg
// placeholders, %(name)s, filled client-side as SQL literals (see package
// drivers).
//
// Options, keys, attempts, dead letter, value conversion: see package
// drivers. Parse errors of the credential are reported without the
// credential's text, so a password never reaches a log.
package postgres
