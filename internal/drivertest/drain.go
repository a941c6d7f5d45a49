package drivertest

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/builtin"
	"github.com/cursorflow/cursorflow/tools/fn"
)

// DefaultLoop is the run id of the cursor loop a drain playbook runs in
// its first step: the loop [Result.Loop] describes unless
// [DrainConfig.Loop] names another.
const DefaultLoop = "start#1"

// Tick is the engine's tick in [Drain], short so that the drain is not
// paced by it.
const Tick = 10 * time.Millisecond

// DrainConfig describes one run of a drain playbook.
type DrainConfig struct {
	// PlaybookFile is the playbook's path, relative to the test's package
	// directory (go test runs there). Required.
	PlaybookFile string
	// Kind is the cursor kind the playbook names, under which Driver is
	// registered. Required.
	Kind string
	// Driver is the driver under test. Required; Drain closes it at the
	// end of the test.
	Driver cursor.Driver
	// Keychain resolves the playbook's credential aliases, for the engine
	// and the built-in tools. Defaults to an empty keychain.
	Keychain tools.Keychain
	// Workload overrides the playbook's workload keys (table, stream, ...).
	Workload map[string]any
	// Loop is the run id of the loop Result.Loop describes. Defaults to
	// DefaultLoop.
	Loop string
	// Tools are registered beside the built-in tools, under their kinds:
	// a host's own tools (fn.New), say one that lets the test see what a
	// loop's body was given.
	Tools map[string]tools.Tool
	// Shutdown shuts the engine down (Engine.Shutdown) once the execution
	// ended, so that what the engine does after the end of a loop or of
	// the execution (a driver's cursor.Finisher) is done when Run returns.
	Shutdown bool
}

// Result is what a completed drain left behind.
type Result struct {
	// ExecutionID is the execution's id.
	ExecutionID string
	// Summary is what engine.Engine.Wait returned.
	Summary *engine.Summary
	// Status is the execution folded by engine.Inspect after it ended.
	Status *engine.Status
	// Loop is Status.Loops[DrainConfig.Loop].
	Loop engine.LoopStatus
	// Events is the execution's whole history.
	Events []eventlog.Event
	// Elapsed runs from Start to the end of Wait.
	Elapsed time.Duration
}

// Drain runs cfg.PlaybookFile on an engine with an in-memory event log,
// the built-in tools and cfg.Driver registered as cfg.Kind, waits for the
// execution to end and fails the test unless it completed. ctx bounds the
// run; the engine, the registries and the driver are closed when the test
// ends.
func Drain(ctx context.Context, t testing.TB, cfg DrainConfig) Result {
	t.Helper()
	r := Run(ctx, t, cfg)
	if sum := r.Summary; sum.Status != engine.StatusCompleted {
		t.Fatalf("execution %s: %s %s %s", sum.Status, sum.Step, sum.Field, sum.Error)
	}
	return r
}

// Run is Drain for an execution that may end in any status: a test of
// how a drain fails checks Result.Summary itself.
func Run(ctx context.Context, t testing.TB, cfg DrainConfig) Result {
	t.Helper()
	st := start(ctx, t, &cfg)
	return wait(ctx, t, cfg, st.e, st.log, st.id, st.began)
}

// Interrupted runs cfg.PlaybookFile, whose loop body must be a tool of
// kind "body", as a process that dies mid-loop and one that resumes: the
// first engine is closed (Engine.Close) while the body's first call runs,
// before the loop can end; then interrupted is called; then a second
// engine on the same event log resumes the execution and Interrupted
// waits for it to end, as Run does. The first call of the body fails
// with its context's error once the close cuts it short; every other
// call succeeds.
func Interrupted(ctx context.Context, t testing.TB, cfg DrainConfig, interrupted func()) Result {
	t.Helper()
	running := holdBody(&cfg)
	st := start(ctx, t, &cfg)
	awaitBody(ctx, t, running)
	if err := st.e.Close(); err != nil {
		t.Fatal(err)
	}
	interrupted()
	e2 := newEngine(t, cfg, st.log, st.regs)
	if err := e2.Resume(ctx, st.id); err != nil {
		t.Fatal(err)
	}
	return wait(ctx, t, cfg, e2, st.log, st.id, st.began)
}

// Cancelled runs cfg.PlaybookFile, whose loop body must be a tool of
// kind "body", and cancels the execution (Engine.Cancel) while the body's
// first call runs; then it waits for the execution to end, as Run does.
// The first call of the body returns its context's error once the cancel
// reaches it; every other call succeeds.
func Cancelled(ctx context.Context, t testing.TB, cfg DrainConfig) Result {
	t.Helper()
	running := holdBody(&cfg)
	st := start(ctx, t, &cfg)
	awaitBody(ctx, t, running)
	if err := st.e.Cancel(ctx, st.id); err != nil {
		t.Fatal(err)
	}
	return wait(ctx, t, cfg, st.e, st.log, st.id, st.began)
}

// started is an execution start made: its engine, event log and
// registries, its id and when it began.
type started struct {
	e     *engine.Engine
	log   eventlog.Log
	regs  registries
	id    string
	began time.Time
}

