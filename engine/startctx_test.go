package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/faultlog"
)

// oneTool is a playbook of one step running the recorder.
const oneTool = header + "workflow:\n  - step: start\n    tool: {kind: rec, key: x}\n"

// TestStartWhoseContextEndsReturnsTheID: a host starts executions under
// a request's deadline. When the deadline ends a Start after the engine
// took the start, the execution runs all the same: Start must hand back
// its id (with the context's error), or the host can neither follow nor
// cancel it, and a retry starts the work a second time. Every execution
// in the log must be one whose id some Start returned.
func TestStartWhoseContextEndsReturnsTheID(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	e, log := b.eng, b.log
	src := []byte(oneTool)
	known := map[string]bool{}
	cut := 0
	for i := range 300 {
		// Deadlines from none at all to a few tens of microseconds: some
		// end before the start reaches the engine, some while it is
		// recorded, some after.
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%50)*time.Microsecond)
		id, err := e.Start(ctx, src, engine.StartOptions{})
		cancel()
		switch {
		case err == nil:
			known[id] = true
		case errors.Is(err, context.DeadlineExceeded):
			if id != "" {
				cut++
				known[id] = true
			}
		default:
			t.Fatalf("Start: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for id := range known {
		if _, err := e.Wait(ctx, id); err != nil && !errors.Is(err, engine.ErrUnknownExecution) {
			t.Fatalf("Wait %s: %v", id, err)
		}
	}
	all, err := log.Executions(ctx, eventlog.ExecutionsQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range all {
		if !known[id] {
			t.Errorf("execution %s runs, but no Start returned its id", id)
		}
	}
	t.Logf("%d executions in the log, %d of them from Starts cut short", len(all), cut)
}

// TestStartCutByCloseReturnsTheID: Starts racing with the engine's Close.
// A start the orchestrator took may be on record when the engine stops,
// and a process that resumes the log runs it: Start must hand back its id
// (with ErrClosed), or the host cannot tell it from a start that never
// happened and starts the work again. Every execution in the log must be
// one whose id some Start returned.
func TestStartCutByCloseReturnsTheID(t *testing.T) {
	t.Parallel()
	src := []byte(oneTool)
	cut := 0
	for trial := range 30 {
		b := setup(t, nil)
		e, log := b.eng, b.log
		var mu sync.Mutex
		known := map[string]bool{}
		var wg sync.WaitGroup
		for range 40 {
			wg.Go(func() {
				id, err := e.Start(context.Background(), src, engine.StartOptions{})
				switch {
				case err == nil:
				case errors.Is(err, engine.ErrClosed):
					if id == "" {
						return
					}
				default:
					t.Errorf("Start: %v", err)
					return
				}
				mu.Lock()
				known[id] = true
				if err != nil {
					cut++
				}
				mu.Unlock()
			})
		}
		// Close while the starts are on their way: a few microseconds
		// in, later from trial to trial.
		time.Sleep(time.Duration(trial*20) * time.Microsecond)
		_ = e.Close()
		wg.Wait()
		all, err := log.Executions(context.Background(), eventlog.ExecutionsQuery{})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range all {
			if !known[id] {
				t.Errorf("trial %d: execution %s is on record, but no Start returned its id", trial, id)
			}
		}
	}
	t.Logf("%d Starts cut by Close returned their id", cut)
}

// TestStartWhoseAppendFailedReturnsTheID: the append of a start fails, as
// when the log's connection drops before the commit's reply. Such an
// append may have been stored all the same; the orchestrator reloads the
// execution from the log and runs it if it is there. Start returned ""
// with "send it again", and a host that did started the work a second
// time. Start now returns the id with the error, and Wait on it tells the
// two cases apart: the stored start runs to its end, the other one is
// unknown.
func TestStartWhoseAppendFailedReturnsTheID(t *testing.T) {
	t.Parallel()
	src := []byte(oneTool)
	for _, stored := range []bool{true, false} {
		t.Run(fmt.Sprintf("stored=%v", stored), func(t *testing.T) {
			t.Parallel()
			mem := eventlog.NewMemory()
			fl := faultlog.New(mem)
			fl.Inject(faultlog.Fault{Op: faultlog.OpAppend, Match: faultlog.AppendsInOrder(eventlog.TypeExecutionStarted), Times: 1,
				AfterCommit: stored, Err: eventlog.ErrUnavailable})
			e := setup(t, fl).eng
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			id, err := e.Start(ctx, src, engine.StartOptions{})
			if id == "" || !errors.Is(err, engine.ErrUnavailable) {
				t.Fatalf("Start = %q, %v: want the id with ErrUnavailable", id, err)
			}
			sum, err := e.Wait(ctx, id)
			all, lerr := mem.Executions(ctx, eventlog.ExecutionsQuery{})
			if lerr != nil {
				t.Fatal(lerr)
			}
			if stored {
				if err != nil || sum.Status != engine.StatusCompleted || !slices.Equal(all, []string{id}) {
					t.Fatalf("Wait = %+v, %v; log holds %v: want %s completed, alone", sum, err, all, id)
				}
				return
			}
			if !errors.Is(err, engine.ErrUnknownExecution) || len(all) != 0 {
				t.Fatalf("Wait = %+v, %v; log holds %v: want ErrUnknownExecution and an empty log", sum, err, all)
			}
		})
	}
}
