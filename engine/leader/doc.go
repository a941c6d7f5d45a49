// Package leader runs one orchestrator among server replicas: a lease row
// in PostgreSQL (table leases in the event log's schema) says which
// replica leads, and an Orchestrator drives every execution while its
// replica holds it.
//
// # Orchestrator
//
// Orchestrator.Run campaigns for the lease. Each time it is won, it
// builds an engine whose appends go through Lease.Fence, resumes every
// unfinished execution of the shared log, and (with a transport such as
// engine/natsjs) serves the workers' reports; when the lease may be lost
// it closes that engine before campaigning again. It implements the API's
// Runner (package engine/api): on a standby, Start and Cancel return
// ErrStandby, which the API answers with 503, and Ready fails, so /readyz
// routes a load balancer to the leader. See the Orchestrator example for
// a host service that embeds all of it next to its own routes.
//
// # Lease
//
// A replica campaigns with a conditional upsert that succeeds only when the
// row is missing or expired (by the database clock), bumping a token. The
// leader renews every RenewEvery (TTL/3 by default) with an UPDATE
// conditioned on its owner and token. It considers itself deposed when a
// renewal is refused or when TTL minus a margin (TTL/5) has passed since it
// sent its last successful renewal: that local deadline always falls
// before the row can expire, so the old leader stops before a successor
// can start. Fence bounds the leader's appends by the same deadline.
//
// The window that remains: an append the deposed leader sent before its
// deadline that the server commits after the successor resumed. Its
// context is cancelled at the deadline plus half the margin (still before
// the row expires), so this needs a commit delayed by more than the
// margin. The event log's duplicate rules (command.issued per command id,
// loop.done per loop id) keep such a late decision from being recorded
// twice, and a late worker report is one the successor would have
// accepted too. Closing the window fully would take the fencing token
// checked inside the append's transaction.
package leader
