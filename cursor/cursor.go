package cursor

import (
	"context"
	"log/slog"
	"time"

	"github.com/cursorflow/cursorflow/dsl"
)

// Row is one claimed item of a cursor source.
type Row struct {
	// Key identifies the row within its source (a primary key, a stream
	// entry id, an object key). Stable across redeliveries.
	Key string
	// Values are the row's columns or fields, seen by the loop body as
	// iter.<iterator>.
	Values map[string]any
	Lease  Lease
	// Error is the row's last error: set by the engine on rows it hands
	// back with Release because their body failed (the row's error as the
	// frame reports it: bounded, with the secrets the body's tools
	// resolved redacted); empty otherwise (claimed rows, acked rows, rows
	// handed back without having failed). A driver may keep it with the
	// row so that a later dead letter says why (SQL statements see it as
	// errors[i].error); one that ignores it loses nothing else.
	Error string
}

// Lease is a claimed row's hold on its source.
type Lease struct {
	// Attempt counts deliveries of this row, starting at 1.
	Attempt int
	// Deadline is when the source will hand the row to another claimer
	// if it is neither acknowledged nor extended. Zero when the source has
	// no lease of its own (SQL drivers: the engine's frame lease applies).
	Deadline time.Time
	// Token fences the holder: an Ack or Release carrying a token that the
	// source has since re-issued is refused with ErrStaleLease.
	Token string
}

// Spec is what the engine hands a driver to open a cursor for one frame
// slot of one loop.
type Spec struct {
	// Kind is the cursor's kind as written in the playbook.
	Kind string
	// Auth is the credential alias, kept for error messages; never the
	// secret.
	Auth string
	// Credential is the resolved connection URL or DSN.
	Credential string
	// Claim is the claim statement for SQL drivers (nil otherwise). The
	// driver renders it for every claim with Scope plus __frame_max_rows
	// (the claim's max), __worker_slot_id (WorkerSlotID) and
	// __worker_slot_index (SlotID).
	Claim *dsl.Template
	// Scope is the render context of the loop (workload, ctx, vars, ...).
	Scope map[string]any
	// Options holds the cursor block's other keys, rendered.
	Options map[string]any
	// LoopID identifies the loop run: the engine gives "<execution
	// id>/<run id>" (run ids such as start#1 repeat in every execution),
	// stable across the run's frames, re-issues and resumes; an execution
	// recorded by an engine before that keeps the run id alone. Drivers
	// may derive a consumer group or a lease owner from it.
	LoopID string
	// SlotID is the frame slot's index within its loop, 0 ..
	// max_in_flight-1 (__worker_slot_index in templates).
	SlotID int
	// WorkerSlotID identifies the frame slot across every loop and
	// execution (__worker_slot_id in templates, NoETL's "engine-assigned
	// snowflake"): a positive integer below 2^53, so it fits BIGINT, TEXT
	// and JSON numbers alike, stable across the re-issues of the slot's
	// frames. The engine derives it from the execution id, LoopID and
	// SlotID; zero means the spec did not come from the engine, and
	// drivers then render SlotID.
	WorkerSlotID int64
	// Lease is the lease to take on claimed rows where the source keeps
	// leases (redis, nats, s3), and, where a driver bounds it, the longest
	// a transactional claim may wait for its Commit or Abort (postgres;
	// mysql on MariaDB): after a frame attempt is lost, the engine holds
	// the drain open a lease, counting on the source to have taken back by
	// then whatever the attempt claimed without recording it.
	Lease time.Duration
	// MaxAttempts is how many deliveries a row gets before it is
	// dead-lettered, where the source counts deliveries.
	MaxAttempts int
	Logger      *slog.Logger
}

