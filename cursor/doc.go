// Package cursor is the contract between cursorflow's engine and the
// sources a cursor loop drains: a Driver opens a Cursor per frame, and
// Cursor.Claim leases up to N rows atomically or reports, with zero rows,
// that the source is drained.
//
// # Claims are pending until recorded
//
// Claim returns a *Claim: the rows, held pending. The engine records the
// rows in its event log (frame.claimed) and only then calls Commit; if the
// record fails it calls Abort. A claim therefore never exists in the
// source without being on record:
//
//	claim, err := cur.Claim(ctx, 100)
//	if err != nil {
//		return err
//	}
//	// Zero rows: drained, but Dead may list rows to report dead.
//	if err := record(ctx, claim.Rows, claim.Dead); err != nil {
//		_ = claim.Abort(ctx) // the rows are claimable again
//		return err
//	}
//	if err := claim.Commit(ctx); err != nil {
//		// on record all the same: run them (at least once, never lost)
//	}
//
// Sources differ in how they hold a pending claim. Transactional sources
// (Features.TransactionalClaim: postgres, mysql, sqlite) run the claim in
// a transaction left open until Commit; a claimer that dies before Commit
// loses its connection and the database rolls the claim back, so the rows
// are claimable again at once, whatever the claim SQL. Sources with leases
// of their own (redis streams, JetStream, S3 markers, ClickHouse claims)
// hold the rows under that lease from the claim on: Commit does nothing
// for them, Abort hands the rows back, and the rows of a claimer that died
// come back when the lease runs out. Where a driver holds the rows past
// MaxAttempts the same way (S3 markers, ClickHouse claims), Commit moves
// the claim's Dead rows to its dead letter, so a claim with Dead rows is
// committed, once they are on record, even when it has no Rows.
//
// # Drivers and the registry
//
// Drivers live in subpackages of drivers/ (postgres, sqlite, mysql,
// redisstream, natsconsumer, s3prefix, clickhouse), so importing one does
// not pull in the others' client libraries. A host builds a Registry,
// registers the drivers it wants (one call each) and hands it to the
// engine; a playbook's `cursor.kind` selects the driver:
//
//	reg := cursor.NewRegistry()
//	defer reg.Close()
//	if err := reg.Register("postgres", postgres.New(postgres.Config{})); err != nil {
//		return err
//	}
//
// A driver written by the host plugs in the same way; the engine needs no
// change. Its behaviour is pinned down by the conformance suite in
// cursortest, which every driver runs against a real server.
//
// # What the engine passes
//
// For every frame command the engine resolves the cursor block's `auth`
// alias to a credential and calls Driver.Open with a Spec: the credential,
// the claim template (SQL drivers), the loop's render scope, the other
// options of the cursor block, the frame slot and the lease and attempt
// limits. Open is cheap: drivers cache connections per credential.
// Options named by a driver's TemplateOptioner (the SQL drivers' ack,
// release and dead_letter) reach the driver unrendered, because they are
// rendered per call with the claimed rows.
//
// # State a driver keeps per loop run
//
// A driver may keep state in the source for each loop run whose cursor
// block names none (redisstream's consumer group, natsconsumer's durable
// consumer, named from Spec.LoopID). A Finisher drops it: the engine
// calls Finish once the run is over for good, after its loop.done is
// recorded or its execution ended, and only logs a failure.
//
// # Features
//
// Sources differ: a SQL table holds no lease of its own (the claim SQL
// and the engine's frame lease bring lost rows back), Redis streams and
// JetStream redeliver after a lease, some count deliveries, some fence
// stale holders. Driver.Features states which, and the engine and the
// suite adapt instead of assuming. SQLite's claims even exclude each
// other (Features.ExclusiveClaim): a claim that finds nothing there
// proves that no other claimer holds rows, so a drain ends at once after
// a lost frame attempt, where on the other sources the engine waits a
// frame lease for what that attempt may hold.
//
// # Errors
//
// Drivers report source failures as *ClaimError, which names the kind and
// the credential alias, never the credential. ErrClosed, ErrStaleLease and
// ErrUnsupported are matched with errors.Is; Registry.Lookup wraps
// ErrUnknownKind.
package cursor
