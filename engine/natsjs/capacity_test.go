package natsjs_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/engine/natsjs"
)

// waitWorkers polls the lister until ok accepts its workers, or fails
// the test after 20 seconds.
func waitWorkers(t *testing.T, l engine.WorkerLister, what string, ok func([]engine.WorkerInfo) bool) []engine.WorkerInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		ws, err := l.Workers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ok(ws) {
			return ws
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: workers are %+v", what, ws)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func byID(ws []engine.WorkerInfo) map[string]engine.WorkerInfo {
	m := map[string]engine.WorkerInfo{}
	for _, w := range ws {
		m[w.ID] = w
	}
	return m
}

// TestCapacityRegistry: workers report pool, labels and free slots; a
// registry (any process may run one) lists them, drops one that stops at
// once and one whose reports stop after it missed three.
func TestCapacityRegistry(t *testing.T) {
	b := setup(t, time.Minute, 5*time.Second)
	reg, err := natsjs.NewRegistry(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	_, stopEU := b.startWorker(t, "eu-1", natsjs.WorkerOptions{Concurrency: 3, Labels: map[string]string{"zone": "eu"}, CapacityEvery: 50 * time.Millisecond})
	_, stopPlain := b.startWorker(t, "plain-1", natsjs.WorkerOptions{Pool: "batch", Concurrency: 2, CapacityEvery: 50 * time.Millisecond})
	ws := waitWorkers(t, reg, "both workers listed", func(ws []engine.WorkerInfo) bool { return len(ws) == 2 })
	m := byID(ws)
	eu, plain := m["eu-1"], m["plain-1"]
	if eu.Pool != natsjs.DefaultPool || !reflect.DeepEqual(eu.Labels, map[string]string{"zone": "eu"}) || eu.Slots != 3 || eu.Free != 3 || eu.Running != 0 || eu.Host == "" || eu.StartedAt.IsZero() {
		t.Fatalf("eu-1 = %+v", eu)
	}
	if plain.Pool != "batch" || len(plain.Labels) != 0 || plain.Slots != 2 || plain.Free != 2 {
		t.Fatalf("plain-1 = %+v", plain)
	}
	if ws[0].Pool > ws[1].Pool {
		t.Fatalf("not sorted by pool: %+v", ws)
	}
	// The leader's dispatcher knows them too.
	waitWorkers(t, b.disp, "the dispatcher lists both", func(ws []engine.WorkerInfo) bool { return len(ws) == 2 })

	stopPlain()
	waitWorkers(t, reg, "a stopped worker is dropped", func(ws []engine.WorkerInfo) bool { return len(ws) == 1 && ws[0].ID == "eu-1" })

	// A worker that dies says nothing: it goes after three missed reports.
	// A registry that starts late asks the workers for a report at once.
	late, err := natsjs.NewRegistry(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = late.Close() })
	waitWorkers(t, late, "a late registry learns eu-1", func(ws []engine.WorkerInfo) bool { return len(ws) == 1 })
	if err := b.cfg.Conn.Publish(b.cfg.Prefix+".workers", []byte(`{"id":"ghost","pool":"default","slots":1,"free":1,"every_ms":20}`)); err != nil {
		t.Fatal(err)
	}
	waitWorkers(t, reg, "a worker that reported once is listed", func(ws []engine.WorkerInfo) bool { return byID(ws)["ghost"].ID == "ghost" })
	waitWorkers(t, reg, "a worker whose reports stopped is dropped", func(ws []engine.WorkerInfo) bool { return len(ws) == 1 && ws[0].ID == "eu-1" })
	stopEU()
}

// TestLabelTargeting: a step with spec.worker_labels runs on the live
// worker of its pool that has them; with no such worker alive (none has
// them, or it stopped) it runs on the pool.
func TestLabelTargeting(t *testing.T) {
	b := setup(t, time.Minute, 5*time.Second)
	every := 50 * time.Millisecond
	_, stopEU := b.startWorker(t, "eu-1", natsjs.WorkerOptions{Concurrency: 2, Labels: map[string]string{"zone": "eu", "gpu": "a100"}, CapacityEvery: every})
	b.startWorker(t, "us-1", natsjs.WorkerOptions{Concurrency: 2, Labels: map[string]string{"zone": "us"}, CapacityEvery: every})
	b.startWorker(t, "plain-1", natsjs.WorkerOptions{Concurrency: 2, CapacityEvery: every})
	waitWorkers(t, b.disp, "three workers", func(ws []engine.WorkerInfo) bool { return len(ws) == 3 })

	flow := func(prefix, labels string) string {
		return fmt.Sprintf(`
workflow:
  - step: start
    spec: {worker_labels: %s}
    loop:
      in: '{{ range(12) | list }}'
      iterator: i
      spec: {mode: parallel}
    tool: {kind: rec, key: '%s{{ iter.i }}'}
`, labels, prefix)
	}
	sum, evs := b.run(t, flow("eu", "{zone: eu}"))
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("eu run: %s %s", sum.Status, sum.Error)
	}
	for i := range 12 {
		if got := b.calls.worker(fmt.Sprint("eu", i)); got != "eu-1" {
			t.Fatalf("item %d ran on %q, want eu-1", i, got)
		}
	}
	for _, ev := range evs {
		if ev.Type == "command.completed" && ev.WorkerID != "eu-1" {
			t.Fatalf("command %s reported by %s", ev.CommandID, ev.WorkerID)
		}
	}
	if n := b.disp.Stats().Targeted.Load(); n < 12 {
		t.Fatalf("targeted %d commands, want 12", n)
	}

	// Nobody has zone: mars: the commands go to the pool, and run.
	if sum, _ := b.run(t, flow("mars", "{zone: mars}")); sum.Status != engine.StatusCompleted {
		t.Fatalf("mars run: %s %s", sum.Status, sum.Error)
	}
	if n := b.disp.Stats().Untargeted.Load(); n < 12 {
		t.Fatalf("untargeted %d, want the 12 mars items", n)
	}

	// eu-1 stops: eu commands fall back to the pool.
	stopEU()
	waitWorkers(t, b.disp, "eu-1 gone", func(ws []engine.WorkerInfo) bool { return byID(ws)["eu-1"].ID == "" })
	if sum, _ := b.run(t, flow("late", "{zone: eu}")); sum.Status != engine.StatusCompleted {
		t.Fatalf("run after eu-1 stopped: %s %s", sum.Status, sum.Error)
	}
	for i := range 12 {
		if got := b.calls.worker(fmt.Sprint("late", i)); got == "eu-1" || got == "" {
			t.Fatalf("item %d ran on %q after eu-1 stopped", i, got)
		}
	}
}
