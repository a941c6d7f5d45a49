package engine_test

import (
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/engine"
	"github.com/cursorflow/cursorflow/eventlog"
)

// TestHonouredFields: fields the table marks honoured change the run.
func TestHonouredFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		check     func(t *testing.T, b *bundle, sum *engine.Summary)
	}{
		{
			name: "spec.policy.admit skips a step",
			src: `
workload: {enabled: false}
workflow:
  - step: start
    tool: {kind: rec, key: start}
    next: [gated]
  - step: gated
    spec:
      policy:
        admit:
          mode: exclusive
          rules:
            - when: '{{ enabled }}'
              then: {allow: true}
            - else:
                then: {allow: false}
    tool: {kind: rec, key: gated}
`,
			check: func(t *testing.T, b *bundle, sum *engine.Summary) {
				if sum.Status != engine.StatusCompleted || b.rec.count("gated") != 0 || sum.Steps["gated"] != "skipped" {
					t.Fatalf("gated ran %d times, steps %v", b.rec.count("gated"), sum.Steps)
				}
			},
		},
		{
			name: "next.spec.on_no_match: error fails the execution",
			src: `
workflow:
  - step: start
    tool: {kind: rec, key: start}
    next:
      spec: {mode: exclusive, on_no_match: error}
      arcs:
        - step: other
          when: '{{ false }}'
  - step: other
    tool: {kind: rec, key: other}
`,
			check: func(t *testing.T, b *bundle, sum *engine.Summary) {
				if sum.Status != engine.StatusFailed || sum.Step != "start" || sum.Field != "next" || !strings.Contains(sum.Error, "no arc matched") {
					t.Fatalf("summary %+v", sum)
				}
			},
		},
		{
			name: "output.output_select keeps the listed keys",
			src: `
workflow:
  - step: start
    tool: {kind: rec, key: start, keep: 1, drop: 2}
    output:
      output_select: [keep, key]
`,
			check: func(t *testing.T, b *bundle, sum *engine.Summary) {
				d := data(t, sum, "start")
				if len(d) != 2 || d["keep"] != int64(1) || d["drop"] != nil {
					t.Fatalf("data %v", d)
				}
			},
		},
		{
			name: "executor.spec.entry_step and defaults.timeout_s",
			src: `
executor:
  spec:
    entry_step: begin
    policy: {defaults: {timeout_s: 0.05}}
workflow:
  - step: begin
    tool: {kind: rec, key: begin, sleep_ms: 2000}
  - step: start
    tool: {kind: rec, key: start}
`,
			check: func(t *testing.T, b *bundle, sum *engine.Summary) {
				if b.rec.count("begin") != 1 || b.rec.count("start") != 0 {
					t.Fatalf("begin %d, start %d: the entry step is begin", b.rec.count("begin"), b.rec.count("start"))
				}
				if sum.Status != engine.StatusFailed || b.rec.interrupted.Load() != 1 {
					t.Fatalf("summary %+v: the default timeout should have cut begin", sum)
				}
			},
		},
		{
			name: "a workbook action's assert.returns",
			src: `
workbook:
  - name: lookup
    tool: {kind: rec, key: lookup, found: 1}
    assert: {returns: [found, missing_key]}
workflow:
  - step: start
    tool: {kind: workbook, name: lookup}
`,
			check: func(t *testing.T, b *bundle, sum *engine.Summary) {
				if sum.Status != engine.StatusFailed || !strings.Contains(sum.Error, `result has no "missing_key"`) {
					t.Fatalf("summary %+v", sum)
				}
			},
		},
		{
			name: "a kind: workbook step's args meet the action's assert.expects",
			src: `
workbook:
  - name: double
    assert: {expects: [n]}
    tool: {kind: rec, key: double, twice: '{{ n * 2 }}'}
workflow:
  - step: start
    kind: workbook
    name: double
    input: {m: 4}
`,
			check: func(t *testing.T, b *bundle, sum *engine.Summary) {
				if sum.Status != engine.StatusFailed || !strings.Contains(sum.Error, `expects input "n"`) || b.rec.count("double") != 0 {
					t.Fatalf("summary %+v, ran %d times", sum, b.rec.count("double"))
				}
			},
		},
		{
			name: "a kind: workbook step's result meets the action's assert.returns",
			src: `
workbook:
  - name: double
    assert: {expects: [n], returns: [doubled]}
    tool: {kind: rec, key: double, twice: '{{ n * 2 }}'}
workflow:
  - step: start
    kind: workbook
    name: double
    input: {n: 4}
`,
			check: func(t *testing.T, b *bundle, sum *engine.Summary) {
				if sum.Status != engine.StatusFailed || !strings.Contains(sum.Error, `result has no "doubled"`) || b.rec.count("double") != 1 {
					t.Fatalf("summary %+v, ran %d times", sum, b.rec.count("double"))
				}
			},
		},
		{
			name: "a workbook call's input overrides the action's defaults",
			src: `
workbook:
  - name: greet
    input: {greeting: hello, who: nobody}
    tool: {kind: rec, key: greet, text: '{{ greeting }} {{ who }}'}
workflow:
  - step: start
    tool: {kind: workbook, name: greet, input: {who: '{{ workload.name }}'}}
workload: {name: ada}
`,
			check: func(t *testing.T, b *bundle, sum *engine.Summary) {
				if sum.Status != engine.StatusCompleted || data(t, sum, "start")["text"] != "hello ada" {
					t.Fatalf("summary %+v, data %v", sum, sum.Results["start"])
				}
			},
		},
		{
			name: "a kind: workbook step's input overrides the action's defaults",
			src: `
workbook:
  - name: greet
    input: {greeting: hello, who: nobody}
    assert: {expects: [who]}
    tool: {kind: rec, key: greet, text: '{{ greeting }} {{ who }}'}
workflow:
  - step: start
    kind: workbook
    name: greet
    input: {who: '{{ workload.name }}'}
workload: {name: ada}
`,
			check: func(t *testing.T, b *bundle, sum *engine.Summary) {
				d := data(t, sum, "start")
				in, _ := d["input"].(map[string]any)
				if sum.Status != engine.StatusCompleted || d["text"] != "hello ada" || in["who"] != "ada" {
					t.Fatalf("summary %+v, data %v", sum, sum.Results["start"])
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			sum, evs := b.run(t, header+tt.src, nil)
			defer dumpOnFail(t, evs)
			tt.check(t, b, sum)
		})
	}
}

