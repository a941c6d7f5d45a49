package eventlog

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/cursorflow/cursorflow/eventlog/internal/notify"
)

// Memory is an in-process Log: the event store of embedded mode, when the
// history does not have to outlive the process. It enforces exactly the
// rules of the durable backends (contiguous seqs, the two uniqueness rules,
// atomic batches) so that code tested against it behaves the same on
// SQLite or PostgreSQL.
//
// Payload and Meta are copied on Append and on Read, so callers may reuse
// their buffers. Wait sleeps on a channel until an append to the execution
// (no polling). The zero value is not usable; call NewMemory.
type Memory struct {
	hub  notify.Hub
	done chan struct{}

	mu     sync.RWMutex
	closed bool
	lastID int64
	execs  map[string]*memExecution
	order  []*memExecution // by first append: the order Executions reports
	// snaps holds snapshots by execution id and format.
	snaps map[[2]string]Snapshot
}

type memExecution struct {
	id       string
	events   []Event
	unique   map[string]struct{} // UniqueKey of stored command.issued, loop.done, loop.fanin.completed
	started  bool                // the first event is execution.started
	terminal bool                // a terminal event was stored
	// hasStart is set once an execution.started is stored (not
	// necessarily as the first event): a second one is refused.
	hasStart bool
}

// NewMemory returns an empty in-memory log.
func NewMemory() *Memory {
	return &Memory{
		done:  make(chan struct{}),
		execs: make(map[string]*memExecution),
	}
}

var (
	_ Log       = (*Memory)(nil)
	_ Snapshots = (*Memory)(nil)
)

// Append implements Log.
func (m *Memory) Append(ctx context.Context, events []Event) ([]Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ValidateBatch(events); err != nil {
		return nil, err
	}
	results := make([]Result, len(events))
	if len(events) == 0 {
		return results, nil
	}
	now := time.Now().Round(0)
	touched := make([]string, 0, 1)

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	// A second start refuses the batch before anything of it is stored.
	if err := m.checkStarts(events); err != nil {
		m.mu.Unlock()
		return nil, err
	}
	// Validation and the start check happened above, so nothing below can
	// fail: the batch is stored whole.
	for i, ev := range events {
		x := m.execs[ev.ExecutionID]
		if x == nil {
			x = &memExecution{
				id:      ev.ExecutionID,
				unique:  make(map[string]struct{}),
				started: ev.Type == TypeExecutionStarted,
			}
			m.execs[ev.ExecutionID] = x
			m.order = append(m.order, x)
		}
		if x.terminal {
			// The execution ended: nothing more of it is stored (a late
			// decision of an orchestrator that did not see the end).
			results[i] = Result{Duplicate: true}
			continue
		}
		if key, ok := UniqueKey(ev); ok {
			if _, dup := x.unique[key]; dup {
				results[i] = Result{Duplicate: true}
				continue
			}
			x.unique[key] = struct{}{}
		}
		m.lastID++
		ev.ID = m.lastID
		ev.Seq = int64(len(x.events)) + 1
		ev.Payload = bytes.Clone(ev.Payload)
		ev.Meta = bytes.Clone(ev.Meta)
		if ev.Time.IsZero() {
			ev.Time = now
		} else {
			ev.Time = ev.Time.Round(0)
		}
		x.events = append(x.events, ev)
		if ev.Type == TypeExecutionStarted {
			x.hasStart = true
		}
		if IsTerminal(ev.Type) {
			x.terminal = true
		}
		results[i] = Result{ID: ev.ID, Seq: ev.Seq}
		if len(touched) == 0 || touched[len(touched)-1] != ev.ExecutionID {
			touched = append(touched, ev.ExecutionID)
		}
	}
	m.mu.Unlock()

	for _, id := range touched {
		m.hub.Notify(id)
	}
	return results, nil
}

