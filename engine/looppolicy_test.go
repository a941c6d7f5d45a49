package engine_test

import (
	"testing"

	"github.com/cursorflow/cursorflow/engine"
)

// TestLoopPolicyDecidesForItems: loop.spec.policy's rules decide each
// item's outcome when its task has no policy of its own: a retry rule
// retries the item that failed, and a fail rule stops the loop on its
// first failed item.
func TestLoopPolicyDecidesForItems(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    loop:
      in: [1, 2, 3]
      iterator: n
      spec:
        mode: sequential
        policy:
          rules:
            - when: "{{ output.status == 'error' }}"
              then: {do: retry, attempts: 3, delay: 0}
    tool: {kind: rec, key: 'item-{{ iter.n }}', fail: "{{ 2 if iter.n == 2 else 0 }}"}
`, nil)
	if sum.Status != engine.StatusCompleted {
		dumpOnFail(t, evs)
		t.Fatalf("status %s: %s; want the retry rule to carry item 2 through", sum.Status, sum.Error)
	}
	if n := b.rec.count("item-2"); n != 3 {
		t.Fatalf("item 2 ran %d times, want 3 (two planned failures, then success)", n)
	}

	sum, evs = b.run(t, header+`
workflow:
  - step: start
    loop:
      in: [1, 2, 3]
      iterator: n
      spec:
        mode: sequential
        policy:
          rules:
            - when: "{{ output.status == 'error' }}"
              then: {do: continue}
    tool: {kind: rec, key: 'cont-{{ iter.n }}', fail: "{{ 1 if iter.n == 2 else 0 }}"}
`, nil)
	if sum.Status != engine.StatusCompleted || b.rec.count("cont-2") != 1 || b.rec.count("cont-3") != 1 {
		dumpOnFail(t, evs)
		t.Fatalf("status %s (%s), item 2 ran %d times, item 3 %d; want the continue rule to pass item 2's failure over",
			sum.Status, sum.Error, b.rec.count("cont-2"), b.rec.count("cont-3"))
	}
}

// TestFailedRoutingMarksTheStepFailed: an execution that fails routing out
// of a step (on_no_match: error) reports that step failed, not running.
func TestFailedRoutingMarksTheStepFailed(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    tool: {kind: rec, key: start}
    next:
      spec: {on_no_match: error}
      arcs: [{step: end, when: '{{ false }}'}]
  - step: end
    tool: {kind: rec, key: end}
`, nil)
	if sum.Status != engine.StatusFailed || sum.Step != "start" || sum.Steps["start"] != "failed" {
		dumpOnFail(t, evs)
		t.Fatalf("status %s at %q, steps %v; want failed at start, start failed", sum.Status, sum.Step, sum.Steps)
	}
}
