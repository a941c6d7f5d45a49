package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/sqlite"
	"github.com/cursorflow/cursorflow/tools"
)

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
			reg.MustRegister("nothing", tools.ToolFunc(func(context.Context, *tools.Call) (tools.Output, error) {
				return tools.Output{Status: tools.StatusSuccess}, nil
			}))
			e, err := engine.New(engine.Config{Log: log, Tools: reg})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				id, err := e.Start(ctx, src, engine.StartOptions{})
				if err != nil {
					b.Fatal(err)
				}
				sum, err := e.Wait(ctx, id)
				if err != nil || sum.Status != engine.StatusCompleted {
					b.Fatalf("%v %+v", err, sum)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*steps), "µs/step")
		})
	}
}