// start starts cfg.PlaybookFile with cfg.Workload on a new engine with a
// memory log and registries of cfg's tools and driver, cfg.Loop defaulted
// in place for the wait.
func start(ctx context.Context, t testing.TB, cfg *DrainConfig) started {
	t.Helper()
	if cfg.Loop == "" {
		cfg.Loop = DefaultLoop
	}
	src, err := os.ReadFile(cfg.PlaybookFile)
	if err != nil {
		t.Fatal(err)
	}
	st := started{log: eventlog.NewMemory(), regs: newRegistries(t, *cfg)}
	st.e = newEngine(t, *cfg, st.log, st.regs)
	st.began = time.Now()
	if st.id, err = st.e.Start(ctx, src, engine.StartOptions{File: cfg.PlaybookFile, Workload: cfg.Workload}); err != nil {
		t.Fatal(err)
	}
	return st
}

// holdBody registers in cfg the tool "body", whose first call waits for
// its context's end and returns its error; every other call succeeds. The
// returned channel is closed as the first call starts.
func holdBody(cfg *DrainConfig) <-chan struct{} {
	var first sync.Once
	running := make(chan struct{})
	cfg.Tools = maps.Clone(cfg.Tools)
	if cfg.Tools == nil {
		cfg.Tools = map[string]tools.Tool{}
	}
	cfg.Tools["body"] = fn.New(func(ctx context.Context, _ *tools.Call) (any, error) {
		held := false
		first.Do(func() { held = true; close(running) })
		if held {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return nil, nil
	})
	return running
}

// awaitBody waits for the first call of holdBody's tool.
func awaitBody(ctx context.Context, t testing.TB, running <-chan struct{}) {
	t.Helper()
	select {
	case <-running:
	case <-ctx.Done():
		t.Fatalf("the body was never called: %v", ctx.Err())
	}
}

type registries struct {
	tools   *tools.Registry
	cursors *cursor.Registry
}

// newRegistries registers the built-in tools, cfg.Tools and cfg.Driver;
// they are closed when the test ends.
func newRegistries(t testing.TB, cfg DrainConfig) registries {
	t.Helper()
	treg, tclose := builtin.NewRegistry(builtin.Options{Keychain: cfg.Keychain})
	t.Cleanup(func() { _ = tclose.Close() })
	for kind, tool := range cfg.Tools {
		if err := treg.Register(kind, tool); err != nil {
			t.Fatal(err)
		}
	}
	creg := cursor.NewRegistry()
	if err := creg.Register(cfg.Kind, cfg.Driver); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = creg.Close() })
	return registries{tools: treg, cursors: creg}
}

// newEngine starts an engine on log, closed when the test ends.
func newEngine(t testing.TB, cfg DrainConfig, log eventlog.Log, regs registries) *engine.Engine {
	t.Helper()
	e, err := engine.New(engine.Config{Log: log, Tools: regs.tools, Cursors: regs.cursors, Keychain: cfg.Keychain, Tick: Tick,
		AllowCursorURL: true}) // the test's own playbooks (s3prefix's names its bucket with url:)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// wait waits for execution id on e and gathers the Result.
func wait(ctx context.Context, t testing.TB, cfg DrainConfig, e *engine.Engine, log eventlog.Log, id string, began time.Time) Result {
	t.Helper()
	sum, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	r := Result{ExecutionID: id, Summary: sum, Elapsed: time.Since(began)}
	if cfg.Shutdown {
		if err := e.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if r.Events, err = log.Read(ctx, id, 0, 0); err != nil {
		t.Fatal(err)
	}
	if r.Status, err = engine.Inspect(ctx, log, id); err != nil {
		t.Fatal(err)
	}
	r.Loop = r.Status.Loops[cfg.Loop]
	return r
}

// LogRate logs the drain's throughput and cost: n items of the named
// kind (rows, entries, ...) in Elapsed, the loop's frames and the events
// per item.
func (r Result) LogRate(t testing.TB, n int, items string) {
	t.Helper()
	t.Logf("drained %d %s in %v (%.0f %s/s), %d frames, %d events (%.4f per item)",
		n, items, r.Elapsed.Round(time.Millisecond), float64(n)/r.Elapsed.Seconds(), items,
		r.Loop.Frames, len(r.Events), float64(len(r.Events))/float64(n))
}

// FrameItems returns every row key the engine reported in frame.done
// events, with its outcomes in order.
func FrameItems(t testing.TB, evs []eventlog.Event) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, ev := range evs {
		if ev.Type != eventlog.TypeFrameDone {
			continue
		}
		var p struct {
			Items []struct {
				Key     string `json:"key"`
				Outcome string `json:"outcome"`
			} `json:"items"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatalf("frame.done payload: %v", err)
		}
		for _, it := range p.Items {
			out[it.Key] = append(out[it.Key], it.Outcome)
		}
	}
	return out
}

// ExpectEachOnceOK fails the test unless the frame.done events in evs
// report exactly the given keys, each once, with outcome ok: every row
// ran through the loop's body once, successfully.
func ExpectEachOnceOK(t testing.TB, evs []eventlog.Event, keys []string) {
	t.Helper()
	items := FrameItems(t, evs)
	if len(items) != len(keys) {
		t.Fatalf("the engine reported %d distinct keys, want %d", len(items), len(keys))
	}
	for _, k := range keys {
		if got := items[k]; len(got) != 1 || got[0] != engine.OutcomeOK {
			t.Fatalf("key %s: outcomes %v, want [ok]", k, got)
		}
	}
}
