package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools/playbook"
)

// TestFinishedExecutionsLeaveNothingBehind: a long-lived engine runs many
// executions of every shape (steps, parallel item loops, failing steps,
// cancelled ones, sub-playbooks, a parent cancelled while its children
// run); once they ended, the engine holds nothing per execution beyond
// its bounded cache of finished summaries, and its goroutines are back
// to what they were before the first. A child whose parent was cancelled
// before the child's calling command parked used to run on with nobody to
// report to: here it sleeps a minute on one of the four workers, so a few
// such orphans starve every later execution and its Wait times out.
func TestFinishedExecutionsLeaveNothingBehind(t *testing.T) {
	dir := t.TempDir()
	writeChild(t, dir, `
workload: {n: 0, sleep: 0}
workflow:
  - step: start
    tool: {kind: rec, key: 'child-{{ n }}', sleep_ms: '{{ sleep }}'}
`)
	const maxFinished = 20
	b := setupWith(t, engine.Config{Log: eventlog.NewMemory(), Workers: 4, MaxFinished: maxFinished})
	b.reg.MustRegister("playbook", playbook.New(b.eng))
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	shapes := []struct {
		name, src string
		cancel    bool
	}{
		{"steps", `
workflow:
  - step: start
    tool: {kind: rec, key: a}
    next: [b]
  - step: b
    tool: {kind: rec, key: b}
`, false},
		{"items", `
workflow:
  - step: start
    loop:
      in: '{{ [1, 2, 3, 4, 5] }}'
      iterator: i
      spec: {mode: parallel}
    tool: {kind: rec, key: 'i{{ iter.i }}'}
`, false},
		{"failing", `
workflow:
  - step: start
    tool: {kind: rec, key: f, fail: 1000000}
`, false},
		{"cancelled", `
workflow:
  - step: start
    tool: {kind: rec, key: held, sleep_ms: 60000}
`, true},
		{"sub-playbooks", `
workflow:
  - step: start
    loop:
      in: '{{ [1, 2] }}'
      iterator: i
      spec: {mode: parallel}
    tool: {kind: playbook, path: child.yaml, workload: {n: '{{ iter.i }}'}}
`, false},
		{"cancelled parent", `
workflow:
  - step: start
    loop:
      in: '{{ [1, 2] }}'
      iterator: i
      spec: {mode: parallel}
    tool: {kind: playbook, path: child.yaml, workload: {n: '{{ iter.i }}', sleep: 60000}}
`, true},
	}
	run := func(rounds int) {
		t.Helper()
		var g errgroup.Group
		g.SetLimit(4)
		for r := range rounds {
			for _, s := range shapes {
				g.Go(func() error {
					id, err := b.eng.Start(ctx, []byte(header+s.src), engine.StartOptions{File: filepath.Join(dir, "parent.yaml")})
					if err != nil {
						return fmt.Errorf("%s %d: %w", s.name, r, err)
					}
					if s.cancel {
						if err := b.eng.Cancel(ctx, id); err != nil {
							return fmt.Errorf("%s %d: cancel: %w", s.name, r, err)
						}
					}
					if _, err := b.eng.Wait(ctx, id); err != nil {
						evs, _ := b.log.Read(context.Background(), id, 0, 0)
						for _, ev := range evs {
							t.Logf("%s %d %s %s %s %s", id, ev.Seq, ev.Type, ev.Step, ev.CommandID, ev.Payload)
						}
						return fmt.Errorf("%s %d: wait: %w", s.name, r, err)
					}
					return nil
				})
			}
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	run(2) // warm up: pools, timers and caches that are made once
	base := runtime.NumGoroutine()
	run(25)
	// The children of cancelled parents end once their cancel reached
	// them, after their parents; their commands' goroutines finish shortly
	// after their reports. Wait for both, up to a deadline.
	deadline := time.Now().Add(15 * time.Second)
	for {
		unfinished, err := b.log.Executions(ctx, eventlog.ExecutionsQuery{Unfinished: true})
		if err != nil {
			t.Fatal(err)
		}
		g := runtime.NumGoroutine()
		if len(unfinished) == 0 && g <= base+4 {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d executions still running (%v) and %d goroutines after %d more executions, %d before:\n%s",
				len(unfinished), unfinished, g, 25*len(shapes), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := b.eng.Close(); err != nil {
		t.Fatal(err)
	}
	for name, n := range engine.Retained(b.eng) {
		// ended is emptied at the orchestrator's next step: what the last
		// one left there is all it may hold.
		if limit := map[string]int{"finished": maxFinished, "ended": len(shapes)}[name]; n > limit {
			t.Errorf("%s holds %d entries once every execution ended, want at most %d", name, n, limit)
		}
	}
}