// checkStarts returns an *AlreadyStartedError for the first
// execution.started of events whose execution has one stored or earlier
// in events. m.mu is held.
func (m *Memory) checkStarts(events []Event) error {
	var seen map[string]bool
	for _, ev := range events {
		if ev.Type != TypeExecutionStarted {
			continue
		}
		if x := m.execs[ev.ExecutionID]; (x != nil && x.hasStart) || seen[ev.ExecutionID] {
			return &AlreadyStartedError{ExecutionID: ev.ExecutionID}
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[ev.ExecutionID] = true
	}
	return nil
}

// Read implements Log.
func (m *Memory) Read(ctx context.Context, executionID string, afterSeq int64, limit int) ([]Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	x := m.execs[executionID]
	if x == nil || afterSeq >= int64(len(x.events)) {
		return nil, nil
	}
	from := max(afterSeq, 0) // seq n lives at index n-1
	src := x.events[from:]
	if limit > 0 && len(src) > limit {
		src = src[:limit]
	}
	out := make([]Event, len(src))
	for i, ev := range src {
		ev.Payload = bytes.Clone(ev.Payload)
		ev.Meta = bytes.Clone(ev.Meta)
		out[i] = ev
	}
	return out, nil
}

// lastSeq returns the execution's highest seq, 0 if it has no events.
func (m *Memory) lastSeq(executionID string) (int64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return 0, ErrClosed
	}
	if x := m.execs[executionID]; x != nil {
		return int64(len(x.events)), nil
	}
	return 0, nil
}

// Wait implements Log. It returns ErrClosed if the log is closed while
// waiting.
func (m *Memory) Wait(ctx context.Context, executionID string, afterSeq int64) error {
	for {
		woken, release := m.hub.Subscribe(executionID)
		last, err := m.lastSeq(executionID)
		if err != nil || last > afterSeq {
			release()
			return err
		}
		select {
		case <-woken:
			release()
		case <-ctx.Done():
			release()
			return ctx.Err()
		case <-m.done:
			release()
			return ErrClosed
		}
	}
}

// Executions implements Log.
func (m *Memory) Executions(ctx context.Context, q ExecutionsQuery) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	n := len(m.order)
	at := func(i int) *memExecution { return m.order[i] }
	if q.NewestFirst {
		at = func(i int) *memExecution { return m.order[n-1-i] }
	}
	i := 0
	if q.After != "" {
		for i < n && at(i).id != q.After {
			i++
		}
		i++ // past After; past the end when the log does not hold it
	}
	var ids []string
	for ; i < n && (q.Limit <= 0 || len(ids) < q.Limit); i++ {
		if x := at(i); !q.Unfinished || x.started && !x.terminal {
			ids = append(ids, x.id)
		}
	}
	return ids, nil
}

// Close implements Log: it drops the history and wakes every Wait with
// ErrClosed. Closing twice is a no-op.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed {
		m.closed = true
		m.execs = nil
		m.order = nil
		m.snaps = nil
		close(m.done)
	}
	return nil
}

// SaveSnapshot implements Snapshots. Data is copied.
func (m *Memory) SaveSnapshot(ctx context.Context, snap Snapshot) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := ValidateSnapshot(snap); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false, ErrClosed
	}
	key := [2]string{snap.ExecutionID, snap.Format}
	if old, ok := m.snaps[key]; ok && old.Seq >= snap.Seq {
		return false, nil
	}
	if m.snaps == nil {
		m.snaps = map[[2]string]Snapshot{}
	}
	snap.Data = bytes.Clone(snap.Data)
	m.snaps[key] = snap
	return true, nil
}

// LoadSnapshot implements Snapshots.
func (m *Memory) LoadSnapshot(ctx context.Context, executionID, format string) (Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return Snapshot{}, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return Snapshot{}, ErrClosed
	}
	snap, ok := m.snaps[[2]string{executionID, format}]
	if !ok {
		return Snapshot{}, ErrNoSnapshot
	}
	snap.Data = bytes.Clone(snap.Data)
	return snap, nil
}
