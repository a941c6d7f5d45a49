package cursor

import (
	"errors"
	"fmt"
)

var (
	// ErrUnknownKind is returned by Registry.Lookup for a kind that no
	// driver was registered under.
	ErrUnknownKind = errors.New("cursor: unknown kind")
	// ErrDuplicateKind is returned by Registry.Register for a kind that
	// already has a driver.
	ErrDuplicateKind = errors.New("cursor: kind already registered")
	// ErrStaleLease is returned by Ack or Release when the row's lease
	// token has since been re-issued to another claimer (Features.Fencing).
	ErrStaleLease = errors.New("cursor: stale lease")
	// ErrClosed is returned by a cursor, driver or registry used after Close.
	ErrClosed = errors.New("cursor: closed")
	// ErrUnsupported is returned when a cursor is asked for something its
	// source or its configuration cannot do (for example DeadLetter on a SQL
	// cursor without a dead_letter statement, or Release without a release
	// statement).
	ErrUnsupported = errors.New("cursor: unsupported")
)

// ClaimError reports a failed operation against a cursor source. It names
// the credential alias (Auth), never the resolved credential, so it is safe
// to log and to record in events.
type ClaimError struct {
	// Kind is the cursor kind (postgres, sqlite, ...).
	Kind string
	// Auth is the keychain alias of the credential; may be empty.
	Auth string
	// Op is the failed operation: open, claim, ack, release, dead_letter or
	// finish.
	Op string
	// Err is the underlying error.
	Err error
}

// Error formats the error as "cursor <kind> (auth <alias>): <op>: <err>".
func (e *ClaimError) Error() string {
	op := e.Op
	if op == "" {
		op = "claim"
	}
	if e.Auth == "" {
		return fmt.Sprintf("cursor %s: %s: %v", e.Kind, op, e.Err)
	}
	return fmt.Sprintf("cursor %s (auth %s): %s: %v", e.Kind, e.Auth, op, e.Err)
}

// Unwrap returns the underlying error.
func (e *ClaimError) Unwrap() error { return e.Err }
