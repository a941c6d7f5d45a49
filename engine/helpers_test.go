package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/internal/stdwire"
	"github.com/cursorflow/cursorflow/internal/testenv"
	"github.com/cursorflow/cursorflow/tools"
)

// recorder is a host tool that records every call, returns its rendered
// config as data, and fails on demand: `fail: N` fails the first N
// attempts of that call with an error output.
type recorder struct {
	mu          sync.Mutex
	interrupted atomic.Int32
	calls       []string
	seen        map[string]int
	commands    map[string]int
}

func (r *recorder) countCommand(base string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.commands[base]
}

func (r *recorder) tool() tools.Tool {
	return tools.ToolFunc(func(ctx context.Context, c *tools.Call) (tools.Output, error) {
		key := fmt.Sprint(c.Config["key"])
		r.mu.Lock()
		r.calls = append(r.calls, key)
		if r.seen == nil {
			r.seen = map[string]int{}
		}
		r.seen[key]++
		if r.commands == nil {
			r.commands = map[string]int{}
		}
		r.commands[c.CommandID]++
		n := r.seen[key]
		r.mu.Unlock()
		if d, ok := c.Config["sleep_ms"].(int64); ok {
			select {
			case <-time.After(time.Duration(d) * time.Millisecond):
			case <-ctx.Done():
				r.interrupted.Add(1)
				return tools.Output{Status: tools.StatusError, Error: ctx.Err().Error()}, nil
			}
		}
		if f, ok := c.Config["fail_attempts"].(int64); ok && int64(c.Attempt) <= f {
			return tools.Output{Status: tools.StatusError, Error: fmt.Sprintf("planned failure on attempt %d", c.Attempt), Data: c.Config}, nil
		}
		if f, ok := c.Config["fail"].(int64); ok && int64(n) <= f {
			return tools.Output{Status: tools.StatusError, Error: fmt.Sprintf("planned failure %d", n), Data: c.Config}, nil
		}
		return tools.Output{Status: tools.StatusSuccess, Data: c.Config}, nil
	})
}

func (r *recorder) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[key]
}

type bundle struct {
	log eventlog.Log
	eng *engine.Engine
	rec *recorder
	reg *tools.Registry
}

func setup(t *testing.T, log eventlog.Log) *bundle {
	t.Helper()
	return setupWith(t, engine.Config{Log: log})
}

// setupWith starts an engine with cfg, the recorder registered as kind rec
// in cfg.Tools (a new registry if nil), a memory log and a 5ms tick unless
// cfg says otherwise.
func setupWith(t testing.TB, cfg engine.Config) *bundle {
	t.Helper()
	if cfg.Log == nil {
		cfg.Log = eventlog.NewMemory()
	}
	if cfg.Tools == nil {
		cfg.Tools = tools.NewRegistry()
	}
	if cfg.Tick == 0 {
		cfg.Tick = 5 * time.Millisecond
	}
	rec := &recorder{}
	cfg.Tools.MustRegister("rec", rec.tool())
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return &bundle{log: cfg.Log, eng: e, rec: rec, reg: cfg.Tools}
}

