// Package clickhouse is the ClickHouse cursor driver (clickhouse-go v2,
// native protocol): a table is the queue, and claims are merge-based,
// since ClickHouse has no row locks, no UPDATE ... RETURNING and no
// compare-and-set.
//
// A host wires it with one registry call:
//
//	reg := cursor.NewRegistry()
//	reg.Register("clickhouse", clickhouse.New(clickhouse.Config{}))
//
// and a playbook drains a table with
//
//	loop:
//	  cursor:
//	    kind: clickhouse
//	    auth: ch            # a clickhouse:// DSN; or url: clickhouse://...
//	    claim: SELECT id, payload FROM jobs WHERE day = today()
//	    table: jobs         # names jobs_claims, jobs_done, jobs_dead
//	    key: id
//	  iterator: job
//	  spec: {mode: cursor, max_in_flight: 4, frame: {max_rows: 1000, lease_seconds: 60, max_attempts: 3, process: frame}}
//
// # Source and options
//
// The rows come from the claim, a SELECT template rendered for every
// claim with the loop's scope, __frame_max_rows and __worker_slot_id
// (the driver adds the filtering and the limit itself). A playbook's
// clickhouse cursor needs a claim; a host opening the driver itself may
// give option table instead. Options: table, key (the identifying column,
// default id; Row.Key is toString(key)), columns (the select list of
// Row.Values, default *), where (an extra condition), order_by (the order
// in which candidates are claimed; default a hash of the key and the
// claim's token, see below), claims_table, done_table, dead_table
// (defaults: <table>_claims, <table>_done, <table>_dead; created when
// absent as ReplacingMergeTree tables), url.
//
// # How a claim works without locks
//
// A claim picks up to max candidates: source rows that are neither in the
// done table nor in the dead table, nor held by an active claim (one that
// was neither released nor withdrawn and has not expired). It inserts a
// claim for each with a fresh token and an expiry (INSERT ... SELECT, one
// statement), then reads back, per candidate, whether any other active
// claim of the same key is visible. It keeps the rows with none and
// withdraws the others at once. Two claimers of one row cannot both keep
// it: each inserts before it reads, so at least one of them sees the
// other's claim (if A's read missed B's insert, B's insert finished after
// A's read began, hence after A's insert, and B's read sees A). Both may
// lose, so Claim retries contested rounds with new candidates after a
// short random pause; hashing the candidate order with the token keeps
// concurrent claimers mostly on different rows. The argument needs
// read-after-write visibility: a synchronous INSERT on one node is visible
// to every SELECT that starts after it returns. On a replicated cluster,
// use insert_quorum with select_sequential_consistency (or a single
// writer replica). Aggregates with GROUP BY and IN over the claims table
// decide; background merges are never relied on (the tables deduplicate
// retried inserts, nothing more).
//
// # Leases, fencing, attempts, dead letters
//
// A claim's expiry is Lease.Deadline; a row whose claim expired without an
// Ack is claimable again (claimers compare expiries with their own
// clocks: keep them in step well within a lease). Lease.Token is the
// claim's token; Ack, Release and DeadLetter first check that no later
// claim of the row exists, and refuse stale tokens with
// cursor.ErrStaleLease. Ack records done rows and then checks again: a
// reclaim that became visible in between is reported as stale too, but
// the done record stands (the holder did process the row). Lease.Attempt
// counts the row's claims that were kept. A row released after its
// MaxAttempts-th delivery, or whose lease lapses after it, is recorded in
// the dead table by the next claim instead of being claimed again. That
// claim first claims such rows itself (as it claims candidates, so that
// of two claimers only one buries a row) and lists those it holds in its
// Dead (cursor.Claim.Dead: key, values and Lease.Attempt), so that the
// engine reports them dead, also when the claim has no rows. The dead
// record waits for the claim's Commit, which the engine makes once the
// claim (or, for a claim of no rows, the frame that reports its Dead) is
// on record: an Abort withdraws the claim of such a row, and a claimer
// that dies first leaves the row to the claim after its lease, which
// lists it dead again. So the log reports every row in the dead table;
// dying between the record and Commit can report one twice. It buries a
// row only if the read-back of that claim counts MaxAttempts deliveries
// besides it: the candidate query's subqueries read the claims table at
// different moments and can count a rival's claim that is then
// withdrawn. Release itself buries nothing, since the engine would never
// learn of it. A claim that wins a row whose deliveries reached
// MaxAttempts meanwhile (another claimer claimed and released it between
// this claim's candidate query and its read-back) buries it the same way
// rather than deliver it once more. A claim returns no row, which the
// engine takes for a drained source, only after a round in which no
// candidate was contested: a loser's claim can hide a row from the other
// claimers until it withdraws, so the loser claims (and buries) again. The
// engine may also dead-letter rows (cursor.DeadLetterer). Delivery is at
// least once: a row comes back only after its lease expired or it was
// released. A claim is held by its claim record from the claim on: the
// engine's Commit, once the rows are on record, changes nothing for them
// (it buries the claim's Dead), and its Abort (the record failed)
// releases them, counting the delivery; rows of a claimer that died
// between its claim and the engine's record are claimed again once their
// claims expire.
//
// # ClickHouse 18.16
//
// The SQL is chosen to run on old servers such as Debian's
// clickhouse-server 18.16: through clickhouse-go v2 on that server
// INSERT ... VALUES and batch appends hang, while INSERT ... SELECT works,
// so every write is INSERT ... SELECT (from the candidate query, or from
// arrayJoin over a literal array of keys); there is no DateTime64 (times
// are UInt64 Unix milliseconds); no ALTER UPDATE and no lightweight
// DELETE (state is appended, never updated). A modern server would allow
// batch inserts of claims (fewer bytes of SQL), DateTime64 columns, TTLs
// that drop old claims, and ALTER ... DELETE to prune finished ones.
//
// Each claim scans the source (narrowed by where), the done and dead
// tables and the claims table: fine for tables of up to millions of rows;
// partition or filter larger ones.
//
// # Connections
//
// The driver keeps one pool per credential. A statement that fails
// because the connection was lost is retried once on a fresh pool; every
// statement is safe to repeat.
package clickhouse
