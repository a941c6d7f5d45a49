package engine_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
)

// TestStepStatusInTemplates: as in NoETL, whose step results carry the
// tool's status (and error) next to the data, a later step, a step's own
// arcs and set: read {{ STEP.status }} after any tool, not only http, and
// the routing that depends on it takes the right arc.
func TestStepStatusInTemplates(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    tool: {kind: rec, key: a, v: 1}
    set:
      ctx.own: '{{ start.status }}'
    next:
      - step: ok
        when: '{{ start.status == "success" }}'
      - step: wrong
  - step: ok
    tool:
      kind: rec
      key: ok
      status_seen: '{{ start.status }}'
      error_seen: '{{ start.error }}'
      own: '{{ own }}'
      v: '{{ start.v }}'
  - step: wrong
    tool: {kind: rec, key: wrong}
`, nil)
	defer dumpOnFail(t, evs)
	if b.rec.count("wrong") != 0 || b.rec.count("ok") != 1 {
		t.Fatalf("routed to ok %d times, wrong %d times; want ok once", b.rec.count("ok"), b.rec.count("wrong"))
	}
	d := data(t, sum, "ok")
	if d["status_seen"] != "success" || d["error_seen"] != nil || d["own"] != "success" || d["v"] != int64(1) {
		t.Fatalf("ok saw %v", d)
	}
}

// TestStepErrorInTemplates: a failed loop that on_error: continue routes
// past keeps its aggregate (as NoETL's loop.done), and later steps read
// its status and error from it.
func TestStepErrorInTemplates(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    loop:
      in: [1, 2]
      iterator: x
    tool: {kind: rec, key: 'i{{ iter.x }}', fail: '{{ 1 if iter.x == 2 else 0 }}'}
    spec: {on_error: continue}
    next: [after]
  - step: after
    tool: {kind: rec, key: z, st: '{{ start.status }}', err: '{{ start.error }}'}
`, nil)
	defer dumpOnFail(t, evs)
	d := data(t, sum, "after")
	if d["st"] != "error" || d["err"] != "item 1: planned failure 1" {
		t.Fatalf("after saw status %v, error %v", d["st"], d["err"])
	}
}

// TestCtxHoldsStepResults: NoETL writes a step's result into its
// variables (mark_step_completed), so ctx.<step> and workload.<step> read
// it as <step> does, in the step's own arcs and in later steps; a ctx
// value set: gave that name keeps precedence.
func TestCtxHoldsStepResults(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    tool: {kind: rec, key: a, v: 7}
    next:
      - step: later
        when: '{{ ctx.start.v == 7 }}'
  - step: later
    tool: {kind: rec, key: b, w: 3}
    set:
      ctx.later: overridden
    next: [last]
  - step: last
    tool:
      kind: rec
      key: c
      from_ctx: '{{ ctx.start.v }}'
      from_workload: '{{ workload.start.v }}'
      set_wins: '{{ ctx.later }}'
`, nil)
	defer dumpOnFail(t, evs)
	d := data(t, sum, "last")
	if d["from_ctx"] != int64(7) || d["from_workload"] != int64(7) || d["set_wins"] != "overridden" {
		t.Fatalf("last saw %v", d)
	}
}

// TestCollectionLoopAggregate: a collection loop reads as NoETL's
// aggregate (state.get_loop_aggregation): results, the items' results in
// order, and stats {total, success, failed}, in the loop's arcs and in
// later steps.
func TestCollectionLoopAggregate(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    loop:
      in: [1, 2, 3]
      iterator: x
      spec: {mode: parallel, max_in_flight: 2}
    tool: {kind: rec, key: 'i{{ iter.x }}', n: '{{ iter.x }}'}
    next:
      - step: after
        when: '{{ event.name == "loop.done" and start.stats.success == 3 }}'
  - step: after
    tool:
      kind: rec
      key: z
      total: '{{ start.stats.total }}'
      failed: '{{ start.stats.failed }}'
      count: '{{ start.results | length }}'
      ns: '{{ start.results | map(attribute="n") | list }}'
`, nil)
	defer dumpOnFail(t, evs)
	d := data(t, sum, "after")
	want := map[string]any{"total": int64(3), "failed": int64(0), "count": int64(3), "ns": []any{int64(1), int64(2), int64(3)}}
	for k, w := range want {
		if !reflect.DeepEqual(d[k], w) {
			t.Errorf("%s = %#v, want %#v", k, d[k], w)
		}
	}
}

