package dsl

import (
	"strings"
	"testing"
)

// warningAt returns the position of the first warning holding substr.
func warningAt(p *Playbook, substr string) (Pos, bool) {
	for _, w := range p.Warnings {
		if w.Warning && strings.Contains(w.Message, substr) {
			return w.Pos, true
		}
	}
	return Pos{}, false
}

// wantWarningAt fails t unless p has a warning holding substr at line:col.
func wantWarningAt(t *testing.T, p *Playbook, substr string, line, col int) {
	t.Helper()
	pos, ok := warningAt(p, substr)
	switch {
	case !ok:
		t.Errorf("no warning %q in %v", substr, p.Warnings)
	case pos.File != "t.yaml" || pos.Line != line || pos.Col != col:
		t.Errorf("warning %q at %v, want t.yaml:%d:%d", substr, pos, line, col)
	}
}

// TestLoopLimitsOutsideTheirMode: a loop that names no mode runs
// sequentially, one item at a time, so a max_in_flight written on it
// (the bound a user writes expecting items at once) does nothing; nor
// does a chunk_size outside mode chunked. validate says so at the key.
func TestLoopLimitsOutsideTheirMode(t *testing.T) {
	t.Parallel()
	p := mustParse(t, pb(`- step: start
  tool: {kind: noop}
  loop:
    in: [1, 2, 3, 4]
    iterator: i
    spec:
      max_in_flight: 4
      chunk_size: 2
- step: other
  tool: {kind: noop}
  loop:
    in: [1, 2]
    iterator: i
    mode: parallel
    concurrency: 2
    batch_size: 2
`))
	wantWarningAt(t, p, "step start: loop.spec.max_in_flight does nothing in mode sequential", 12, 7)
	wantWarningAt(t, p, "step start: loop.spec.chunk_size only applies to mode chunked", 13, 7)
	wantWarningAt(t, p, "step other: loop.batch_size only applies to mode chunked", 21, 5)
	if _, ok := warningAt(p, "step other: loop.concurrency"); ok {
		t.Errorf("concurrency of a parallel loop warned: %v", p.Warnings)
	}

	// Where the limit is read, nothing is said.
	for _, loop := range []string{
		"{in: [1], iterator: i, spec: {mode: parallel, max_in_flight: 2}}",
		"{in: [1], iterator: i, spec: {mode: chunked, max_in_flight: 2, chunk_size: 5}}",
		"{in: [1], iterator: i, spec: {loop_mode: fanout, max_in_flight: 2}}",
		"{in: [1], iterator: i, spec: {mode: sequential, max_in_flight: 1}}",
		"{cursor: {kind: redisstream, stream: s}, iterator: r, spec: {max_in_flight: 2}}",
	} {
		p := mustParse(t, pb("- step: start\n  tool: {kind: noop}\n  loop: "+loop+"\n"))
		for _, w := range p.Warnings {
			if strings.Contains(w.Message, "max_in_flight") || strings.Contains(w.Message, "chunk_size") {
				t.Errorf("loop %s: warning %v", loop, w)
			}
		}
	}
	// A step's spec.loop_mode fanout makes the loop a fan-out, whose
	// max_in_flight bounds the shards at once.
	p = mustParse(t, pb("- step: start\n  tool: {kind: noop}\n  spec: {loop_mode: fanout}\n  loop: {in: [1], iterator: i, spec: {max_in_flight: 2}}\n"))
	if _, ok := warningAt(p, "max_in_flight"); ok {
		t.Errorf("max_in_flight of a step-level fan-out warned: %v", p.Warnings)
	}
}

// TestOnErrorValue: spec.on_error takes fail, continue or ignore; any
// other value (skip, retry, a capitalised Continue) used to run as fail
// without a word, so the step the user meant to get past failed the
// execution. It is refused at its position now.
func TestOnErrorValue(t *testing.T) {
	t.Parallel()
	el := parseErrors(t, pb("- step: start\n  tool: {kind: noop}\n  spec:\n    on_error: skip\n"))
	if len(el) != 1 || el[0].Pos.Line != 9 || el[0].Pos.Col != 15 ||
		!strings.Contains(el[0].Message, `step start: bad spec.on_error "skip" (want fail, continue or ignore)`) {
		t.Errorf("errors = %v", el)
	}
	for _, v := range []string{"fail", "continue", "ignore"} {
		mustParse(t, pb("- step: start\n  tool: {kind: noop}\n  spec: {on_error: "+v+"}\n"))
	}
}

// TestExecutorUnreadKeys: of NoETL's executor.spec, this build reads
// entry_step, no_next_is_error and policy.defaults.timeout_s (and
// policy.results as a hint). Another default (a retry, an on_error) or
// spec key reads as a setting in force, so validate says it is not.
func TestExecutorUnreadKeys(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: t}
executor:
  profile: auto
  requires: {tools: [noop], features: [x]}
  spec:
    entry_step: start
    final_step: end
    policy:
      defaults:
        timeout_s: 30
        retry: {max_attempts: 3}
      limits: {max_steps: 10}
workflow:
  - step: start
    tool: {kind: noop}
`)
	wantWarningAt(t, p, "executor: spec.final_step is not read by this build (ignored)", 9, 5)
	wantWarningAt(t, p, "executor: spec.policy.defaults.retry is not read by this build (ignored)", 13, 9)
	wantWarningAt(t, p, "executor: spec.policy.limits is not read by this build (ignored)", 14, 7)
	if len(p.Warnings) != 3 {
		t.Errorf("warnings = %v, want the three above", p.Warnings)
	}
}

// TestRuleActionKeysOutsideTheirDo: a rule's attempts, backoff and delay
// only shape do: retry, its to only do: jump, and allow only admission
// rules. then: {attempts: 3} without do: continues on the first failure;
// validate says so at the key.
func TestRuleActionKeysOutsideTheirDo(t *testing.T) {
	t.Parallel()
	p := mustParse(t, pb(`- step: start
  tool:
    kind: noop
    spec:
      policy:
        rules:
          - when: "{{ output.status == 'error' }}"
            then: {attempts: 3, delay: 1}
          - when: "{{ true }}"
            then: {do: fail, to: start, allow: false}
`))
	wantWarningAt(t, p, "rules[0].then.attempts only applies to do: retry (this rule's do is continue; ignored)", 13, 20)
	wantWarningAt(t, p, "rules[0].then.delay only applies to do: retry", 13, 33)
	wantWarningAt(t, p, "rules[1].then.to only applies to do: jump (this rule's do is fail; ignored)", 15, 30)
	wantWarningAt(t, p, "rules[1].then.allow only applies to spec.policy.admit rules (ignored)", 15, 41)

	p = mustParse(t, pb(`- step: start
  tool:
    kind: noop
    spec:
      policy:
        rules:
          - when: "{{ output.status == 'error' }}"
            then: {do: retry, attempts: 3, delay: 1, backoff: fixed}
          - else:
              then: {do: jump, to: start}
  spec:
    policy:
      admit:
        rules: [{when: "{{ true }}", then: {allow: true}}]
`))
	if len(p.Warnings) != 0 {
		t.Errorf("keys in their place warned: %v", p.Warnings)
	}
}
