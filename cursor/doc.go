// Package cursor is the contract between cursorflow's engine and the
// sources a cursor loop drains: a Driver opens a Cursor per frame, and
// Cursor.Claim leases up to N rows atomically or reports, with zero rows,
// that the source is drained.
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
// # Features
//
// Sources differ: a SQL table holds no lease of its own (the claim SQL
// and the engine's frame lease bring lost rows back), Redis streams and
// JetStream redeliver after a lease, some count deliveries, some fence
// stale holders. Driver.Features states which, and the engine and the
// suite adapt instead of assuming.
//
// # Errors
//
// Drivers report source failures as *ClaimError, which names the kind and
// the credential alias, never the credential. ErrClosed, ErrStaleLease and
// ErrUnsupported are matched with errors.Is; Registry.Lookup wraps
// ErrUnknownKind.
package cursor
