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
// With the event log in the lease's PostgreSQL database (an
// eventlog/postgres Log), every fenced append also runs the lease check
// inside its own transaction, first: it refuses the append unless the
// lease row still carries the term's token, and holds that row while the
// append commits, so a successor's takeover waits for it. A deposed leader
// can therefore append nothing, however late its append reaches the
// server. (With another log, only the local deadline fences the appends;
// the fold then still applies a repeated decision once.)
package leader
