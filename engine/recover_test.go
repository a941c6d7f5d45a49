package engine

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
)

const flow = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: t}
workflow:
  - step: start
    tool: {kind: ok}
    next: [second]
  - step: second
    tool: {kind: ok}
`

func testEngine(t *testing.T, cfg Config) *Engine {
	t.Helper()
	if cfg.Log == nil {
		cfg.Log = eventlog.NewMemory()
	}
	reg := tools.NewRegistry()
	reg.MustRegister("ok", tools.ToolFunc(func(context.Context, *tools.Call) (tools.Output, error) {
		return tools.Output{Status: tools.StatusSuccess, Data: 1}, nil
	}))
	cfg.Tools = reg
	if cfg.Tick == 0 {
		cfg.Tick = 5 * time.Millisecond
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// TestPanicInDecisionFailsTheExecution: decision code that panics for one
// execution fails that execution with the panic on record; the process
// and the other executions go on.
func TestPanicInDecisionFailsTheExecution(t *testing.T) {
	t.Parallel()
	e := testEngine(t, Config{})
	decide := e.orch.decide
	e.orch.decide = func(s *State, now time.Time, expired []expiry) []eventlog.Event {
		if s.Workload["poison"] == true && len(s.Results) > 0 {
			slots := make([]slotState, 1)
			_ = slots[s.Workload["slot"].(int64)] // a bad slot index, as a decision bug would use
		}
		return decide(s, now, expired)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bad, err := e.Start(ctx, []byte(flow), StartOptions{Workload: map[string]any{"poison": true, "slot": int64(3)}})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.Wait(ctx, bad)
	if err != nil || sum.Status != StatusFailed || !strings.Contains(sum.Error, "internal error: decision panicked") || !strings.Contains(sum.Error, "index out of range [3] with length 1") {
		t.Fatalf("poisoned execution: %v %+v", err, sum)
	}
	st, err := Inspect(ctx, e.cfg.Log, bad)
	if err != nil || st.Status != StatusFailed {
		t.Fatalf("the failure is not in the log: %v %+v", err, st)
	}
	good, err := e.Start(ctx, []byte(flow), StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := e.Wait(ctx, good); err != nil || sum.Status != StatusCompleted {
		t.Fatalf("a healthy execution after the panic: %v %+v", err, sum)
	}
}

// TestCorruptHistoryIsAnError: a history that does not fit the state (a
// frame.done for a slot the loop does not have, a negative max_in_flight)
// is refused with an error; before, folding it panicked.
func TestCorruptHistoryIsAnError(t *testing.T) {
	t.Parallel()
	src := `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: t}
workflow:
  - step: start
    loop:
      cursor: {kind: x, claim: 'x'}
      iterator: r
      spec: {mode: cursor, max_in_flight: 1}
    tool: {kind: ok}
