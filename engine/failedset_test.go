package engine_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
)

// TestFailedStepRunsNoSet: NoETL runs a step's set: on call.done only and
// stores no result for a step that ended in call.error (events.py), so a
// step on_error: continue routes past runs no set: of its own, and later
// steps find no result under its name; its arcs still read the error.
func TestFailedStepRunsNoSet(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    tool: {kind: rec, key: start, fail: 1}
    spec: {on_error: continue}
    set:
      ctx.note: 'set ran on {{ output.status }}'
    next:
      - step: after
        when: '{{ event.name == "call.error" and output.status == "error" }}'
  - step: after
    tool: {kind: rec, key: after, note: '{{ note is defined }}', start: '{{ start is defined }}'}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	d := data(t, sum, "after")
	if d["note"] != false || d["start"] != false {
		t.Fatalf("after read note defined %v, start defined %v; want False, False", d["note"], d["start"])
	}
}

// TestFailedStepSetUnderEarlierSemantics: a history recorded before
// semantics level 3 keeps its rules when it is resumed: the failed step's
// set: runs and its result is kept under its name.
func TestFailedStepSetUnderEarlierSemantics(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, h := b.run(t, header+`
workflow:
  - step: start
    tool: {kind: rec, key: start, fail: 1}
    spec: {on_error: continue}
    set:
      ctx.note: 'set ran on {{ output.status }}'
    next: [after]
  - step: after
    tool: {kind: rec, key: after}
`, nil)
	defer dumpOnFail(t, h)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	var started map[string]any
	if err := json.Unmarshal(h[0].Payload, &started); err != nil {
		t.Fatal(err)
	}
	started["semantics"] = 2
	h[0].Payload, _ = json.Marshal(started)
	k := slices.IndexFunc(h, func(ev eventlog.Event) bool { return ev.Type == eventlog.TypeCommandFailed })
	s, err := engine.Fold(h[0].ExecutionID, h[:k+1])
	if err != nil {
		t.Fatal(err)
	}
	evs := s.Decide(h[k].Time, nil, "")
	i := slices.IndexFunc(evs, func(ev eventlog.Event) bool { return ev.Type == eventlog.TypeStepFailed })
	if i < 0 || !strings.Contains(string(evs[i].Payload), `"note":"set ran on error"`) {
		t.Fatalf("decided %v: want a step.failed whose ctx has the set's note", evs)
	}
	s, err = engine.Fold(h[0].ExecutionID, append(slices.Clone(h[:k+1]), evs[:i+1]...))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Results["start"]; !ok {
		t.Fatal("the failed step's result was not kept under its name")
	}
}
