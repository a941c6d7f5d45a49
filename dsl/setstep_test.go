package dsl

import (
	"strings"
	"testing"
)

// TestSetStepScopeWarns: NoETL's set: (a step's, an arc's) writes
// step.x, like ctx.x and iter.x, as the execution variable x
// (_apply_set_mutations strips the scope). Here a step's or an arc's set:
// stores step.x under ctx.step, so the {{ x }} or {{ ctx.x }} that a NoETL
// playbook reads next renders empty: validate says so where it is written.
// A task's set: keeps step.x as a name of its pipeline's, which later
// tasks read as step.x: no warning there.
func TestSetStepScopeWarns(t *testing.T) {
	t.Parallel()
	p := mustParse(t, pb(`- step: start
  tool:
    - name: a
      kind: noop
      set:
        step.local: 1
  set:
    step.total: 2
    ctx.fine: 3
  next:
    - step: b
      set:
        step.picked: b
- step: b
  tool: {kind: noop}
`))
	var got []string
	for _, w := range p.Warnings {
		if strings.Contains(w.Message, "NoETL") && strings.Contains(w.Message, "step.") {
			got = append(got, w.Error())
		}
	}
	want := []string{
		"t.yaml:13:5: step start: set step.total: NoETL stores it as total (ctx.total); here it goes under ctx.step, and {{ total }} and {{ ctx.total }} render empty: write ctx.total",
		"t.yaml:18:9: step start: arc to b: set step.picked: NoETL stores it as picked (ctx.picked); here it goes under ctx.step, and {{ picked }} and {{ ctx.picked }} render empty: write ctx.picked",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
