package engine_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/tools"
)

// Executions started from one source share its parsed playbook
// (Config.PlaybookCache) and nothing else: started at once, each with a
// parallel loop rendering the same templates, every row sees its own
// execution's workload, whether given at Start or the playbook's own,
// and an override given to one execution reaches no other. Run with
// -race, it also finds a write to the shared playbook while it renders.
func TestExecutionsOfOneSourceShareOnlyItsParse(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string][]string{} // execution id: labels its rows rendered
	reg := tools.NewRegistry()
	reg.MustRegister("seen", tools.ToolFunc(func(_ context.Context, c *tools.Call) (tools.Output, error) {
		label, _ := c.Config["label"].(string)
		mu.Lock()
		seen[c.ExecutionID] = append(seen[c.ExecutionID], label)
		mu.Unlock()
		return tools.Output{Status: tools.StatusSuccess}, nil
	}))
	b := setupWith(t, engine.Config{Tools: reg})
	src := []byte(header + `
workload:
  cfg: {who: base}
  items: [1, 2, 3, 4]
workflow:
  - step: start
    loop: {in: '{{ workload.items }}', iterator: item, spec: {mode: parallel, max_in_flight: 4}}
    tool: {kind: seen, label: '{{ workload.cfg.who }}-{{ item }}'}
`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const executions = 8
	want := map[string]string{} // execution id: whose workload its rows read
	var wg sync.WaitGroup
	var startMu sync.Mutex
	for i := range executions {
		wg.Go(func() {
			who := "base"
			opts := engine.StartOptions{File: "shared.yaml"}
			if i%2 == 0 {
				who = fmt.Sprintf("own-%d", i)
				opts.Workload = map[string]any{"cfg": map[string]any{"who": who}}
			}
			id, err := b.eng.Start(ctx, src, opts)
			if err != nil {
				t.Error(err)
				return
			}
			startMu.Lock()
			want[id] = who
			startMu.Unlock()
			sum, err := b.eng.Wait(ctx, id)
			if err != nil || sum.Status != engine.StatusCompleted {
				t.Errorf("execution %d: %+v, %v", i, sum, err)
			}
		})
	}
	wg.Wait()
	if len(want) != executions {
		t.Fatalf("%d executions started, want %d", len(want), executions)
	}
	for id, who := range want {
		got := slices.Sorted(slices.Values(seen[id]))
		wantLabels := []string{who + "-1", who + "-2", who + "-3", who + "-4"}
		if !slices.Equal(got, wantLabels) {
			t.Errorf("execution %s rendered %q, want %q", id, got, wantLabels)
		}
	}
}