// Features declares what a driver guarantees, so the engine and
// cursortest adapt to it instead of assuming.
type Features struct {
	// TransactionalClaim: a claim is invisible to other claimers until
	// Claim.Commit, and undone by Claim.Abort or by the claimer's death
	// (the source rolls back a claim whose connection is gone), so rows
	// come back at once rather than after a lease (postgres, mysql,
	// sqlite).
	TransactionalClaim bool
	// BatchClaim: Claim returns up to max rows at once (else at most one).
	BatchClaim bool
	// LeaseExpiry: the source itself redelivers a row whose lease expired
	// without an Ack (redis, nats, s3). SQL drivers leave this to the claim
	// SQL and to the engine's frame lease.
	LeaseExpiry bool
	// NeedsAck: rows must be acknowledged with Ack or they come back.
	NeedsAck bool
	// DeadLetter: the driver moves rows past MaxAttempts to a dead letter.
	DeadLetter bool
	// Ordered: rows are claimed in source order.
	Ordered bool
	// Fencing: Ack and Release refuse stale lease tokens.
	Fencing bool
	// ClaimTemplate: the claim is a template (Spec.Claim) rendered for every
	// claim with Spec.Scope plus __frame_max_rows and __worker_slot_id.
	ClaimTemplate bool
	// Attempts: Lease.Attempt counts deliveries of a row (SQL drivers: when
	// the claim returns an attempts, attempt or attempt_count column);
	// otherwise it is always 1.
	Attempts bool
	// ExclusiveClaim: while one claim is open (not yet committed or
	// aborted), no other claim on the source finds rows nothing holds or
	// returns empty: it waits, or fails (sqlite, whose claims hold the
	// file's write lock). A claim that finds no rows then proves that no
	// claimer holds rows it has not recorded, so the engine ends the
	// drain at once where it would otherwise wait a frame lease after a
	// lost attempt for that attempt's rows to come back
	// (engine.LoopStatus.HoldUntil). Claims that pass each other's locked
	// rows by (FOR UPDATE SKIP LOCKED) or that lease rows out are not
	// exclusive; false is always safe.
	ExclusiveClaim bool
}

// Driver opens cursors of one kind. A Driver caches connections by
// credential, so Open is cheap enough to call once per frame.
type Driver interface {
	Open(ctx context.Context, spec Spec) (Cursor, error)
	Features() Features
	// Close releases the driver's cached connections.
	Close() error
}

// Cursor claims frames of rows from one source.
type Cursor interface {
	// Claim leases up to max rows and returns them as a pending claim that
	// the caller settles with Commit (once the rows are on record) or
	// Abort. A claim of zero rows, with a nil error, means the source is
	// drained for this cursor. A cursor holds at most one pending claim at
	// a time; Ack, Release and DeadLetter apply to committed rows.
	Claim(ctx context.Context, max int) (*Claim, error)
	// Ack marks rows done where the source needs it; a no-op otherwise.
	Ack(ctx context.Context, rows []Row) error
	// Release hands rows back for another claim (or counts a failed
	// delivery); rows whose body failed carry its error in Row.Error,
	// which the source may keep for a later dead letter. A cursor that
	// cannot hand rows back (a SQL cursor without a release statement)
	// returns an error wrapping ErrUnsupported and leaves the rows with
	// their claimer.
	Release(ctx context.Context, rows []Row) error
	// Close ends the cursor; it does not close the driver's connections.
	Close() error
}

// DeadLetterer is implemented by cursors that can move rows to a dead
// letter on the engine's request (after the engine's own attempt count
// is exhausted).
type DeadLetterer interface {
	DeadLetter(ctx context.Context, rows []Row, reason string) error
}

// Finisher is implemented by drivers that keep state in the source for
// each loop run when the cursor block names none of its own: a consumer
// group or a durable consumer named from Spec.LoopID. Without it that
// state outlives the loop forever, one group per execution of a playbook
// that drains a stream every time.
//
// The engine calls Finish once a loop run is over for good: after its
// loop.done is recorded in the event log, or after its execution ended
// (failed, cancelled) without one, since an ended execution is never
// resumed. It calls it on the process that recorded that event, with the
// credential and options its frames had (SlotID and WorkerSlotID zero),
// and only for loop ids of the form "<execution id>/<run id>", which no
// other loop run shares. Finish must remove only what the driver named
// by default, never a group or consumer the cursor block names (others
// may share it), and succeed when there is nothing to remove. A failed
// Finish is logged and the execution's outcome is unchanged; a process
// that dies between the record and the call leaves that run's state
// behind.
type Finisher interface {
	Finish(ctx context.Context, spec Spec) error
}
