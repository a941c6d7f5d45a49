package eventlog

import (
	"context"
	"errors"
)

// ErrNoSnapshot is what Snapshots.LoadSnapshot returns when the log holds
// no snapshot of the execution in the format asked for.
var ErrNoSnapshot = errors.New("eventlog: no snapshot")

// Snapshot is a reader's fold of an execution's events up to Seq, kept by
// the log so that another process (or the same one after a restart) can
// continue from it and read only the events after Seq. The log stores
// Data as it is and never interprets it; the history stays the only
// authority, and a snapshot can always be rebuilt from it.
type Snapshot struct {
	ExecutionID string
	// Format names Data's encoding (for example engine.SnapshotFormat). A
	// log keeps one snapshot per execution and format, so processes of
	// two versions never read each other's.
	Format string
	// Seq is the seq of the last event folded into Data.
	Seq  int64
	Data []byte
}

// Snapshots is implemented by logs that also keep snapshots: Memory,
// eventlog/sqlite and eventlog/postgres. A reader that finds the log
// lacks it folds from the first event.
type Snapshots interface {
	// SaveSnapshot stores snap, replacing the execution's snapshot in the
	// same format only if that one's Seq is lower: of two processes saving
	// at once, the further one wins. saved reports whether snap was
	// stored.
	SaveSnapshot(ctx context.Context, snap Snapshot) (saved bool, err error)
	// LoadSnapshot returns the execution's snapshot in format, or an error
	// wrapping ErrNoSnapshot.
	LoadSnapshot(ctx context.Context, executionID, format string) (Snapshot, error)
}

// ValidateSnapshot checks a snapshot before it is saved: it needs an
// execution id, a format and a positive seq. Backends call it.
func ValidateSnapshot(s Snapshot) error {
	switch {
	case s.ExecutionID == "":
		return errors.New("eventlog: snapshot without an execution id")
	case s.Format == "":
		return errors.New("eventlog: snapshot without a format")
	case s.Seq < 1:
		return errors.New("eventlog: snapshot seq must be positive")
	}
	return nil
}
