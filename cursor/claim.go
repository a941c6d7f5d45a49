package cursor

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrClaimSettled is returned by Commit on a claim that was already
// aborted (or committed and then committed again after a failure).
var ErrClaimSettled = errors.New("cursor: claim already settled")

// Claim is the result of Cursor.Claim: the claimed rows, held pending
// until the engine settles the claim with Commit or Abort.
//
// The engine records a claim's rows in its log before it commits the
// claim, so a claim is never both held by the source and unknown to the
// engine:
//
//   - Commit makes the claim definitive: the rows stay with this claimer
//     until they are acknowledged, released or dead-lettered. For a source
//     with TransactionalClaim it commits the claim's transaction; for a
//     source with leases of its own it does nothing (the lease already
//     holds the rows).
//   - Abort undoes the claim: the rows become claimable again. A
//     transactional source rolls the claim back, as it does when the
//     claimer dies before Commit (its connection is closed); a source with
//     leases hands the rows back (Release), counting the delivery where the
//     source counts deliveries.
//
// A claim with zero rows means the source is drained; the driver holds
// nothing for it but its Dead rows, if any, and Commit and Abort of a
// claim with neither rows nor Dead rows return nil. Abort after Commit does
// nothing, so `defer claim.Abort(ctx)` is safe; Commit after Abort fails
// with ErrClaimSettled. Commit and Abort are safe for concurrent use.
type Claim struct {
	// Rows are the claimed rows, at most the max passed to Claim.
	Rows []Row
	// Dead are rows the driver set aside while claiming instead of
	// returning them (dead-lettered, past the spec's MaxAttempts), so that
	// the engine reports them dead. Whether or not Rows is empty, they are
	// not to run. Optional: a driver may leave it empty.
	//
	// The engine records them (in the claim's record, or in the drained
	// frame's outcome) before it commits the claim, so a driver moves them
	// to its dead letter in Commit, as a transactional source commits
	// its dead_letter statement with the claim: Abort, or a claimer that
	// dies before Commit, leaves them for a later claim to list dead
	// again. A row moved while claiming is lost to the log when the record
	// never comes. Dying between the record and Commit can list a row
	// dead twice, which the engine counts twice: over-reporting, never a
	// row dead-lettered that the log does not report.
	Dead []Row
	// More, on a claim of no Rows, says that the source may still hold
	// rows to run although this claim returned none: it set aside as many
	// Dead rows as one claim may (a SQL cursor whose claim rounds found
	// only rows past max_attempts up to its round limit). The engine then
	// reports the claim's Dead rows and claims again instead of taking the
	// slot as drained. Ignored on a claim with Rows.
	More bool

	mu      sync.Mutex
	settled bool
	commit  func(context.Context) error
	abort   func(context.Context) error
}

// NewClaim returns a pending claim of rows that commit and abort settle.
// Either function may be nil (nothing to do); each is called at most
// once, and neither is called for a claim with neither rows nor Dead
// rows (Dead may be set after NewClaim). Drivers build their claims with
// it.
func NewClaim(rows []Row, commit, abort func(context.Context) error) *Claim {
	return &Claim{Rows: rows, commit: commit, abort: abort}
}

// Commit makes the claim definitive. An error means the source may or may
// not have kept the claim: the rows may already be claimable again.
func (c *Claim) Commit(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.settled {
		return fmt.Errorf("commit: %w", ErrClaimSettled)
	}
	c.settled = true
	if c.empty() || c.commit == nil {
		return nil
	}
	return c.commit(ctx)
}

// Abort undoes a claim that was not committed; after Commit (or a first
// Abort) it does nothing and returns nil.
func (c *Claim) Abort(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.settled {
		return nil
	}
	c.settled = true
	if c.empty() || c.abort == nil {
		return nil
	}
	return c.abort(ctx)
}

// empty reports whether the claim holds nothing: no rows, no Dead rows.
func (c *Claim) empty() bool { return len(c.Rows) == 0 && len(c.Dead) == 0 }

// LeasedClaim returns the claim of rows that a source already holds under
// a lease of its own (a consumer group's pending list, an ack wait, a
// lease marker): Commit does nothing, Abort hands the rows back with
// release (the cursor's Release). Drivers without transactional claims
// build their claims with it, unless they keep Dead rows to bury in
// Commit.
func LeasedClaim(rows []Row, release func(context.Context, []Row) error) *Claim {
	return NewClaim(rows, nil, func(ctx context.Context) error {
		if len(rows) == 0 {
			return nil // a drained claim with Dead rows: nothing to hand back
		}
		return release(ctx, rows)
	})
}
