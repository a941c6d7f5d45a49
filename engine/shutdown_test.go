package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/clock"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/tools"
)

// TestCallsAfterCloseFail: every call after Close returns ErrClosed at
// once, and a Wait on a running execution returns ErrClosed when the
// engine closes (before, they hung).
func TestCallsAfterCloseFail(t *testing.T) {
	t.Parallel()
	b, ctx, id := setupHeld(t, "slow")
	waited := make(chan error, 1)
	go func() { _, err := b.eng.Wait(ctx, id); waited <- err }()
	if err := b.eng.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("Wait on a running execution after Close: %v, want ErrClosed", err)
	}
	calls := map[string]func() error{
		"Start":  func() error { _, err := b.eng.Start(ctx, []byte(twoSteps), engine.StartOptions{}); return err },
		"Resume": func() error { return b.eng.Resume(ctx, id) },
		"Cancel": func() error { return b.eng.Cancel(ctx, id) },
		"Wait":   func() error { _, err := b.eng.Wait(ctx, id); return err },
		"Driving": func() error {
			_, err := b.eng.Driving(ctx)
			return err
		},
		"Report": func() error {
			return b.eng.Reporter().Report(ctx, eventlog.Event{ExecutionID: id, Type: eventlog.TypeCommandCompleted, CommandID: "start#1@1"})
		},
		"Heartbeat": func() error { return b.eng.Reporter().Heartbeat(ctx, id, "start#1@1") },
		"Shutdown":  func() error { return b.eng.Shutdown(ctx) },
	}
	for name, call := range calls {
		err := call()
		if name == "Shutdown" && err == nil {
			continue // closing twice is a no-op
		}
		if !errors.Is(err, engine.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	if ctx.Err() != nil {
		t.Fatal("a call after Close hung until the test's deadline")
	}
	// The execution is still in the log, running, for a resume.
	st, err := engine.Inspect(ctx, b.log, id)
	if err != nil || st.Status != engine.StatusRunning {
		t.Fatalf("after Close: %v %+v", err, st)
	}
}

// TestShutdownLetsRunningCommandsFinish: Shutdown records the report of
// the command that is running, dispatches nothing new, and leaves the
// rest in the log, where a new engine resumes it.
func TestShutdownLetsRunningCommandsFinish(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	started := make(chan struct{})
	reg := tools.NewRegistry()
	reg.MustRegister("gate", tools.ToolFunc(func(ctx context.Context, c *tools.Call) (tools.Output, error) {
		close(started)
		select {
		case <-gate:
			return tools.Output{Status: tools.StatusSuccess, Data: "let through"}, nil
		case <-ctx.Done():
			return tools.Output{}, ctx.Err()
		}
	}))
	b := setupWith(t, engine.Config{Tools: reg})
	e, rec, log := b.eng, b.rec, b.log
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id, err := e.Start(ctx, []byte(header+`
workflow:
  - step: start
    tool: {kind: gate}
    next: [after]
  - step: after
    tool: {kind: rec, key: after}
`), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	shut := make(chan error, 1)
	go func() { shut <- e.Shutdown(ctx) }()
	// New work is refused while running commands may still finish.
	for {
		_, err := e.Driving(ctx)
		if errors.Is(err, engine.ErrClosed) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // Shutdown has not begun yet
	}
	if _, err := e.Start(ctx, []byte(twoSteps), engine.StartOptions{}); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("Start during Shutdown: %v", err)
	}
	close(gate)
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if rec.count("after") != 0 {
		t.Fatal("a command was dispatched after Shutdown began")
	}
	evs, _ := log.Read(ctx, id, 0, 0)
	if n := logtest.CountType(evs, eventlog.TypeCommandCompleted); n != 1 {
		dumpOnFail(t, evs)
		t.Fatalf("%d command.completed recorded, want the running command's", n)
	}
	// The rest is handed back: another engine finishes it (Resume, like
	// Start, wants every kind of the playbook registered).
	freshReg := tools.NewRegistry()
	freshReg.MustRegister("gate", tools.ToolFunc(func(context.Context, *tools.Call) (tools.Output, error) {
		return tools.Output{Status: tools.StatusSuccess}, nil
	}))
	fresh := setupWith(t, engine.Config{Log: log, Tools: freshReg})
	if err := fresh.eng.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	sum, err := fresh.eng.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusCompleted || fresh.rec.count("after") != 1 {
		t.Fatalf("resumed: %v %+v", err, sum)
	}
}

// TestShutdownDeadlineCancelsRunningCommands: when ctx ends first, what
// still runs is cancelled and Shutdown says so.
func TestShutdownDeadlineCancelsRunningCommands(t *testing.T) {
	t.Parallel()
	b, ctx, _ := setupHeld(t, "slow")
	sctx, scancel := context.WithCancel(ctx)
	scancel()
	if err := b.eng.Shutdown(sctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown: %v, want context.Canceled", err)
	}
	if b.rec.interrupted.Load() != 1 {
		t.Fatal("the running command was not cancelled")
	}
}

// TestRetryDelayRunsOnTheClock: a durable retry with a 30-second delay
// falls due when the fake clock says so, not on the wall clock.
func TestRetryDelayRunsOnTheClock(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := setupWith(t, engine.Config{Clock: clk, Tick: time.Second})
	e, rec, log := b.eng, b.rec, b.log
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id, err := e.Start(ctx, []byte(header+`
workflow:
  - step: start
    tool: {kind: rec, key: flaky, fail: 1}
    spec:
      policy:
        rules:
          - when: '{{ output.status == "error" }}'
            then: {do: retry, attempts: 2, delay: 30}
`), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the retry to be scheduled, 30 s of fake time from now.
	var after int64
	for {
		evs, _ := log.Read(ctx, id, 0, 0)
		if logtest.CountType(evs, eventlog.TypeRetryScheduled) == 1 {
			after = evs[len(evs)-1].Seq
			break
		}
		if err := log.Wait(ctx, id, int64(len(evs))); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(29 * time.Second)
	if rec.count("flaky") != 1 {
		t.Fatal("retried before its delay")
	}
	clk.Advance(time.Second)
	if err := log.Wait(ctx, id, after); err != nil {
		t.Fatal("no retry after the delay")
	}
	sum, err := e.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusCompleted || rec.count("flaky") != 2 {
		t.Fatalf("%v %+v, %d calls", err, sum, rec.count("flaky"))
	}
}

// TestWaitReadsEvictedSummariesFromTheLog: with room for one summary, an
// older execution's outcome still comes back, read from the log; and so
// does one another engine ran.
func TestWaitReadsEvictedSummariesFromTheLog(t *testing.T) {
	t.Parallel()
	b := setupWith(t, engine.Config{MaxFinished: 1})
	e, log := b.eng, b.log
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var ids []string
	for range 3 {
		id, err := e.Start(ctx, []byte(twoSteps), engine.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Wait(ctx, id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		sum, err := e.Wait(ctx, id)
		if err != nil || sum.Status != engine.StatusCompleted || sum.Steps["second"] != "completed" || sum.Results["second"] == nil {
			t.Fatalf("%s: %v %+v", id, err, sum)
		}
	}
	other := setup(t, log)
	sum, err := other.eng.Wait(ctx, ids[0])
	if err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("another engine's Wait: %v %+v", err, sum)
	}
	if _, err := e.Wait(ctx, "no-such-execution"); !errors.Is(err, engine.ErrUnknownExecution) {
		t.Fatalf("unknown execution: %v", err)
	}
}

// TestResultSizeIsBounded: a command whose result is larger than
// MaxResultBytes fails with an error that says so; its result never
// reaches the log.
func TestResultSizeIsBounded(t *testing.T) {
	t.Parallel()
	log := eventlog.NewMemory()
	reg := tools.NewRegistry()
	reg.MustRegister("big", tools.ToolFunc(func(context.Context, *tools.Call) (tools.Output, error) {
		return tools.Output{Status: tools.StatusSuccess, Data: strings.Repeat("x", 3<<20)}, nil
	}))
	e, err := engine.New(engine.Config{Log: log, Tools: reg, MaxResultBytes: 1 << 20, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id, err := e.Start(ctx, []byte(header+"workflow:\n  - step: start\n    tool: {kind: big}\n"), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusFailed || !strings.Contains(sum.Error, "MaxResultBytes") {
		t.Fatalf("%v %+v", err, sum)
	}
	evs, _ := log.Read(ctx, id, 0, 0)
	for _, ev := range evs {
		if len(ev.Payload) > 1<<20 {
			t.Fatalf("%s carries %d bytes", ev.Type, len(ev.Payload))
		}
	}
}

// TestTemplatesCannotStallTheOrchestrator: a loop over a billion-item
// range, and a collection past MaxLoopItems, fail their step quickly with
// an error naming the field; other executions go on.
func TestTemplatesCannotStallTheOrchestrator(t *testing.T) {
	t.Parallel()
	b := setupWith(t, engine.Config{MaxLoopItems: 500})
	e := b.eng
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tt := range []struct{ in, want string }{
		{"'{{ range(1000000000) | list }}'", "range of 1000000000 items exceeds 100000"},
		{"'{{ range(1000) | list }}'", "1000 items are more than a collection loop may hold (500"},
		// 100 MB of output: stopped by the output bound, or by the time
		// bound on a slow machine, whichever comes first.
		{"\"{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}\"", "template render limit"},
	} {
		start := time.Now()
		id, err := e.Start(ctx, []byte(header+`
workflow:
  - step: start
    loop:
      in: `+tt.in+`
      iterator: i
    tool: {kind: rec, key: 'i{{ iter.i }}'}
`), engine.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sum, err := e.Wait(ctx, id)
		if err != nil || sum.Status != engine.StatusFailed || sum.Step != "start" || !strings.Contains(sum.Error, "loop.in") || !strings.Contains(sum.Error, tt.want) {
			t.Fatalf("%s: %v %+v", tt.in, err, sum)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("%s took %s to fail", tt.in, d)
		}
	}
	if sum, _ := b.run(t, twoSteps, nil); sum.Status != engine.StatusCompleted {
		t.Fatalf("the engine did not go on: %+v", sum)
	}
}

// TestReportOnCancelledContextIsNotRecorded: a report made on a context
// already cancelled (a tool that returned ctx.Err() as the engine shut
// down) is refused with that context's error and never recorded, every
// time: a resume must find the command in flight, not failed. (It used to
// be a coin toss between the context and the orchestrator's inbox.)
func TestReportOnCancelledContextIsNotRecorded(t *testing.T) {
	t.Parallel()
	b, ctx, id := setupHeld(t, "held")
	evs, err := b.log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var issued eventlog.Event
	for _, ev := range evs {
		if ev.Type == eventlog.TypeCommandIssued {
			issued = ev
		}
	}
	if issued.CommandID == "" {
		t.Fatalf("no command.issued in %+v", evs)
	}
	gone, stop := context.WithCancel(ctx)
	stop()
	for range 200 {
		err := b.eng.Reporter().Report(gone, eventlog.Event{ExecutionID: id, Type: eventlog.TypeCommandFailed, Step: issued.Step,
			CommandID: issued.CommandID, Attempt: issued.Attempt, WorkerID: "w-test", Payload: []byte(`{"output":null,"error":"context canceled"}`)})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("report on a cancelled context: %v, want context.Canceled", err)
		}
	}
	after, err := b.log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := logtest.CountType(after, eventlog.TypeCommandFailed); n != 0 {
		t.Fatalf("%d command.failed recorded from reports on a cancelled context", n)
	}
}
