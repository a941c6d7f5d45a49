package engine_test

import (
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
	"github.com/cursorflow/cursorflow/eventlog/logtest"
)

func TestArcsSetAndGuards(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workload: {threshold: 3}
workflow:
  - step: start
    tool: {kind: rec, key: start, value: 5}
    set:
      ctx.value: '{{ output.data.value }}'
    next:
      spec: {mode: exclusive}
      arcs:
        - step: big
          when: '{{ ctx.value > threshold }}'
          args: {doubled: '{{ output.data.value * 2 }}'}
        - step: small
  - step: big
    tool: {kind: rec, key: big, got: '{{ doubled }}', from_args: '{{ args.doubled }}'}
    next: [fanout_a, fanout_b, guarded]
  - step: small
    tool: {kind: rec, key: small}
  - step: fanout_a
    tool: {kind: rec, key: a}
  - step: fanout_b
    tool: {kind: rec, key: b}
  - step: guarded
    when: '{{ ctx.value < 0 }}'
    tool: {kind: rec, key: guarded}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	if got := data(t, sum, "big")["got"]; got != int64(10) {
		t.Errorf("big.got = %#v, want 10 (arc args rendered against output)", got)
	}
	if b.rec.count("small") != 0 {
		t.Error("exclusive router ran the second arc too")
	}
	// A list of names is inclusive only when written as a router; a plain
	// list follows every name whose arc has no guard in NoETL: here the
	// first matching one (exclusive default) — check what ran.
	if b.rec.count("guarded") != 0 {
		t.Error("guarded step ran although its when was false")
	}
	if sum.Steps["guarded"] != "skipped" && b.rec.count("a") == 1 {
		t.Logf("steps: %v", sum.Steps)
	}
}

func TestInclusiveRouter(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    tool: {kind: rec, key: start}
    next:
      spec: {mode: inclusive}
      arcs:
        - step: a
        - step: b
        - step: c
          when: '{{ false }}'
  - step: a
    tool: {kind: rec, key: a}
  - step: b
    tool: {kind: rec, key: b}
  - step: c
    tool: {kind: rec, key: c}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s", sum.Status)
	}
	if b.rec.count("a") != 1 || b.rec.count("b") != 1 || b.rec.count("c") != 0 {
		t.Fatalf("calls a=%d b=%d c=%d, want 1 1 0", b.rec.count("a"), b.rec.count("b"), b.rec.count("c"))
	}
}

func TestLoopsAggregateResults(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"sequential", "parallel"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			sum, evs := b.run(t, header+`
workload:
  numbers: [1, 2, 3, 4, 5]
workflow:
  - step: start
    loop:
      in: '{{ workload.numbers }}'
      iterator: n
      spec: {mode: `+mode+`, max_in_flight: 2}
    tool: {kind: rec, key: 'item{{ iter.n }}', square: '{{ iter.n * iter.n }}', index: '{{ iter._index }}'}
    next:
      - step: total
        when: '{{ event.name == "loop.done" }}'
  - step: total
    tool: {kind: rec, key: total, sum: '{{ start.results | map(attribute="square") | sum }}', count: '{{ start.results | length }}'}
`, nil)
			defer dumpOnFail(t, evs)
			if sum.Status != engine.StatusCompleted {
				t.Fatalf("status %s: %s", sum.Status, sum.Error)
			}
			d := data(t, sum, "total")
			if d["sum"] != int64(55) || d["count"] != int64(5) {
				t.Fatalf("total = %v, want sum 55 count 5", d)
			}
			if n := logtest.CountType(evs, eventlog.TypeLoopDone); n != 1 {
				t.Fatalf("loop.done recorded %d times", n)
			}
		})
	}
}

func TestPolicyRetryIsDurableAndBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    tool:
      kind: rec
      key: flaky
      fail: 2
      spec:
        policy:
          rules:
            - when: '{{ output.status == "error" }}'
              then: {do: retry, attempts: 4, backoff: exponential, delay: 0.01}
            - else:
                then:
                  do: continue
                  set:
                    ctx.attempts_seen: '{{ _attempt }}'
                    # every name a NoETL rule reads the outcome by
                    ctx.seen: '{{ result.key }}/{{ start.key }}/{{ output.status }}/{{ attempt }}'
    next: [after]
  - step: after
    tool: {kind: rec, key: after, attempts: '{{ ctx.attempts_seen }}', seen: '{{ ctx.seen }}'}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	if b.rec.count("flaky") != 3 {
		t.Fatalf("flaky ran %d times, want 3", b.rec.count("flaky"))
	}
	if n := logtest.CountType(evs, eventlog.TypeRetryScheduled); n != 2 {
		t.Fatalf("retry.scheduled recorded %d times, want 2", n)
	}
	if got := data(t, sum, "after")["attempts"]; got != int64(3) {
		t.Fatalf("after.attempts = %#v, want 3", got)
	}
	if got := data(t, sum, "after")["seen"]; got != "flaky/flaky/success/3" {
		t.Fatalf("after.seen = %#v, want flaky/flaky/success/3", got)
	}

	// Exhausted retries fail the execution, naming step and task.
	b2 := setup(t, nil)
	sum, evs = b2.run(t, header+`
workflow:
  - step: start
    tool:
      - name: fetch
        kind: rec
        key: always
        fail: 100
        spec:
          policy:
            rules:
              - when: '{{ output.status == "error" }}'
                then: {do: retry, attempts: 2, delay: 0}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusFailed || sum.Step != "start" || !strings.Contains(sum.Field, "fetch") || !strings.Contains(sum.Error, "planned failure") {
		t.Fatalf("summary = %+v, want failed at start/tool.fetch with the tool's error", sum)
	}
	if b2.rec.count("always") != 2 {
		t.Fatalf("ran %d times, want 2", b2.rec.count("always"))
	}
}

func TestPipelinePolicies(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    tool:
      - name: first
        kind: rec
        key: first
        value: 7
        spec:
          policy:
            rules:
              - else:
                  then:
                    do: continue
                    set: {iter.carried: '{{ output.data.value }}'}
      - name: skip_me_not
        kind: rec
        key: second
        got: '{{ iter.carried }}'
        spec:
          policy:
            rules:
              - else: {then: {do: jump, to: fourth}}
      - name: third
        kind: rec
        key: third
      - name: fourth
        kind: rec
        key: fourth
        spec:
          policy:
            rules:
              - else: {then: {do: break}}
      - name: fifth
        kind: rec
        key: fifth
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", sum.Status, sum.Error)
	}
	for key, want := range map[string]int{"first": 1, "second": 1, "third": 0, "fourth": 1, "fifth": 0} {
		if got := b.rec.count(key); got != want {
			t.Errorf("%s ran %d times, want %d", key, got, want)
		}
	}
	if b.rec.calls[1] != "second" {
		t.Fatalf("order %v", b.rec.calls)
	}
}

func TestUnhandledErrorFailsWithStepAndField(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    tool: {kind: rec, key: s}
    next: [bad]
  - step: bad
    tool: {kind: rec, key: '{{ undefined_thing.attr | int }}', url: '{{ nosuch() }}'}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusFailed || sum.Step != "bad" || sum.Field == "" {
		t.Fatalf("summary = %+v, want failed at step bad with a field", sum)
	}
	last := evs[len(evs)-1]
	if last.Type != eventlog.TypeExecutionFailed || !strings.Contains(string(last.Payload), `"step":"bad"`) {
		t.Fatalf("final event %s %s", last.Type, last.Payload)
	}
}

func TestOnErrorContinueRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    spec: {on_error: continue}
    tool: {kind: rec, key: s, fail: 1}
    next:
      - step: handled
        when: '{{ output.status == "error" }}'
  - step: handled
    tool: {kind: rec, key: h}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted || b.rec.count("h") != 1 {
		t.Fatalf("summary = %+v", sum)
	}
}

// TestPolicyFailOnSuccessNamesTheRule: a rule that fails (or keeps
// retrying) a task whose tool succeeded says which rule decided, instead
// of the tool's non-existent error.
func TestPolicyFailOnSuccessNamesTheRule(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, then, want string }{
		{"fail", `{do: fail}`, `policy rule test.yaml:14:15 (when "{{ output.data.value > 5 }}") decided fail`},
		{"retry", `{do: retry, attempts: 2, delay: 0}`, `policy rule test.yaml:14:15 (when "{{ output.data.value > 5 }}") decided retry (after 2 attempts)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			sum, evs := b.run(t, header+`
workflow:
  - step: start
    tool:
      kind: rec
      key: check
      value: 7
      spec:
        policy:
          rules:
            - when: '{{ output.data.value > 5 }}'
              then: `+tt.then+`
            - else:
                then: {do: continue}
`, nil)
			defer dumpOnFail(t, evs)
			if sum.Status != engine.StatusFailed || sum.Step != "start" || sum.Error != tt.want {
				t.Fatalf("summary = %+v, want failed at start with %q", sum, tt.want)
			}
		})
	}
}

// TestLoopFailureNamesTheItem: a loop of many items that fails for one
// says which (its iter._index), not only what the tool said.
func TestLoopFailureNamesTheItem(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"{mode: sequential}", "{mode: parallel, max_in_flight: 2}"} {
		t.Run(spec, func(t *testing.T) {
			b := setup(t, nil)
			sum, evs := b.run(t, header+`
workflow:
  - step: start
    loop:
      in: [10, 20, 30]
      iterator: x
      spec: `+spec+`
    tool: {kind: rec, key: 'k{{ iter.x }}', fail: '{{ 1 if iter.x == 20 else 0 }}'}
`, nil)
			defer dumpOnFail(t, evs)
			if sum.Status != engine.StatusFailed || !strings.Contains(sum.Error, "item 1: planned failure 1") {
				t.Fatalf("summary %s %q, want failed naming item 1", sum.Status, sum.Error)
			}
			// The loop's status counts the failed item as failed, not
			// only as done.
			st, err := engine.Inspect(t.Context(), b.log, sum.ExecutionID)
			if err != nil {
				t.Fatal(err)
			}
			if l := st.Loops["start#1"]; l.Failed != 1 || l.Done < 1 {
				t.Fatalf("loop status %+v: want 1 failed item", l)
			}
		})
	}
}
