package engine

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
)

// Defaults of ProjectionConfig.
const (
	// DefaultProjectionCache is how many executions' folded states a
	// Projection keeps in memory.
	DefaultProjectionCache = 256
	// DefaultSnapshotEvery is how many events a Projection folds past its
	// last snapshot before it saves another.
	DefaultSnapshotEvery int64 = 10_000
	// DefaultListLimit is how many executions List returns without a
	// limit; MaxListLimit is the most it returns.
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// projectionReadBatch is how many events one read of the log fetches
// while catching up.
const projectionReadBatch = 5000

// maxSummaries bounds the summaries of ended executions a Projection
// remembers for List.
const maxSummaries = 100_000

// ProjectionConfig configures a Projection.
type ProjectionConfig struct {
	// Log is the event log the projection reads. Required.
	Log eventlog.Log
	// Cache bounds the executions whose folded state stays in memory; the
	// least recently read is dropped first. Defaults to
	// DefaultProjectionCache (256).
	Cache int
	// SnapshotEvery: when Log implements eventlog.Snapshots, the
	// projection saves a snapshot of an execution once it has folded this
	// many events past the last one, and a last snapshot of an ended
	// execution of at least this many events; a process that starts later
	// folds only what came after. Defaults to DefaultSnapshotEvery
	// (10,000); negative disables snapshots.
	SnapshotEvery int64
	// Logger receives snapshot problems (never fatal: the log is the
	// authority). Defaults to slog.Default().
	Logger *slog.Logger
}

// Projection answers status questions about executions without folding
// their whole history on every question. It keeps each execution's State
// in memory and, on every question, folds only the events appended since
// it last looked (one read of the log's tail), so its answers are as
// current as the log itself, on any replica, whoever appends. A process
// that starts (or evicted the state) continues from the execution's
// latest snapshot (see eventlog.Snapshots), which projections save as
// they go.
//
// A Projection is safe for concurrent use. Status on one execution is
// serialised; different executions proceed in parallel.
type Projection struct {
	cfg   ProjectionConfig
	snaps eventlog.Snapshots
	log   *slog.Logger

	mu        sync.Mutex
	entries   map[string]*list.Element // of *projected
	lru       *list.List               // front: most recently read
	summaries map[string]ExecutionSummary
}

// projected is one execution's folded state.
type projected struct {
	id string

	mu       sync.Mutex
	state    *State // nil until first read, and after a failed fold
	savedSeq int64  // seq of the latest snapshot saved or loaded
}

// ExecutionSummary is one execution in a list.
type ExecutionSummary struct {
	ExecutionID string `json:"execution_id"`
	Status      string `json:"status"`
	// Playbook is the playbook's metadata name.
	Playbook  string    `json:"playbook"`
	StartedAt time.Time `json:"started_at,omitzero"`
	// EndedAt is zero while the execution runs.
	EndedAt   time.Time `json:"ended_at,omitzero"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	Events    int64     `json:"events"`
}

// Summary returns the status's line in a list.
func (st *Status) Summary() ExecutionSummary {
	return ExecutionSummary{ExecutionID: st.ExecutionID, Status: st.Status, Playbook: st.Playbook,
		StartedAt: st.StartedAt, EndedAt: st.EndedAt, UpdatedAt: st.UpdatedAt, Events: st.Events}
}

// NewProjection returns a Projection over cfg.Log. A ProjectionConfig
// without a Log is refused with an error wrapping ErrConfig.
func NewProjection(cfg ProjectionConfig) (*Projection, error) {
	if cfg.Log == nil {
		return nil, fmt.Errorf("%w: ProjectionConfig.Log is required", ErrConfig)
	}
	if cfg.Cache <= 0 {
		cfg.Cache = DefaultProjectionCache
	}
	if cfg.SnapshotEvery == 0 {
		cfg.SnapshotEvery = DefaultSnapshotEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Projection{cfg: cfg, log: cfg.Logger, entries: map[string]*list.Element{}, lru: list.New(),
		summaries: map[string]ExecutionSummary{}}
	if s, ok := cfg.Log.(eventlog.Snapshots); ok && cfg.SnapshotEvery > 0 {
		p.snaps = s
	}
	return p, nil
}

// entry returns the execution's entry, creating it, and marks it the most
// recently read, evicting the least recently read beyond the cache size.
func (p *Projection) entry(id string) *projected {
	p.mu.Lock()
	defer p.mu.Unlock()
	if el, ok := p.entries[id]; ok {
		p.lru.MoveToFront(el)
		return el.Value.(*projected)
	}
	e := &projected{id: id}
	p.entries[id] = p.lru.PushFront(e)
	for p.lru.Len() > p.cfg.Cache {
		last := p.lru.Back()
		p.lru.Remove(last)
		delete(p.entries, last.Value.(*projected).id)
	}
	return e
}

// forget drops an execution's entry (one the log does not know).
func (p *Projection) forget(e *projected) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if el, ok := p.entries[e.id]; ok && el.Value == e {
		p.lru.Remove(el)
		delete(p.entries, e.id)
	}
}

// Status returns the execution's status as of the last event in the log.
// An execution the log does not hold is ErrUnknownExecution.
func (p *Projection) Status(ctx context.Context, executionID string) (*Status, error) {
	st, _, err := p.read(ctx, executionID, func(s *State) *Status { return s.Snapshot() })
	return st, err
}

// Playbook returns the playbook source the execution runs and the file
// name it was started with, as execution.started recorded them.
func (p *Projection) Playbook(ctx context.Context, executionID string) (file, source string, err error) {
	_, started, err := p.read(ctx, executionID, func(*State) *Status { return nil })
	if errors.Is(err, ErrRecordedPlaybook) {
		// This build cannot fold it, but its source is on record, and
		// is what the operator told to finish it elsewhere needs to see.
		return p.recordedPlaybook(ctx, executionID)
	}
	return started.File, started.Playbook, err
}

// recordedPlaybook reads the playbook source and file name from the
// execution's execution.started event itself, without folding.
func (p *Projection) recordedPlaybook(ctx context.Context, executionID string) (file, source string, err error) {
	evs, err := p.cfg.Log.Read(ctx, executionID, 0, 1)
	if err != nil {
		return "", "", err
	}
	var started startedPayload
	if len(evs) == 0 || evs[0].Type != eventlog.TypeExecutionStarted {
		return "", "", fmt.Errorf("%w: %s", ErrUnknownExecution, executionID)
	}
	if err := decode(evs[0], &started); err != nil {
		return "", "", fmt.Errorf("engine: execution %s: execution.started: %w", executionID, err)
	}
	return started.File, started.Playbook, nil
}

// read brings the execution's state up to date and calls view on it
// under the entry's lock.
func (p *Projection) read(ctx context.Context, id string, view func(*State) *Status) (*Status, startedPayload, error) {
	e := p.entry(id)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := p.catchUp(ctx, e); err != nil {
		return nil, startedPayload{}, err
	}
	if e.state.Events == 0 {
		e.state = nil
		p.forget(e)
		return nil, startedPayload{}, fmt.Errorf("%w: %s", ErrUnknownExecution, id)
	}
	p.maybeSave(ctx, e)
	st := view(e.state)
	if st != nil && !st.EndedAt.IsZero() {
		p.remember(st.Summary())
	}
	return st, e.state.started, nil
}

// catchUp restores the entry from its snapshot if it has no state yet,
// then folds the events after its last seq.
func (p *Projection) catchUp(ctx context.Context, e *projected) error {
	if e.state == nil {
		e.state, e.savedSeq = p.restore(ctx, e.id), 0
		if e.state.LastSeq > 0 {
			e.savedSeq = e.state.LastSeq
		}
	}
	for {
		evs, err := p.cfg.Log.Read(ctx, e.id, e.state.LastSeq, projectionReadBatch)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if err := e.state.Apply(ev); err != nil {
				// Half applied: fold again next time.
				e.state = nil
				return err
			}
		}
		if len(evs) < projectionReadBatch {
			return nil
		}
	}
}

// restore returns the state of the execution's snapshot, or an empty
// state when there is none (or it cannot be used).
func (p *Projection) restore(ctx context.Context, id string) *State {
	if p.snaps == nil {
		return NewState(id)
	}
	snap, err := p.snaps.LoadSnapshot(ctx, id, SnapshotFormat)
	if err != nil {
		if !errors.Is(err, eventlog.ErrNoSnapshot) {
			p.log.WarnContext(ctx, "projection: cannot load snapshot; folding from the first event", "execution_id", id, "error", err)
		}
		return NewState(id)
	}
	s, err := UnmarshalState(snap.Data)
	if err == nil && (s.ExecutionID != id || s.LastSeq != snap.Seq) {
		err = fmt.Errorf("snapshot of %s at seq %d holds %s at seq %d", id, snap.Seq, s.ExecutionID, s.LastSeq)
	}
	if err != nil {
		p.log.WarnContext(ctx, "projection: unusable snapshot; folding from the first event", "execution_id", id, "error", err)
		return NewState(id)
	}
	return s
}

// maybeSave saves a snapshot when the state is SnapshotEvery events past
// the last one, or when a long execution has ended.
func (p *Projection) maybeSave(ctx context.Context, e *projected) {
	s := e.state
	if p.snaps == nil || s.LastSeq <= e.savedSeq {
		return
	}
	if s.LastSeq-e.savedSeq < p.cfg.SnapshotEvery && (s.EndedAt.IsZero() || s.LastSeq < p.cfg.SnapshotEvery) {
		return
	}
	data, err := s.MarshalSnapshot()
	if err == nil {
		_, err = p.snaps.SaveSnapshot(ctx, eventlog.Snapshot{ExecutionID: e.id, Format: SnapshotFormat, Seq: s.LastSeq, Data: data})
	}
	if err != nil {
		p.log.WarnContext(ctx, "projection: cannot save snapshot", "execution_id", e.id, "seq", s.LastSeq, "error", err)
		return
	}
	// Saved, or another process saved one at least as far: either way
	// there is one at this seq or later.
	e.savedSeq = s.LastSeq
}

// remember keeps an ended execution's summary for List.
func (p *Projection) remember(sum ExecutionSummary) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.summaries[sum.ExecutionID]; !ok && len(p.summaries) >= maxSummaries {
		for k := range p.summaries { // drop any one
			delete(p.summaries, k)
			break
		}
	}
	p.summaries[sum.ExecutionID] = sum
}

func (p *Projection) ended(id string) (ExecutionSummary, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sum, ok := p.summaries[id]
	return sum, ok
}

// ListOptions select the executions List returns.
type ListOptions struct {
	// Status keeps the executions in this status only (StatusRunning,
	// StatusCompleted, StatusFailed, StatusCancelled); empty keeps all.
	Status string
	// Limit bounds how many are returned. Defaults to DefaultListLimit
	// (100); at most MaxListLimit (1000).
	Limit int
	// After continues a listing after this execution (the last of the
	// previous page); empty starts with the newest. An id the log does
	// not hold lists none.
	After string
}

// List returns executions, newest first. An ended execution's summary is
// remembered once read, so listing many finished executions folds each
// at most once per process (from its snapshot when there is one). An
// execution this build cannot fold, an earlier release having started it
// with a playbook this one refuses (ErrRecordedPlaybook), is left out:
// its Status says why, and the others stay listable.
func (p *Projection) List(ctx context.Context, opts ListOptions) ([]ExecutionSummary, error) {
	switch opts.Status {
	case "", StatusRunning, StatusCompleted, StatusFailed, StatusCancelled:
	default:
		return nil, fmt.Errorf("engine: list: unknown status %q", opts.Status)
	}
	limit := opts.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	// The log is read newest first, a page at a time, until the page
	// is full: a log of a million executions is not read whole to show
	// a hundred. A status other than running may need several pages.
	out := []ExecutionSummary{}
	q := eventlog.ExecutionsQuery{Unfinished: opts.Status == StatusRunning, NewestFirst: true, Limit: limit, After: opts.After}
	for {
		ids, err := p.cfg.Log.Executions(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			sum, ok := p.ended(id)
			if !ok {
				st, err := p.Status(ctx, id)
				if errors.Is(err, ErrUnknownExecution) || errors.Is(err, ErrRecordedPlaybook) {
					continue
				}
				if err != nil {
					return nil, err
				}
				sum = st.Summary()
			}
			if opts.Status == "" || sum.Status == opts.Status {
				out = append(out, sum)
				if len(out) == limit {
					return out, nil
				}
			}
		}
		if len(ids) < q.Limit {
			return out, nil
		}
		q.After = ids[len(ids)-1]
	}
}

// Refresh brings every unfinished execution's state up to date, saving
// snapshots as it goes, so that a status question (here or, through the
// snapshots, on another replica) has little left to fold. An orchestrator
// calls it now and then (see leader.OrchestratorConfig.Projection).
func (p *Projection) Refresh(ctx context.Context) error {
	ids, err := p.cfg.Log.Executions(ctx, eventlog.ExecutionsQuery{Unfinished: true})
	if err != nil {
		return err
	}
	for _, id := range ids {
		// One this build cannot fold (ErrRecordedPlaybook) has nothing
		// to refresh; the others still do.
		if _, err := p.Status(ctx, id); err != nil && !errors.Is(err, ErrUnknownExecution) && !errors.Is(err, ErrRecordedPlaybook) {
			return err
		}
	}
	return nil
}
