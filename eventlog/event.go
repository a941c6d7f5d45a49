package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Event types. The engine owns their meaning; the log knows those whose
// uniqueness it enforces (see Log).
const (
	// TypeExecutionStarted is stored once per execution_id; a second one
	// refuses its batch (AlreadyStartedError).
	TypeExecutionStarted   = "execution.started"
	TypeExecutionCompleted = "execution.completed"
	TypeExecutionFailed    = "execution.failed"
	TypeExecutionCancelled = "execution.cancelled"
	TypeCancelRequested    = "cancel.requested"

	TypeStepStarted   = "step.started"
	TypeStepSkipped   = "step.skipped"
	TypeStepCompleted = "step.completed"
	TypeStepFailed    = "step.failed"

	// TypeCommandIssued is unique per (execution_id, command_id).
	TypeCommandIssued    = "command.issued"
	TypeCommandCompleted = "command.completed"
	TypeCommandFailed    = "command.failed"
	TypeRetryScheduled   = "retry.scheduled"
	// TypeCommandAwaiting: the command's worker handed it back to wait
	// for another execution (a sub-playbook) to end.
	TypeCommandAwaiting = "command.awaiting"
	// TypeAwaitDone: the execution an awaiting command waits for ended;
	// the command is issued again.
	TypeAwaitDone = "await.done"

	TypeLoopStarted = "loop.started"
	// TypeLoopDone is unique per (execution_id, loop_id).
	TypeLoopDone = "loop.done"
	// TypeLoopFaninCompleted ends a fan-out loop once every shard ended;
	// it is unique per (execution_id, loop_id).
	TypeLoopFaninCompleted = "loop.fanin.completed"
	TypeFrameClaimed       = "frame.claimed"
	TypeFrameDone          = "frame.done"

	// TypeCallPartial is a partial result a tool handed on while its
	// command ran (a page, a batch of rows, a line of output). It is for
	// people watching; no decision reads it.
	TypeCallPartial = "call.partial"
)

// Event is one entry of an execution's append-only history.
type Event struct {
	// ID is assigned by the log on append: unique and increasing across
	// the whole log.
	ID int64 `json:"id"`
	// ExecutionID names the execution the event belongs to.
	ExecutionID string `json:"execution_id"`
	// Seq is assigned by the log on append: 1, 2, 3, ... within one
	// execution, without gaps.
	Seq       int64  `json:"seq"`
	Type      string `json:"type"`
	Step      string `json:"step,omitempty"`
	CommandID string `json:"command_id,omitempty"`
	LoopID    string `json:"loop_id,omitempty"`
	Frame     int    `json:"frame,omitempty"`
	Attempt   int    `json:"attempt,omitempty"`
	WorkerID  string `json:"worker_id,omitempty"`
	// Payload is the event's JSON body; its shape depends on Type.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Meta carries tracing and diagnostic data that decisions never read.
	Meta json.RawMessage `json:"meta,omitempty"`
	// Time is set by the appender if zero.
	Time time.Time `json:"time"`
}

// Result reports what Append did with one event of the batch.
type Result struct {
	// ID and Seq are the stored event's identifiers; zero for a duplicate.
	ID  int64
	Seq int64
	// Duplicate is true when the event was not stored because the log
	// already holds a command.issued with the same (execution_id,
	// command_id), or a loop.done or loop.fanin.completed with the same
	// (execution_id, loop_id), or because its execution has ended: once
	// a terminal event (IsTerminal) is stored, in an earlier batch or
	// earlier in the same one, nothing more of that execution is.
	Duplicate bool
}

