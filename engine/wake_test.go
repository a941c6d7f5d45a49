package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/clock"
	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
)

// dyingStepDispatcher runs a command's first attempt as a worker that
// heartbeats once and dies (nothing more is heard of it), and any later
// attempt through the engine's worker runtime.
type dyingStepDispatcher struct {
	eng  *engine.Engine
	beat chan error // the first attempt's heartbeat, sent
}

func (d *dyingStepDispatcher) Durable() bool    { return false }
func (d *dyingStepDispatcher) Cancel(id string) { d.eng.Worker().Cancel(id) }
func (d *dyingStepDispatcher) Dispatch(cmd *engine.Command) {
	go func() {
		if cmd.Attempt == 1 {
			d.beat <- d.eng.Reporter().Heartbeat(context.Background(), cmd.ExecutionID, cmd.ID)
			return
		}
		_ = d.eng.Worker().Execute(context.Background(), cmd, d.eng.Reporter())
	}()
}

// TestHeartbeatBringsTheDeadlineForward: a step's worker heartbeats once
// and dies. Its lease is 100 s, but once it has heartbeaten its deadline
// is three heartbeats (30 s) away: on the fake clock, 31 s on, the
// command is issued again, not only once the whole lease has run out.
func TestHeartbeatBringsTheDeadlineForward(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	reg := tools.NewRegistry()
	reg.MustRegister("nothing", nothing)
	d := &dyingStepDispatcher{beat: make(chan error, 1)}
	log := eventlog.NewMemory()
	e, err := engine.New(engine.Config{Log: log, Tools: reg, Dispatcher: d, Clock: clk,
		CommandLease: 100 * time.Second, Tick: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d.eng = e
	defer e.Close()
	id, err := e.Start(ctx, []byte(header+"workflow:\n  - step: start\n    tool: {kind: nothing}\n"), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-d.beat:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the first attempt never ran")
	}
	// The orchestrator takes its messages in order: once it has answered
	// this one, it has the heartbeat.
	if _, err := e.Driving(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(31 * time.Second)
	sum, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatalf("the dead attempt was not issued again 31 s after its heartbeat (lease 100 s): %v", err)
	}
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	evs, err := log.Read(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var attempts []int
	for _, ev := range evs {
		if ev.Type == eventlog.TypeCommandIssued {
			attempts = append(attempts, ev.Attempt)
		}
	}
	if len(attempts) != 2 || attempts[1] != 2 {
		t.Fatalf("command.issued attempts %v, want [1 2]", attempts)
	}
}
