package engine_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/sqlite"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/fn"
)

// hostEngine starts an engine on log with the host function f registered
// as kind host.
func hostEngine(t *testing.T, log eventlog.Log, f fn.Func) *bundle {
	t.Helper()
	reg := tools.NewRegistry()
	reg.MustRegister("host", fn.New(f))
	return setupWith(t, engine.Config{Log: log, Tools: reg})
}

// hostThenDone runs the host function in step start, then a step after it
// that must never run once start fails.
const hostThenDone = header + `
workflow:
  - step: start
    tool: {kind: host}
    next: [after]
  - step: after
    tool: {kind: rec, key: after}
`

// TestCyclicResultFailsTheStep: a host function that returns a value
// holding itself fails its step with an error that says so; the process
// (and the engine) go on.
func TestCyclicResultFailsTheStep(t *testing.T) {
	t.Parallel()
	for name, f := range map[string]fn.Func{
		"map": func(context.Context, *tools.Call) (any, error) {
			cyc := map[string]any{}
			cyc["self"] = cyc
			return cyc, nil
		},
		"list": func(context.Context, *tools.Call) (any, error) {
			l := []any{1, nil}
			l[1] = map[string]any{"up": l}
			return map[string]any{"rows": l}, nil
		},
		// Non-finite floats take the path that used to recurse without end.
		"with NaN": func(context.Context, *tools.Call) (any, error) {
			cyc := map[string]any{"ratio": 0.0}
			cyc["ratio"] = cyc["ratio"].(float64) / cyc["ratio"].(float64)
			cyc["self"] = cyc
			return cyc, nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := hostEngine(t, eventlog.NewMemory(), f)
			sum, evs := b.run(t, hostThenDone, nil)
			defer dumpOnFail(t, evs)
			if sum.Status != engine.StatusFailed || sum.Step != "start" || !strings.Contains(sum.Error, "cycle") {
				t.Fatalf("summary %+v", sum)
			}
			if b.rec.count("after") != 0 {
				t.Fatal("the step after the failed one ran")
			}
			if sum, _ := b.run(t, twoSteps, nil); sum.Status != engine.StatusCompleted {
				t.Fatalf("the engine did not go on: %+v", sum)
			}
		})
	}
}

// TestUnencodableResultFailsTheStep: a host function whose value holds
// something JSON cannot encode (a channel, a func, a complex number) fails
// its step with an error naming the type and where it was, the way an
// oversized result does; the result is not dropped with the step
// completing.
func TestUnencodableResultFailsTheStep(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		value any
		want  string
	}{
		{map[string]any{"rows": 10, "stream": make(chan int)}, "chan int"},
		{map[string]any{"rows": 10, "cb": func() {}}, "func()"},
		{map[string]any{"rows": 10, "z": []any{complex(1, 2)}}, "complex128"},
	} {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			log, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "events.db"), sqlite.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = log.Close() })
			b := hostEngine(t, log, func(context.Context, *tools.Call) (any, error) { return tt.value, nil })
			sum, evs := b.run(t, hostThenDone, nil)
			defer dumpOnFail(t, evs)
			if sum.Status != engine.StatusFailed || sum.Step != "start" || !strings.Contains(sum.Error, tt.want) ||
				!strings.Contains(sum.Error, "JSON") {
				t.Fatalf("summary %+v", sum)
			}
			if b.rec.count("after") != 0 {
				t.Fatal("the step after the failed one ran")
			}
			for _, ev := range evs {
				if strings.Contains(string(ev.Payload), "encode_error") {
					t.Fatalf("%s recorded %s", ev.Type, ev.Payload)
				}
			}
		})
	}
}

// TestUnencodableWorkloadIsRefused: Start refuses a workload it could not
// record (the log is the only authority: an execution.started without
// its playbook could be neither inspected nor resumed) and records
// nothing.
func TestUnencodableWorkloadIsRefused(t *testing.T) {
	t.Parallel()
	log := eventlog.NewMemory()
	b := setupWith(t, engine.Config{Log: log})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id, err := b.eng.Start(ctx, []byte(twoSteps), engine.StartOptions{Workload: map[string]any{"c": make(chan int)}})
	if err == nil || !strings.Contains(err.Error(), "workload") || !strings.Contains(err.Error(), "chan int") {
		t.Fatalf("Start: %q, %v", id, err)
	}
	if ids, err := log.Executions(ctx, eventlog.ExecutionsQuery{}); err != nil || len(ids) != 0 {
		t.Fatalf("recorded %v (%v)", ids, err)
	}
	// A cycle is refused the same way, rather than taking the process down.
	cyc := map[string]any{}
	cyc["self"] = cyc
	if _, err := b.eng.Start(ctx, []byte(twoSteps), engine.StartOptions{Workload: map[string]any{"c": cyc}}); err == nil ||
		!strings.Contains(err.Error(), "cycle") {
		t.Fatalf("Start with a cycle: %v", err)
	}
	if ids, err := log.Executions(ctx, eventlog.ExecutionsQuery{}); err != nil || len(ids) != 0 {
		t.Fatalf("recorded %v (%v)", ids, err)
	}
}
