package engine_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/engine"
)

// TestLoopVariables: an item reads NoETL's loop variables (commands.py
// _create_command_for_step): loop_index, iter._index, iter._first and
// iter._last, and loop.index, loop.first, loop.length and loop.done, all
// 0-based, in its tool, in a pipeline's tasks and in a task's set:.
func TestLoopVariables(t *testing.T) {
	t.Parallel()
	for _, form := range []string{
		"spec: {mode: sequential}",
		"spec: {mode: parallel, max_in_flight: 2}",
		"mode: chunked, chunk_size: 2",
	} {
		t.Run(form, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			sum, evs := b.run(t, header+`
workload: {letters: [a, b, c]}
workflow:
  - step: start
    loop: {in: '{{ workload.letters }}', iterator: l, `+form+`}
    tool:
      - first:
          kind: rec
          key: 'first-{{ l }}'
          vars: '{{ loop_index }} {{ iter._index }} {{ iter._first }} {{ iter._last }} {{ loop.index }} {{ loop.first }} {{ loop.length }} {{ loop.done }}'
          set:
            iter.pos: '{{ loop.index + 1 }}/{{ loop.length }}'
      - second:
          kind: rec
          key: 'second-{{ l }}'
          pos: '{{ iter.pos }}'
          vars: '{{ loop_index }} {{ iter._index }} {{ iter._first }} {{ iter._last }} {{ loop.index }} {{ loop.first }} {{ loop.length }} {{ loop.done }}'
`, nil)
			defer dumpOnFail(t, evs)
			if sum.Status != engine.StatusCompleted {
				t.Fatalf("status %s: %s", sum.Status, sum.Error)
			}
			want := []struct{ vars, pos string }{
				{"0 0 True False 0 True 3 False", "1/3"},
				{"1 1 False False 1 False 3 False", "2/3"},
				{"2 2 False True 2 False 3 False", "3/3"},
			}
			list := sum.Results["start"].(map[string]any)["data"].([]any)
			if len(list) != len(want) {
				t.Fatalf("%d items, want %d", len(list), len(want))
			}
			for i, w := range want {
				d := list[i].(map[string]any)
				if d["vars"] != w.vars || d["pos"] != w.pos {
					t.Errorf("item %d: vars %q pos %v, want %q %s", i, d["vars"], d["pos"], w.vars, w.pos)
				}
			}
		})
	}
}
