package engine_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
)

// TestCancelledLoopItemsAreNotFailed: a parallel loop (max_in_flight 3)
// of slow items is cancelled while three items run. The cancel stops
// them, and the status said "3 failed" for them (Failed counted every
// item whose command ended failed, the cancel's among them), so an
// operator looked for a fault that was not there. The items the cancel
// stopped are counted as cancelled; none failed, none is done.
func TestCancelledLoopItemsAreNotFailed(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"parallel", "sequential"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			id, err := b.eng.Start(ctx, []byte(header+`
workflow:
  - step: start
    loop:
      in: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
      iterator: i
      spec: {mode: `+mode+`, max_in_flight: 3}
    tool: {kind: rec, key: 'i{{ iter.i }}', sleep_ms: 60000}
`), engine.StartOptions{})
			if err != nil {
				t.Fatal(err)
			}
			running := 1
			if mode == "parallel" {
				running = 3
				b.waitForCall(t, ctx, "i1")
				b.waitForCall(t, ctx, "i2")
			}
			b.waitForCall(t, ctx, "i0")
			if err := b.eng.Cancel(ctx, id); err != nil {
				t.Fatal(err)
			}
			sum, err := b.eng.Wait(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Status != engine.StatusCancelled || sum.Steps["start"] != engine.StatusCancelled {
				t.Fatalf("summary %+v, want the execution and its step cancelled", sum)
			}
			st, err := engine.Inspect(ctx, b.log, id)
			if err != nil {
				t.Fatal(err)
			}
			l := st.Loops["start#1"]
			if l.Failed != 0 || l.Cancelled != running || l.Done != 0 || l.Items != 10 || !l.Finished {
				t.Fatalf("loop status %+v: want 0 failed, 0 done, %d cancelled of 10", l, running)
			}
			// The dashboard's badge reads it: it said completed.
			if l.Status != engine.StatusCancelled {
				t.Fatalf("loop status %q, want cancelled", l.Status)
			}
		})
	}
}

// TestCancelledParentLoopHasNothingInFlight: a parallel loop whose items
// wait for sub-playbooks is cancelled while two children run. The
// children are cancelled, but the parent's loop status said "in flight
// 2" for good (the items it had parked on the children never ended on
// record) and counted them neither done nor cancelled. The items the
// cancel stopped count as cancelled, and nothing is in flight.
func TestCancelledParentLoopHasNothingInFlight(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeChild(t, dir, `
workload: {n: 0}
workflow:
  - step: start
    tool: {kind: rec, key: 'child-{{ n }}', sleep_ms: 60000}
`)
	log := eventlog.NewMemory()
	e, rec := subEngine(t, log, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id, err := e.Start(ctx, []byte(header+`
workflow:
  - step: start
    loop:
      in: [0, 1, 2]
      iterator: i
      spec: {mode: parallel, max_in_flight: 2}
    tool: {kind: playbook, path: child.yaml, workload: {n: '{{ iter.i }}'}}
`), engine.StartOptions{File: filepath.Join(dir, "parent.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	for rec.count("child-0") == 0 || rec.count("child-1") == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the children never ran")
		case <-time.After(time.Millisecond):
		}
	}
	if err := e.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	if sum, err := e.Wait(ctx, id); err != nil || sum.Status != engine.StatusCancelled {
		t.Fatalf("Wait = %+v, %v; want cancelled", sum, err)
	}
	st, err := engine.Inspect(ctx, log, id)
	if err != nil {
		t.Fatal(err)
	}
	l := st.Loops["start#1"]
	if l.InFlight != 0 || l.Cancelled != 2 || l.Done != 0 || l.Failed != 0 || !l.Finished {
		t.Fatalf("loop status %+v: want nothing in flight, 2 cancelled, none done or failed", l)
	}
	for _, child := range []string{id + "/start#1/i0", id + "/start#1/i1"} {
		if sum, err := e.Wait(ctx, child); err != nil || sum.Status != engine.StatusCancelled {
			t.Fatalf("child %s: %+v, %v; want cancelled", child, sum, err)
		}
	}
}

// TestCancelledFanoutShardsAreNotFailed: a fan-out loop of three shards
// is cancelled while they run; the status counted the shards the cancel
// stopped as failed.
func TestCancelledFanoutShardsAreNotFailed(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id, err := b.eng.Start(ctx, []byte(header+`
workflow:
  - step: start
    loop:
      in: [a, b, c, d, e, f]
      iterator: batch
      spec: {loop_mode: fanout, shards: 3}
    tool: {kind: rec, key: 'shard{{ shard.index }}', sleep_ms: 60000}
`), engine.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"shard0", "shard1", "shard2"} {
		b.waitForCall(t, ctx, key)
	}
	if err := b.eng.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	if sum, err := b.eng.Wait(ctx, id); err != nil || sum.Status != engine.StatusCancelled {
		t.Fatalf("Wait = %+v, %v; want cancelled", sum, err)
	}
	st, err := engine.Inspect(ctx, b.log, id)
	if err != nil {
		t.Fatal(err)
	}
	l := st.Loops["start#1"]
	if l.Failed != 0 || l.Cancelled != 3 || l.Done != 0 || l.OK != 0 || l.InFlight != 0 {
		t.Fatalf("loop status %+v: want the 3 shards cancelled, none failed or done", l)
	}
}
