package faultlog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/faultlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m, nil) }

// Without faults the wrapper is a conforming log.
func TestConformance(t *testing.T) {
	logtest.Run(t, func(t *testing.T) eventlog.Log {
		l := faultlog.New(eventlog.NewMemory())
		t.Cleanup(func() { l.Close() })
		return l
	})
}

func TestFaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := eventlog.NewMemory()
	defer mem.Close()
	l := faultlog.New(mem)
	start := eventlog.Event{ExecutionID: "x", Type: eventlog.TypeExecutionStarted}
	done := eventlog.Event{ExecutionID: "x", Type: eventlog.TypeCommandCompleted}

	// Before the store: nothing stored.
	l.Inject(faultlog.Fault{Op: faultlog.OpAppend, Match: faultlog.HasType(eventlog.TypeCommandCompleted), Times: 1})
	if _, err := l.Append(ctx, []eventlog.Event{start}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, []eventlog.Event{done}); !errors.Is(err, faultlog.ErrInjected) {
		t.Fatalf("append: %v", err)
	}
	if evs, _ := mem.Read(ctx, "x", 0, 0); len(evs) != 1 {
		t.Fatalf("%d events stored", len(evs))
	}
	// Times ran out: the next one goes through.
	if _, err := l.Append(ctx, []eventlog.Event{done}); err != nil {
		t.Fatal(err)
	}
	// After the store: stored, and the caller hears a failure.
	boom := errors.New("connection reset")
	l.Inject(faultlog.Fault{Op: faultlog.OpAppend, AfterCommit: true, Err: boom, Times: 1})
	if _, err := l.Append(ctx, []eventlog.Event{done}); !errors.Is(err, boom) {
		t.Fatalf("after-commit append: %v", err)
	}
	if evs, _ := mem.Read(ctx, "x", 0, 0); len(evs) != 3 {
		t.Fatalf("%d events stored, want 3", len(evs))
	}
	// Reads of one execution.
	l.Inject(faultlog.Fault{Op: faultlog.OpRead, Match: faultlog.Execution("x"), Times: 2})
	for range 2 {
		if _, err := l.Read(ctx, "x", 0, 0); !errors.Is(err, faultlog.ErrInjected) {
			t.Fatalf("read: %v", err)
		}
	}
	if _, err := l.Read(ctx, "y", 0, 0); err != nil {
		t.Fatal(err)
	}
	// A gate holds an append until released, then lets it through.
	gate := make(chan struct{})
	l.Inject(faultlog.Fault{Op: faultlog.OpAppend, Gate: gate, Times: 1})
	res := make(chan error, 1)
	go func() { _, err := l.Append(ctx, []eventlog.Event{done}); res <- err }()
	select {
	case err := <-res:
		t.Fatalf("gated append returned %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(gate)
	if err := <-res; err != nil {
		t.Fatalf("released append: %v", err)
	}
	if got := l.Hits(faultlog.OpAppend); got != 3 {
		t.Fatalf("%d append hits, want 3", got)
	}
	// A rate affects about that share of calls, reproducibly per seed.
	count := func(seed uint64) int {
		r := faultlog.New(eventlog.NewMemory(), seed)
		r.Inject(faultlog.Fault{Op: faultlog.OpRead, Rate: 0.25})
		for range 1000 {
			_, _ = r.Read(ctx, "x", 0, 0)
		}
		return r.Hits(faultlog.OpRead)
	}
	if a, b := count(7), count(7); a != b || a < 150 || a > 350 {
		t.Fatalf("rate 0.25 hit %d and %d of 1000", a, b)
	}
}

func TestAppendsInOrder(t *testing.T) {
	match := faultlog.AppendsInOrder(eventlog.TypeFrameDone, eventlog.TypeFrameClaimed)
	batch := func(types ...string) faultlog.Call {
		c := faultlog.Call{Op: faultlog.OpAppend}
		for _, ty := range types {
			c.Events = append(c.Events, eventlog.Event{Type: ty})
		}
		return c
	}
	for _, tc := range []struct {
		types []string
		want  bool
	}{
		{[]string{eventlog.TypeFrameDone, eventlog.TypeCommandIssued, eventlog.TypeFrameClaimed}, true},
		{[]string{eventlog.TypeFrameDone, eventlog.TypeFrameClaimed}, true},
		{[]string{eventlog.TypeFrameClaimed, eventlog.TypeFrameDone}, false},
		{[]string{eventlog.TypeFrameClaimed}, false},
		{[]string{eventlog.TypeFrameDone}, false},
		{nil, false},
	} {
		if got := match(batch(tc.types...)); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.types, got, tc.want)
		}
	}
	if faultlog.AppendsInOrder()(batch(eventlog.TypeFrameDone)) {
		t.Error("AppendsInOrder() matched an append; it names no event")
	}
}
