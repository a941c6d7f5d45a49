package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
	"github.com/cursorflow/cursorflow/tools"
	"github.com/cursorflow/cursorflow/tools/playbook"
)

func TestStepTimeoutFailsTheStep(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    spec: {timeout: 0.05}
    tool: {kind: rec, key: slow, sleep_ms: 5000}
`, nil)
	defer dumpOnFail(t, evs)
	// The error says which deadline: the step's spec.timeout.
	if sum.Status != engine.StatusFailed || sum.Step != "start" || !strings.Contains(sum.Error, "spec.timeout of 50ms reached") {
		t.Fatalf("summary %+v, want failed at start by its spec.timeout", sum)
	}
}

func TestCancelStopsAnExecution(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id, err := b.eng.Start(ctx, []byte(header+`
workflow:
  - step: start
    loop:
      in: '{{ range(1000) | list }}'
      iterator: i
      spec: {mode: sequential}
    tool: {kind: rec, key: 'i{{ iter.i }}', sleep_ms: 5}
`), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Cancel once the loop is under way, three times at once (as three
	// clicks do): one cancel.requested is recorded.
	b.waitForCall(t, ctx, "i3")
	errs := make(chan error, 3)
	for range 3 {
		go func() { errs <- b.eng.Cancel(ctx, id) }()
	}
	for range 3 {
		if err := <-errs; err != nil && !errors.Is(err, engine.ErrUnknownExecution) {
			t.Fatal(err)
		}
	}
	sum, err := b.eng.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != engine.StatusCancelled {
		t.Fatalf("status %s, want cancelled", sum.Status)
	}
	evs, _ := b.log.Read(ctx, id, 0, 0)
	if evs[len(evs)-1].Type != eventlog.TypeExecutionCancelled {
		t.Fatalf("last event %s", evs[len(evs)-1].Type)
	}
	if n := logtest.CountType(evs, eventlog.TypeCancelRequested); n != 1 {
		t.Fatalf("cancel.requested recorded %d times, want 1", n)
	}
	if n := len(b.rec.calls); n > 100 {
		t.Fatalf("%d items ran after cancel", n)
	}
	// The loop's step stopped with the execution: neither the summary nor
	// the status says it is still running.
	if sum.Steps["start"] != engine.StatusCancelled {
		t.Errorf("summary steps %v, want start cancelled", sum.Steps)
	}
	st, err := engine.Inspect(ctx, b.log, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Steps["start"] != engine.StatusCancelled || !st.Loops["start#1"].Finished {
		t.Errorf("status steps %v, loops %+v: want start cancelled and its loop finished", st.Steps, st.Loops)
	}
}

func TestSubPlaybook(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	child := header + `
workload: {base: 1}
workflow:
  - step: start
    tool: {kind: rec, key: 'child-{{ base }}', doubled: '{{ base * 2 }}'}
`
	if err := os.WriteFile(filepath.Join(dir, "child.yaml"), []byte(child), 0o644); err != nil {
		t.Fatal(err)
	}
	parent := header + `
workflow:
  - step: start
    loop:
      in: '{{ [5, 6] }}'
      iterator: n
      spec: {mode: parallel}
    tool:
      kind: playbook
      path: child.yaml
      workload: {base: '{{ iter.n }}'}
    next:
      - step: use
        when: '{{ event.name == "loop.done" }}'
  - step: use
    tool: {kind: rec, key: use, got: '{{ start.results | map(attribute="steps") | map(attribute="start") | map(attribute="data") | map(attribute="doubled") | list }}'}
`
	log := eventlog.NewMemory()
	rec := &recorder{}
	reg := tools.NewRegistry()
	reg.MustRegister("rec", rec.tool())
	e, err := engine.New(engine.Config{Log: log, Tools: reg, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	reg.MustRegister("playbook", playbook.New(e))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id, err := e.Start(ctx, []byte(parent), engine.StartOptions{File: filepath.Join(dir, "parent.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	if rec.count("child-5") != 1 || rec.count("child-6") != 1 {
		t.Fatalf("children ran %d and %d times, want once each", rec.count("child-5"), rec.count("child-6"))
	}
	got := data(t, sum, "use")["got"]
	if s, _ := got.([]any); len(s) != 2 || s[0] != int64(10) || s[1] != int64(12) {
		t.Fatalf("use.got = %#v, want [10 12]", got)
	}
	children, _ := log.Executions(ctx, eventlog.ExecutionsQuery{})
	if len(children) != 3 {
		t.Fatalf("log holds %d executions, want parent + 2 children", len(children))
	}
}

func TestVarsAndStepVars(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workload: {name: world}
vars:
  greeting: 'hello {{ name }}'
workflow:
  - step: start
    tool: {kind: rec, key: s, value: 41}
    vars:
      answer: '{{ result.value + 1 }}'
    next: [use]
  - step: use
    tool: {kind: rec, key: u, greeting: '{{ vars.greeting }}', answer: '{{ vars.answer }}', exec: '{{ execution_id }}'}
`, map[string]any{"name": "cursorflow"})
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	d := data(t, sum, "use")
	if d["greeting"] != "hello cursorflow" || d["answer"] != int64(42) || d["exec"] != sum.ExecutionID {
		t.Fatalf("use = %v", d)
	}
}