`
	js := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	started := eventlog.Event{ExecutionID: "x", Seq: 1, Type: eventlog.TypeExecutionStarted, Payload: js(startedPayload{Playbook: src})}
	loop := func(n int) eventlog.Event {
		return eventlog.Event{ExecutionID: "x", Seq: 2, Type: eventlog.TypeLoopStarted, Step: "start", LoopID: "start#1",
			Payload: js(loopStartedPayload{Run: "start#1", Mode: "cursor", MaxInFlight: n})}
	}
	issued := eventlog.Event{ExecutionID: "x", Seq: 3, Type: eventlog.TypeCommandIssued, Step: "start", CommandID: "start#1/s5.f1@1", Attempt: 1,
		Payload: js(issuedPayload{Kind: KindFrame, Run: "start#1", Base: "start#1/s5.f1", Slot: 5})}
	done := eventlog.Event{ExecutionID: "x", Seq: 4, Type: eventlog.TypeFrameDone, Step: "start", CommandID: "start#1/s5.f1@1", Attempt: 1,
		Payload: js(frameDonePayload{Drained: true})}
	for name, h := range map[string][]eventlog.Event{
		"slot out of range":      {started, loop(1), issued, done},
		"negative max_in_flight": {started, loop(-1)},
	} {
		if _, err := Fold("x", h); err == nil {
			t.Errorf("%s: folded without an error", name)
		}
	}
}

// TestCancelledWaitLeavesNoWaiter: Waits that give up leave nothing
// behind; before, each left its waiter for the life of the process.
func TestCancelledWaitLeavesNoWaiter(t *testing.T) {
	t.Parallel()
	e := testEngine(t, Config{Workers: 0, Dispatcher: nullDispatcher{}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id, err := e.Start(ctx, []byte(flow), StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		wctx, wcancel := context.WithCancel(ctx)
		wcancel()
		if _, err := e.Wait(wctx, id); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait: %v", err)
		}
	}
	e.orch.mu.Lock()
	n := len(e.orch.waiters)
	e.orch.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d waiters left behind", n)
	}
}

type nullDispatcher struct{}

func (nullDispatcher) Dispatch(*Command) {}
func (nullDispatcher) Durable() bool     { return true }
func (nullDispatcher) Cancel(string)     {}

// TestFinishedSummariesAreBounded: the summaries kept in memory stay
// within MaxFinished and FinishedTTL.
func TestFinishedSummariesAreBounded(t *testing.T) {
	t.Parallel()
	c := newSummaryCache(3, 1<<30, time.Minute)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10 {
		c.put(string(rune('a'+i)), &Summary{}, t0)
	}
	if c.len() != 3 || c.get("a", t0) != nil || c.get("j", t0) == nil {
		t.Fatalf("LRU: %d kept", c.len())
	}
	if c.get("j", t0.Add(2*time.Minute)) != nil || c.len() != 0 {
		t.Fatalf("TTL: %d kept after it", c.len())
	}
	e := testEngine(t, Config{MaxFinished: 5})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range 20 {
		id, err := e.Start(ctx, []byte(flow), StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Wait(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	e.orch.mu.Lock()
	n := e.orch.finished.len()
	e.orch.mu.Unlock()
	if n > 5 {
		t.Fatalf("%d summaries kept, MaxFinished 5", n)
	}
}

// TestFinishedSummariesAreBoundedInBytes: summaries whose results are
// large are kept within MaxFinishedBytes, the oldest going first, and one
// evicted is read back whole from the log.
func TestFinishedSummariesAreBoundedInBytes(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 100_000)
	reg := tools.NewRegistry()
	reg.MustRegister("big", tools.ToolFunc(func(context.Context, *tools.Call) (tools.Output, error) {
		return tools.Output{Status: tools.StatusSuccess, Data: big}, nil
	}))
	e, err := New(Config{Log: eventlog.NewMemory(), Tools: reg, Tick: 5 * time.Millisecond, MaxFinishedBytes: 350_000})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var ids []string
	for range 10 {
		id, err := e.Start(ctx, []byte("apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t}\nworkflow:\n  - step: start\n    tool: {kind: big}\n"), StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Wait(ctx, id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	e.orch.mu.Lock()
	n, held := e.orch.finished.len(), e.orch.finished.bytes
	first := e.orch.finished.get(ids[0], e.cfg.Clock.Now())
	e.orch.mu.Unlock()
	if n == 0 || n > 3 || held > 350_000 || first != nil {
		t.Fatalf("%d summaries kept holding about %d bytes (the first kept: %v), MaxFinishedBytes 350,000 and results of 100,000",
			n, held, first != nil)
	}
	sum, err := e.Wait(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	start, _ := sum.Results["start"].(map[string]any)
	if start["data"] != big {
		t.Fatalf("the evicted summary read back from the log lost its result: %.60v", sum.Results["start"])
	}
	// One summary alone past the bound is not kept either.
	c := newSummaryCache(10, 1_000, time.Minute)
	c.put("huge", &Summary{Results: map[string]any{"s": big}}, time.Now())
	if c.len() != 0 || c.bytes != 0 {
		t.Fatalf("a summary of %d bytes kept under a bound of 1,000: %d kept, %d bytes", len(big), c.len(), c.bytes)
	}
}
