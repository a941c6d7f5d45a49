package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/sqlite"
	"github.com/cursorflow/cursorflow/tools"
)

// nothing is a tool that does nothing and succeeds.
var nothing = tools.ToolFunc(func(context.Context, *tools.Call) (tools.Output, error) {
	return tools.Output{Status: tools.StatusSuccess}, nil
})

// runToCompletion starts src on e and waits for it, failing b unless it
// completes.
func runToCompletion(b *testing.B, e *engine.Engine, src []byte, opts engine.StartOptions) {
	ctx := context.Background()
	id, err := e.Start(ctx, src, opts)
	if err != nil {
		b.Fatal(err)
	}
	if sum, err := e.Wait(ctx, id); err != nil || sum.Status != engine.StatusCompleted {
		b.Fatalf("%v %+v", err, sum)
	}
}

// BenchmarkStepOverhead measures what the engine adds per step: a chain of
// steps whose tool does nothing, so the time is folding, deciding,
// appending (three events per step), dispatching and rendering.
func BenchmarkStepOverhead(b *testing.B) {
	const steps = 50
	var sb strings.Builder
	sb.WriteString(header + "workflow:\n")
	for i := 0; i < steps; i++ {
		name := fmt.Sprintf("s%d", i)
		if i == 0 {
			name = "start"
		}
		fmt.Fprintf(&sb, "  - step: %s\n    tool: {kind: nothing, i: '{{ execution_id }}-%d'}\n", name, i)
		if i < steps-1 {
			fmt.Fprintf(&sb, "    next: [s%d]\n", i+1)
		}
	}
	src := []byte(sb.String())
	for _, backend := range []string{"memory", "sqlite"} {
		b.Run(backend, func(b *testing.B) {
			var log eventlog.Log = eventlog.NewMemory()
			if backend == "sqlite" {
				l, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "events.db"), sqlite.Config{})
				if err != nil {
					b.Fatal(err)
				}
				log = l
			}
			defer log.Close()
			reg := tools.NewRegistry()
			reg.MustRegister("nothing", nothing)
			e, err := engine.New(engine.Config{Log: log, Tools: reg})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				runToCompletion(b, e, src, engine.StartOptions{})
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*steps), "µs/step")
		})
	}
}

// BenchmarkFinishAmongParked measures a short execution's start-to-end
// while many others stay running, parked on a retry an hour away (as
// executions waiting on a sub-playbook or a backoff are): ending an
// execution must not cost in proportion to the executions driven beside
// it.
func BenchmarkFinishAmongParked(b *testing.B) {
	quick := []byte(header + "workflow:\n  - step: start\n    tool: {kind: nothing}\n")
	parked := []byte(header + `workflow:
  - step: start
    tool:
      kind: failing
      spec:
        policy:
          rules:
            - when: "{{ output.status == 'error' }}"
              then: {do: retry, attempts: 2, delay: 3600}
`)
	for _, n := range []int{0, 5000, 20000} {
		b.Run(fmt.Sprintf("parked=%d", n), func(b *testing.B) {
			log := eventlog.NewMemory()
			defer log.Close()
			var first sync.WaitGroup
			first.Add(n)
			reg := tools.NewRegistry()
			reg.MustRegister("nothing", nothing)
			reg.MustRegister("failing", tools.ToolFunc(func(_ context.Context, c *tools.Call) (tools.Output, error) {
				if c.Attempt == 1 {
					first.Done()
				}
				return tools.Output{Status: tools.StatusError, Error: "not yet"}, nil
			}))
			e, err := engine.New(engine.Config{Log: log, Tools: reg})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			ctx := context.Background()
			for range n {
				if _, err := e.Start(ctx, parked, engine.StartOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			first.Wait()
			for b.Loop() { // the timer starts here
				runToCompletion(b, e, quick, engine.StartOptions{})
			}
		})
	}
}

// BenchmarkSubPlaybookFanOut measures a parallel loop of sub-playbooks,
// per child: each parks its item's command and ends, and its end resumes
// the parent. What it costs must not grow with the children in flight.
func BenchmarkSubPlaybookFanOut(b *testing.B) {
	for _, n := range []int{100, 1600} {
		b.Run(fmt.Sprintf("children=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "child.yaml"), []byte(header+doublingChild), 0o644); err != nil {
				b.Fatal(err)
			}
			parent := []byte(parentOfChildren(fmt.Sprintf("{{ range(%d) | list }}", n)))
			e, _ := subEngine(b, eventlog.NewMemory(), 4)
			for b.Loop() {
				runToCompletion(b, e, parent, engine.StartOptions{File: filepath.Join(dir, "parent.yaml")})
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/child")
		})
	}
}
