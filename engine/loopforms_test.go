package engine_test

import (
	"fmt"
	"testing"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
)

// maxInFlight replays the log: the most commands of step issued and not
// yet reported at any point.
func maxInFlight(evs []eventlog.Event, step string) int {
	n, top := 0, 0
	for _, ev := range evs {
		if ev.Step != step {
			continue
		}
		switch ev.Type {
		case eventlog.TypeCommandIssued:
			n++
		case eventlog.TypeCommandCompleted, eventlog.TypeCommandFailed:
			n--
		}
		top = max(top, n)
	}
	return top
}

// TestLoopForms: the design's loop form (collection/element, mode async,
// chunked, concurrency), NoETL's loop.concurrency, and templated bounds.
func TestLoopForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, loop   string
		wantCommands int
		wantMax      int
	}{
		{"async with concurrency", "{collection: '{{ workload.items }}', element: it, mode: async, concurrency: 2}", 7, 2},
		{"async unbounded", "{collection: '{{ workload.items }}', element: it, mode: async}", 7, 7},
		{"NoETL spec.concurrency, templated", "{in: '{{ workload.items }}', iterator: it, spec: {mode: parallel, concurrency: '{{ workload.workers }}'}}", 7, 3},
		{"chunked", "{collection: '{{ workload.items }}', element: it, mode: chunked, chunk_size: 3, concurrency: 1}", 3, 1},
		{"chunked, templated size", "{collection: '{{ workload.items }}', element: it, mode: chunked, chunk_size: '{{ workload.workers - 1 }}'}", 4, 4},
		{"sequential", "{collection: '{{ workload.items }}', element: it}", 7, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			sum, evs := b.run(t, header+`
workload: {items: [1, 2, 3, 4, 5, 6, 7], workers: 3}
workflow:
  - step: start
    loop: `+tt.loop+`
    tool: {kind: rec, key: 'item-{{ it }}', sleep_ms: 10, square: '{{ it * it }}'}
`, nil)
			defer dumpOnFail(t, evs)
			if sum.Status != engine.StatusCompleted {
				t.Fatalf("status %s: %s", sum.Status, sum.Error)
			}
			if got := issued(evs, "start"); got != tt.wantCommands {
				t.Errorf("%d commands, want %d", got, tt.wantCommands)
			}
			if got := maxInFlight(evs, "start"); got > tt.wantMax || (tt.wantMax == 1 && got != 1) {
				t.Errorf("%d commands in flight at once, bound %d", got, tt.wantMax)
			}
			list := sum.Results["start"].(map[string]any)["data"].([]any)
			if len(list) != 7 {
				t.Fatalf("result has %d items, want 7", len(list))
			}
			for i, it := range list {
				if it.(map[string]any)["square"] != int64((i+1)*(i+1)) {
					t.Fatalf("item %d = %v: results out of order", i, it)
				}
			}
			for i := 1; i <= 7; i++ {
				if b.rec.count(fmt.Sprintf("item-%d", i)) != 1 {
					t.Errorf("item %d ran %d times", i, b.rec.count(fmt.Sprintf("item-%d", i)))
				}
			}
		})
	}
}

// TestTemplatedBoundErrorNamesStepAndField: a templated number that
// renders to something else fails the execution naming step and field.
func TestTemplatedBoundErrorNamesStepAndField(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workload: {items: [1, 2], workers: many}
workflow:
  - step: start
    loop: {collection: '{{ workload.items }}', element: it, mode: async, concurrency: '{{ workload.workers }}'}
    tool: {kind: rec, key: x}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusFailed || sum.Step != "start" || sum.Field != "loop.spec.max_in_flight" {
		t.Fatalf("summary %+v, want failed at start, loop.spec.max_in_flight", sum)
	}
}

// TestToolNamedByString: `tool: http`-style steps carry the tool's fields
// on the step itself.
func TestToolNamedByString(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    tool: rec
    key: by-name
    value: '{{ 20 + 22 }}'
    next: [after]
  - step: after
    tool: {kind: rec, key: after, saw: '{{ start.value }}'}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted || b.rec.count("by-name") != 1 || data(t, sum, "after")["saw"] != int64(42) {
		t.Fatalf("summary %+v, after=%v", sum, sum.Results["after"])
	}
}

// TestLoopOverOneThing: a loop over a mapping (a step's single object) or
// a string runs once with it as the item, as NoETL wraps them; blank text
// and null run nothing.
func TestLoopOverOneThing(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for name, want := range map[string]int{"one": 1, "text": 1, "blank": 0, "none": 0} {
		coll, key := "{{ workload."+name+" }}", "item-"+name
		sum, evs := b.run(t, header+`
workload: {one: {a: 1, b: 2}, text: hello, blank: "  ", none: null}
workflow:
  - step: start
    loop: {in: '`+coll+`', iterator: it}
    tool: {kind: rec, key: '`+key+`-{{ it.a | default(it) }}'}
`, nil)
		defer dumpOnFail(t, evs)
		if sum.Status != engine.StatusCompleted {
			t.Fatalf("%s: %+v", coll, sum)
		}
		got := 0
		for _, k := range []string{key + "-1", key + "-hello"} {
			got += b.rec.count(k)
		}
		if got != want {
			t.Errorf("%s: %d items ran with the whole value, want %d", coll, got, want)
		}
	}
}
