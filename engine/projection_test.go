package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
)

// countingLog is a memory log that counts the events its Read returns,
// so a test can see how much of a history the projection folded.
type countingLog struct {
	*eventlog.Memory
	read atomic.Int64
}

func (l *countingLog) Read(ctx context.Context, id string, after int64, limit int) ([]eventlog.Event, error) {
	evs, err := l.Memory.Read(ctx, id, after, limit)
	l.read.Add(int64(len(evs)))
	return evs, err
}

// readDuring returns how many events f made the log return.
func (l *countingLog) readDuring(f func()) int64 {
	before := l.read.Load()
	f()
	return l.read.Load() - before
}

const loopOfTen = header + `
workflow:
  - step: start
    loop:
      in: '{{ [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] }}'
      iterator: it
      spec: {mode: parallel, max_in_flight: 3}
    tool: {kind: rec, key: 'item{{ iter.it }}'}
    next: [done]
  - step: done
    tool: {kind: rec, key: done}
`

// sameStatus compares two statuses as the API shows them (JSON): a
// status restored from a snapshot has lost the times' monotonic clock
// readings that the memory log's events carry.
func sameStatus(a, b *engine.Status) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func newProjection(t *testing.T, log eventlog.Log, every int64) (*engine.Projection, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	p, err := engine.NewProjection(engine.ProjectionConfig{Log: log, SnapshotEvery: every,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return p, &logs
}

func inspect(t *testing.T, log eventlog.Log, id string) *engine.Status {
	t.Helper()
	st, err := engine.Inspect(context.Background(), log, id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestProjectionFollowsTheLog asks a projection after every event of a
// history as it is appended: each answer equals the full fold of what the
// log holds, and each question reads only the events appended since the
// previous one.
func TestProjectionFollowsTheLog(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, h := b.run(t, loopOfTen, nil)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("recording run ended %s", sum.Status)
	}
	log := &countingLog{Memory: eventlog.NewMemory()}
	p, _ := newProjection(t, log, -1)
	ctx := context.Background()
	id := h[0].ExecutionID
	if _, err := p.Status(ctx, id); !errors.Is(err, engine.ErrUnknownExecution) {
		t.Fatalf("status of an execution not yet in the log: %v, want ErrUnknownExecution", err)
	}
	for i := range h {
		if _, err := log.Append(ctx, h[i:i+1]); err != nil {
			t.Fatal(err)
		}
		var st *engine.Status
		n := log.readDuring(func() {
			var err error
			if st, err = p.Status(ctx, id); err != nil {
				t.Fatal(err)
			}
		})
		if n != 1 {
			t.Fatalf("after event %d the projection read %d events, want only the new one", i+1, n)
		}
		if want := inspect(t, log.Memory, id); !sameStatus(st, want) {
			t.Fatalf("after event %d:\nprojection %+v\nfold       %+v", i+1, st, want)
		}
	}
	if n := log.readDuring(func() { _, _ = p.Status(ctx, id) }); n != 0 {
		t.Fatalf("an unchanged execution read %d events", n)
	}
	st, _ := p.Status(ctx, id)
	if st.Status != engine.StatusCompleted || st.EndedAt.IsZero() || st.StartedAt.IsZero() || st.Loops["start#1"].Done != 10 {
		t.Fatalf("final status %+v", st)
	}
}

// TestProjectionContinuesFromSnapshot: a projection saves snapshots as
// it folds; a second one (another replica, or this one restarted) starts
// from the latest and reads only the events after it. A snapshot that
// cannot be used is ignored with a warning, never trusted.
func TestProjectionContinuesFromSnapshot(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	_, h := b.run(t, loopOfTen, nil)
	log := &countingLog{Memory: eventlog.NewMemory()}
	ctx := context.Background()
	id := h[0].ExecutionID
	const every = 10
	first, _ := newProjection(t, log, every)
	cut := len(h) - 7
	if _, err := log.Append(ctx, h[:cut]); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Status(ctx, id); err != nil {
		t.Fatal(err)
	}
	snap, err := log.LoadSnapshot(ctx, id, engine.SnapshotFormat)
	if err != nil || snap.Seq != int64(cut) {
		t.Fatalf("snapshot after folding %d events: seq %d, %v", cut, snap.Seq, err)
	}
	if _, err := log.Append(ctx, h[cut:]); err != nil {
		t.Fatal(err)
	}
	second, _ := newProjection(t, log, every)
	var st *engine.Status
	if n := log.readDuring(func() { st, err = second.Status(ctx, id) }); n != int64(len(h)-cut) {
		t.Fatalf("a fresh projection read %d events, want the %d after the snapshot", n, len(h)-cut)
	}
	if err != nil {
		t.Fatal(err)
	}
	if want := inspect(t, log.Memory, id); !sameStatus(st, want) {
		t.Fatalf("from the snapshot:\n%+v\nfold:\n%+v", st, want)
	}

	// An unusable snapshot (garbage, or another execution's) is ignored.
	other := &countingLog{Memory: eventlog.NewMemory()}
	if _, err := other.Append(ctx, h); err != nil {
		t.Fatal(err)
	}
	if _, err := other.SaveSnapshot(ctx, eventlog.Snapshot{ExecutionID: id, Format: engine.SnapshotFormat, Seq: 3, Data: []byte(`{"ExecutionID": "someone-else", "LastSeq": 3}`)}); err != nil {
		t.Fatal(err)
	}
	third, logs := newProjection(t, other, every)
	if n := other.readDuring(func() { st, err = third.Status(ctx, id) }); n != int64(len(h)) || err != nil {
		t.Fatalf("with an unusable snapshot the projection read %d events (%v), want all %d", n, err, len(h))
	}
	if want := inspect(t, other.Memory, id); !sameStatus(st, want) {
		t.Fatalf("after an unusable snapshot:\n%+v\nfold:\n%+v", st, want)
	}
	if !strings.Contains(logs.String(), "unusable snapshot") {
		t.Fatalf("no warning about the unusable snapshot: %s", logs)
	}
}

// TestProjectionList lists executions newest first, by status, and
// remembers ended ones so that listing again reads nothing for them.
func TestProjectionList(t *testing.T) {
	t.Parallel()
	log := &countingLog{Memory: eventlog.NewMemory()}
	release := make(chan struct{})
	reg := tools.NewRegistry()
	reg.MustRegister("rec", (&recorder{}).tool())
	reg.MustRegister("gate", tools.ToolFunc(func(ctx context.Context, _ *tools.Call) (tools.Output, error) {
		select {
		case <-release:
			return tools.Output{Status: tools.StatusSuccess}, nil
		case <-ctx.Done():
			return tools.Output{Status: tools.StatusError, Error: ctx.Err().Error()}, nil
		}
	}))
	e, err := engine.New(engine.Config{Log: log, Tools: reg, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := func(src string) string {
		id, err := e.Start(ctx, []byte(src), engine.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	wait := func(id, want string) {
		sum, err := e.Wait(ctx, id)
		if err != nil || sum.Status != want {
			t.Fatalf("%s: %v %+v, want %s", id, err, sum, want)
		}
	}
	gated := header + "workflow:\n  - step: start\n    tool: {kind: gate}\n"
	completed := start(loopOfTen)
	wait(completed, engine.StatusCompleted)
	failed := start(header + "workflow:\n  - step: start\n    tool: {kind: rec, key: x, fail: 1}\n")
	wait(failed, engine.StatusFailed)
	cancelled := start(gated)
	if err := e.Cancel(ctx, cancelled); err != nil {
		t.Fatal(err)
	}
	wait(cancelled, engine.StatusCancelled)
	running := start(gated)
	if err := log.Wait(ctx, running, 1); err != nil {
		t.Fatal(err)
	}

	p, _ := newProjection(t, log, -1)
	ids := func(list []engine.ExecutionSummary) []string {
		var out []string
		for _, s := range list {
			out = append(out, s.ExecutionID)
		}
		return out
	}
	for _, tc := range []struct {
		opts engine.ListOptions
		want []string
	}{
		{engine.ListOptions{}, []string{running, cancelled, failed, completed}},
		{engine.ListOptions{Limit: 2}, []string{running, cancelled}},
		{engine.ListOptions{Status: engine.StatusRunning}, []string{running}},
		{engine.ListOptions{Status: engine.StatusCompleted}, []string{completed}},
		{engine.ListOptions{Status: engine.StatusFailed}, []string{failed}},
		{engine.ListOptions{Status: engine.StatusCancelled}, []string{cancelled}},
	} {
		list, err := p.List(ctx, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(list); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("List(%+v) = %v, want %v", tc.opts, got, tc.want)
		}
	}
	list, _ := p.List(ctx, engine.ListOptions{Status: engine.StatusCompleted})
	if s := list[0]; s.Playbook != "t" || s.StartedAt.IsZero() || s.EndedAt.Before(s.StartedAt) || s.Events == 0 {
		t.Errorf("summary %+v", s)
	}
	// Ended executions are remembered: listing them again reads nothing.
	if n := log.readDuring(func() { _, _ = p.List(ctx, engine.ListOptions{Status: engine.StatusFailed}) }); n != 0 {
		t.Errorf("listing ended executions again read %d events", n)
	}
	if _, err := p.List(ctx, engine.ListOptions{Status: "sleeping"}); err == nil {
		t.Error("List accepted an unknown status")
	}
}

// TestProjectionConcurrentReaders asks many goroutines at once while the
// execution runs; every answer is a fold of some prefix of the history
// (events never go backwards) and the last equals the full fold.
func TestProjectionConcurrentReaders(t *testing.T) {
	t.Parallel()
	log := eventlog.NewMemory()
	b := setup(t, log)
	p, _ := newProjection(t, log, 7)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id, err := b.eng.Start(ctx, []byte(loopOfTen), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last int64
			for {
				st, err := p.Status(ctx, id)
				if err != nil {
					errs <- err
					return
				}
				if st.LastSeq < last {
					errs <- errors.New("status went backwards")
					return
				}
				last = st.LastSeq
				if st.Status != engine.StatusRunning {
					return
				}
			}
		}()
	}
	if _, err := b.eng.Wait(ctx, id); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st, err := p.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if want := inspect(t, log, id); !sameStatus(st, want) {
		t.Fatalf("final:\n%+v\nfold:\n%+v", st, want)
	}
}

// listingLog is a memory log that counts the execution ids its
// Executions hands out.
type listingLog struct {
	*eventlog.Memory
	listed atomic.Int64
}

func (l *listingLog) Executions(ctx context.Context, q eventlog.ExecutionsQuery) ([]string, error) {
	ids, err := l.Memory.Executions(ctx, q)
	l.listed.Add(int64(len(ids)))
	return ids, err
}

// TestProjectionListReadsPages: listing the newest few executions of a
// long log reads a page of ids, not the whole log (the server's list
// endpoint read every id the log held, hundreds of thousands of them,
// in one statement, to show a hundred), and a status found only further
// back is still found, page after page.
func TestProjectionListReadsPages(t *testing.T) {
	t.Parallel()
	log := &listingLog{Memory: eventlog.NewMemory()}
	reg := tools.NewRegistry()
	reg.MustRegister("rec", (&recorder{}).tool())
	e, err := engine.New(engine.Config{Log: log, Tools: reg, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := func(src, want string) string {
		id, err := e.Start(ctx, []byte(src), engine.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sum, err := e.Wait(ctx, id); err != nil || sum.Status != want {
			t.Fatalf("%s: %v %+v, want %s", id, err, sum, want)
		}
		return id
	}
	failed := run(header+"workflow:\n  - step: start\n    tool: {kind: rec, key: x, fail: 1}\n", engine.StatusFailed)
	var completed []string
	for range 24 {
		completed = append(completed, run(header+"workflow:\n  - step: start\n    tool: {kind: rec, key: x}\n", engine.StatusCompleted))
	}

	p, _ := newProjection(t, log, -1)
	log.listed.Store(0)
	list, err := p.List(ctx, engine.ListOptions{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 || list[0].ExecutionID != completed[23] || list[2].ExecutionID != completed[21] {
		t.Fatalf("List(limit 3) = %+v, want the 3 newest", list)
	}
	if n := log.listed.Load(); n > 3 {
		t.Fatalf("List(limit 3) read %d execution ids from the log, want at most 3", n)
	}
	list, err = p.List(ctx, engine.ListOptions{Status: engine.StatusFailed, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ExecutionID != failed {
		t.Fatalf("List(failed) = %+v, want the oldest, %s", list, failed)
	}
}
