package engine_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/faultlog"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/noop"
)

// TestCloseWithAnAppendInFlight: a host that alerts on its ERROR logs
// closes the engine while an append is on its way to the log (a slow
// PostgreSQL, a Start in flight). The append Close cuts short is no
// outage: it was logged as "event log append failed; reloading the
// executions from the log", at ERROR, on every such Close, and the Start
// got ErrUnavailable ("send it again"), which no retry could satisfy,
// where every call the engine's close ends gets ErrClosed.
func TestCloseWithAnAppendInFlight(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	defer close(gate)
	fl := faultlog.New(eventlog.NewMemory())
	fl.Inject(faultlog.Fault{Op: faultlog.OpAppend, Match: faultlog.HasType(eventlog.TypeExecutionStarted), Gate: gate})
	h := &errorRecorder{}
	reg := tools.NewRegistry()
	reg.MustRegister("noop", noop.New())
	e, err := engine.New(engine.Config{Log: fl, Tools: reg, Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	started := make(chan error, 1)
	go func() {
		_, err := e.Start(ctx, []byte(header+"workflow:\n  - step: start\n    tool: {kind: noop}\n"), engine.StartOptions{})
		started <- err
	}()
	for fl.Hits(faultlog.OpAppend) == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-started; !errors.Is(err, engine.ErrClosed) {
		t.Errorf("Start cut short by Close: %v, want ErrClosed", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.errors {
		t.Errorf("Close logged an error: %s", m)
	}
}

type errorRecorder struct {
	mu     sync.Mutex
	errors []string
}

func (h *errorRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *errorRecorder) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		h.mu.Lock()
		h.errors = append(h.errors, r.Message)
		h.mu.Unlock()
	}
	return nil
}
func (h *errorRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *errorRecorder) WithGroup(string) slog.Handler      { return h }