// TestScheduledRetrySurvivesRestart stops the engine while a retry is
// scheduled; a fresh engine resuming from the log runs the retry when it
// falls due, not before.
func TestScheduledRetrySurvivesRestart(t *testing.T) {
	t.Parallel()
	log := eventlog.NewMemory()
	b := setup(t, log)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id, err := b.eng.Start(ctx, []byte(header+`
workflow:
  - step: start
    tool:
      kind: rec
      key: flaky
      fail_attempts: 1
      spec:
        policy:
          rules:
            - when: '{{ output.status == "error" }}'
              then: {do: retry, attempts: 2, delay: 0.4}
`), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var scheduled eventlog.Event
	for after := int64(0); scheduled.Type == ""; {
		if err := log.Wait(ctx, id, after); err != nil {
			t.Fatal(err)
		}
		evs, _ := log.Read(ctx, id, after, 0)
		for _, ev := range evs {
			after = ev.Seq
			if ev.Type == eventlog.TypeRetryScheduled {
				scheduled = ev
			}
		}
	}
	_ = b.eng.Close()

	fresh := setup(t, log)
	if err := fresh.eng.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	sum, err := fresh.eng.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	if n := fresh.rec.count("flaky"); n != 1 {
		t.Fatalf("the resumed engine ran the retry %d times, want 1", n)
	}
	evs, _ := log.Read(ctx, id, scheduled.Seq, 0)
	for _, ev := range evs {
		if ev.Type == eventlog.TypeCommandIssued {
			if ev.Time.Sub(scheduled.Time) < 350*time.Millisecond {
				t.Fatalf("retry issued %v after it was scheduled, before its 0.4s delay", ev.Time.Sub(scheduled.Time))
			}
			return
		}
	}
	t.Fatal("no retry was issued")
}

func TestJumpToStep(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    tool:
      kind: rec
      key: s
      spec:
        policy:
          rules:
            - else: {then: {do: jump, to: elsewhere}}
    next: [normal]
  - step: normal
    tool: {kind: rec, key: normal}
  - step: elsewhere
    tool: {kind: rec, key: elsewhere}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted || b.rec.count("elsewhere") != 1 || b.rec.count("normal") != 0 {
		t.Fatalf("status %s, elsewhere %d, normal %d", sum.Status, b.rec.count("elsewhere"), b.rec.count("normal"))
	}
}

// TestCancelStopsRunningCommands cancels an execution while its command
// runs in this process: the command's context ends, so the tool stops
// instead of running on for nothing.
func TestCancelStopsRunningCommands(t *testing.T) {
	t.Parallel()
	b, ctx, id := setupHeld(t, "long")
	if err := b.eng.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	sum, err := b.eng.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusCancelled {
		t.Fatalf("Wait = %+v, %v; want cancelled", sum, err)
	}
	for b.rec.interrupted.Load() == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the running command was not interrupted after its execution was cancelled")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestRepeatedCancelRecordsOnce: cancelling an execution whose cancel is
// on record already (its command is still stopping) answers nil and
// records nothing more.
func TestRepeatedCancelRecordsOnce(t *testing.T) {
	t.Parallel()
	d := &holdingDispatcher{}
	log := eventlog.NewMemory()
	e, err := engine.New(engine.Config{Log: log, Dispatcher: d, Tick: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id, err := e.Start(ctx, []byte(header+"workflow:\n  - step: start\n    tool: {kind: noop}\n"), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := e.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := logtest.CountType(evs, eventlog.TypeCancelRequested); n != 1 {
		t.Fatalf("cancel.requested recorded %d times, want 1", n)
	}
}