// TestStepViewUnderEarlierSemantics: a history recorded before semantics
// level 5 keeps its rules when it is resumed: its collection loop reads
// as the list of its items' data (no stats), so its arcs route as they
// did when it was recorded.
func TestStepViewUnderEarlierSemantics(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, h := b.run(t, header+`
workflow:
  - step: start
    loop:
      in: [1, 2]
      iterator: x
    tool: {kind: rec, key: 'i{{ iter.x }}'}
    next:
      spec: {mode: exclusive}
      arcs:
        - step: aggregate
          when: '{{ start.stats.total == 2 and start.status == "success" }}'
        - step: list
          when: '{{ start | length == 2 and start[0].key == "i1" }}'
  - step: aggregate
    tool: {kind: rec, key: aggregate}
  - step: list
    tool: {kind: rec, key: list}
`, nil)
	defer dumpOnFail(t, h)
	if sum.Status != engine.StatusCompleted || b.rec.count("aggregate") != 1 {
		t.Fatalf("status %s (%s), aggregate ran %d times: want the aggregate arc now", sum.Status, sum.Error, b.rec.count("aggregate"))
	}
	var started map[string]any
	if err := json.Unmarshal(h[0].Payload, &started); err != nil {
		t.Fatal(err)
	}
	started["semantics"] = 4
	h[0].Payload, _ = json.Marshal(started)
	k := slices.IndexFunc(h, func(ev eventlog.Event) bool { return ev.Type == eventlog.TypeLoopDone })
	s, err := engine.Fold(h[0].ExecutionID, h[:k])
	if err != nil {
		t.Fatal(err)
	}
	evs := s.Decide(h[k-1].Time, nil, "")
	i := slices.IndexFunc(evs, func(ev eventlog.Event) bool { return ev.Type == eventlog.TypeLoopDone })
	if i < 0 || !strings.Contains(string(evs[i].Payload), `"next":[{"step":"list"}]`) || strings.Contains(string(evs[i].Payload), `"stats"`) {
		t.Fatalf("decided %v: want a loop.done without stats that routes to list", evs)
	}
}

// TestBigFloatsStayNumbers: a float of 2^63 or more (1e20, a workload's
// limit, a step's result) is recorded as Go writes it, without exponent
// (100000000000000000000); read back from the log it must still be a
// number, so that an arc comparing it routes as the value says (read as
// text, {{ v > 5 }} was false and the wrong arc was taken).
func TestBigFloatsStayNumbers(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workload:
  limit: 1.0e20
workflow:
  - step: start
    tool: {kind: rec, key: a, v: 1.0e20}
    next:
      - step: big
        when: '{{ start.v > 5 and limit > 5 and start.v + 1 >= limit }}'
      - step: wrong
  - step: big
    tool: {kind: rec, key: big, v: '{{ start.v }}'}
  - step: wrong
    tool: {kind: rec, key: wrong}
`, nil)
	defer dumpOnFail(t, evs)
	if b.rec.count("wrong") != 0 || b.rec.count("big") != 1 {
		t.Fatalf("routed to big %d times, wrong %d times; want big once", b.rec.count("big"), b.rec.count("wrong"))
	}
	if d := data(t, sum, "big"); d["v"] != 1e20 {
		t.Fatalf("big saw v %#v, want 1e20", d["v"])
	}
}
