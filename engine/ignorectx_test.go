package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
)

// deafTool ignores its context: it returns only once the test lets it
// (at cleanup, so that no goroutine outlives the test).
type deafTool struct {
	started chan struct{}
	release chan struct{}
}

func newDeafTool(t *testing.T) *deafTool {
	d := &deafTool{started: make(chan struct{}, 100), release: make(chan struct{})}
	t.Cleanup(func() { close(d.release) })
	return d
}

func (d *deafTool) Execute(context.Context, *tools.Call) (tools.Output, error) {
	d.started <- struct{}{}
	<-d.release
	return tools.Output{Status: "ok"}, nil
}

// TestToolIgnoringItsContext: a tool that never looks at its context
// cannot hang the engine. Shutdown returns shortly after its deadline,
// Close returns, and a cancel ends the execution once the cancelled
// command's lease runs out, though its worker keeps heartbeating.
func TestToolIgnoringItsContext(t *testing.T) {
	t.Parallel()
	step := header + `
workflow:
  - step: start
    tool: {kind: deaf}
`
	start := func(t *testing.T, cfg engine.Config) (*engine.Engine, string, *deafTool, context.Context) {
		t.Helper()
		deaf := newDeafTool(t)
		reg := tools.NewRegistry()
		reg.MustRegister("deaf", deaf)
		cfg.Log, cfg.Tools = eventlog.NewMemory(), reg
		e, err := engine.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		t.Cleanup(cancel)
		id, err := e.Start(ctx, []byte(step), engine.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		<-deaf.started
		return e, id, deaf, ctx
	}
	t.Run("shutdown", func(t *testing.T) {
		t.Parallel()
		e, _, _, ctx := start(t, engine.Config{})
		sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		began := time.Now()
		if err := e.Shutdown(sctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown: %v, want DeadlineExceeded", err)
		}
		// Its deadline, the wait for cancelled tools, the last flush:
		// a hang guard, not a speed bound.
		if d := time.Since(began); d > 20*time.Second {
			t.Fatalf("Shutdown took %s", d)
		}
	})
	t.Run("close", func(t *testing.T) {
		t.Parallel()
		e, _, _, _ := start(t, engine.Config{})
		done := make(chan error, 1)
		go func() { done <- e.Close() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Close hung on a tool that ignores its context")
		}
	})
	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		e, id, _, ctx := start(t, engine.Config{CommandLease: 300 * time.Millisecond, Tick: 10 * time.Millisecond})
		t.Cleanup(func() { _ = e.Close() })
		if err := e.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
		// A lease of 300 ms: the cancel ends in well under a second; 5 s
		// is a hang guard (it took 17 s when heartbeats kept the lease).
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		sum, err := e.Wait(wctx, id)
		if err != nil || sum.Status != engine.StatusCancelled {
			t.Fatalf("Wait: %v %+v, want the execution cancelled", err, sum)
		}
	})
}

// TestCancelAFrameWhoseToolIgnoresIt: a cursor frame whose tool ignores
// the cancel ends with the execution, its rows counted as left claimed
// (the source has no release statement), not as dead-lettered.
func TestCancelAFrameWhoseToolIgnoresIt(t *testing.T) {
	t.Parallel()
	_, path := jobsQueue(t, 4)
	deaf := newDeafTool(t)
	reg := tools.NewRegistry()
	reg.MustRegister("deaf", deaf)
	e, log := sqliteEngine(t, path, reg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id, err := e.Start(ctx, []byte(jobsPlaybook([]string{jobsAck}, 1, `{max_rows: 4, row_concurrency: 4, lease_seconds: 0.3, heartbeat_seconds: 0.1}`, `{kind: deaf}`)), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		<-deaf.started
	}
	if err := e.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	sum, err := e.Wait(wctx, id)
	if err != nil || sum.Status != engine.StatusCancelled {
		t.Fatalf("Wait: %v %+v, want the execution cancelled", err, sum)
	}
	st, err := engine.Inspect(ctx, log, id)
	if err != nil {
		t.Fatal(err)
	}
	ls := st.Loops["start#1"]
	if ls.Dead != 0 || ls.Abandoned != 4 {
		t.Fatalf("loop %+v: want 4 rows left claimed, none dead", ls)
	}
}
