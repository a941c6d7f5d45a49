package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/clock"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
)

// TestSecondDriverLearnsTheEnd: two engines drive one execution (as two
// processes do when one lost its lock). One records the end; the other,
// whose state still has the command in flight, re-issues it once its
// lease runs out. The log stores nothing after the end, so that engine
// reloads the execution, learns it completed, and its Wait returns,
// instead of re-issuing for ever and never ending.
func TestSecondDriverLearnsTheEnd(t *testing.T) {
	t.Parallel()
	log := eventlog.NewMemory()
	newEngine := func() (*engine.Engine, *holdingDispatcher, *clock.Fake) {
		d := &holdingDispatcher{}
		clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		e, err := engine.New(engine.Config{Log: log, Dispatcher: d, Clock: clk, CommandLease: 30 * time.Second, Tick: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		return e, d, clk
	}
	a, da, _ := newEngine()
	b, _, clkB := newEngine()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id, err := a.Start(ctx, []byte(header+"workflow:\n  - step: start\n    tool: {kind: noop}\n"), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	settler(ctx, t, a)()
	if err := b.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	settler(ctx, t, b)()
	cmds := da.issued()
	if len(cmds) != 1 {
		t.Fatalf("a issued %d commands, want 1", len(cmds))
	}
	done := eventlog.Event{ExecutionID: id, Type: eventlog.TypeCommandCompleted, Step: "start", CommandID: cmds[0].ID, Attempt: cmds[0].Attempt, Payload: []byte(`{"status":"success"}`)}
	if err := a.Reporter().Report(ctx, done); err != nil {
		t.Fatal(err)
	}
	if sum, err := a.Wait(ctx, id); err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("a: %+v, %v; want completed", sum, err)
	}
	// b's lease on the command runs out: it decides a re-issue, which
	// the log refuses; b reloads the execution at its next tick.
	clkB.Advance(31 * time.Second)
	settler(ctx, t, b)()
	clkB.Advance(time.Second)
	sum, err := b.Wait(ctx, id)
	if err != nil || sum.Status != engine.StatusCompleted {
		t.Fatalf("b: %+v, %v; want it to learn the execution completed", sum, err)
	}
	evs, err := log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1]; last.Type != eventlog.TypeExecutionCompleted {
		t.Fatalf("the log's last event is %s: something was stored after the end", last.Type)
	}
}