// Log is an append-only, per-execution ordered event store.
//
// Implementations are safe for concurrent use by many goroutines and, for
// the durable backends, by many processes.
type Log interface {
	// Append stores the batch atomically, in one round trip to the backend,
	// in order, assigning each stored event its ID and its execution's next
	// Seq. The result has one entry per input event. Duplicates (see Result)
	// are skipped without error and without consuming a Seq; this check is
	// atomic with the insert, so of two racing appends of the same
	// command.issued exactly one is stored. A batch holding a second
	// execution.started of an execution is refused whole with an
	// *AlreadyStartedError, as atomically: of two racing starts of one
	// execution exactly one is stored.
	Append(ctx context.Context, events []Event) ([]Result, error)
	// Read returns up to limit events of the execution with Seq > afterSeq,
	// in Seq order. limit <= 0 means no limit.
	Read(ctx context.Context, executionID string, afterSeq int64, limit int) ([]Event, error)
	// Wait blocks until the execution has an event with Seq > afterSeq, or
	// ctx is done (then it returns ctx.Err()).
	Wait(ctx context.Context, executionID string, afterSeq int64) error
	// Executions lists the ids of the executions q selects, in the order
	// their first events were appended (oldest first, or newest first
	// with q.NewestFirst), at most q.Limit of them. A caller that shows
	// a few (a list endpoint) asks for a page and continues after its
	// last id with q.After; one that needs them all (a leader resuming
	// the unfinished ones) leaves Limit zero, and the backend still reads
	// them in pages, each its own bounded statement, so a log of any
	// size is listed without one statement outliving its bound.
	Executions(ctx context.Context, q ExecutionsQuery) ([]string, error)
	// Close releases the log's resources.
	Close() error
}

// ExecutionsQuery selects the executions Log.Executions lists. The zero
// value lists every execution, oldest first.
type ExecutionsQuery struct {
	// Unfinished keeps only the executions whose first event is
	// execution.started and that have no terminal event
	// (execution.completed, execution.failed, execution.cancelled).
	Unfinished bool
	// NewestFirst lists the executions whose first event was appended
	// last first.
	NewestFirst bool
	// After continues a listing: only the executions that come after
	// this one in the listing's order are listed (pass the last id of
	// the previous page). Empty starts at the beginning; an id the log
	// does not hold lists none.
	After string
	// Limit bounds how many ids are returned; zero or negative returns
	// them all.
	Limit int
}

// ErrClosed is returned by operations on a closed log.
var ErrClosed = errors.New("eventlog: log is closed")

// ErrUnavailable is wrapped by the error of an operation the log's
// backend failed (a connection refused or lost, a server restarting, a
// statement the database refused): the log could not answer now. An API
// answers it 503, not 500.
var ErrUnavailable = errors.New("eventlog: log unavailable")

// ErrNoLog is wrapped by the error of an open that must find an existing
// log (eventlogurl.OpenExisting, postgres.Config.MustExist) and finds
// none: a mistyped path or database, which is better said than created.
var ErrNoLog = errors.New("eventlog: no event log there")

// ErrAlreadyStarted is wrapped by the error Append returns when the batch
// holds an execution.started for an execution that has one already, in
// the log or earlier in the batch (see AlreadyStartedError). Nothing of
// the batch is stored.
var ErrAlreadyStarted = errors.New("eventlog: execution already started")

// AlreadyStartedError is the error Append returns for a second
// execution.started of one execution. Unlike a repeated command.issued,
// which a retry of the same decision sends and the log skips, a second
// start is a conflict (two callers chose the same execution id), so the
// whole batch is refused: the events decided after it would otherwise
// land in the first caller's history.
type AlreadyStartedError struct {
	// ExecutionID is the first execution of the batch found started.
	ExecutionID string
}

// Error names the execution.
func (e *AlreadyStartedError) Error() string {
	return fmt.Sprintf("eventlog: execution %q already started", e.ExecutionID)
}

// Is makes errors.Is(err, ErrAlreadyStarted) hold.
func (e *AlreadyStartedError) Is(target error) bool { return target == ErrAlreadyStarted }

// IsTerminal reports whether an event type ends an execution.
func IsTerminal(typ string) bool {
	switch typ {
	case TypeExecutionCompleted, TypeExecutionFailed, TypeExecutionCancelled:
		return true
	}
	return false
}
