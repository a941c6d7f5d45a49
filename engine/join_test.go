package engine_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
)

// seqOf returns the seq of the first event matching typ and step.
func seqOf(evs []eventlog.Event, typ, step string) int64 {
	for _, ev := range evs {
		if ev.Type == typ && ev.Step == step {
			return ev.Seq
		}
	}
	return -1
}

func lastSeqOf(evs []eventlog.Event, typ, step string) int64 {
	var s int64 = -1
	for _, ev := range evs {
		if ev.Type == typ && ev.Step == step {
			s = ev.Seq
		}
	}
	return s
}

// TestJoinBarrier: a step that several branches of an inclusive fan-out
// converge on runs once, after every live branch ended, with all their
// results in scope.
func TestJoinBarrier(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, workflow string
		join           string
		branches       []string
		wantCalls      map[string]int
	}{
		{
			// NoETL's fanout_reduce_phase6 shape.
			name: "fan-out, reduce",
			workflow: `
  - step: start
    tool: {kind: rec, key: start}
    next:
      spec: {mode: inclusive}
      arcs: [{step: normalize_customer}, {step: enrich_customer}]
  - step: normalize_customer
    tool: {kind: rec, key: normalize, sleep_ms: 30, normalized: true}
    next: [reduce_customer]
  - step: enrich_customer
    tool: {kind: rec, key: enrich, enriched: true}
    next: [reduce_customer]
  - step: reduce_customer
    tool: {kind: rec, key: reduce, both: '{{ normalize_customer.normalized and enrich_customer.enriched }}'}
`,
			join: "reduce_customer", branches: []string{"normalize_customer", "enrich_customer"},
			wantCalls: map[string]int{"reduce": 1},
		},
		{
			name: "a longer branch",
			workflow: `
  - step: start
    tool: {kind: rec, key: start}
    next:
      spec: {mode: inclusive}
      arcs: [{step: a1}, {step: b}]
  - step: a1
    tool: {kind: rec, key: a1, sleep_ms: 20}
    next: [a2]
  - step: a2
    tool: {kind: rec, key: a2, sleep_ms: 20}
    next: [join]
  - step: b
    tool: {kind: rec, key: b}
    next: [join]
  - step: join
    tool: {kind: rec, key: join, both: '{{ a2 is defined and b is defined }}'}
`,
			join: "join", branches: []string{"a2", "b"},
			wantCalls: map[string]int{"join": 1, "a1": 1, "a2": 1},
		},
		{
			name: "a skipped branch does not block",
			workflow: `
  - step: start
    tool: {kind: rec, key: start}
    next:
      spec: {mode: inclusive}
      arcs: [{step: a}, {step: b}]
  - step: a
    when: '{{ false }}'
    tool: {kind: rec, key: a}
    next: [join]
  - step: b
    tool: {kind: rec, key: b, sleep_ms: 20}
    next: [join]
  - step: join
    tool: {kind: rec, key: join, both: '{{ b is defined }}'}
`,
			join: "join", branches: []string{"b"},
			wantCalls: map[string]int{"join": 1, "a": 0},
		},
		{
			// NoETL's control_flow_workbook shape: the cold branch is never
			// routed to and must not hold the join.
			name: "a branch never routed to does not block",
			workflow: `
  - step: start
    tool: {kind: rec, key: start}
    next:
      - step: hot
        when: '{{ true }}'
      - step: cold
  - step: hot
    tool: {kind: rec, key: hot}
    next:
      spec: {mode: inclusive}
      arcs: [{step: hot_a}, {step: hot_b}]
  - step: hot_a
    tool: {kind: rec, key: hot_a, sleep_ms: 20}
    next: [end]
  - step: hot_b
    tool: {kind: rec, key: hot_b}
    next: [end]
  - step: cold
    tool: {kind: rec, key: cold}
    next: [cold_task]
  - step: cold_task
    tool: {kind: rec, key: cold_task}
    next: [end]
  - step: end
    tool: {kind: rec, key: end, both: '{{ hot_a is defined and hot_b is defined }}'}
`,
			join: "end", branches: []string{"hot_a", "hot_b"},
			wantCalls: map[string]int{"end": 1, "cold": 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			sum, evs := b.run(t, header+"workflow:"+tt.workflow, nil)
			defer dumpOnFail(t, evs)
			if sum.Status != engine.StatusCompleted {
				t.Fatalf("status %s: %s", sum.Status, sum.Error)
			}
			for key, n := range tt.wantCalls {
				if got := b.rec.count(key); got != n {
					t.Errorf("%s called %d times, want %d", key, got, n)
				}
			}
			if got := issued(evs, tt.join); got != 1 {
				t.Fatalf("%s issued %d times, want once", tt.join, got)
			}
			joinAt := seqOf(evs, eventlog.TypeCommandIssued, tt.join)
			for _, br := range tt.branches {
				if done := lastSeqOf(evs, eventlog.TypeCommandCompleted, br); done < 0 || done > joinAt {
					t.Errorf("%s issued at %d, before branch %s completed (at %d)", tt.join, joinAt, br, done)
				}
			}
			if d := data(t, sum, tt.join); d["both"] != true {
				t.Errorf("%s did not see every branch's result: %#v", tt.join, d)
			}
		})
	}
}

// TestLoopBackStillEnters: a step routed back to while nothing else runs
// enters at once (a pagination loop), and exclusive routing is unchanged.
func TestLoopBackStillEnters(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    tool: {kind: rec, key: start}
    set: {ctx.page: 1}
    next: [fetch]
  - step: fetch
    tool: {kind: rec, key: 'fetch-{{ ctx.page }}'}
    set: {ctx.page: '{{ ctx.page + 1 }}'}
    next:
      - step: fetch
        when: '{{ ctx.page <= 3 }}'
      - step: done
  - step: done
    tool: {kind: rec, key: done}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted || b.rec.count("fetch-3") != 1 || b.rec.count("done") != 1 {
		t.Fatalf("status %s, calls fetch-3=%d done=%d", sum.Status, b.rec.count("fetch-3"), b.rec.count("done"))
	}
}
