package engine_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
)

// TestToolPanicOrGoexitInARow: a host tool that panics, or ends its
// goroutine (runtime.Goexit, as t.FailNow in a tool does), fails its row:
// it neither takes the process down (a frame's rows run on goroutines of
// their own) nor hangs the frame.
func TestToolPanicOrGoexitInARow(t *testing.T) {
	t.Parallel()
	for name, tool := range map[string]tools.ToolFunc{
		"panic":  func(context.Context, *tools.Call) (tools.Output, error) { panic("boom") },
		"goexit": func(context.Context, *tools.Call) (tools.Output, error) { runtime.Goexit(); return tools.Output{}, nil },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, path := jobsQueue(t, 5)
			reg := tools.NewRegistry()
			reg.MustRegister("bad", tool)
			e, log := sqliteEngine(t, path, reg)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			id, err := e.Start(ctx, []byte(jobsPlaybook([]string{jobsAck}, 1, `{max_rows: 5, row_concurrency: 2, process: row}`, `{kind: bad}`)), engine.StartOptions{})
			if err != nil {
				t.Fatal(err)
			}
			sum, err := e.Wait(ctx, id)
			if err != nil || sum.Status != engine.StatusCompleted {
				t.Fatalf("%v %+v", err, sum)
			}
			st, err := engine.Inspect(ctx, log, id)
			if err != nil {
				t.Fatal(err)
			}
			if ls := st.Loops["start#1"]; ls.Failed != 5 {
				t.Fatalf("loop %+v: want its 5 rows failed", ls)
			}
		})
	}
}

// TestToolGoexitInAStep: a step whose tool ends the worker goroutine is
// re-issued once its lease runs out, on a worker that took the lost one's
// place, and the execution goes on.
func TestToolGoexitInAStep(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	reg := tools.NewRegistry()
	reg.MustRegister("once", tools.ToolFunc(func(context.Context, *tools.Call) (tools.Output, error) {
		if calls.Add(1) == 1 {
			runtime.Goexit()
		}
		return tools.Output{Status: "ok"}, nil
	}))
	log := eventlog.NewMemory()
	e, err := engine.New(engine.Config{Log: log, Tools: reg, Workers: 1, CommandLease: 300 * time.Millisecond, Tick: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := e.Start(ctx, []byte(header+`
workflow:
  - step: start
    tool: {kind: once}
    next: [second]
  - step: second
    tool: {kind: once}
`), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusCompleted || calls.Load() != 3 {
		t.Fatalf("%v %+v, %d calls; want completed after 3", err, sum, calls.Load())
	}
}