// TestPrevIsThePreviousTasksData: NoETL's _prev in a pipeline.
func TestPrevIsThePreviousTasksData(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    tool:
      - name: generate
        kind: rec
        key: gen
        record_id: 100
      - name: save
        kind: rec
        key: save
        saw: '{{ _prev.record_id }}'
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted || data(t, sum, "start")["saw"] != int64(100) {
		t.Fatalf("summary %+v, data %v", sum, sum.Results["start"])
	}
}

// prevFlow reads _prev in a task that fails its first attempt and is
// retried (durably: the retry's carry holds _prev), then replaces _prev
// with its own set: for the next task.
const prevFlow = header + `
workflow:
  - step: start
    tool:
      - name: generate
        kind: rec
        key: gen
        record_id: 100
      - name: flaky
        kind: rec
        key: flaky
        fail_attempts: 1
        retry: {max_attempts: 2}
        saw: '{{ _prev.record_id }}'
        set:
          _prev: {record_id: 7}
      - name: save
        kind: rec
        key: save
        saw: '{{ _prev.record_id }}'
        again: '{{ flaky.saw }}'
`

// TestPrevAcrossRetryAndSet: _prev is carried through a durable retry of
// the task that reads it, and a task's set: can replace it for the next;
// a history cut after any event and resumed by a fresh engine reads the
// same.
func TestPrevAcrossRetryAndSet(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, prevFlow, nil)
	defer dumpOnFail(t, evs)
	got := data(t, sum, "start")
	if sum.Status != engine.StatusCompleted || b.rec.count("flaky") != 2 || got["saw"] != int64(7) || got["again"] != int64(100) {
		t.Fatalf("summary %+v (%d flaky calls), data %v", sum, b.rec.count("flaky"), got)
	}
	resumeFromEveryCut(t, prevFlow, func(k int, got *engine.Summary, _ []eventlog.Event) {
		d := data(t, got, "start")
		if d["saw"] != int64(7) || d["again"] != int64(100) {
			t.Fatalf("cut at %d: start's data %v, want saw 7 and again 100", k, d)
		}
	})
}

// TestCarryKeepsIntegers: a pipeline's _prev and locals cross a durable
// retry in its carry, which was decoded with every number a float64: in
// the retried task (and every task after it) 42 rendered as "42.0" and
// an id past 2^53 came back one less (9007199254740993 as
// 9007199254740992).
func TestCarryKeepsIntegers(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workflow:
  - step: start
    tool:
      - name: generate
        kind: rec
        key: gen
        record_id: 9007199254740993
        n: 42
        f: 2.5
      - name: flaky
        kind: rec
        key: flaky
        fail_attempts: 1
        retry: {max_attempts: 2}
        saw: '{{ _prev.record_id }}'
        text: 'n={{ _prev.n }} f={{ _prev.f }}'
`, nil)
	defer dumpOnFail(t, evs)
	got := data(t, sum, "start")
	if sum.Status != engine.StatusCompleted || got["saw"] != int64(9007199254740993) || got["text"] != "n=42 f=2.5" {
		t.Fatalf("status %s (%s), the retried task saw %#v and rendered %q, want 9007199254740993 and \"n=42 f=2.5\"",
			sum.Status, sum.Error, got["saw"], got["text"])
	}
}

// TestWorkbookActionRetry: an action's own retry block applies when it is
// called.
func TestWorkbookActionRetry(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sum, evs := b.run(t, header+`
workbook:
  - name: flaky
    tool:
      kind: rec
      key: flaky
      fail: 2
      retry: {max_attempts: 3}
workflow:
  - step: start
    tool: {kind: workbook, name: flaky}
`, nil)
	defer dumpOnFail(t, evs)
	if sum.Status != engine.StatusCompleted || b.rec.count("flaky") != 3 {
		t.Fatalf("status %s (%s), %d calls", sum.Status, sum.Error, b.rec.count("flaky"))
	}
}
