package engine_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/engine"
)

// TestCtxAndWorkloadAreOneStore: as in NoETL, whose render context's ctx,
// workload and top-level names are all its one variable store, a key a
// step sets with `set: ctx.page` is read as page, ctx.page and
// workload.page, by the step's own arcs and by later steps, and
// ctx.<workload key> reads the workload. A step's result keeps its name.
func TestCtxAndWorkloadAreOneStore(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workload:
  page: 1
  api_url: http://api.example
  items: [a, b]
workflow:
  - step: start
    tool: {kind: rec, key: start, next_page: 2}
    set:
      ctx.page: '{{ output.data.next_page }}'
      ctx.items: [x, y, z]
      ctx.start: shadowed
      total: 10
    next:
      spec: {mode: exclusive}
      arcs:
        - step: second
          when: '{{ page == 2 and workload.page == 2 }}'
        - step: wrong
  - step: second
    tool:
      kind: rec
      key: second
      bare: '{{ page }}'
      via_ctx: '{{ ctx.page }}'
      via_workload: '{{ workload.page }}'
      bare_total: '{{ total }}'
      ctx_url: '{{ ctx.api_url }}'
      start_key: '{{ start.key }}'
    next: [each]
  - step: each
    loop:
      in: '{{ items }}'
      iterator: item
    tool: {kind: rec, key: 'each-{{ iter.item }}'}
  - step: wrong
    tool: {kind: rec, key: wrong}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	if b.rec.count("wrong") != 0 {
		t.Fatal("the arc read page and workload.page as the workload's 1, not the 2 the step set")
	}
	got := data(t, sum, "second")
	want := map[string]any{
		"bare": int64(2), "via_ctx": int64(2), "via_workload": int64(2), "bare_total": int64(10),
		"ctx_url": "http://api.example", "start_key": "start",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("second.%s = %#v, want %#v", k, got[k], w)
		}
	}
	for _, k := range []string{"each-x", "each-y", "each-z"} {
		if b.rec.count(k) != 1 {
			t.Errorf("%s ran %d times, want 1 (the loop's in reads the items set: put in ctx)", k, b.rec.count(k))
		}
	}
	if b.rec.count("each-a") != 0 {
		t.Error("the loop iterated the workload's items, not the ones set: put in ctx")
	}
}
