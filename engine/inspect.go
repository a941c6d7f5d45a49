package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cursorflow/cursorflow/dsl"
	"github.com/cursorflow/cursorflow/eventlog"
)

// Status is a snapshot of an execution, folded from its events.
type Status struct {
	ExecutionID string `json:"execution_id"`
	Status      string `json:"status"`
	// Playbook is the playbook's metadata name.
	Playbook string `json:"playbook"`
	// Steps maps each step that ran to the status of its last run.
	Steps map[string]string `json:"steps"`
	// Loops describes each loop run by its run id ("step#n").
	Loops map[string]LoopStatus `json:"loops"`
	// InFlight lists the commands issued and not yet finished.
	InFlight []string `json:"in_flight"`
	Events   int64    `json:"events"`
	LastSeq  int64    `json:"last_seq"`
	// StartedAt is when the execution started, EndedAt when it ended
	// (zero while it runs) and UpdatedAt the time of its last event.
	StartedAt time.Time `json:"started_at,omitzero"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// Failure fields for a failed execution.
	FailedStep  string `json:"failed_step,omitempty"`
	FailedField string `json:"failed_field,omitempty"`
	Error       string `json:"error,omitempty"`
}

// LoopStatus describes one loop run.
type LoopStatus struct {
	Step string `json:"step"`
	Mode string `json:"mode"`
	// Items is the collection size (collection loops) and Done how many
	// finished, Failed (below) counting those that failed among them.
	Items int `json:"items,omitempty"`
	Done  int `json:"done"`
	// Cursor loops: frames issued, frames in flight, rows seen and their
	// outcomes. They count runs of rows: a row that failed, went back to
	// the source (release) and was claimed again counts in Rows, and in
	// OK or Failed, once per run.
	Frames   int `json:"frames,omitempty"`
	InFlight int `json:"in_flight"`
	Rows     int `json:"rows,omitempty"`
	OK       int `json:"ok,omitempty"`
	Failed   int `json:"failed,omitempty"`
	Dead     int `json:"dead,omitempty"`
	// Cancelled counts the items of a collection loop (the shards of a
	// fan-out loop, the rows of a cursor loop) that a cancel of the
	// execution stopped while they ran or waited for their
	// sub-playbooks: neither done nor failed.
	// An ended execution's loops have nothing in flight.
	Cancelled int `json:"cancelled,omitempty"`
	// Abandoned counts rows the engine gave up on that stay claimed in
	// the source: their release (or the frame's) failed. They are listed
	// in frame.done's abandoned and need a hand: they never run again.
	Abandoned int `json:"abandoned,omitempty"`
	// Unreleased counts failed rows that stay claimed in the source
	// because the cursor has no release statement to hand them back (as
	// validate warns): they wait for the playbook's own SQL, or a hand.
	// Abandoned + Unreleased are the loop's rows left claimed.
	Unreleased int `json:"unreleased,omitempty"`
	// Returned counts rows the loop claimed and handed back to the source
	// without an outcome, for a later claim to give out again: rows a
	// cancel kept from starting, rows of a worker that stopped, rows a
	// frame ran out of time (max_seconds) or room (max_bytes) for. They
	// are in none of the counts above; a row that runs later counts in
	// Rows then. Histories recorded before the count have none.
	Returned int `json:"returned,omitempty"`
	// HoldUntil (a running cursor loop) is set after a frame attempt was
	// lost (its worker died or went silent, or the process driving the
	// execution was killed): what that attempt may have claimed without
	// recording it stays out of the other claims' reach (a stalled
	// claimer's transaction keeps its rows locked) until the source takes
	// it back, a frame lease after the loss. Until then a claim that
	// finds nothing does not end the loop, so a loop whose rows are all
	// done waits for HoldUntil before it finishes, unless its source's
	// claims exclude each other (cursor.Features.ExclusiveClaim: SQLite),
	// where a claim that finds nothing proves nothing is held. Zero when
	// no attempt was lost or the loop has finished.
	HoldUntil time.Time `json:"hold_until,omitzero"`
	Finished  bool      `json:"finished"`
	// Status is the loop's outcome: running, completed or failed as its
	// step's run ended, or the execution's end (cancelled, failed) for a
	// loop that was running when the execution ended.
	Status string `json:"status"`
	// StartedAt is when the loop started; Rate is Done per second from
	// then to the last item or frame that finished.
	StartedAt time.Time `json:"started_at,omitzero"`
	Rate      float64   `json:"rate"`
}

// Inspect folds an execution's events from log into a Status. It reads
// only; any process with access to the log can call it.
func Inspect(ctx context.Context, log eventlog.Log, executionID string) (*Status, error) {
	if log == nil {
		return nil, errors.New("engine: Inspect: nil event log")
	}
	events, err := log.Read(ctx, executionID, 0, 0)
	if err != nil {
		return nil, err
	}
	if len(events) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrUnknownExecution, executionID)
	}
	s, err := Fold(executionID, events)
	if err != nil {
		return nil, err
	}
	return s.Snapshot(), nil
}

// Snapshot describes the state as a Status.
func (s *State) Snapshot() *Status {
	sum := summarize(s)
	st := &Status{
		ExecutionID: s.ExecutionID, Status: s.Status, Steps: sum.Steps, Loops: map[string]LoopStatus{},
		InFlight: s.InFlight(), Events: s.Events, LastSeq: s.LastSeq,
		StartedAt: s.StartedAt, EndedAt: s.EndedAt, UpdatedAt: s.UpdatedAt,
		FailedStep: sum.Step, FailedField: sum.Field, Error: sum.Error,
	}
	if s.Playbook != nil {
		st.Playbook = s.Playbook.Metadata.Name
	}
	for id, l := range s.Loops {
		st.Loops[id] = s.loopStatus(id, l)
	}
	for id, ls := range s.doneLoops {
		st.Loops[id] = ls
	}
	return st
}

// loopStatus describes a loop of the state.
func (s *State) loopStatus(id string, l *loopState) LoopStatus {
	ls := LoopStatus{Mode: l.Mode, InFlight: s.loopInFlight(l), StartedAt: l.StartedAt}
	if r := s.Runs[id]; r != nil {
		ls.Step = r.Step
		ls.Finished = r.Status != runRunning || s.Status != StatusRunning
		ls.Status = r.Status
		if r.Status == runRunning && s.Status != StatusRunning {
			ls.Status = s.Status
		}
	}
	switch l.Mode {
	case dsl.ModeCursor:
		// Rows a cancel stopped are not failed.
		ls.Frames, ls.Rows, ls.OK, ls.Failed, ls.Dead, ls.Abandoned = l.Frames, l.Rows, l.OK, l.Failed-l.Cancelled, l.Dead, l.Abandoned
		ls.Cancelled = l.Cancelled
		ls.Unreleased = l.Unreleased
		ls.Returned = l.Returned
		ls.Done = ls.OK + ls.Failed + ls.Dead
		if !ls.Finished {
			ls.HoldUntil = l.HoldUntil
		}
	case dsl.ModeFanout:
		// A fan-out loop counts its shards.
		ls.Items, ls.Done, ls.OK, ls.Failed, ls.Cancelled = l.Shards, l.Done-l.Cancelled, l.OK, l.Failed-l.Cancelled, l.Cancelled
	default:
		// Items a cancel stopped are neither done nor failed.
		ls.Items, ls.Done, ls.Failed, ls.Cancelled = l.count(), l.Done-l.Cancelled, l.Failed-l.Cancelled, l.Cancelled
	}
	if s.Status == StatusCancelled && l.Mode != dsl.ModeCursor {
		// Items or shards still out when the cancel ended the execution
		// (parked on sub-playbooks, which the cancel ends too) were
		// stopped by it.
		ls.Cancelled += ls.InFlight
	}
	if s.Status != StatusRunning {
		// Nothing of an ended execution runs on: a report that comes
		// after its end is not recorded.
		ls.InFlight = 0
	}
	if d := l.ProgressAt.Sub(l.StartedAt).Seconds(); d > 0 {
		ls.Rate = float64(ls.Done) / d
	}
	return ls
}
