package logtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
)

// RunShared checks logs that share one store, as separate processes do:
// appends from all of them to one execution interleave with contiguous
// seqs, a command.issued appended by every one of them is stored once, and
// a Wait on the last log is woken by an append through the first. Every
// log must be open on the same store; the backend's test opens them (and
// decides how Wait learns of another process's appends: notification or
// polling). Each log appends rounds times.
func RunShared(t *testing.T, logs []eventlog.Log, rounds int) {
	t.Helper()
	if len(logs) < 2 {
		t.Fatal("logtest.RunShared needs at least two logs on one store")
	}
	ctx := ctxT(t)
	exec := ExecutionID("shared")
	errs := make(chan error, len(logs))
	for _, l := range logs {
		go func() {
			for range rounds {
				if _, err := l.Append(ctx, []eventlog.Event{ev(exec, eventlog.TypeStepStarted), issued(exec, "shared")}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range logs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	first, last := logs[0], logs[len(logs)-1]
	want := len(logs)*rounds + 1
	evs := mustRead(t, last, exec, 0, 0)
	if len(evs) != want {
		t.Fatalf("stored %d events, want %d step.started + 1 command.issued", len(evs), want-1)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("seq %d at position %d", e.Seq, i)
		}
	}
	// Nothing new yet: Wait must block until its context ends.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := last.Wait(short, exec, int64(want))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with nothing new returned %v, want the context's deadline", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- last.Wait(ctx, exec, int64(want)) }()
	mustAppend(t, first, ev(exec, eventlog.TypeStepCompleted))
	if err := <-waited; err != nil {
		t.Fatalf("Wait woken by another log's append = %v, want nil", err)
	}
}
