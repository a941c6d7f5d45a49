package engine_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/engine"
)

// TestLoopVariablesAfterTheLoop: NoETL keeps the last item it issued under
// the iterator's name, and its index as loop_index, in its variables
// (commands.py), so a step after the loop reads them, at top level and
// under ctx.
func TestLoopVariablesAfterTheLoop(t *testing.T) {
	t.Parallel()
	for _, form := range []string{"spec: {mode: sequential}", "spec: {mode: parallel, max_in_flight: 2}", "mode: chunked, chunk_size: 2"} {
		t.Run(form, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			sum, evs := b.run(t, header+`
workload: {letters: [a, b, c]}
workflow:
  - step: start
    loop: {in: '{{ workload.letters }}', iterator: l, `+form+`}
    tool: {kind: rec, key: 'item-{{ l }}'}
    next: [after]
  - step: after
    tool: {kind: rec, key: after, last: '{{ l }}', via_ctx: '{{ ctx.l }}', index: '{{ loop_index }}', ctx_index: '{{ ctx.loop_index }}'}
`, nil)
			defer dumpOnFail(t, evs)
			if sum.Status != engine.StatusCompleted {
				t.Fatalf("status %s: %s", sum.Status, sum.Error)
			}
			d := data(t, sum, "after")
			if d["last"] != "c" || d["via_ctx"] != "c" || d["index"] != int64(2) || d["ctx_index"] != int64(2) {
				t.Fatalf("after the loop read %v; want the last item c at index 2", d)
			}
		})
	}
}
