package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/noop"
)

// TestStartWhoseContextEndsReturnsTheID: a host starts executions under
// a request's deadline. When the deadline ends a Start after the engine
// took the start, the execution runs all the same: Start must hand back
// its id (with the context's error), or the host can neither follow nor
// cancel it, and a retry starts the work a second time. Every execution
// in the log must be one whose id some Start returned.
func TestStartWhoseContextEndsReturnsTheID(t *testing.T) {
	t.Parallel()
	log := eventlog.NewMemory()
	reg := tools.NewRegistry()
	reg.MustRegister("noop", noop.New())
	e, err := engine.New(engine.Config{Log: log, Tools: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	src := []byte(header + "workflow:\n  - step: start\n    tool: {kind: noop}\n")
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
