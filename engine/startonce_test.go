package engine_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/eventlog/postgres"
	"github.com/cursorflow/cursorflow/eventlog/sqlite"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
)

// startLogs opens an empty log of each backend for a subtest.
var startLogs = []struct {
	name string
	open func(t *testing.T) eventlog.Log
}{
	{"memory", func(t *testing.T) eventlog.Log {
		l := eventlog.NewMemory()
		t.Cleanup(func() { _ = l.Close() })
		return l
	}},
	{"sqlite", func(t *testing.T) eventlog.Log {
		l, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "events.db"), sqlite.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}},
	{"postgres", func(t *testing.T) eventlog.Log {
		dsn := testenv.Postgres(t)
		schema := "t_" + testenv.RandomSuffix(t)
		l, err := postgres.Open(t.Context(), dsn, postgres.Config{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := l.Pool().Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
				t.Errorf("drop schema %s: %v", schema, err)
			}
			_ = l.Close()
		})
		return l
	}},
}

const onceBook = header + `
workflow:
  - step: start
    tool: {kind: rec, key: once}
`

// An HTTP retry that reuses its idempotency key as the execution id
// starts the id twice: the second Start is refused and records nothing,
// and the host function runs once.
func TestStartRefusesExistingExecutionID(t *testing.T) {
	for _, lc := range startLogs {
		t.Run(lc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			b := setupWith(t, engine.Config{Log: lc.open(t)})
			opts := engine.StartOptions{ExecutionID: "order-42"}
			id, err := b.eng.Start(ctx, []byte(onceBook), opts)
			if err != nil || id != "order-42" {
				t.Fatalf("first Start = %q, %v", id, err)
			}
			// At once, while the first runs (its start may not be in the
			// log yet), and again once it ended.
			if _, err := b.eng.Start(ctx, []byte(onceBook), opts); !errors.Is(err, engine.ErrExecutionExists) {
				t.Fatalf("Start of a running id = %v, want ErrExecutionExists", err)
			}
			sum, err := b.eng.Wait(ctx, id)
			if err != nil || sum.Status != engine.StatusCompleted {
				t.Fatalf("Wait = %+v, %v", sum, err)
			}
			before, err := b.log.Read(ctx, id, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.eng.Start(ctx, []byte(onceBook), opts); !errors.Is(err, engine.ErrExecutionExists) {
				t.Fatalf("Start of a finished id = %v, want ErrExecutionExists", err)
			}
			// Give a wrongly started second run time to call the tool.
			time.Sleep(100 * time.Millisecond)
			after, err := b.log.Read(ctx, id, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(after) != len(before) || logtest.CountType(after, eventlog.TypeExecutionStarted) != 1 {
				t.Fatalf("the refused Start recorded: %d events before, %d after, %d execution.started",
					len(before), len(after), logtest.CountType(after, eventlog.TypeExecutionStarted))
			}
			if n := b.rec.count("once"); n != 1 {
				t.Fatalf("the host function ran %d times, want 1", n)
			}
		})
	}
}

// blindLog hides the events of one execution from Read until told:
// Start's look at the log then misses a start another process is about
// to record, the race the log itself must settle.
type blindLog struct {
	eventlog.Log
	mu    sync.Mutex
	blind string
}

func (l *blindLog) Read(ctx context.Context, id string, after int64, limit int) ([]eventlog.Event, error) {
	l.mu.Lock()
	blind := l.blind == id
	l.mu.Unlock()
	if blind {
		return nil, nil
	}
	return l.Log.Read(ctx, id, after, limit)
}

func (l *blindLog) see() {
	l.mu.Lock()
	l.blind = ""
	l.mu.Unlock()
}

// Two processes start one id at once: the log stores one start, the other
// Start is refused (not reloaded and driven a second time), and its engine
// goes on serving.
func TestStartRaceSettledByTheLog(t *testing.T) {
	for _, lc := range startLogs {
		t.Run(lc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			shared := lc.open(t)
			first := setupWith(t, engine.Config{Log: shared})
			blind := &blindLog{Log: shared, blind: "order-42"}
			second := setupWith(t, engine.Config{Log: blind})
			opts := engine.StartOptions{ExecutionID: "order-42"}
			if _, err := first.eng.Start(ctx, []byte(onceBook), opts); err != nil {
				t.Fatal(err)
			}
			if _, err := second.eng.Start(ctx, []byte(onceBook), opts); !errors.Is(err, engine.ErrExecutionExists) {
				t.Fatalf("racing Start = %v, want ErrExecutionExists", err)
			}
			blind.see()
			if sum, err := first.eng.Wait(ctx, "order-42"); err != nil || sum.Status != engine.StatusCompleted {
				t.Fatalf("Wait = %+v, %v", sum, err)
			}
			time.Sleep(100 * time.Millisecond)
			if n := first.rec.count("once") + second.rec.count("once"); n != 1 {
				t.Fatalf("the host function ran %d times, want 1", n)
			}
			if driving, err := second.eng.Driving(ctx); err != nil || slices.Contains(driving, "order-42") {
				t.Fatalf("the refused engine drives %v (%v)", driving, err)
			}
			events, err := shared.Read(ctx, "order-42", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if n := logtest.CountType(events, eventlog.TypeExecutionStarted); n != 1 {
				t.Fatalf("%d execution.started recorded, want 1", n)
			}
			// The refusal left the second engine serving.
			id, err := second.eng.Start(ctx, []byte(onceBook), engine.StartOptions{ExecutionID: "order-43"})
			if err != nil {
				t.Fatal(err)
			}
			if sum, err := second.eng.Wait(ctx, id); err != nil || sum.Status != engine.StatusCompleted {
				t.Fatalf("Wait after the refusal = %+v, %v", sum, err)
			}
		})
	}
}

const slowBook = header + `
workflow:
  - step: start
    tool: {kind: slow}
`

// Resuming on an engine that lacks a kind the playbook uses is refused
// before anything is recorded; the execution stays resumable on an engine
// that has it.
func TestResumeRefusesUnregisteredKind(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	log := eventlog.NewMemory()
	defer log.Close()

	running := make(chan struct{}, 1)
	blocking := tools.NewRegistry()
	blocking.MustRegister("slow", tools.ToolFunc(func(ctx context.Context, _ *tools.Call) (tools.Output, error) {
		running <- struct{}{}
		<-ctx.Done()
		return tools.Output{}, ctx.Err()
	}))
	a, err := engine.New(engine.Config{Log: log, Tools: blocking, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	id, err := a.Start(ctx, []byte(slowBook), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	<-running
	_ = a.Close() // the execution is left unfinished in the log

	before, _ := log.Read(ctx, id, 0, 0)
	lacking, err := engine.New(engine.Config{Log: log, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer lacking.Close()
	err = lacking.Resume(ctx, id)
	var unsupported *engine.UnsupportedError
	if !errors.Is(err, engine.ErrUnsupported) || !errors.As(err, &unsupported) {
		t.Fatalf("Resume on an engine lacking the kind = %v, want an UnsupportedError", err)
	}
	time.Sleep(50 * time.Millisecond)
	if after, _ := log.Read(ctx, id, 0, 0); len(after) != len(before) {
		t.Fatalf("the refused Resume recorded %d events", len(after)-len(before))
	}

	done := tools.NewRegistry()
	done.MustRegister("slow", tools.ToolFunc(func(context.Context, *tools.Call) (tools.Output, error) {
		return tools.Output{Status: tools.StatusSuccess}, nil
	}))
	c, err := engine.New(engine.Config{Log: log, Tools: done, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	if sum, err := c.Wait(ctx, id); err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("Wait on the engine that has the kind = %+v, %v", sum, err)
	}
}