// setupHeld is setup with a memory log and startHeld's execution running:
// the bundle, a context that ends with the test (20 s at most) and the
// execution's id.
func setupHeld(t *testing.T, key string) (*bundle, context.Context, string) {
	t.Helper()
	b := setup(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return b, ctx, b.startHeld(t, ctx, key)
}

// startHeld starts a one-step execution whose command sleeps a minute (or
// until cancelled) and returns once the command runs.
func (b *bundle) startHeld(t *testing.T, ctx context.Context, key string) string {
	t.Helper()
	id, err := b.eng.Start(ctx, []byte(header+`
workflow:
  - step: start
    tool: {kind: rec, key: `+key+`, sleep_ms: 60000}
`), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.waitForCall(t, ctx, key)
	return id
}

func (b *bundle) run(t *testing.T, src string, workload map[string]any) (*engine.Summary, []eventlog.Event) {
	t.Helper()
	// A hang guard, not a speed bound: a 3 MB result under -race on a
	// loaded two-core machine has taken more than 20 s.
	return runPlaybook(t, b.eng, b.log, src, engine.StartOptions{File: "test.yaml", Workload: workload}, time.Minute)
}

// runPlaybook starts src on e, waits at most timeout for it to end and
// returns its summary and history (read from log).
func runPlaybook(t *testing.T, e *engine.Engine, log eventlog.Log, src string, opts engine.StartOptions, timeout time.Duration) (*engine.Summary, []eventlog.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	id, err := e.Start(ctx, []byte(src), opts)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return sum, evs
}

func dumpOnFail(t *testing.T, evs []eventlog.Event) {
	t.Helper()
	if !t.Failed() {
		return
	}
	for _, ev := range evs {
		t.Logf("%3d %-20s %-12s %-22s %s", ev.Seq, ev.Type, ev.Step, ev.CommandID, ev.Payload)
	}
}

func data(t *testing.T, sum *engine.Summary, step string) map[string]any {
	t.Helper()
	r, ok := sum.Results[step].(map[string]any)
	if !ok {
		t.Fatalf("no result for step %s in %v", step, sum.Results)
	}
	d, _ := r["data"].(map[string]any)
	return d
}

const header = "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t}\n"

// waitForCall polls until the recorder has seen a call with key, or fails
// the test when ctx ends.
func (b *bundle) waitForCall(t *testing.T, ctx context.Context, key string) {
	t.Helper()
	for b.rec.count(key) == 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("no call with key %q before %v", key, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// foldBeforeLoopDone folds evs, up to their first loop.done, as if the
// execution had been started under semantics level: how the history
// would have been decided by a build of that level.
func foldBeforeLoopDone(t *testing.T, evs []eventlog.Event, level int) *engine.State {
	t.Helper()
	hist := slices.Clone(evs)
	var started map[string]any
	if err := json.Unmarshal(hist[0].Payload, &started); err != nil {
		t.Fatal(err)
	}
	started["semantics"] = level
	hist[0].Payload, _ = json.Marshal(started)
	if k := slices.IndexFunc(hist, func(ev eventlog.Event) bool { return ev.Type == eventlog.TypeLoopDone }); k >= 0 {
		hist = hist[:k]
	}
	s, err := engine.Fold(hist[0].ExecutionID, hist)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// pgLogEngine returns an engine on log with the standard tools and
// cursors resolving the credential alias pg to dsn, closed when the test
// ends; the channel closes once the engine logs a line holding signal.
func pgLogEngine(t *testing.T, log eventlog.Log, dsn, signal string) (*engine.Engine, <-chan struct{}, *tools.Registry) {
	t.Helper()
	kc := tools.StaticURLs(map[string]string{"pg": dsn})
	treg, creg, closer := stdwire.Registries(kc, nil, false)
	t.Cleanup(func() { _ = closer.Close() })
	seen := make(chan struct{})
	logger := slog.New(signalHandler{slog.NewTextHandler(t.Output(), nil), signal, &sync.Once{}, seen})
	e, err := engine.New(engine.Config{Log: log, Tools: treg, Cursors: creg, Keychain: kc, Tick: 10 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e, seen, treg
}

// drainedOnce checks a drain of pgQueue's table of n rows: loop.done
// recorded once in evs, every row done.
func drainedOnce(t *testing.T, dsn, table string, n int, evs []eventlog.Event) {
	t.Helper()
	loopDone := 0
	for _, ev := range evs {
		if ev.Type == eventlog.TypeLoopDone {
			loopDone++
		}
	}
	if loopDone != 1 {
		t.Errorf("loop.done recorded %d times, want once", loopDone)
	}
	var done, left int
	testenv.QueryRow(t, dsn, "SELECT count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE status <> 'done') FROM "+table, &done, &left)
	if done != n || left != 0 {
		t.Fatalf("%d of %d rows done, %d not done", done, n, left)
	}
}
