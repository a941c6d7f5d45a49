package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cursorflow/cursorflow/dsl"
)

// SnapshotFormat names the encoding State.MarshalSnapshot writes. It
// changes whenever State's shape does, so that a process never restores a
// snapshot another version wrote: it folds from the first event instead.
//
// 8: loops count the items, shards and rows a cancel stopped (Cancelled;
// builds that wrote 7 before that lacked it, and their snapshots lose
// it), and finished loops keep their outcome (LoopStatus.Status).
//
// 9: cursor loops know that their source's claims are exclusive
// (Exclusive), and then hold nothing after a lost attempt.
//
// 10: cursor loops count the rows handed back without an outcome
// (Returned).
const SnapshotFormat = "cursorflow.engine.state/10"

// stateSnapshot is State with its unexported fields, as JSON.
type stateSnapshot struct {
	ExecutionID     string
	Status          string
	Failure         finishedPayload
	Workload        map[string]any
	Ctx             map[string]any
	Vars            map[string]any
	Results         map[string]any
	Runs            map[string]*stepRun
	Commands        map[string]*commandSnapshot
	Loops           map[string]*loopState
	LastSeq         int64
	Events          int64
	StartedAt       time.Time
	EndedAt         time.Time
	UpdatedAt       time.Time
	Started         startedPayload
	CancelRequested bool
	RunCount        map[string]int
	Wanted          []wantedStep
	Finishing       []string
	Inflight        int
	// Steps and DoneLoops are what finished runs and loops leave behind.
	Steps     map[string]finishedRun
	DoneLoops map[string]LoopStatus
	// RefNames are the scope variables holding stored-result references.
	RefNames map[string]bool `json:",omitempty"`
}

// commandSnapshot is commandState with its recorded rows.
type commandSnapshot struct {
	commandState
	Rows json.RawMessage `json:",omitempty"`
}

// MarshalSnapshot encodes the state in SnapshotFormat: everything the
// fold has gathered, so that UnmarshalState and the events after LastSeq
// give the same State as folding every event. The parsed playbook is not
// encoded; it is parsed again from the source execution.started recorded.
func (s *State) MarshalSnapshot() ([]byte, error) {
	snap := stateSnapshot{
		ExecutionID: s.ExecutionID, Status: s.Status, Failure: s.Failure,
		Workload: s.Workload, Ctx: s.Ctx, Vars: s.Vars, Results: s.Results,
		Runs: s.Runs, Commands: make(map[string]*commandSnapshot, len(s.Commands)), Loops: s.Loops,
		LastSeq: s.LastSeq, Events: s.Events,
		StartedAt: s.StartedAt, EndedAt: s.EndedAt, UpdatedAt: s.UpdatedAt,
		Started: s.started, CancelRequested: s.cancelRequested, RunCount: s.runCount,
		Wanted: s.wanted, Finishing: s.finishing, Inflight: s.inflight,
		Steps: s.steps, DoneLoops: s.doneLoops, RefNames: s.refNames,
	}
	for k, c := range s.Commands {
		snap.Commands[k] = &commandSnapshot{commandState: *c, Rows: c.rows}
	}
	b, err := json.Marshal(snap)
	if err != nil {
		return nil, fmt.Errorf("engine: snapshot of %s: %w", s.ExecutionID, err)
	}
	return b, nil
}

// UnmarshalState restores a State that MarshalSnapshot encoded (in
// SnapshotFormat); apply the events after its LastSeq to bring it up to
// date.
func UnmarshalState(data []byte) (*State, error) {
	var snap stateSnapshot
	if err := unmarshal(data, &snap); err != nil {
		return nil, fmt.Errorf("engine: restore snapshot: %w", err)
	}
	if snap.ExecutionID == "" {
		return nil, errors.New("engine: restore snapshot: no execution id")
	}
	s := NewState(snap.ExecutionID)
	s.Status, s.Failure = snap.Status, snap.Failure
	s.Workload, s.LastSeq, s.Events = snap.Workload, snap.LastSeq, snap.Events
	s.started, s.parent, s.cancelRequested = snap.Started, snap.Started.Parent, snap.CancelRequested
	s.semantics = snap.Started.Semantics
	s.wanted, s.finishing, s.inflight = snap.Wanted, snap.Finishing, snap.Inflight
	s.StartedAt, s.EndedAt, s.UpdatedAt = snap.StartedAt, snap.EndedAt, snap.UpdatedAt
	// NewState's empty maps stay when the snapshot has none, as in a fold.
	setMap(&s.Ctx, snap.Ctx)
	setMap(&s.Vars, snap.Vars)
	setMap(&s.Results, snap.Results)
	setMap(&s.Runs, snap.Runs)
	setMap(&s.Loops, snap.Loops)
	setMap(&s.runCount, snap.RunCount)
	setMap(&s.steps, snap.Steps)
	setMap(&s.doneLoops, snap.DoneLoops)
	s.refNames = snap.RefNames
	for k, c := range snap.Commands {
		cs := c.commandState
		cs.rows = c.Rows
		s.Commands[k] = &cs
	}
	if s.Status != "" {
		pb, err := dsl.Parse(s.started.File, []byte(s.started.Playbook))
		if err != nil {
			return nil, fmt.Errorf("engine: restore snapshot of %s: playbook: %w", s.ExecutionID, err)
		}
		s.Playbook = pb
	}
	return s, nil
}

func setMap[M ~map[K]V, K comparable, V any](dst *M, src M) {
	if src != nil {
		*dst = src
	}
}
