package natsjs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/tools"
)

// TestPartialsRecordedBeforeTheirCommandEnds: a command's reports travel
// the events stream in order, and the orchestrator side, which records
// reports concurrently, records one command's in that order. A command
// that hands on partial results and then completes has every partial on
// record (the engine refuses a partial after its command's end), for
// many commands at once.
func TestPartialsRecordedBeforeTheirCommandEnds(t *testing.T) {
	t.Parallel()
	const items, parts = 12, 10
	// Partials far larger than the final report take longer to decode,
	// which gives a final report recorded out of order its chance to
	// overtake them.
	blob := strings.Repeat("x", 12<<10)
	b := setup(t, 5*time.Second, 5*time.Second)
	b.tools = func(r *tools.Registry) {
		r.MustRegister("parts", tools.ToolFunc(func(_ context.Context, call *tools.Call) (tools.Output, error) {
			for i := range parts {
				call.EmitPartial(map[string]any{"part": i, "blob": blob})
			}
			return tools.Output{Status: tools.StatusSuccess}, nil
		}))
	}
	b.worker(t, "w1", "", time.Second)
	b.worker(t, "w2", "", time.Second)
	for round := range 3 {
		_, evs := b.run(t, fmt.Sprintf(`
workflow:
  - step: start
    loop:
      in: "{{ range(%d) | list }}"
      iterator: i
      spec: {mode: parallel, max_in_flight: %d}
    tool: {kind: parts}
`, items, items))
		byCommand := map[string]int{}
		for _, ev := range evs {
			switch ev.Type {
			case eventlog.TypeCallPartial:
				byCommand[ev.CommandID]++
			case eventlog.TypeCommandCompleted:
				if n := byCommand[ev.CommandID]; n != parts {
					t.Fatalf("round %d: %s completed after %d of its %d partials were recorded", round, ev.CommandID, n, parts)
				}
			}
		}
		if len(byCommand) != items {
			t.Fatalf("round %d: partials of %d commands recorded, want %d", round, len(byCommand), items)
		}
	}
}
